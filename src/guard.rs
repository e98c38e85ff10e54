//! [`LockGuard`]: proof of one hold; releases it on `unlock` or drop.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::attempt::release_on;
use crate::client::Inner;
use crate::error::{Error, Result};
use crate::holds::Hold;
use crate::offers::{Answer, Offer, Taken};
use crate::scripts::{self, Handover};

/// One hold on a lock. Dropping it releases the hold in a background task;
/// [`unlock`](LockGuard::unlock) releases it and reports what happened.
///
/// A guard may move to another task: it releases with the holder id it was acquired
/// with. While it lives and no explicit lease was given, the watchdog keeps the lease.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    inner: Arc<Inner>,
    hold: Arc<Hold>,
    lease_ms: u64,
    watchdog: bool,
    fair: bool,
    token: Option<u64>,
    validity: Duration,
    runtime: tokio::runtime::Handle,
    armed: bool,
}

impl LockGuard {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        inner: Arc<Inner>,
        hold: Arc<Hold>,
        lease_ms: u64,
        watchdog: bool,
        fair: bool,
        token: Option<u64>,
        validity: Duration,
    ) -> Self {
        LockGuard {
            inner,
            hold,
            lease_ms,
            watchdog,
            fair,
            token,
            validity,
            runtime: tokio::runtime::Handle::current(),
            armed: true,
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.hold.name
    }

    /// The holder id (`"{client_uuid}:{n}"`) this hold was taken with.
    pub fn holder(&self) -> &str {
        &self.hold.holder
    }

    /// The fencing token of a fenced lock (strictly greater than every token handed out
    /// before for this name); `None` for other locks. Pass it to the storage you write
    /// to, and let it reject writes with an older token.
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// Cancelled when the lock is known to be lost: the watchdog found it gone or could
    /// not renew it on a majority within its validity, it was force-unlocked by this
    /// client, or the client shut down. Select on `lost().cancelled()` to abort work.
    ///
    /// With an explicit lease (no watchdog) nothing renews the lock, so nothing finds
    /// it lost: the lease simply ends [`validity`](Self::validity) after acquisition.
    /// Bound such work with `tokio::time::timeout(guard.validity(), ...)`.
    pub fn lost(&self) -> CancellationToken {
        self.hold.lost.clone()
    }

    /// How long the lock was valid for when acquired: lease − elapsed − drift
    /// (Redlock step 4). With the watchdog the lease is extended while the guard lives.
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// Releases this hold now.
    ///
    /// # Errors
    /// [`Error::NotHeld`] if the lease expired, the lock was force-unlocked or the
    /// watchdog reported it lost; [`Error::NoQuorum`] / a master's error if a majority
    /// of masters could not be reached (the lease then runs out on its own).
    ///
    /// # Cancel safety
    /// If the future is dropped the release may or may not have happened; the lease
    /// bounds how long the lock can stay held.
    pub async fn unlock(mut self) -> Result<()> {
        self.armed = false;
        let Some(left) = self.inner.holds.released(&self.hold, self.watchdog) else {
            return Err(Error::NotHeld {
                name: self.hold.name.to_string(),
                holder: self.hold.holder.to_string(),
            });
        };
        Box::pin(release(
            &self.inner,
            &self.hold,
            self.lease_ms,
            self.fair,
            left == 0,
        ))
        .await
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(left) = self.inner.holds.released(&self.hold, self.watchdog) else {
            return;
        };
        let (inner, hold) = (self.inner.clone(), self.hold.clone());
        let (lease_ms, fair) = (self.lease_ms, self.fair);
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        let release = async move {
            if let Err(e) = release(&inner, &hold, lease_ms, fair, left == 0).await {
                tracing::warn!(lock = %hold.name, error = %e, "release on drop failed");
            }
        };
        self.inner.cleanups.spawn_on(release, &runtime);
    }
}

/// The most offers one fair release considers: the queue head is nearly always one of
/// the oldest local waiters, and a head not offered is woken by its message as usual.
const MAX_FAIR_OFFERS: usize = 32;

/// Releases one hold. When it is the last local hold on a single master and other tasks
/// of this client wait with offers (offers.rs), the lock is handed over in the same
/// script: one round trip instead of a release and an acquire. A plain lock goes to the
/// gate holder unless another client waits (release.lua); a fair lock goes to the
/// queue head if it is one of the offered waiters (fair_release.lua).
async fn release(
    inner: &Arc<Inner>,
    hold: &Hold,
    lease_ms: u64,
    fair: bool,
    last: bool,
) -> Result<()> {
    if last && inner.masters.len() == 1 {
        let offers = inner
            .offers(fair)
            .take(&hold.name, if fair { MAX_FAIR_OFFERS } else { 1 });
        if !offers.is_empty() {
            return hand_over(inner, hold, lease_ms, fair, offers).await;
        }
    }
    release_on(inner, &hold.name, &hold.holder, lease_ms, fair, None, true)
        .await
        .map(drop)
}

/// Runs the hand-over script and answers every taken offer (offers.rs invariant 2):
/// the granted one with the instant the script was sent, the others declined; if the
/// script fails or this future is dropped, `Taken` answers them "unknown", and each
/// waiter asks Redis whether the script gave it the lock.
async fn hand_over(
    inner: &Arc<Inner>,
    hold: &Hold,
    lease_ms: u64,
    fair: bool,
    offers: Vec<Offer>,
) -> Result<()> {
    let started = std::time::Instant::now();
    let mut taken = Taken { offers, started };
    let from = (&*hold.holder, lease_ms);
    let master = &inner.masters[0];
    let outcome = if fair {
        let offered: Vec<(&str, u64)> = (taken.offers.iter())
            .map(|o| (&*o.holder, o.lease_ms))
            .collect();
        scripts::fair_handover(master, &hold.name, from, &offered).await?
    } else {
        let to = (&*taken.offers[0].holder, taken.offers[0].lease_ms);
        scripts::handover(master, &hold.name, from, to).await?
    };
    let granted = match outcome {
        Handover::HandedOver(i) => Some(taken.remove(i)),
        _ => None,
    };
    // The others were not handed the lock: they wait or compete as usual.
    taken.decline();
    if let Some(offer) = granted {
        if offer.tx.send(Answer::Granted(started)).is_err() {
            // The waiter gave up meanwhile: release what it was handed.
            let (name, lease_ms) = (&hold.name, offer.lease_ms);
            release_on(inner, name, &offer.holder, lease_ms, fair, None, true).await?;
        }
        return Ok(());
    }
    match outcome {
        // Another client waits (plain) or is next (fair): released and published.
        Handover::Released => {
            if !fair {
                inner
                    .pubsub
                    .notify_local(&crate::names::channel(&hold.name));
            }
            Ok(())
        }
        Handover::StillHeld | Handover::HandedOver(_) => Ok(()),
        Handover::NotHeld => Err(Error::NotHeld {
            name: hold.name.to_string(),
            holder: hold.holder.to_string(),
        }),
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.hold.name)
            .field("holder", &self.hold.holder)
            .field("watchdog", &self.watchdog)
            .field("token", &self.token)
            .field("validity", &self.validity)
            .finish()
    }
}
