//! The engine: how locks are taken, waited for, kept and given back, over one or more
//! independent deployments. It sends requests through the transport layer
//! ([`crate::transport::Transport`]) and knows nothing of the public API above it.
//!
//! The folders say what they hold, lowest first (each uses only those above it in
//! this list; scripts/check-layers.py checks that no two import each other):
//!
//! * [`masters`]: how the engine reaches the masters: one master with its group
//!   commit (`master`), how plain operations travel in it (`plain_ops`), the fan-out
//!   to every master and the majority rules (`quorum`), grouping a batch by slot or
//!   node (`shards`), script replies and the rules every call shares (`replies`), and
//!   deadlines from any duration (`clock`).
//! * [`kinds`]: a lock kind is one type: its scripts, channel, wait policy, renewal
//!   and inspection ([`Kind`] names them, in `kind`); what the calls of every kind
//!   share: the call descriptions (`call`), the renewal calls (`renew`), the spin
//!   kind's [`BackOff`] (`backoff`) and the read-write layout (`rw_layout`).
//! * [`holding`]: keeping and giving back: one acquisition as a guard carries it
//!   (`held`), the client's hold table (`table`), holder ids (`holder_id`), the
//!   watchdog (`watchdog`, `urgent`), the release (`release`) and the hand-over
//!   offers of local waiters it may answer (`offers`).
//! * [`acquire`]: taking a lock: one Redlock attempt (`attempt`), the wait for a busy
//!   lock (`waiter/`: attempt → subscribe → wait → retry) or a spin lock's
//!   (`spin_wait`), waiting for a counter (`signal`), the local line of contenders
//!   (`gate`), hand-overs from other clients (`tickets`), and a call that may wait for
//!   its own task's hold (`self_wait`).
//! * [`coordination`]: what is built on holding a lock: leader election, guarded
//!   writes and release requests.
//! * [`observe`]: reading a deployment for operators: the locks under a pattern, who
//!   holds them and who waits (`Client::list`).
//! * [`facade`]: what the API layer calls. `facade/mod.rs` lists every method of
//!   [`Engine`] the API calls and the file that holds it; `catalogue` (tests) lists
//!   every script.
//!
//! The API layer uses only the façade: [`Engine`]'s methods (listed in [`facade`])
//! and [`Held`]'s,
//! [`Kind`], [`Settings`], and the types [`facade`] re-exports (the call description,
//! the handle of an acquisition, what the API needs of the transport). It never names
//! an inner module (scripts/check-layers.py checks it, and that no engine modules
//! import each other in a circle). `Engine`'s fields are read, and its `impl` blocks
//! written, only in this file and in [`facade`]; each part keeps its own state in a
//! type of its folder (`masters::Masters`, `holding::Holdings`, `acquire::Contenders`,
//! `observe::Observe`) whose fields are private to it, and its work is a method of that
//! type or a function of its folder, given what it needs of the engine
//! (scripts/check-layers.py checks all three).
//!
//! [`Held`]: holding::held::Held

pub(crate) mod acquire;
pub(crate) mod coordination;
pub(crate) mod facade;
#[cfg(test)]
mod fake;
pub(crate) mod holding;
pub(crate) mod kinds;
pub(crate) mod masters;
pub(crate) mod observe;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::transport::pubsub::PubSub;

/// The hash map of the tables an acquisition and its release touch (holds, gates,
/// tickets): foldhash, seeded per process, not SipHash (which cost ~1k instructions of
/// an uncontended pair).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

use holding::table::HoldEntry;
pub use kinds::backoff::{BackOff, Delays};
pub use kinds::kind::Kind;

/// The slack of a bounded wait (`try_lock(w)`, `w` > 0, and every wait given a
/// limit): a request still in flight at the deadline is abandoned this long after it
/// at the latest, or one request's bound if that is shorter (50 ms per master under
/// Redlock), so the call returns by `w` plus this whatever the masters do
/// (docs/guarantees.md, "Bounds"). Long enough for a loaded machine's loopback
/// answer, short against a single master's 1 s timeout. A single try
/// (`try_lock(Duration::ZERO)`) keeps one request's bound.
pub const WAIT_SLACK: Duration = Duration::from_millis(250);

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
    /// How long a last release asks masters that did not answer (Config::release_timeout).
    pub(crate) release_after: Duration,
    /// The deployment is a Redis Cluster (lock names must keep their keys in one slot).
    pub(crate) cluster: bool,
    /// The lock names metrics are labelled with (telemetry.rs).
    pub(crate) metrics_names: crate::telemetry::LockNames,
    /// The app name of the client record (engine/observe/).
    pub(crate) app: Arc<str>,
    /// A waiter looks for deadlocks through itself (engine/observe/deadlock.rs).
    pub(crate) deadlock_detection: bool,
    /// Where the client record, ledger, revoke markers and notice channel go, if
    /// anywhere (keys/books.rs).
    pub(crate) books: crate::keys::books::Books,
}

/// The state one client's locks share. Each part of the engine keeps its own state in
/// a type of its folder ([`Masters`](masters::Masters), [`Holdings`](holding::Holdings),
/// [`Contenders`](acquire::Contenders), [`Observe`](observe::Observe)); what is left
/// here is the client's identity, its settings, the pub/sub hub and the background
/// tasks' lifetime. These fields are read only in this file and in facade/; every other
/// file asks the accessors below (scripts/check-layers.py checks it).
pub(crate) struct Engine {
    id: Uuid,
    /// `"{id}:"`, shared by every holder id of this client.
    holder_prefix: String,
    masters: masters::Masters,
    settings: Settings,
    pubsub: PubSub,
    holdings: holding::Holdings,
    contenders: acquire::Contenders,
    /// Background clean-ups (releases on drop, undoing cancelled attempts, leaving fair
    /// queues, the answers of masters slower than the majority), so a shutdown can
    /// wait for them.
    cleanups: TaskTracker,
    /// The client record, the ledger and deadlock detection (engine/observe/).
    observe: Arc<observe::Observe>,
    shutdown: CancellationToken,
    /// When `close()` began: the background releases still asking unanswered masters
    /// give up the release timeout after it (holding/release.rs).
    closing: std::sync::OnceLock<std::time::Instant>,
}

/// The accessors the parts use (private: the API layer calls the façade's methods).
impl Engine {
    /// The masters and their majority (masters/).
    fn masters(&self) -> &masters::Masters {
        &self.masters
    }

    /// The hold table, the urgent renewals and the hand-over offers (holding/).
    fn holdings(&self) -> &holding::Holdings {
        &self.holdings
    }

    /// The local line of contenders and the hand-over tickets (acquire/).
    fn contenders(&self) -> &acquire::Contenders {
        &self.contenders
    }

    /// The client record, the ledger and deadlock detection (observe/).
    fn observe(&self) -> &Arc<observe::Observe> {
        &self.observe
    }

    fn settings(&self) -> &Settings {
        &self.settings
    }

    fn pubsub(&self) -> &PubSub {
        &self.pubsub
    }

    /// `"{id}:"`, the start of every holder id of this client.
    fn holder_prefix(&self) -> &str {
        &self.holder_prefix
    }

    /// The background clean-ups `close()` waits for.
    fn cleanups(&self) -> &TaskTracker {
        &self.cleanups
    }

    /// Cancelled when the client shuts down.
    fn stopping(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// When `close()` began, if it did.
    fn closing(&self) -> Option<&std::time::Instant> {
        self.closing.get()
    }

    /// The hand-over offers of plain (`fair` false) or fair locks.
    fn offers(&self, fair: bool) -> &holding::offers::Offers {
        self.holdings.offers(fair)
    }

    /// Hands a hold just acquired (or re-entered) to the watchdog's urgent renewal
    /// when the watchdog renews it and its reply came so late that the next round
    /// could miss its validity (urgent.rs); nothing otherwise.
    fn watch_new(&self, hold: &Arc<HoldEntry>) {
        let validity = self.validity_of(self.settings.watchdog_timeout);
        (self.holdings.urgent()).offer(hold, validity, self.settings.watchdog_timeout / 3);
    }

    /// The longest one request may take when its master answers (the slowest master's
    /// [`Master::bound`](masters::master::Master::bound)).
    fn request_bound(&self) -> Duration {
        self.masters.request_bound()
    }

    /// Redlock validity of a lease: lease − (lease × drift_factor + 2 ms).
    fn validity_of(&self, lease: Duration) -> Duration {
        let drift = lease.mul_f64(self.settings.drift_factor) + Duration::from_millis(2);
        lease.saturating_sub(drift)
    }

    /// Waits (at most `timeout`) for the background clean-ups, then stops the watchdog
    /// and the pub/sub connections.
    /// Deletes the client record and ledger within what is left of `timeout`.
    pub(crate) async fn shut_down(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        let _ = self.closing.set(std::time::Instant::now());
        self.cleanups.close();
        let _ = tokio::time::timeout(timeout, self.cleanups.wait()).await;
        self.shutdown.cancel();
        let _ = tokio::time::timeout_at(deadline, self.observe.remove_record(self)).await;
        // Nobody renews from now on: live guards report it before close() returns.
        self.holdings.table().lose_all();
    }

    /// Stops the background tasks at once (the last handle went).
    pub(crate) fn stop(&self) {
        self.shutdown.cancel();
    }
}
