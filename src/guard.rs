//! [`LockGuard`]: proof of one hold; releases it on `unlock` or drop.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::attempt::release_on;
use crate::client::Inner;
use crate::error::{Error, Result};
use crate::gate::Offer;
use crate::holds::Hold;
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

/// Releases one hold. When it is the last local hold of a plain lock on a single master
/// and another task of this client waits at the gate with an offer, the lock is handed
/// to that task in the same script (gate.rs invariant 3): one round trip instead of a
/// release and an acquire, and never past another client's waiter (handover.lua).
async fn release(
    inner: &Arc<Inner>,
    hold: &Hold,
    lease_ms: u64,
    fair: bool,
    last: bool,
) -> Result<()> {
    if last && !fair && inner.masters.len() == 1 {
        if let Some(offer) = inner.gates.take(&hold.name) {
            return hand_over(inner, hold, lease_ms, offer).await;
        }
    }
    release_on(inner, &hold.name, &hold.holder, lease_ms, fair, None, true)
        .await
        .map(drop)
}

async fn hand_over(inner: &Arc<Inner>, hold: &Hold, lease_ms: u64, offer: Offer) -> Result<()> {
    let started = std::time::Instant::now();
    let from = (&*hold.holder, lease_ms);
    let to = (&*offer.holder, offer.lease_ms);
    // On an error the offer is dropped: the waiter wakes and asks Redis itself.
    match scripts::handover(&inner.masters[0], &hold.name, from, to).await? {
        Handover::HandedOver => {
            if offer.tx.send(started).is_err() {
                // The waiter gave up meanwhile: release what it was handed.
                release_on(
                    inner,
                    &hold.name,
                    &offer.holder,
                    offer.lease_ms,
                    false,
                    None,
                    true,
                )
                .await?;
            }
            Ok(())
        }
        // Another client waits: released and published as usual; the dropped offer
        // wakes our waiter, which competes like everyone else.
        Handover::Released => {
            inner
                .pubsub
                .notify_local(&crate::names::channel(&hold.name));
            Ok(())
        }
        Handover::StillHeld => Ok(()),
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
