//! Replica-synced writes: after a lock acquisition the primary is asked, in the same
//! round trip, to wait until its replicas have the write (`WAIT`, or `WAITAOF` for
//! fsynced copies), so a failover cannot promote a replica that never saw the lock
//! (the "lock loss" of a primary that dies before replicating). Redisson does the same
//! with `checkLockSyncedSlaves` / `slavesSyncTimeout`.
//!
//! Invariants:
//! 1. [`SyncReplicas::Auto`] waits for the replicas that could take over: those the
//!    primary lists in `INFO replication` as `state=online`, that acknowledged within
//!    [`MAX_LAG_S`] seconds (`lag`) and are at most [`MAX_BEHIND`] bytes behind the
//!    primary's `master_repl_offset`. A replica that acknowledged nothing (`offset=0`)
//!    of a stream that has begun is loading the snapshot of its full sync (it
//!    acknowledges once loaded) if the previous count saw it syncing or it has not
//!    acknowledged for more than [`MAX_LAG_S`] seconds; otherwise it was just put
//!    online. A replica in its initial sync (`wait_bgsave`, `send_bulk`), loading, paused or far behind
//!    is not waited for. The list is read on a connection's first synced write and
//!    again when older than [`RECOUNT_EVERY`]; none eligible, nothing is waited for.
//! 2. A replica that was eligible and is no longer listed at all (its link broke: a
//!    network cut, `CLIENT KILL TYPE master`, a crash) is still waited for during
//!    [`REJOIN_GRACE`] after it was missed: Sentinel or the cluster may promote it with
//!    what it had, so a write it did not get must not count as replicated. A replica
//!    that is listed again in a sync state is not waited for (it is resyncing).
//! 3. A synced write that fewer replicas acknowledged than it waited for is judged
//!    again on a fresh count (invariant 1): the count may predate a replica's restart.
//!    Only the replicas still eligible then must have acknowledged: an ineligible
//!    replica (resyncing, loading) cannot acknowledge, so the acknowledgements came
//!    from eligible ones.
//! 4. A synced write is answered `[reply, acked, wanted, node]`; the engine undoes an
//!    acquisition with `acked < wanted` and reports
//!    [`Error::NotReplicated`](crate::Error::NotReplicated); a renewal with `acked < wanted` does not extend
//!    the hold's validity (engine/holding/watchdog.rs).

use std::time::{Duration, Instant};

use redis::Value;

/// How long a replica count is trusted (invariant 1).
const RECOUNT_EVERY: Duration = Duration::from_secs(1);
/// Largest `lag` (seconds since the replica's last acknowledgement) of an eligible
/// replica. Replicas acknowledge every second, and at once when a `WAIT` asks.
pub(crate) const MAX_LAG_S: u64 = 3;
/// Largest distance (bytes of replication stream) between the primary's offset and a
/// replica's acknowledged offset for the replica to count as caught up.
pub(crate) const MAX_BEHIND: u64 = 16 << 20;
/// How long a vanished eligible replica is still waited for (invariant 2).
pub(crate) const REJOIN_GRACE: Duration = Duration::from_secs(2);

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
    /// Every replica that could take over: online and caught up per the primary's
    /// `INFO replication` (`WAIT <eligible> <timeout>`). A replica in its initial sync
    /// or loading its snapshot, paused or far behind is not waited for; none eligible,
    /// no wait (see docs/deployments.md: what holds while no replica is eligible). The default,
    /// like Redisson's `checkLockSyncedSlaves`, which counts every connected replica.
    #[default]
    Auto,
    /// At least this many replicas (`WAIT n <timeout>`).
    Count(usize),
    /// Fsynced to the primary's append-only file and to every eligible replica's
    /// (`WAITAOF 1 <eligible> <timeout>`; Redis >= 7.2, checked at connect).
    Aof,
    /// No waiting: a lock granted by a primary that dies before replicating it can be
    /// granted again by the promoted replica.
    Off,
}

/// What a primary's replicas look like to replica sync, as `status` shows it.
///
/// # Examples
/// See the example on [`Lock::status`](crate::Lock::status).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ReplicaSync {
    /// Replicas the primary listed at the last count (`connected_slaves`).
    pub connected: usize,
    /// Of those, the replicas that could take over and are waited for (online and
    /// caught up), plus eligible replicas whose link broke less than 2 s ago.
    pub eligible: usize,
    /// Acknowledgements the last synced write (acquisition or renewal) on this primary
    /// waited for; `None` before the first (while no replica is eligible, writes are
    /// not synced: nothing to wait for).
    pub waited: Option<usize>,
}

/// One server's replica-sync policy and its cached replica count.
pub(crate) struct Replicas {
    mode: SyncReplicas,
    timeout: Duration,
    /// The last count of the replicas (invariants 1 and 2).
    counted: parking_lot::Mutex<Option<Count>>,
    /// Acknowledgements the last synced write waited for.
    waited: parking_lot::Mutex<Option<usize>>,
}

/// One reading of `INFO replication`.
#[derive(Clone, Debug)]
struct Count {
    at: Instant,
    /// Replicas listed.
    connected: usize,
    /// The addresses (`ip:port`) of the eligible replicas listed (invariant 1).
    eligible: Vec<String>,
    /// The replicas listed in their full sync (seen online with nothing acknowledged
    /// after this, they are loading the snapshot).
    syncing: Vec<String>,
    /// Eligible replicas no longer listed, and when they were first missed
    /// (invariant 2).
    missing: Vec<(String, Instant)>,
}

impl Count {
    fn waited_for(&self) -> usize {
        self.eligible.len() + self.missing.len()
    }
}

/// How a listed replica is judged (invariant 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Judged {
    /// Could take over: waited for.
    Eligible,
    /// In its full sync: receiving or loading the snapshot.
    Syncing,
    /// Online but not caught up (lagging, far behind).
    Behind,
}

/// One `slaveN:ip=..,port=..,state=..,offset=..,lag=..` line: the replica's address
/// and how it is judged, given the primary's offset and whether the previous count
/// saw it syncing (invariant 1).
fn replica_line(
    line: &str,
    master_offset: u64,
    was_syncing: impl Fn(&str) -> bool,
) -> Option<(String, Judged)> {
    let (key, fields) = line.split_once(':')?;
    if !key.starts_with("slave") || !key[5..].chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let field = |name: &str| {
        fields
            .split(',')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    };
    let addr = format!("{}:{}", field("ip")?, field("port")?);
    let offset: u64 = field("offset")
        .and_then(|o| o.trim().parse().ok())
        .unwrap_or(0);
    let lag: u64 = field("lag")
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(u64::MAX);
    // Nothing acknowledged of a stream that has begun: just put online (its first
    // acknowledgement is due within a second), or loading its snapshot (it does not
    // acknowledge until loaded): so if it was seen syncing before, or has not
    // acknowledged for longer than an eligible replica may.
    let silent = offset == 0 && master_offset > 0;
    let judged = match field("state") {
        Some("online") if silent && (lag > MAX_LAG_S || was_syncing(&addr)) => Judged::Syncing,
        Some("online")
            if lag <= MAX_LAG_S && master_offset - offset.min(master_offset) <= MAX_BEHIND =>
        {
            Judged::Eligible
        }
        Some("online") => Judged::Behind,
        _ => Judged::Syncing,
    };
    Some((addr, judged))
}

impl Replicas {
    pub(crate) fn new(mode: SyncReplicas, timeout: Duration) -> Self {
        Replicas {
            mode,
            timeout,
            counted: parking_lot::Mutex::new(None),
            waited: parking_lot::Mutex::new(None),
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
                .as_ref()
                .is_none_or(|c| c.waited_for() > 0 || c.at.elapsed() >= RECOUNT_EVERY),
        }
    }

    /// Whether the replicas waited for are counted (rather than a fixed number).
    pub(crate) fn counts(&self) -> bool {
        matches!(self.mode, SyncReplicas::Auto | SyncReplicas::Aof)
    }

    /// Whether a write made without a synced call may have to reach replicas: false only
    /// for an `Auto` master last seen with no replica listed at all (none attached,
    /// syncing or behind; a count that is merely stale still says so, where
    /// [`active`](Self::active) sends a synced call to count them again). Never
    /// counted: assumed so.
    pub(crate) fn known_to_wait(&self) -> bool {
        match self.mode {
            SyncReplicas::Off => false,
            SyncReplicas::Count(n) => n > 0,
            SyncReplicas::Aof => true,
            SyncReplicas::Auto => {
                (self.counted.lock().as_ref()).is_none_or(|c| c.connected > 0 || c.waited_for() > 0)
            }
        }
    }

    /// True when the replicas must be counted (again) before the next wait.
    pub(crate) fn needs_count(&self) -> bool {
        matches!(self.mode, SyncReplicas::Auto | SyncReplicas::Aof)
            && self
                .counted
                .lock()
                .as_ref()
                .is_none_or(|c| c.at.elapsed() >= RECOUNT_EVERY)
    }

    /// Records an `INFO replication` answer (invariants 1 and 2).
    pub(crate) fn record(&self, info: &str) {
        let now = Instant::now();
        let master_offset: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("master_repl_offset:"))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        let mut counted = self.counted.lock();
        let was_syncing =
            |addr: &str| (counted.as_ref()).is_some_and(|c| c.syncing.iter().any(|a| a == addr));
        let listed: Vec<(String, Judged)> = info
            .lines()
            .filter_map(|l| replica_line(l.trim(), master_offset, was_syncing))
            .collect();
        let is_listed = |addr: &str| listed.iter().any(|(a, _)| a == addr);
        let judged = |want: Judged| -> Vec<String> {
            (listed.iter())
                .filter(|(_, j)| *j == want)
                .map(|(a, _)| a.clone())
                .collect()
        };
        let mut missing = Vec::new();
        if let Some(before) = counted.as_ref() {
            for addr in before.eligible.iter().filter(|a| !is_listed(a)) {
                missing.push((addr.clone(), now));
            }
            for (addr, since) in &before.missing {
                if !is_listed(addr) && now.saturating_duration_since(*since) < REJOIN_GRACE {
                    missing.push((addr.clone(), *since));
                }
            }
        }
        *counted = Some(Count {
            at: now,
            connected: listed.len(),
            eligible: judged(Judged::Eligible),
            syncing: judged(Judged::Syncing),
            missing,
        });
    }

    /// Acknowledgements to wait for now: replicas (with [`SyncReplicas::Aof`], the
    /// primary's own fsync counts as one more).
    pub(crate) fn wanted(&self) -> usize {
        let eligible = || self.counted.lock().as_ref().map_or(0, Count::waited_for);
        match self.mode {
            SyncReplicas::Count(n) => n,
            SyncReplicas::Off => 0,
            SyncReplicas::Auto => eligible(),
            SyncReplicas::Aof => 1 + eligible(),
        }
    }

    /// Notes that a synced write waited for `wanted` acknowledgements.
    pub(crate) fn waited(&self, wanted: usize) {
        *self.waited.lock() = Some(wanted);
    }

    /// What `status` shows of this primary's replicas; `None` with sync off.
    pub(crate) fn snapshot(&self) -> Option<ReplicaSync> {
        if self.mode == SyncReplicas::Off {
            return None;
        }
        let counted = self.counted.lock();
        Some(ReplicaSync {
            connected: counted.as_ref().map_or(0, |c| c.connected),
            eligible: counted.as_ref().map_or(0, Count::waited_for),
            waited: *self.waited.lock(),
        })
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

    const ONLINE: &str = "slave0:ip=127.0.0.1,port=7001,state=online,offset=5000,lag=0";
    const ONLINE2: &str = "slave1:ip=127.0.0.1,port=7002,state=online,offset=4990,lag=1";

    /// An `INFO replication` answer of a primary at offset 5000 listing `lines`.
    fn info(lines: &[&str]) -> String {
        let mut s = format!(
            "# Replication\r\nrole:master\r\nconnected_slaves:{}\r\n",
            lines.len()
        );
        for l in lines {
            s.push_str(l);
            s.push_str("\r\n");
        }
        s + "master_replid:abc\r\nmaster_repl_offset:5000\r\n"
    }

    #[test]
    fn only_online_caught_up_replicas_are_waited_for() {
        let r = Replicas::new(SyncReplicas::Auto, Duration::from_millis(100));
        let syncing = [
            "slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0",
            "slave2:ip=127.0.0.1,port=7003,state=send_bulk,offset=0,lag=0",
            // Online but loading the snapshot: nothing acknowledged for four seconds.
            "slave3:ip=127.0.0.1,port=7004,state=online,offset=0,lag=4",
            // Paused or stuck: no acknowledgement for 9 s.
            "slave4:ip=127.0.0.1,port=7005,state=online,offset=5000,lag=9",
        ];
        let mut lines = vec![ONLINE];
        lines.extend(syncing);
        r.record(&info(&lines));
        assert_eq!(r.wanted(), 1);
        let seen = r.snapshot().unwrap();
        assert_eq!((seen.connected, seen.eligible, seen.waited), (5, 1, None));
        r.waited(1);
        assert_eq!(r.snapshot().unwrap().waited, Some(1));
        // Seen in its transfer before: loading now.
        let transfer = "slave1:ip=127.0.0.1,port=7002,state=send_bulk,offset=0,lag=0";
        r.record(&info(&[ONLINE, transfer]));
        let loading = "slave1:ip=127.0.0.1,port=7002,state=online,offset=0,lag=0";
        r.record(&info(&[ONLINE, loading]));
        assert_eq!(r.wanted(), 1);
        r.record(&info(&[ONLINE, loading]));
        assert_eq!(r.wanted(), 1, "still loading");
        // Just put online, its first acknowledgement due: waited for.
        r.record(&info(&[
            "slave0:ip=127.0.0.1,port=7001,state=online,offset=0,lag=0",
        ]));
        assert_eq!(r.wanted(), 1);
        // A primary that never wrote: nothing to acknowledge yet.
        let quiet =
            "master_repl_offset:0\r\nslave0:ip=127.0.0.1,port=7001,state=online,offset=0,lag=1\r\n";
        r.record(quiet);
        assert_eq!(r.wanted(), 1);
        // Far behind the primary's offset.
        let far = format!(
            "master_repl_offset:{}\r\n{ONLINE}\r\n",
            5000 + MAX_BEHIND + 1
        );
        r.record(&far);
        assert_eq!(r.wanted(), 0);
        r.record(&info(&syncing));
        assert_eq!(r.wanted(), 0);
        assert!(r.wait_cmd(0).is_none());
        // A server without INFO (ACL) or without replicas: nothing to wait for.
        r.record("");
        assert_eq!(r.wanted(), 0);
    }

    #[test]
    fn a_vanished_eligible_replica_is_waited_for_during_the_grace() {
        let r = Replicas::new(SyncReplicas::Auto, Duration::from_millis(100));
        r.record(&info(&[ONLINE, ONLINE2]));
        assert_eq!(r.wanted(), 2);
        // Both links cut: still waited for (a failover may promote either).
        r.record(&info(&[]));
        assert_eq!(r.wanted(), 2);
        r.record(&info(&[]));
        assert_eq!(r.wanted(), 2, "the grace counts from the first miss");
        // One is back, resyncing: not waited for; the other still missing.
        r.record(&info(&[
            "slave0:ip=127.0.0.1,port=7001,state=wait_bgsave,offset=0,lag=0",
        ]));
        assert_eq!(r.wanted(), 1);
        // After the grace the missing one is forgotten.
        {
            let mut c = r.counted.lock();
            let c = c.as_mut().unwrap();
            for m in &mut c.missing {
                m.1 = Instant::now() - REJOIN_GRACE;
            }
        }
        r.record(&info(&[]));
        assert_eq!(r.wanted(), 0);
    }

    #[test]
    fn auto_waits_for_the_eligible_replicas_and_none_when_there_are_none() {
        let r = Replicas::new(SyncReplicas::Auto, Duration::from_millis(100));
        assert!(r.needs_count() && r.active()); // counted by the first synced call
        r.record("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n");
        assert!(!r.needs_count());
        assert!(!r.active()); // nothing to wait for: an ordinary call
        assert!(r.wait_cmd(r.wanted()).is_none());
        r.record(&info(&[ONLINE, ONLINE2]));
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
        r.record(&info(&[]));
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
