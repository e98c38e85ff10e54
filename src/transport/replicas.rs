//! Replica-synced writes: after a lock acquisition the primary is asked, in the same
//! round trip, to wait until its replicas have the write (`WAIT`, or `WAITAOF` for
//! fsynced copies), so a failover cannot promote a replica that never saw the lock
//! (the "lock loss" of a primary that dies before replicating). Redisson does the same
//! with `checkLockSyncedSlaves` / `slavesSyncTimeout`.
//!
//! Invariants:
//! 1. [`SyncReplicas::Auto`] waits for every replica the primary reports connected
//!    (`connected_slaves` of `INFO replication`), read on a connection's first synced
//!    write and again when older than [`RECOUNT_EVERY`]; with none connected nothing
//!    is waited for (a standalone server without replicas pays nothing).
//! 2. A synced write is answered `[reply, acked, wanted, node]`; the engine undoes an
//!    acquisition with `acked < wanted` and reports [`Error::NotReplicated`]
//!    (crate::Error::NotReplicated).

use std::time::{Duration, Instant};

use redis::Value;

/// How long a replica count is trusted (invariant 1).
const RECOUNT_EVERY: Duration = Duration::from_secs(1);

/// Which replicas must acknowledge a lock acquisition before it is granted
/// ([`Config::sync_replicas`](crate::Config::sync_replicas)).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use redlatch::{Config, SyncReplicas};
/// let config = Config::cluster(["redis://10.0.0.1:7000"])
///     .sync_replicas(SyncReplicas::Count(1), Duration::from_millis(500));
/// assert_eq!(config.replica_sync(), (SyncReplicas::Count(1), Duration::from_millis(500)));
/// assert_eq!(SyncReplicas::default(), SyncReplicas::Auto);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncReplicas {
    /// Every replica connected to the primary (`WAIT <connected> <timeout>`); none
    /// connected, no wait. The default, as Redisson's `checkLockSyncedSlaves`.
    #[default]
    Auto,
    /// At least this many replicas (`WAIT n <timeout>`).
    Count(usize),
    /// Fsynced to the primary's append-only file and to every connected replica's
    /// (`WAITAOF 1 <connected> <timeout>`; Redis >= 7.2, checked at connect).
    Aof,
    /// No waiting: a lock granted by a primary that dies before replicating it can be
    /// granted again by the promoted replica.
    Off,
}

/// One server's replica-sync policy and its cached replica count.
pub(crate) struct Replicas {
    mode: SyncReplicas,
    timeout: Duration,
    /// Connected replicas and when they were counted (invariant 1).
    counted: parking_lot::Mutex<Option<(usize, Instant)>>,
}

impl Replicas {
    pub(crate) fn new(mode: SyncReplicas, timeout: Duration) -> Self {
        Replicas {
            mode,
            timeout,
            counted: parking_lot::Mutex::new(None),
        }
    }

    /// The longest a WAIT may block.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether the next acquisition must be sent synced: something to wait for, or a
    /// stale count that its answer renews (one lock, not one per question).
    pub(crate) fn active(&self) -> bool {
        match self.mode {
            SyncReplicas::Off => false,
            SyncReplicas::Count(n) => n > 0,
            SyncReplicas::Aof => true,
            SyncReplicas::Auto => self
                .counted
                .lock()
                .is_none_or(|(n, at)| n > 0 || at.elapsed() >= RECOUNT_EVERY),
        }
    }

    /// True when the connected replicas must be counted (again) before the next wait.
    pub(crate) fn needs_count(&self) -> bool {
        matches!(self.mode, SyncReplicas::Auto | SyncReplicas::Aof)
            && self
                .counted
                .lock()
                .is_none_or(|(_, at)| at.elapsed() >= RECOUNT_EVERY)
    }

    /// Records an `INFO replication` answer.
    pub(crate) fn record(&self, info: &str) {
        let n = info
            .lines()
            .find_map(|l| l.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        *self.counted.lock() = Some((n, Instant::now()));
    }

    /// Acknowledgements to wait for now: replicas (with [`SyncReplicas::Aof`], the
    /// primary's own fsync counts as one more).
    pub(crate) fn wanted(&self) -> usize {
        let connected = || self.counted.lock().map_or(0, |(n, _)| n);
        match self.mode {
            SyncReplicas::Count(n) => n,
            SyncReplicas::Off => 0,
            SyncReplicas::Auto => connected(),
            SyncReplicas::Aof => 1 + connected(),
        }
    }

    /// The command that waits for `wanted` acknowledgements, if any are wanted.
    pub(crate) fn wait_cmd(&self, wanted: usize) -> Option<redis::Cmd> {
        let ms = self.timeout.as_millis().max(1) as u64;
        match self.mode {
            _ if wanted == 0 => None,
            SyncReplicas::Off => None,
            SyncReplicas::Aof => Some(redis::cmd("WAITAOF").arg(1).arg(wanted - 1).arg(ms).clone()),
            _ => Some(redis::cmd("WAIT").arg(wanted).arg(ms).clone()),
        }
    }

    /// Acknowledgements in the wait command's reply (`WAITAOF` answers
    /// `[local, replicas]`, the local fsync counting as one).
    pub(crate) fn acked(&self, reply: &Value) -> usize {
        match reply {
            Value::Int(n) => (*n).max(0) as usize,
            Value::Array(v) => v
                .iter()
                .take(2)
                .map(|x| match x {
                    Value::Int(n) => (*n).max(0) as usize,
                    _ => 0,
                })
                .sum(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_waits_for_the_connected_replicas_and_none_when_there_are_none() {
        let r = Replicas::new(SyncReplicas::Auto, Duration::from_millis(100));
        assert!(r.needs_count() && r.active()); // counted by the first synced call
        r.record("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n");
        assert!(!r.needs_count());
        assert!(!r.active()); // nothing to wait for: an ordinary call
        assert!(r.wait_cmd(r.wanted()).is_none());
        r.record("role:master\r\nconnected_slaves:2\r\n");
        assert_eq!(r.wanted(), 2);
        assert!(r.active());
        let wait = r.wait_cmd(2).unwrap();
        let args: Vec<_> = wait.args_iter().collect();
        assert_eq!(args.len(), 3);
        assert_eq!(r.acked(&Value::Int(1)), 1);
    }

    #[test]
    fn aof_needs_the_local_fsync_too() {
        let r = Replicas::new(SyncReplicas::Aof, Duration::from_millis(100));
        r.record("connected_slaves:0\r\n");
        assert_eq!(r.wanted(), 1); // the local fsync alone is still waited for
        assert!(r.wait_cmd(1).is_some());
        let reply = |l, n| Value::Array(vec![Value::Int(l), Value::Int(n)]);
        assert_eq!(r.acked(&reply(1, 2)), 3);
        assert_eq!(r.acked(&reply(0, 0)), 0);
        let off = Replicas::new(SyncReplicas::Off, Duration::from_millis(100));
        assert!(!off.active() && off.wait_cmd(3).is_none());
        let count = Replicas::new(SyncReplicas::Count(1), Duration::from_millis(100));
        assert!(!count.needs_count());
        assert_eq!(count.wanted(), 1);
    }
}
