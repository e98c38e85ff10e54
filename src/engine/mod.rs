//! The engine: how locks are taken, waited for, kept and given back, over one or more
//! independent deployments. It sends requests through the transport layer
//! ([`crate::transport::Transport`]) and knows nothing of the public API above it.
//!
//! * [`master`]: one deployment as the engine uses it (its transport and group commit).
//! * [`scripts`]: one typed call per Lua script in `lua/`.
//! * [`quorum`]: fan-out to every master and the majority rules.
//! * [`attempt`]: one acquisition attempt over all masters (Redlock steps 1–5).
//! * [`waiter`]: the wait for a busy lock (attempt → subscribe → wait → retry).
//! * [`release`]: giving a hold back, or handing it to a local waiter.
//! * [`rw`]: what the read and write locks of a read-write lock send instead.
//! * [`permits`], [`signal`]: semaphores and latches, and waiting for a counter.
//! * [`watchdog`]: renewing the leases of held locks.
//! * [`holds`], [`holder`], [`gate`], [`offers`]: the client's local bookkeeping.
//! * [`tickets`]: waits that a release in another client may hand the lock to.
//!
//! The API layer uses only the façade: [`Engine`]'s methods in [`facade`] (connect,
//! acquire, counters) and [`queries`] (the read side, `force_unlock`), [`Kind`],
//! [`Settings`], and the types [`facade`] names (the call description, the handle of
//! an acquisition, what the API needs of the transport). `Engine`'s fields are private
//! to this module.

pub(crate) mod attempt;
pub(crate) mod call;
pub(crate) mod facade;
pub(crate) mod gate;
pub(crate) mod held;
pub(crate) mod holder;
pub(crate) mod holds;
mod kind;
pub(crate) mod master;
pub(crate) mod offers;
pub(crate) mod permits;
pub(crate) mod queries;
pub(crate) mod quorum;
pub(crate) mod release;
pub(crate) mod rw;
pub(crate) mod scripts;
pub(crate) mod signal;
pub(crate) mod tickets;
pub(crate) mod waiter;
pub(crate) mod watchdog;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::transport::pubsub::PubSub;
use crate::transport::Transport;

use gate::Gates;
use holds::{Hold, Holds};
pub use kind::Kind;
use master::Master;
use offers::Offers;
use tickets::Tickets;

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
    /// Holds acquired too late for the next renewal round (watchdog::Urgent).
    urgent: Arc<watchdog::Urgent>,
    shutdown: CancellationToken,
}

impl Engine {
    /// Starts an engine over `links` (already checked to answer), with its watchdog and
    /// pub/sub tasks; they stop when [`shut_down`](Self::shut_down) is called or the
    /// engine is dropped.
    fn start(links: Vec<Arc<dyn Transport>>, settings: Settings) -> Arc<Engine> {
        let quorum = links.len() / 2 + 1;
        let shutdown = CancellationToken::new();
        let period = settings.watchdog_timeout / 3;
        let id = Uuid::new_v4();
        let engine = Arc::new_cyclic(|engine: &std::sync::Weak<Engine>| {
            // Hand-overs from other clients' releases arrive as messages (tickets.rs).
            let engine = engine.clone();
            let on_payload = Box::new(move |payload: &[u8]| {
                if let Some(engine) = engine.upgrade() {
                    tickets::received(&engine, payload);
                }
            });
            let timeout = settings.connect_timeout;
            Engine {
                id,
                holder_prefix: holder::prefix(&id),
                masters: links.iter().cloned().map(Master::new).collect(),
                quorum,
                pubsub: PubSub::start(links, quorum, timeout, &shutdown, on_payload),
                settings,
                holds: Holds::default(),
                gates: Gates::default(),
                tickets: Tickets::default(),
                offers: Default::default(),
                cleanups: TaskTracker::new(),
                urgent: Arc::default(),
                shutdown: shutdown.clone(),
            }
        });
        let urgent = engine.urgent.clone();
        tokio::spawn(watchdog::run_urgent(
            Arc::downgrade(&engine),
            urgent,
            shutdown.clone(),
        ));
        tokio::spawn(watchdog::run(Arc::downgrade(&engine), shutdown, period));
        engine
    }

    /// The hand-over offers of plain (`fair` false) or fair locks.
    fn offers(&self, fair: bool) -> &Offers {
        &self.offers[usize::from(fair)]
    }

    /// Hands a hold just acquired (or re-entered) to the watchdog's urgent renewal
    /// when the watchdog renews it and its reply came so late that the next round
    /// could miss its validity (watchdog::Urgent); nothing otherwise.
    fn watch_new(&self, hold: &Arc<Hold>) {
        let validity = self.validity_of(self.settings.watchdog_timeout);
        self.urgent
            .offer(hold, validity, self.settings.watchdog_timeout / 3);
    }

    /// Declares a hold lost for `reason` and wakes this client's local waiters of its lock, which
    /// may have been waiting for that holder's release (waiter.rs invariant 6).
    ///
    /// Then drops what is left of it on every master, in the background: renewals
    /// queued on a paused master may have extended it after we gave up on it, and
    /// nobody would release it (its guards no longer send a release, holds.rs
    /// invariant 2). The holder's next acquisition of the name waits for this, so the
    /// drop cannot remove a newer grant; sent on the lock lane, it also runs before
    /// that acquisition on every master that answers late.
    ///
    /// False, and nothing done, when the hold is no longer in the table: released
    /// meanwhile (a renewal sent before the release finds it gone) or lost already.
    fn lose(&self, hold: &Arc<Hold>, reason: crate::lost::LostReason) -> bool {
        if !self.holds.lose(hold, reason) {
            return false;
        }
        if !hold.permit {
            self.pubsub.notify_local(&hold.kind.channel(&hold.name));
        }
        let (name, holder) = (hold.name.clone(), hold.holder.clone());
        let settling = [false, true].map(|fair| self.offers(fair).settling(&name, &holder));
        let masters = self.masters.clone();
        let (rw, permit) = (hold.kind.is_rw(), hold.permit);
        self.cleanups.spawn(async move {
            let _settling = settling;
            let (n, h) = (&*name, &*holder);
            let dropped = quorum::fan_out(&masters, |m| async move {
                if permit {
                    permits::return_permit(m, n, h).await
                } else if rw {
                    rw::drop_lost(m, n, h).await
                } else {
                    scripts::drop_lost(m, n, h).await
                }
            })
            .await;
            for (m, r) in masters.iter().zip(dropped) {
                match r {
                    Ok(true) => tracing::info!(lock = %name, %holder, master = m.addr(),
                        "deleted a lost lock that a late renewal had kept"),
                    Ok(false) => {}
                    Err(e) => tracing::debug!(lock = %name, master = m.addr(), error = %e,
                        "could not drop a lost lock; its lease ends it"),
                }
            }
        });
        true
    }

    /// Redlock validity of a lease: lease − (lease × drift_factor + 2 ms).
    fn validity_of(&self, lease: Duration) -> Duration {
        let drift = lease.mul_f64(self.settings.drift_factor) + Duration::from_millis(2);
        lease.saturating_sub(drift)
    }

    /// Waits (at most `timeout`) for the background clean-ups, then stops the watchdog
    /// and the pub/sub connections.
    pub(crate) async fn shut_down(&self, timeout: Duration) {
        self.cleanups.close();
        let _ = tokio::time::timeout(timeout, self.cleanups.wait()).await;
        self.shutdown.cancel();
        // Nobody renews from now on: live guards report it before close() returns.
        self.holds.lose_all();
    }

    /// Stops the background tasks at once (the last handle went).
    pub(crate) fn stop(&self) {
        self.shutdown.cancel();
    }
}
