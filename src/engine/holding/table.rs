//! The client's table of held locks: one [`HoldEntry`] per (lock name, holder), with the
//! local reentrant count. The watchdog renews what is in it; guards count down in it.
//!
//! Invariants:
//! 1. An entry exists while its holder holds the lock at least once (count > 0).
//! 2. An entry that is lost (watchdog, force-unlock, expired lease found on re-acquire)
//!    has its `lost` token cancelled and is removed; guards of a lost hold never send a
//!    release again, so they cannot release a later acquisition by the same holder.
//! 3. A lost hold's reason is set before its token is cancelled (the first reason
//!    wins), so whoever wakes on `lost` reads why.
//! 4. `risk` holds `Some(end of validity)` while renewals failed on a majority since
//!    the last renewal that counted, `None` otherwise (watchdog.rs).

use crate::engine::FastMap as HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::engine::holding::holder_id::{self, Context};
use crate::engine::holding::lost_signal::LostSignal;
use crate::engine::kinds::call::Call;
use crate::engine::kinds::expirable_semaphore;
use crate::engine::kinds::kind::Kind;
use crate::error::Error;
use crate::lost::LostReason;
use crate::telemetry;

/// One holder's hold on one lock.
pub(crate) struct HoldEntry {
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    /// What kind of lock it is (the watchdog renews read holds differently).
    pub(crate) kind: Kind,
    /// A permit of an expirable semaphore (`holder` is the permit id), not a lock.
    pub(crate) permit: bool,
    /// Lost or not, its token made when asked for (holding/lost_signal.rs).
    pub(crate) lost: LostSignal,
    /// Why it was lost (invariant 3).
    reason: OnceLock<LostReason>,
    /// The end of its validity while renewals fail on a majority (invariant 4). Made
    /// when first asked for or put at risk: a channel per hold, made and dropped (its
    /// eight wakers notified) with every W1 pair, was ~0.9k instructions of it.
    risk: OnceLock<watch::Sender<Option<Instant>>>,
    /// A permanent error (NOPERM) that refused its last renewal, if any since the last
    /// renewal that counted: the reason if it runs out.
    refused: parking_lot::Mutex<Option<Error>>,
    /// A request to release it reached this client (coordination/revoke.rs): set once,
    /// before the token (made only when asked for) is cancelled.
    revoke_asked: std::sync::atomic::AtomicBool,
    revoke: OnceLock<tokio_util::sync::CancellationToken>,
    /// This client is force-unlocking its name (facade/queries.rs): a renewal that
    /// finds it gone meanwhile (its notice can outrun the force's own reply) says so.
    pub(crate) forcing: std::sync::atomic::AtomicBool,
    /// When the holder first took the lock (re-entries do not move it).
    pub(crate) since: Instant,
    /// The task (or thread) whose call took it first (holding/holder_id.rs invariant 5).
    pub(crate) context: Context,
    state: parking_lot::Mutex<State>,
}

struct State {
    count: u32,
    watchdog_holds: u32,
    /// When a majority last set the lease to `lease` (acquire, re-entry or renewal).
    last_renewed: Instant,
    lease: Duration,
}

impl HoldEntry {
    /// Holds that want the watchdog, and when a majority last confirmed the lease.
    pub(crate) fn watchdog_state(&self) -> (u32, Instant) {
        let s = self.state.lock();
        (s.watchdog_holds, s.last_renewed)
    }

    /// A majority renewed it (replicated, with replica sync) at `at`: the risk, if
    /// any, is over.
    pub(crate) fn renewed(&self, at: Instant) {
        self.state.lock().last_renewed = at;
        *self.refused.lock() = None;
        // Never made: never at risk (`at_risk` makes it).
        let Some(risk) = self.risk.get() else {
            return;
        };
        if risk.send_if_modified(|r| r.take().is_some()) {
            tracing::info!(target: "redlatch", lock = %self.name, holder = %self.holder,
                "lock no longer at risk: renewed by a majority");
        }
    }

    /// When its validity ends (`validity` after the last renewal that counted).
    pub(crate) fn valid_until(&self, validity: Duration) -> Instant {
        self.state.lock().last_renewed + validity
    }

    /// When its current lease's validity ends, `validity_of` turning the lease into
    /// its validity: counted from the acquisition or the last renewal that counted
    /// (replicated, with replica sync).
    pub(crate) fn lease_valid_until(&self, validity_of: impl Fn(Duration) -> Duration) -> Instant {
        let s = self.state.lock();
        s.last_renewed + validity_of(s.lease)
    }

    /// Renewals failed on a majority: at risk until `until` unless a renewal counts.
    /// Nothing for a hold already lost: a loss is final, not a risk (the round that
    /// found it gone on the masters would otherwise report both, the risk second).
    pub(crate) fn at_risk(&self, until: Instant) {
        if self.lost.is_cancelled() {
            return;
        }
        let mut began = false;
        self.risk_sender().send_if_modified(|r| {
            began = r.is_none();
            let changed = *r != Some(until);
            *r = Some(until);
            changed
        });
        if began {
            let left_ms = until.saturating_duration_since(Instant::now()).as_millis() as u64;
            tracing::warn!(target: "redlatch", lock = %self.name, holder = %self.holder,
                validity_left_ms = left_ms,
                "lock at risk: renewals failed on a majority; its validity ends unless one succeeds");
        }
    }

    /// A receiver of the risk state (invariant 4).
    pub(crate) fn risk(&self) -> watch::Receiver<Option<Instant>> {
        self.risk_sender().subscribe()
    }

    fn risk_sender(&self) -> &watch::Sender<Option<Instant>> {
        self.risk.get_or_init(|| watch::channel(None).0)
    }

    /// Notes a permanent error that refused a renewal.
    pub(crate) fn refused(&self, e: &Error) {
        *self.refused.lock() = Some(e.clone());
    }

    /// The permanent error of the last refused renewal, if no renewal counted since.
    pub(crate) fn refusal(&self) -> Option<Error> {
        self.refused.lock().clone()
    }

    /// Why it was lost, once it was (invariant 3).
    pub(crate) fn reason(&self) -> Option<LostReason> {
        self.lost
            .is_cancelled()
            .then(|| self.reason.get().cloned())
            .flatten()
    }

    /// Records a request to release this hold: its revoke token fires, now or when it
    /// is made. Whether it was the first request seen.
    pub(crate) fn ask_release(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let first = !self.revoke_asked.swap(true, SeqCst);
        if let Some(token) = self.revoke.get() {
            token.cancel();
        }
        first
    }

    /// The token that fires when a release is requested ([`ask_release`](Self::ask_release)).
    pub(crate) fn revoke_token(&self) -> tokio_util::sync::CancellationToken {
        use std::sync::atomic::Ordering::SeqCst;
        let token = self.revoke.get_or_init(Default::default).clone();
        if self.revoke_asked.load(SeqCst) {
            token.cancel();
        }
        token
    }

    /// Whether a release was requested.
    pub(crate) fn release_asked(&self) -> bool {
        self.revoke_asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// A new hold, count 1: `(watchdog, acquired at, lease)`.
    fn first(
        name: &Arc<str>,
        holder: &Arc<str>,
        kind: Kind,
        permit: bool,
        (watchdog, at, lease): (bool, Instant, Duration),
    ) -> Arc<HoldEntry> {
        Arc::new(HoldEntry {
            name: name.clone(),
            holder: holder.clone(),
            kind,
            permit,
            lost: LostSignal::default(),
            reason: OnceLock::new(),
            risk: OnceLock::new(),
            refused: parking_lot::Mutex::new(None),
            revoke_asked: Default::default(),
            forcing: Default::default(),
            revoke: OnceLock::new(),
            since: at,
            context: holder_id::context(),
            state: parking_lot::Mutex::new(State {
                count: 1,
                watchdog_holds: u32::from(watchdog),
                last_renewed: at,
                lease,
            }),
        })
    }

    /// When the lease runs out unless renewed.
    fn expires(&self) -> Instant {
        let s = self.state.lock();
        s.last_renewed + s.lease
    }
}

/// All holds of a client, by lock name (usually one holder per name).
#[derive(Default)]
pub(crate) struct HoldTable {
    map: parking_lot::Mutex<HashMap<Arc<str>, Vec<Arc<HoldEntry>>>>,
    /// The names whose hold time is measured under a `lock` label (telemetry.rs).
    names: telemetry::LockNames,
}

impl HoldTable {
    /// An empty table whose hold-time metric labels the lock names `names` allows.
    pub(crate) fn new(names: telemetry::LockNames) -> HoldTable {
        HoldTable {
            names,
            ..HoldTable::default()
        }
    }

    /// The live hold of `holder` on `name`, if any.
    pub(crate) fn get(&self, name: &str, holder: &str) -> Option<Arc<HoldEntry>> {
        let map = self.map.lock();
        map.get(name)?
            .iter()
            .find(|h| &*h.holder == holder)
            .cloned()
    }

    /// A hold of `kind` on `name` first taken by a call of `context` (the caller's task
    /// or thread), if any: what "held by the calling task" means (holding/holder_id.rs invariant 5).
    pub(crate) fn taken_in(
        &self,
        name: &str,
        kind: Kind,
        context: Context,
    ) -> Option<Arc<HoldEntry>> {
        let map = self.map.lock();
        map.get(name)?
            .iter()
            .find(|h| !h.permit && h.kind == kind && h.context == context)
            .cloned()
    }

    /// If a task of this client holds `name`: how long until its lease runs out. Its
    /// release wakes local waiters directly, so they need not ask Redis meanwhile.
    /// Holds of `except` (the caller's own holder id) do not count: the caller would
    /// re-enter those in Redis, not wait for them.
    pub(crate) fn held_locally_for(&self, name: &str, except: &str) -> Option<Duration> {
        let map = self.map.lock();
        let holds = map.get(name)?.iter().filter(|h| &*h.holder != except);
        let expires = holds.map(|h| h.expires()).min()?;
        Some(expires.saturating_duration_since(Instant::now()))
    }

    /// Records `call`, granted at `at`. `fresh`: the lock was created rather than
    /// re-entered; a fresh acquisition while we still had an entry means the old one
    /// silently expired, so the old entry is declared lost (invariant 2).
    pub(crate) fn acquired(&self, call: &Call, fresh: bool, at: Instant) -> Arc<HoldEntry> {
        let (name, holder, kind) = (&call.name, &call.holder, call.kind);
        let (watchdog, lease) = (call.watchdog, call.lease);
        let mut map = self.map.lock();
        let holds = map.entry(name.clone()).or_default();
        if let Some(i) = holds.iter().position(|h| h.holder == *holder) {
            if !fresh {
                let old = &holds[i];
                let mut s = old.state.lock();
                s.count += 1;
                s.watchdog_holds += u32::from(watchdog);
                // The re-entrant grant extended the lease to `lease` on a majority if
                // that was later; it never shortens it (acquire.lua).
                if at + lease > s.last_renewed + s.lease {
                    s.last_renewed = at;
                    s.lease = lease;
                }
                return old.clone();
            }
            let old = holds.swap_remove(i);
            telemetry::held(-1);
            self.cancel(&old, LostReason::ExpiredOrDeleted);
        }
        let hold = HoldEntry::first(name, holder, kind, false, (watchdog, at, lease));
        holds.push(hold.clone());
        telemetry::held(1);
        hold
    }

    /// Records a permit of an expirable semaphore `name` taken under `id` (count 1;
    /// the watchdog renews it when `watchdog`).
    pub(crate) fn permit(
        &self,
        name: &Arc<str>,
        id: &Arc<str>,
        watchdog: bool,
        at: Instant,
        lease: Duration,
    ) -> Arc<HoldEntry> {
        let hold = HoldEntry::first(
            name,
            id,
            expirable_semaphore::HOLD_KIND,
            true,
            (watchdog, at, lease),
        );
        let mut map = self.map.lock();
        map.entry(name.clone()).or_default().push(hold.clone());
        telemetry::held(1);
        hold
    }

    /// Counts one hold down; the entry goes when the count reaches 0. Returns the holds
    /// left, or `None` if the hold was already lost (nothing to release in Redis).
    pub(crate) fn released(&self, hold: &Arc<HoldEntry>, watchdog: bool) -> Option<u32> {
        // Checked under the map lock: `lose` cancels and removes under it too.
        let mut map = self.map.lock();
        if hold.lost.is_cancelled() {
            return None;
        }
        let mut s = hold.state.lock();
        s.count = s.count.saturating_sub(1);
        if watchdog {
            s.watchdog_holds = s.watchdog_holds.saturating_sub(1);
        }
        let left = s.count;
        if left == 0 {
            drop(s);
            Self::remove(&mut map, hold);
            telemetry::released(self.names.label(&hold.name), hold.since.elapsed());
        }
        Some(left)
    }

    fn remove(map: &mut HashMap<Arc<str>, Vec<Arc<HoldEntry>>>, hold: &Arc<HoldEntry>) {
        if let Some(holds) = map.get_mut(&hold.name) {
            let before = holds.len();
            holds.retain(|h| !Arc::ptr_eq(h, hold));
            telemetry::held(holds.len() as i64 - before as i64);
            if holds.is_empty() {
                map.remove(&hold.name);
            }
        }
    }

    /// Declares a hold lost for `reason`: cancels its token and removes it. False, and
    /// nothing done, when it is no longer in the table (released, or lost already).
    pub(crate) fn lose(&self, hold: &Arc<HoldEntry>, reason: LostReason) -> bool {
        let mut map = self.map.lock();
        let live = (map.get(&hold.name)).is_some_and(|hs| hs.iter().any(|h| Arc::ptr_eq(h, hold)));
        if live {
            let forced = hold.forcing.load(std::sync::atomic::Ordering::Acquire);
            let reason = match reason {
                LostReason::ExpiredOrDeleted if forced => LostReason::ForceUnlocked,
                other => other,
            };
            self.cancel(hold, reason);
            Self::remove(&mut map, hold);
        }
        live
    }

    /// Sets the reason, then cancels the token of a hold (invariant 3; once: a second
    /// loss is not counted again).
    fn cancel(&self, hold: &HoldEntry, reason: LostReason) {
        if !hold.lost.is_cancelled() {
            // Said before the token fires, so the warning precedes what code does on it.
            let held_ms = hold.since.elapsed().as_millis() as u64;
            let (name, holder) = (&hold.name, &hold.holder);
            match reason {
                // The application closed the client with the guard alive: said, not warned.
                LostReason::ClientClosed => tracing::info!(target: "redlatch", lock = %name,
                    holder = %holder, reason = %reason, held_ms, "lock lost"),
                _ => tracing::warn!(target: "redlatch", lock = %name, holder = %holder,
                    reason = %reason, held_ms, "lock lost"),
            }
            let _ = hold.reason.set(reason);
            hold.lost.cancel();
            telemetry::lost(self.names.label(&hold.name), hold.since.elapsed());
        }
    }

    /// The holds on `name` now (what a force-unlock about to be sent deletes).
    pub(crate) fn named(&self, name: &str) -> Vec<Arc<HoldEntry>> {
        self.map.lock().get(name).cloned().unwrap_or_default()
    }

    /// Declares every hold lost (the client shut down: nobody renews any more).
    pub(crate) fn lose_all(&self) {
        for hold in self.map.lock().drain().flat_map(|(_, v)| v) {
            telemetry::held(-1);
            self.cancel(&hold, LostReason::ClientClosed);
        }
    }

    /// The holds the watchdog must renew.
    pub(crate) fn watched(&self) -> Vec<Arc<HoldEntry>> {
        self.map
            .lock()
            .values()
            .flatten()
            .filter(|h| h.state.lock().watchdog_holds > 0)
            .cloned()
            .collect()
    }

    /// Every hold (what the ledger lists, engine/observe/ledger.rs).
    pub(crate) fn all(&self) -> Vec<Arc<HoldEntry>> {
        self.map.lock().values().flatten().cloned().collect()
    }

    /// Number of holds (distinct name and holder pairs).
    pub(crate) fn len(&self) -> usize {
        self.map.lock().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
impl HoldTable {
    /// Records a fresh plain hold of `holder` on `name` granted at `at` (for tests).
    pub(crate) fn fresh(
        &self,
        name: &str,
        holder: &Arc<str>,
        watchdog: bool,
        at: Instant,
        lease: Duration,
    ) -> Arc<HoldEntry> {
        let call = Call {
            name: name.into(),
            holder: holder.clone(),
            kind: Kind::Plain,
            lease,
            watchdog,
            wait: None,
            intent: false,
        };
        self.acquired(&call, true, at)
    }
}
