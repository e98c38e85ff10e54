//! Leader election on top of the fenced lock (docs/election.md): the scripts that keep
//! an election's leader record and change log (lua/election_*.lua), and the observer's
//! wait for changes.
//!
//! An election `name` is the fenced lock `redlatch_election:{name}`: its holder leads
//! and its fencing token is the term. Beside it, in the same hash slot:
//! `redlatch_election_leader:{name}` (HASH holder, term, value: who leads, what it
//! advertises), `redlatch_election_log:{name}` (STREAM of changes: elected, proclaimed,
//! resigned) and the channel `redlatch_election__channel:{name}`, published on with
//! every change.
//!
//! Invariants:
//! 1. The record and the log are written only by the holder of the lock, in the same
//!    script that checks it holds it (election_proclaim.lua), or by a resigning leader
//!    while its own term is recorded (election_resign.lua): a leader whose lease ran
//!    out can never overwrite a later leader's record.
//! 2. A leader is reported only while its holder still holds the lock
//!    (election_read.lua): a leader killed with `kill -9` stops being reported when its
//!    lease ends, before anyone else is elected.
//! 3. An observer subscribes and has a majority confirm the channel before it reads
//!    the log's newest id, then reads the entries after the last id it has seen on
//!    every wake-up: each change is seen once, in log order; a change made between two
//!    reads is read by the second (the wake counter was bumped after the first was
//!    sent, pubsub.rs invariant 2), and a reconnect wakes it (pubsub.rs invariant 3).
//! 4. A campaign leads only once its term is recorded: it takes the lock (waiting with
//!    pub/sub as any lock's waiter), records its value under the lock's token, and
//!    campaigns on if the lock was lost before the record. A failed record gives the
//!    lock back. Stepping down clears the record before it gives the lock back, so an
//!    observer sees the resignation before the next leader's election.

use std::collections::VecDeque;
use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;

use crate::engine::masters::master::Master;
use crate::engine::masters::replies::typed;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::pubsub::Subscription;
use crate::transport::script::lua;
use crate::transport::{Lane, Script};

static PROCLAIM: LazyLock<Script> = lua!("election_proclaim.lua");
static RESIGN: LazyLock<Script> = lua!("election_resign.lua");
static READ: LazyLock<Script> = lua!("election_read.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 3] {
    [&PROCLAIM, &RESIGN, &READ]
}

/// Log entries kept per election (approximately: `XADD MAXLEN ~`).
const LOG_LEN: u64 = 1000;
/// Entries read per round trip by an observer.
const READ_BATCH: u64 = 100;

/// The fenced lock whose holder leads election `name`.
pub(crate) fn lock_name(name: &str) -> String {
    keys::derived("redlatch_election", name)
}

/// The leader record (HASH holder, term, value).
pub(crate) fn record_key(name: &str) -> String {
    keys::derived("redlatch_election_leader", name)
}

/// The change log (STREAM event, term, value).
pub(crate) fn log_key(name: &str) -> String {
    keys::derived("redlatch_election_log", name)
}

/// The channel every change is published on.
pub(crate) fn channel(name: &str) -> String {
    keys::derived("redlatch_election__channel", name)
}

/// What kind of change a log entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    Elected,
    Proclaimed,
    Resigned,
}

impl Event {
    fn label(self) -> &'static str {
        match self {
            Event::Elected => "elected",
            Event::Proclaimed => "proclaimed",
            Event::Resigned => "resigned",
        }
    }

    fn parse(s: &str) -> Option<Event> {
        match s {
            "elected" => Some(Event::Elected),
            "proclaimed" => Some(Event::Proclaimed),
            "resigned" => Some(Event::Resigned),
            _ => None,
        }
    }
}

/// The current leader as the record says (invariant 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Current {
    pub(crate) term: u64,
    pub(crate) value: String,
    pub(crate) holder: String,
    /// The lock's remaining lease in ms (-1 no expiry).
    pub(crate) pttl_ms: i64,
}

/// One log entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) id: String,
    pub(crate) event: Event,
    pub(crate) term: u64,
    pub(crate) value: String,
}

/// What election_read.lua answered.
pub(crate) struct Snapshot {
    pub(crate) leader: Option<Current>,
    pub(crate) last: String,
    pub(crate) entries: Vec<Entry>,
}

/// Records `holder` as the leader of term `term` advertising `value` (`event`:
/// Elected at the start of the term, Proclaimed for a new value). False when it does
/// not hold the election's lock any more, or the record is not its term (invariant 1).
pub(crate) async fn proclaim(
    m: &Master,
    name: &str,
    holder: &str,
    term: u64,
    value: &str,
    event: Event,
) -> Result<bool> {
    let mut inv = PROCLAIM.call();
    inv.key(lock_name(name))
        .key(record_key(name))
        .key(log_key(name))
        .arg(holder)
        .arg(term)
        .arg(value)
        .arg(event.label())
        .arg(channel(name))
        .arg(LOG_LEN);
    written(m, name, &inv).await
}

/// Removes `holder`'s record of term `term` and logs its resignation; false when the
/// record is another's (invariant 1).
pub(crate) async fn resign(m: &Master, name: &str, holder: &str, term: u64) -> Result<bool> {
    let mut inv = RESIGN.call();
    inv.key(record_key(name))
        .key(log_key(name))
        .arg(holder)
        .arg(term)
        .arg(channel(name))
        .arg(LOG_LEN);
    written(m, name, &inv).await
}

/// Runs a writing script on the lock lane, synced to the replicas as acquisitions are
/// (a failover keeps the record of a leader whose lock it keeps); true unless it
/// answered 0. A write the replicas did not acknowledge in time still happened on the
/// primary: it is logged, not failed (the lock it records was synced).
async fn written(m: &Master, name: &str, inv: &crate::transport::Invocation) -> Result<bool> {
    let (v, short) = m.eval_acquire(inv).await.map_err(|e| typed(name, e))?;
    if let Some(e) = short {
        tracing::debug!(election = name, error = %e, "election record not acknowledged by the replicas");
    }
    Ok(!matches!(v, Value::Int(0)))
}

/// The current leader, the newest log id and the entries after `after` (none when
/// `after` is `None`).
pub(crate) async fn read(m: &Master, name: &str, after: Option<&str>) -> Result<Snapshot> {
    let mut inv = READ.call();
    inv.key(lock_name(name))
        .key(record_key(name))
        .key(log_key(name))
        .arg(after.unwrap_or(""))
        .arg(READ_BATCH);
    let v = m.eval(Lane::Side, &inv).await.map_err(|e| typed(name, e))?;
    parse_snapshot(&v).ok_or_else(|| {
        m.err(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "unexpected script reply",
            format!("election_read: {v:?}"),
        )))
    })
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

fn number(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        other => text(other)?.parse().ok(),
    }
}

fn parse_snapshot(v: &Value) -> Option<Snapshot> {
    let Value::Array(parts) = v else { return None };
    let [leader, last, entries] = parts.as_slice() else {
        return None;
    };
    let leader = match leader {
        Value::Array(l) if l.is_empty() => None,
        Value::Array(l) if l.len() == 4 => Some(Current {
            term: number(&l[0])?.try_into().ok()?,
            value: text(&l[1])?,
            holder: text(&l[2])?,
            pttl_ms: number(&l[3])?,
        }),
        _ => return None,
    };
    let Value::Array(raw) = entries else {
        return None;
    };
    let entries = raw.iter().map(parse_entry).collect::<Option<Vec<_>>>()?;
    Some(Snapshot {
        leader,
        last: text(last)?,
        entries,
    })
}

fn parse_entry(v: &Value) -> Option<Entry> {
    let Value::Array(pair) = v else { return None };
    let [id, fields] = pair.as_slice() else {
        return None;
    };
    let Value::Array(fields) = fields else {
        return None;
    };
    let (mut event, mut term, mut value) = (None, None, String::new());
    for kv in fields.chunks(2) {
        let [k, v] = kv else { return None };
        match text(k)?.as_str() {
            "event" => event = Event::parse(&text(v)?),
            "term" => term = number(v)?.try_into().ok(),
            "value" => value = text(v)?,
            _ => {}
        }
    }
    Some(Entry {
        id: text(id)?,
        event: event?,
        term: term?,
        value,
    })
}

/// An observer's wait for the changes of one election (invariant 3).
/// Checks that the election `name` can be held here: its name, and one deployment
/// (a server, Sentinel or Redis Cluster), not Redlock masters (`masters` of them).
pub(crate) fn check(name: &str, cluster: bool, masters: usize) -> Result<()> {
    keys::validate(name)?;
    if cluster {
        keys::validate_cluster(name)?;
    }
    if masters > 1 {
        return Err(Error::Unsupported {
            what: format!("leader election {name:?} over {masters} Redlock masters"),
            reason: "the leader record and its change log would be kept on independent \
                     masters with no order between them, so observers could see changes \
                     in different orders and a leader read from a minority; use one \
                     deployment (a server, Sentinel or Redis Cluster)"
                .into(),
        });
    }
    Ok(())
}

pub(crate) struct Watch {
    name: String,
    sub: Subscription,
    last: String,
    pending: VecDeque<Entry>,
    /// A safety net for a message lost without a reconnect: read again after this
    /// long without one (the watchdog timeout, as signal.rs does).
    idle: Duration,
}

impl Watch {
    /// Subscribes to the election's channel, has it confirmed, then reads where the log
    /// stands: the observer sees the changes after that. Returns the leader then.
    pub(crate) async fn start(engine: &Engine, name: &str) -> Result<(Watch, Option<Current>)> {
        let mut sub = engine.pubsub().subscribe(channel(name));
        if let Err((addr, detail)) = sub.ready(engine.settings().connect_timeout).await {
            return Err(Error::PermissionDenied { addr, detail });
        }
        sub.mark_seen();
        let snap = read(engine.masters().first(), name, None).await?;
        let watch = Watch {
            name: name.to_string(),
            sub,
            last: snap.last,
            pending: VecDeque::new(),
            idle: engine.settings().watchdog_timeout,
        };
        Ok((watch, snap.leader))
    }

    /// The next change, waiting for it as long as it takes.
    ///
    /// Cancel safe: an entry is removed from the queue only when returned.
    pub(crate) async fn next(&mut self, engine: &Engine) -> Result<Entry> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(e);
            }
            // Mark before reading: a change logged after this read wakes us, once the
            // subscription is confirmed. Unconfirmed (its wait in `start` ran out), a
            // change may go unheard until the confirmation, which on a live connection
            // wakes nobody: confirmed first, then read again.
            self.sub.mark_seen();
            let confirmed = self.sub.is_confirmed();
            let snap = read(engine.masters().first(), &self.name, Some(&self.last)).await?;
            if let Some(e) = snap.entries.last() {
                self.last = e.id.clone();
            }
            self.pending.extend(snap.entries);
            if self.pending.is_empty() {
                if !confirmed {
                    let within = engine.settings().connect_timeout;
                    if let Err((addr, detail)) = self.sub.ready(within).await {
                        return Err(Error::PermissionDenied { addr, detail });
                    }
                    continue;
                }
                self.sub.wait(self.idle).await;
            }
        }
    }
}
