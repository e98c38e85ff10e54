//! Observing a deployment for operators, on our side of the wire (the Redisson wire is
//! untouched): what a client tells about itself (who it is, its record; what its tasks
//! hold and wait for, its ledger), reading both back (holder ids resolved, the
//! wait-for graph, cycles), and what locks exist, who holds them and who waits
//! (`Client::list`, `redlatch list` and `top`).
//!
//! * `record`: the client record `redlatch_client:{uuid}` (the prefix is
//!   `Config::bookkeeping_prefix`, keys/books.rs; with bookkeeping off nothing here is
//!   written or read) (host, pid, app, version,
//!   since), written at connect, refreshed by the watchdog's round, deleted by close;
//!   resolving holder ids to records and acquisition times.
//! * `ledger`: the ledger `redlatch_ledger:{uuid}` (`h|n|name` -> acquired ms,
//!   `w|n|name` -> waiting since ms), written by one coalescing task at most once a
//!   second, never on the acquire path.
//! * `graph`: the wait-for graph over tasks and its cycles (pure).
//! * `deadlock`: reading every ledger, the cycles of the deployment, and the opt-in
//!   check of a waiter (`Config::deadlock_detection`).
//! * [`scan`]: every master's (every cluster primary's) keys under a pattern, by
//!   `SCAN`, within the listing's one deadline.
//! * [`classify`]: which keys are names of their own (not part of another name's
//!   layout) and what kind each is, from its inspection (kinds/inspect.rs).
//! * [`waiters`]: a name's listeners, counted by pub/sub.
//! * [`records`]: the records and ledgers as a listing reads them: who a holder is,
//!   since when it holds, who waits.
//! * [`assemble`]: one name's listing from all of it; [`listing`]: the public types;
//!   [`list`]: `Engine::list`, all of it within one deadline.
//!
//! Invariants:
//! 1. Nothing here is sent on an acquisition's path: a wait registers in memory (and,
//!    with deadlock detection, writes its entry once the call has waited
//!    [`DETECT_AFTER`]); holds are read from the hold table by the flusher.
//! 2. Both keys carry the watchdog timeout as their expiry, refreshed every round: a
//!    client that dies leaves them for at most that long.
//! 3. A task is a holder id `uuid:n`: a wait is written under the waiting call's id
//!    and under the ids of the holds its task (or thread) took, so a task holding L1
//!    as `uuid:5` and waiting for L2 as `uuid:6` is one node of the graph. A tokio
//!    task is the unit: futures it polls together (`join!`, `select!`) count as one
//!    task, and a wait is listed under at most 16 of its task's holds.

pub(crate) mod assemble;
pub(crate) mod classify;
mod deadlock;
pub(crate) mod graph;
mod jobs;
mod ledger;
pub(crate) mod list;
pub(crate) mod listing;
mod record;
pub(crate) mod records;
pub(crate) mod scan;
pub(crate) mod waiters;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::{Either, FutureExt};

use crate::engine::holding::holder_id::Context;
use crate::engine::kinds::call::Call;
use crate::engine::Engine;
use crate::error::Result;

pub(crate) use deadlock::{Cycle, Deadlocks};
pub(crate) use ledger::run as run_flusher;
pub(crate) use record::Who;

/// How long a call waits before deadlock detection writes its wait entry (a call
/// granted sooner writes nothing).
pub(crate) const DETECT_AFTER: Duration = Duration::from_millis(50);
/// How often a waiter with deadlock detection looks for a cycle through itself.
pub(crate) const DETECT_EVERY: Duration = Duration::from_secs(1);

/// `uuid:n` or `uuid:n:write` (or any `uuid:n:…`): `(uuid, n)`.
pub(crate) fn split_holder(holder: &str) -> Option<(&str, u64)> {
    let (uuid, rest) = holder.split_once(':')?;
    let n = rest.split(':').next()?.parse().ok()?;
    (uuid.len() == 36).then_some((uuid, n))
}

/// The task of a holder id: `uuid:n` (a writer's `:write` dropped).
pub(crate) fn task_of(holder: &str) -> Option<String> {
    split_holder(holder).map(|(u, n)| format!("{u}:{n}"))
}

/// Now, in ms since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What a client knows of itself and its waits (one per engine).
pub(crate) struct Observe {
    /// The record's fields.
    who: record::Mine,
    /// Deadlock detection is on (`Config::deadlock_detection`).
    detection: bool,
    /// By a number that only grows: a `BTreeMap` inserts at its end and hashes nothing
    /// (every acquisition registers and removes one, on its path).
    waits: parking_lot::Mutex<BTreeMap<u64, Wait>>,
    next_wait: AtomicU64,
    /// What the ledger holds on the masters, as far as this client wrote it.
    written: tokio::sync::Mutex<HashMap<String, i64>>,
    /// Asks the flusher to write now (a wait's entry with detection on, its end).
    flush_now: tokio::sync::Notify,
}

/// One call waiting for a lock.
#[derive(Clone)]
pub(crate) struct Wait {
    pub(crate) holder: Arc<str>,
    pub(crate) name: Arc<str>,
    pub(crate) since_ms: i64,
    pub(crate) context: Context,
}

impl Observe {
    pub(crate) fn new(app: Arc<str>, detection: bool) -> Observe {
        Observe {
            who: record::Mine::new(app),
            detection,
            waits: Default::default(),
            next_wait: AtomicU64::new(0),
            written: Default::default(),
            flush_now: Default::default(),
        }
    }

    /// Registers a wait; it ends when the returned [`Waiting`] drops.
    pub(crate) fn wait(self: &Arc<Self>, holder: &Arc<str>, name: &Arc<str>) -> Waiting {
        let id = self.next_wait.fetch_add(1, Ordering::Relaxed);
        let wait = Wait {
            holder: holder.clone(),
            name: name.clone(),
            since_ms: now_ms(),
            context: crate::engine::holding::holder_id::context(),
        };
        self.waits.lock().insert(id, wait);
        Waiting {
            observe: self.clone(),
            id,
            written: false,
        }
    }

    fn waits(&self) -> Vec<Wait> {
        self.waits.lock().values().cloned().collect()
    }
}

/// A registered wait (removed on drop).
pub(crate) struct Waiting {
    observe: Arc<Observe>,
    id: u64,
    /// Its entry was written at once (deadlock detection): its end is flushed at once.
    pub(crate) written: bool,
}

impl Waiting {
    /// The wait as registered.
    pub(crate) fn get(&self) -> Option<Wait> {
        self.observe.waits.lock().get(&self.id).cloned()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let ended = self.observe.waits.lock().remove(&self.id);
        // A wait old enough to have been flushed is taken off the ledger at once, not
        // at the next period: listed, it would show a task waiting for the lock it
        // now holds.
        let flushable = (ended.as_ref())
            .is_some_and(|w| now_ms() - w.since_ms >= DETECT_AFTER.as_millis() as i64);
        if self.written || flushable {
            self.observe.flush_now.notify_one();
        }
    }
}

impl Engine {
    /// Runs `acquire` (the acquisition of `call`) as a registered wait; with deadlock
    /// detection, raced against [`detect`](Engine::detect).
    ///
    /// Not an `async fn`: without detection the returned future is `acquire` and the
    /// registration, not a state machine holding `acquire` twice (its argument and its
    /// awaited copy); the race with detection is boxed.
    pub(in crate::engine) fn observed<'a, T: Send + 'a>(
        &'a self,
        call: &'a Call,
        acquire: impl Future<Output = Result<T>> + Send + 'a,
    ) -> impl Future<Output = Result<T>> + Send + 'a {
        let mut waiting = self.observe().wait(&call.holder, &call.name);
        if !self.observe().detection {
            return Either::Left(acquire.map(move |r| {
                drop(waiting);
                r
            }));
        }
        Either::Right(Box::pin(async move {
            tokio::select! {
                biased;
                r = acquire => r,
                e = self.detect(&mut waiting) => Err(e),
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_holder_ids_parse() {
        let u = "0b1b7a5e-3a5c-4e4e-9a4b-1c2d3e4f5a6b";
        assert_eq!(split_holder(&format!("{u}:42")), Some((u, 42)));
        assert_eq!(split_holder(&format!("{u}:42:write")), Some((u, 42)));
        assert_eq!(task_of(&format!("{u}:7:write")), Some(format!("{u}:7")));
        assert_eq!(split_holder("not-a-uuid:1"), None);
        assert_eq!(split_holder(&format!("{u}:x")), None);
    }
}
