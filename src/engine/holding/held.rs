//! [`Held`]: one acquisition as the API's guards carry it (a `LockGuard`, a `Permit`,
//! each part of a `MultiGuard`): the hold, how it was taken, and the release that
//! runs when it is given back or dropped.
//!
//! Invariants:
//! 1. A `Held` gives its hold back once: by [`Held::release`] (reporting the outcome)
//!    or, if still armed, by its drop (in a background task the client's shutdown
//!    waits for, on the runtime it was acquired on when dropped outside one).
//! 2. A hold that was lost is never released again (holding/table.rs invariant 2): the
//!    release reports [`Error::NotHeld`] once what a late renewal kept of it is
//!    dropped (Holdings::lose, holding/watchdog.rs), and a drop sends nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::engine::holding::holder_id::{self, ScopeEntry};
use crate::engine::holding::table::HoldEntry;
use crate::engine::kinds::{self, expirable_semaphore};
use crate::engine::{holding::release, Engine};
use crate::error::{Error, Result};
use crate::lost::LostReason;

/// One hold of a lock or a permit, released on [`release`](Held::release) or drop.
pub(crate) struct Held {
    engine: Arc<Engine>,
    hold: Arc<HoldEntry>,
    lease_ms: u64,
    /// Kept by the watchdog (no explicit lease).
    watchdog: bool,
    /// A fenced lock's token.
    token: Option<u64>,
    /// The validity the grant reported.
    granted: Duration,
    /// Where a drop outside any runtime releases (invariant 1).
    runtime: tokio::runtime::Handle,
    armed: bool,
}

impl Held {
    /// The hold, not kept alive by the caller (revoke.rs invariant 3).
    pub(in crate::engine) fn hold_weak(&self) -> std::sync::Weak<HoldEntry> {
        Arc::downgrade(&self.hold)
    }

    pub(in crate::engine) fn new(
        engine: Arc<Engine>,
        hold: Arc<HoldEntry>,
        lease: Duration,
        watchdog: bool,
        (token, granted): (Option<u64>, Duration),
    ) -> Held {
        Held {
            engine,
            hold,
            lease_ms: lease.as_millis() as u64,
            watchdog,
            token,
            granted,
            runtime: tokio::runtime::Handle::current(),
            armed: true,
        }
    }

    /// The lock's (or semaphore's) name.
    /// The engine the hold lives in (the guarded writes and revocation run there).
    pub(in crate::engine) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    pub(crate) fn name(&self) -> &str {
        &self.hold.name
    }

    /// The holder id (a permit's id).
    pub(crate) fn holder(&self) -> &str {
        &self.hold.holder
    }

    /// The fencing token of a fenced lock.
    pub(crate) fn token(&self) -> Option<u64> {
        self.token
    }

    /// Kept by the watchdog.
    pub(crate) fn watchdog(&self) -> bool {
        self.watchdog
    }

    /// The validity the grant reported (lease − elapsed − drift).
    pub(crate) fn granted_validity(&self) -> Duration {
        self.granted
    }

    /// The number of masters the hold is on.
    pub(crate) fn masters(&self) -> usize {
        self.engine.masters().len()
    }

    /// Cancelled when the hold is known to be lost.
    pub(crate) fn lost(&self) -> CancellationToken {
        self.hold.lost.token()
    }

    /// Why it was lost, once it was.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.hold.reason()
    }

    /// `Some(end of validity)` while renewals fail on a majority.
    pub(crate) fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        self.hold.risk()
    }

    /// When the current lease's validity ends unless renewed.
    pub(crate) fn valid_until(&self) -> Instant {
        let engine = &self.engine;
        self.hold
            .lease_valid_until(|lease| engine.validity_of(lease))
    }

    /// What a guard's scope re-enters: this client, this name, this holder.
    pub(crate) fn scope_entry(&self) -> ScopeEntry {
        let holder = holder_id::base(&self.hold.holder);
        (
            self.engine.holder_prefix().into(),
            self.hold.name.clone(),
            holder.into(),
        )
    }

    /// Gives the hold back now (invariants 1, 2).
    pub(crate) async fn release(mut self) -> Result<()> {
        self.armed = false;
        let (engine, hold) = (&self.engine, &self.hold);
        match engine.holdings().table().released(hold, self.watchdog) {
            Some(left) => give_back(engine, hold, self.lease_ms, left).await,
            None if hold.permit => Err(not_held(hold)),
            None => {
                // A lost hold is being dropped on the masters (Holdings::lose, holding/watchdog.rs): report
                // once that is done, so nothing of it is left when unlock returns.
                let fair = kinds::fair_offers(hold.kind);
                engine.offers(fair).settled(&hold.name, &hold.holder).await;
                Err(not_held(hold))
            }
        }
    }
}

/// Gives one hold back in Redis (`left`: the holds of its holder still counted).
async fn give_back(engine: &Arc<Engine>, hold: &HoldEntry, lease_ms: u64, left: u32) -> Result<()> {
    if !hold.permit {
        return release::release(engine, hold, lease_ms, left == 0).await;
    }
    match expirable_semaphore::return_permit(engine.masters().first(), &hold.name, &hold.holder)
        .await?
    {
        true => Ok(()),
        false => Err(not_held(hold)),
    }
}

fn not_held(hold: &HoldEntry) -> Error {
    Error::NotHeld {
        name: hold.name.to_string(),
        holder: hold.holder.to_string(),
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(left) = self
            .engine
            .holdings()
            .table()
            .released(&self.hold, self.watchdog)
        else {
            return;
        };
        let (engine, hold, lease_ms) = (self.engine.clone(), self.hold.clone(), self.lease_ms);
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        let release = async move {
            match give_back(&engine, &hold, lease_ms, left).await {
                Ok(()) => {}
                Err(e) if hold.permit && e.is_not_held() => {}
                Err(e) if hold.permit => tracing::warn!(semaphore = %hold.name, error = %e,
                    "giving a permit back on drop failed; it expires on its own"),
                Err(e) => tracing::warn!(lock = %hold.name, error = %e, "release on drop failed"),
            }
        };
        self.engine.cleanups().spawn_on(release, &runtime);
    }
}
