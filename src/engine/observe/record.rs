//! The client record `redlatch_client:{uuid}` (host, pid, app, version, since): written
//! at connect and in every watchdog round (with the ledger's expiry), deleted by
//! close; and reading records back to resolve holder ids.
//!
//! Invariants:
//! 1. Every write of the record sets its expiry to the watchdog timeout, in the same
//!    round trip (module invariant 2); a master that lost it (a restart) gets it again
//!    at the next round.
//! 2. A round that finds the ledger gone on a master (its expiry refreshed nothing)
//!    while this client wrote entries forgets what it wrote, so the next flush writes
//!    them all again.
//! 3. A holder id whose client has no record resolves to itself alone (a Redisson
//!    holder, or a client that is gone): never an error.
//! 4. A write the ACL refuses is logged once as a WARN naming the key and the fix
//!    (`Config::bookkeeping_prefix` / `bookkeeping(false)`), then at debug level: the
//!    lock path never depends on it (keys/books.rs invariant 2).

use std::collections::HashMap;
use std::sync::Arc;

use redis::Value;

use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::fan_out;
use crate::engine::observe::{now_ms, split_holder, Observe};
use crate::engine::Engine;
use crate::keys::books::Books;
use crate::transport::{Lane, Request};

/// This client's record.
pub(crate) struct Mine {
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) app: Arc<str>,
    pub(crate) since_ms: i64,
    /// A refused write was logged (invariant 4).
    refused: std::sync::atomic::AtomicBool,
}

impl Mine {
    pub(crate) fn new(app: Arc<str>) -> Mine {
        Mine {
            host: crate::engine::kinds::shedlock::host_name(),
            pid: std::process::id(),
            app,
            since_ms: now_ms(),
            refused: Default::default(),
        }
    }
}

/// A holder id resolved: its client's record (if any) and when the hold was taken (if
/// the ledger says).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Who {
    pub(crate) id: String,
    pub(crate) host: Option<String>,
    pub(crate) pid: Option<u32>,
    pub(crate) app: Option<String>,
    pub(crate) version: Option<String>,
    /// The client connected at, ms since the epoch.
    pub(crate) since: Option<i64>,
    /// The hold was taken at, ms since the epoch.
    pub(crate) acquired: Option<i64>,
}

impl Who {
    /// Fills the record's fields from `HGETALL`'s answer.
    pub(crate) fn with_record(mut self, fields: &HashMap<String, String>) -> Who {
        self.host = fields.get("host").cloned();
        self.pid = fields.get("pid").and_then(|p| p.parse().ok());
        self.app = fields.get("app").cloned();
        self.version = fields.get("version").cloned();
        self.since = fields.get("since").and_then(|p| p.parse().ok());
        self
    }
}

impl Observe {
    /// Writes this client's record (and the ledger's expiry) on every master of
    /// `engine`; failures are logged (the next round writes it again). Invariants 1
    /// and 2.
    pub(in crate::engine) async fn write_record(&self, engine: &Engine) {
        // Never after close() deleted it (remove_record holds the same lock).
        let written = self.written.lock().await;
        let books = &engine.settings().books;
        if engine.stopping().is_cancelled() || !books.is_on() {
            return;
        }
        let uuid = engine.id().to_string();
        let (record, ledger) = (books.record(&uuid), books.ledger(&uuid));
        let ttl = engine.settings().watchdog_timeout.as_millis() as u64;
        let who = &self.who;
        let mut pipe = redis::pipe();
        pipe.cmd("HSET")
            .arg(&record)
            .arg("host")
            .arg(&who.host)
            .arg("pid")
            .arg(who.pid)
            .arg("app")
            .arg(&*who.app)
            .arg("version")
            .arg(env!("CARGO_PKG_VERSION"))
            .arg("since")
            .arg(who.since_ms)
            .ignore();
        pipe.cmd("PEXPIRE").arg(&record).arg(ttl).ignore();
        pipe.cmd("PEXPIRE").arg(&ledger).arg(ttl);
        let pipe = &pipe;
        let results = fan_out(engine.masters().all(), |m| async move {
            let v = m.link().send(Lane::Side, m.timeout(), Request::Pipe(pipe));
            m.decode::<Vec<i64>>(v.await?)
        })
        .await;
        let mut lost_ledger = false;
        for (m, r) in engine.masters().iter().zip(results) {
            match r {
                Ok(set) => lost_ledger |= set.first() == Some(&0),
                Err(e) => refused_or_failed(who, m.addr(), &record, &e),
            }
        }
        if lost_ledger {
            let mut written = written;
            written.clear();
        }
    }

    /// Deletes this client's record and ledger on every master of `engine` (close).
    pub(in crate::engine) async fn remove_record(&self, engine: &Engine) {
        // No flush or record write runs during or after (both check the shutdown
        // under this lock).
        let _written = self.written.lock().await;
        let books = &engine.settings().books;
        if !books.is_on() {
            return;
        }
        let uuid = engine.id().to_string();
        let mut cmd = redis::cmd("DEL");
        cmd.arg(books.record(&uuid)).arg(books.ledger(&uuid));
        let cmd = &cmd;
        fan_out(engine.masters().all(), |m| async move {
            let v = m.link().send(Lane::Side, m.timeout(), Request::Cmd(cmd));
            v.await
        })
        .await;
    }
}

/// Resolves the holder ids `holders` of lock `name` as master `m` knows them (`books`:
/// where the records are): its record and the hold's acquisition time there
/// (invariant 3).
pub(crate) async fn resolve(m: &Master, books: &Books, name: &str, holders: &[String]) -> Vec<Who> {
    let calls = holders.iter().map(|h| resolve_one(m, books, name, h));
    futures_util::future::join_all(calls).await
}

/// Logs a failed write of the record (invariant 4).
fn refused_or_failed(who: &Mine, addr: &str, record: &str, e: &crate::error::Error) {
    use std::sync::atomic::Ordering;
    let denied = matches!(e, crate::error::Error::PermissionDenied { .. });
    if denied && !who.refused.swap(true, Ordering::Relaxed) {
        tracing::warn!(target: "redlatch", master = addr, key = record,
            "the ACL refuses writing this client's record and ledger (NOPERM): locks work, but operators \
             see its holders and waiters by bare id and deadlock detection does not see \
             it; allow the key, or set Config::bookkeeping_prefix to keys the ACL allows, \
             or bookkeeping(false) (docs/errors.md)");
    } else {
        tracing::debug!(target: "redlatch", master = addr, error = %e,
            "could not write the client record; the next round tries again");
    }
}

/// One holder id on one master: `HGETALL` of its record and `HGET` of its ledger
/// entry, in one round trip (one slot: the uuid is the hash tag).
pub(crate) async fn resolve_one(m: &Master, books: &Books, name: &str, holder: &str) -> Who {
    let who = Who {
        id: holder.to_string(),
        ..Default::default()
    };
    // A scheduled job's run (ShedLock's value) names its host and start itself.
    if let Some(job) = crate::engine::kinds::shedlock::parse(holder) {
        let at = job.since.duration_since(std::time::UNIX_EPOCH);
        return Who {
            host: Some(job.host),
            acquired: at.ok().map(|d| d.as_millis() as i64),
            ..who
        };
    }
    let Some((uuid, n)) = split_holder(holder).filter(|_| books.is_on()) else {
        return who;
    };
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(books.record(uuid));
    pipe.cmd("HGET")
        .arg(books.ledger(uuid))
        .arg(crate::engine::observe::ledger::hold_field(n, name));
    let answer = m.link().send(Lane::Side, m.timeout(), Request::Pipe(&pipe));
    let Ok(Value::Array(mut parts)) = answer.await else {
        return who;
    };
    let acquired = parts
        .pop()
        .and_then(|v| redis::from_redis_value::<i64>(v).ok());
    let record: HashMap<String, String> = parts
        .pop()
        .and_then(|v| redis::from_redis_value(v).ok())
        .unwrap_or_default();
    if record.is_empty() {
        return who;
    }
    Who { acquired, ..who }.with_record(&record)
}
