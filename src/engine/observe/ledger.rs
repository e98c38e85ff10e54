//! The ledger `redlatch_ledger:{uuid}`: `h|<n>|<name>` -> when the hold was taken,
//! `w|<n>|<name>` -> since when a task waits (ms since the epoch), written by one
//! coalescing task.
//!
//! Invariants:
//! 1. The flusher writes at most once per [`PERIOD`] (and when a waiter with deadlock
//!    detection asks, or a wait that may have been written ends:
//!    [`Observe::flush_now`]), only the difference between what the
//!    client holds and waits for now and what it wrote last, in one round trip per
//!    master with the key's expiry; nothing when nothing changed. A hold taken and
//!    given back between two flushes is never written.
//! 2. What was written is remembered only once every master took it; a master that
//!    failed makes the next flush send the whole difference again (`HSET` and `HDEL`
//!    are idempotent).
//! 3. A wait is listed under its call's id and under the ids of the holds its task (or
//!    thread) took, at most [`TASK_IDS`] of them (module invariant 3); a permit of an
//!    expirable semaphore is not a hold of a task and is not listed.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::engine::holding::holder_id::Context;
use crate::engine::masters::quorum::fan_out;
use crate::engine::observe::{now_ms, split_holder, Observe, Wait, DETECT_AFTER};
use crate::engine::Engine;
use crate::transport::{Lane, Request};

/// Fields per `HSET` / `HDEL` of a flush.
const CHUNK: usize = 1000;

/// The shortest time between two flushes.
pub(crate) const PERIOD: Duration = Duration::from_secs(1);

/// The most hold ids a wait is listed under besides its call's own (invariant 3): a
/// task that holds thousands of locks (futures joined in one task) would otherwise
/// multiply them by its waits.
pub(crate) const TASK_IDS: usize = 16;

/// A hold's field: `h|<n>|<name>`.
pub(crate) fn hold_field(n: u64, name: &str) -> String {
    format!("h|{n}|{name}")
}

/// A wait's field: `w|<n>|<name>`.
pub(crate) fn wait_field(n: u64, name: &str) -> String {
    format!("w|{n}|{name}")
}

/// A field taken apart: (`'h'` or `'w'`, n, lock name).
pub(crate) fn parse_field(field: &str) -> Option<(char, u64, &str)> {
    let mut parts = field.splitn(3, '|');
    let tag = match parts.next()? {
        "h" => 'h',
        "w" => 'w',
        _ => return None,
    };
    let n = parts.next()?.parse().ok()?;
    Some((tag, n, parts.next()?))
}

/// What the ledger should hold now (invariant 3).
fn fields(engine: &Engine) -> HashMap<String, i64> {
    let (now_ms, now) = (now_ms(), Instant::now());
    let mut out = HashMap::new();
    let mut tasks: HashMap<Context, Vec<u64>> = HashMap::new();
    for hold in engine
        .holdings()
        .table()
        .all()
        .into_iter()
        .filter(|h| !h.permit)
    {
        let Some((_, n)) = split_holder(&hold.holder) else {
            continue;
        };
        let age = now.saturating_duration_since(hold.since).as_millis() as i64;
        out.insert(hold_field(n, &hold.name), now_ms - age);
        let ids = tasks.entry(hold.context).or_default();
        if ids.len() < TASK_IDS {
            ids.push(n);
        }
    }
    // A call is a waiter once it has waited DETECT_AFTER: an acquisition granted at
    // once (its registration lasts one round trip) is never listed as one.
    let waiting = |w: &Wait| now_ms - w.since_ms >= DETECT_AFTER.as_millis() as i64;
    for wait in engine.observe().waits().into_iter().filter(waiting) {
        let Some((_, own)) = split_holder(&wait.holder) else {
            continue;
        };
        let held = tasks.get(&wait.context).into_iter().flatten();
        for n in std::iter::once(&own).chain(held) {
            out.insert(wait_field(*n, &wait.name), wait.since_ms);
        }
    }
    out
}

impl Engine {
    /// Writes the difference between what the ledger should hold and what was written
    /// (invariants 1 and 2).
    pub(in crate::engine) async fn flush_ledger(&self) {
        let mut written = self.observe().written.lock().await;
        if self.stopping().is_cancelled() || !self.settings().books.is_on() {
            return;
        }
        let now = fields(self);
        let set: Vec<(&String, &i64)> = (now.iter())
            .filter(|(f, v)| written.get(*f) != Some(v))
            .collect();
        let gone: Vec<&String> = written.keys().filter(|f| !now.contains_key(*f)).collect();
        if set.is_empty() && gone.is_empty() {
            return;
        }
        let key = self.settings().books.ledger(&self.id().to_string());
        let mut pipe = redis::pipe();
        // In commands of at most CHUNK fields: other clients' commands run between them.
        for part in set.chunks(CHUNK) {
            pipe.cmd("HSET").arg(&key).arg(part).ignore();
        }
        for part in gone.chunks(CHUNK) {
            pipe.cmd("HDEL").arg(&key).arg(part).ignore();
        }
        let ttl = self.settings().watchdog_timeout.as_millis() as u64;
        pipe.cmd("PEXPIRE").arg(&key).arg(ttl).ignore();
        let pipe = &pipe;
        let results = fan_out(self.masters().all(), |m| async move {
            m.link()
                .send(Lane::Side, m.timeout(), Request::Pipe(pipe))
                .await
        })
        .await;
        match results.iter().find_map(|r| r.as_ref().err()) {
            None => *written = now,
            Some(e) => tracing::debug!(target: "redlatch", error = %e,
                "could not write the ledger; the next flush tries again"),
        }
    }
}

/// The flusher: runs until `shutdown` or the client is gone (invariant 1).
pub(crate) async fn run(engine: Weak<Engine>, observe: Arc<Observe>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
            _ = observe.flush_now.notified() => {}
        }
        let Some(engine) = engine.upgrade() else {
            break;
        };
        engine.flush_ledger().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_names_may_hold_bars() {
        assert_eq!(hold_field(3, "a|b"), "h|3|a|b");
        assert_eq!(parse_field("h|3|a|b"), Some(('h', 3, "a|b")));
        assert_eq!(parse_field(&wait_field(9, "x")), Some(('w', 9, "x")));
        assert_eq!(parse_field("x|1|a"), None);
        assert_eq!(parse_field("h|one|a"), None);
    }
}
