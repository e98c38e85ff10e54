//! The engine: how locks are taken, waited for, kept and given back, over one or more
//! independent deployments. It sends requests through the transport layer
//! ([`crate::transport::Transport`]) and knows nothing of the public API above it.
//!
//! * [`facade`]: what the API layer calls (connect, `lock`, the façade's types);
//!   [`queries`]: the read side and `force_unlock`; `counters`: semaphores and
//!   latches; `expirable`: the permit-expirable semaphore; [`election`],
//!   [`guarded`], [`revoke`]: leader election, guarded writes, release requests.
//! * [`master`]: one deployment as the engine uses it (its transport and group commit).
//! * [`kinds`]: one protocol per lock kind (what it sends, which channel wakes it);
//!   [`catalogue`]: every script in `lua/`; [`plain_ops`]: how group commit sends
//!   plain operations; [`renew`]: renewal calls; [`shards`]: grouping a batch by slot
//!   or node; [`wire`]: script replies and the rules every call shares.
//! * [`quorum`]: fan-out to every master and the majority rules.
//! * [`attempt`]: one acquisition attempt over all masters (Redlock steps 1–5).
//! * [`waiter`]: the wait for a busy lock (attempt → subscribe → wait → retry);
//!   [`spin`]: a spin lock's wait instead (try → back off → retry, no pub/sub), spaced
//!   by a [`BackOff`] ([`backoff`]).
//! * [`release`]: giving a hold back, or handing it to a local waiter.
//! * [`rw`]: what the read and write locks of a read-write lock share.
//! * [`signal`]: waiting for a counter; calls that run to their end if cancelled.
//! * [`watchdog`]: renewing the leases of held locks.
//! * [`held`], [`holds`], [`holder`], [`gate`], [`offers`]: the client's local
//!   bookkeeping; `self_wait`: telling a call that may wait for its own task's hold.
//! * [`tickets`]: waits that a release in another client may hand the lock to.
//!
//! The API layer uses only the façade: [`Engine`]'s methods (in [`facade`],
//! [`queries`], `counters`, `expirable`, [`election`], [`revoke`]) and [`Held`]'s,
//! [`Kind`], [`Settings`], and the types [`facade`] re-exports (the call description,
//! the handle of an acquisition, what the API needs of the transport). It never names
//! an inner module (scripts/check-layers.py checks it, and that no engine modules
//! import each other in a circle). `Engine`'s fields are private to this module.
//!
//! [`Held`]: held::Held

pub(crate) mod attempt;
mod backoff;
pub(crate) mod call;
pub(crate) mod catalogue;
mod clock;
mod counters;
pub(crate) mod election;
mod expirable;
pub(crate) mod facade;
#[cfg(test)]
mod fake;
pub(crate) mod gate;
pub(crate) mod guarded;
pub(crate) mod held;
pub(crate) mod holder;
pub(crate) mod holds;
mod kind;
pub(crate) mod kinds;
pub(crate) mod master;
pub(crate) mod observe;
pub(crate) mod offers;
pub(crate) mod plain_ops;
pub(crate) mod queries;
pub(crate) mod quorum;
pub(crate) mod release;
pub(crate) mod renew;
pub(crate) mod revoke;
pub(crate) mod rw;
mod self_wait;
pub(crate) mod shards;
pub(crate) mod signal;
mod spin;
pub(crate) mod tickets;
mod urgent;
pub(crate) mod waiter;
pub(crate) mod watchdog;
pub(crate) mod wire;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::transport::pubsub::PubSub;

pub use backoff::{BackOff, Delays};
use gate::Gates;
use holds::{Hold, Holds};
pub use kind::Kind;
use master::Master;
use offers::Offers;
use tickets::Tickets;
use urgent::Urgent;

/// The timing the engine works with (the API's `Config`, validated).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Lease of watchdog-kept holds; the watchdog renews every third of it.
    pub(crate) watchdog_timeout: Duration,
    /// Clock drift allowed for, as a fraction of the lease.
    pub(crate) drift_factor: f64,
    /// Upper bound of the back-off after a split vote or an outage.
    pub(crate) retry_jitter: Duration,
    /// Time allowed to open a connection (and to confirm a subscription).
    pub(crate) connect_timeout: Duration,
    /// A fair waiter that stops refreshing its liveness is evicted after this long (by
    /// the next fair script of a redlatch client; see `lua/fair_evict.lua`).
    pub(crate) fair_stale_timeout: Duration,
    /// A fair waiter's wait time on Redisson's wire (its threadWaitTime).
    pub(crate) fair_wait_time: Duration,
    /// How long `lock()` retries while no majority answers.
    pub(crate) unavailable_after: Duration,
    /// The deployment is a Redis Cluster (lock names must keep their keys in one slot).
    pub(crate) cluster: bool,
    /// The app name of the client record (engine/observe/).
    pub(crate) app: Arc<str>,
    /// A waiter looks for deadlocks through itself (engine/observe/deadlock.rs).
    pub(crate) deadlock_detection: bool,
}

/// The state one client's locks share: the masters, the pub/sub hub, the hold table,
/// the local gates and offers, and the background clean-ups.
pub(crate) struct Engine {
    id: Uuid,
    /// `"{id}:"`, shared by every holder id of this client.
    holder_prefix: String,
    masters: Vec<Arc<Master>>,
    quorum: usize,
    settings: Settings,
    pubsub: PubSub,
    holds: Holds,
    gates: Gates,
    /// Waits registered for a cross-process hand-over (tickets.rs).
    tickets: Tickets,
    /// Hand-over offers of waiting tasks: plain locks, then fair locks (offers.rs).
    offers: [Offers; 2],
    /// Background clean-ups (releases on drop, undoing cancelled attempts, leaving fair
    /// queues, the answers of masters slower than the majority), so a shutdown can
    /// wait for them.
    cleanups: TaskTracker,
    /// Holds acquired too late for the next renewal round (urgent.rs).
    urgent: Arc<Urgent>,
    /// The client record, the ledger and deadlock detection (engine/observe/).
    observe: Arc<observe::Observe>,
    shutdown: CancellationToken,
}

impl Engine {
    /// The hand-over offers of plain (`fair` false) or fair locks.
    fn offers(&self, fair: bool) -> &Offers {
        &self.offers[usize::from(fair)]
    }

    /// Hands a hold just acquired (or re-entered) to the watchdog's urgent renewal
    /// when the watchdog renews it and its reply came so late that the next round
    /// could miss its validity (urgent.rs); nothing otherwise.
    fn watch_new(&self, hold: &Arc<Hold>) {
        let validity = self.validity_of(self.settings.watchdog_timeout);
        self.urgent
            .offer(hold, validity, self.settings.watchdog_timeout / 3);
    }

    /// Redlock validity of a lease: lease − (lease × drift_factor + 2 ms).
    /// The longest one request may take when its master answers (the slowest master's
    /// [`Master::bound`](master::Master::bound)).
    fn request_bound(&self) -> Duration {
        self.masters
            .iter()
            .map(|m| m.bound())
            .max()
            .unwrap_or_default()
    }

    fn validity_of(&self, lease: Duration) -> Duration {
        let drift = lease.mul_f64(self.settings.drift_factor) + Duration::from_millis(2);
        lease.saturating_sub(drift)
    }

    /// Waits (at most `timeout`) for the background clean-ups, then stops the watchdog
    /// and the pub/sub connections.
    /// Deletes the client record and ledger within what is left of `timeout`.
    pub(crate) async fn shut_down(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        self.cleanups.close();
        let _ = tokio::time::timeout(timeout, self.cleanups.wait()).await;
        self.shutdown.cancel();
        let _ = tokio::time::timeout_at(deadline, self.remove_record()).await;
        // Nobody renews from now on: live guards report it before close() returns.
        self.holds.lose_all();
    }

    /// Stops the background tasks at once (the last handle went).
    pub(crate) fn stop(&self) {
        self.shutdown.cancel();
    }
}
