//! The read side of the façade, and `force_unlock`: what a lock's state is on the
//! masters, judged by the majority rules (quorum.rs), and per master for operators.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::engine::kinds::call::LockSpec;
use crate::engine::kinds::inspect::{self, lease_left, State};
use crate::engine::kinds::{self, group, Probe};
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::{answers, fan_out, majority_floor, majority_true};
use crate::engine::masters::replies::{no_expiry, typed};
use crate::engine::observe;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::lost::LostReason;
use crate::transport::replicas::ReplicaSync;

/// One master's answer to an inspection ([`Engine::inspect`]).
pub(crate) struct Inspected {
    /// The server that answered for the key (a cluster's node, Sentinel's primary).
    pub(crate) serving: String,
    /// Its replicas as replica sync last counted them.
    pub(crate) replicas: Option<ReplicaSync>,
    /// What it holds under the name, or why that could not be read.
    pub(crate) state: std::result::Result<State, String>,
    /// The connections subscribed to its waiters' channel there (observe/waiters.rs).
    pub(crate) waiters: u64,
}

impl Engine {
    /// True if anyone holds `spec` on a majority. For the read lock of a read-write
    /// lock: anyone reads; for its write lock: anyone writes.
    pub(crate) async fn is_locked(&self, spec: &LockSpec) -> Result<bool> {
        if let Probe::Hash(held) = spec.kind.protocol().probe() {
            let v = self
                .query(spec, redis::cmd("HGETALL").arg(&*spec.name))
                .await?;
            let held: Vec<bool> = v.iter().map(held).collect();
            return Ok(majority_true(&held, self.quorum));
        }
        self.check_name(&spec.name, spec.kind)?;
        let name = &*spec.name;
        let key_type = match spec.kind.protocol().probe() {
            Probe::Key(key_type) => key_type,
            _ => "hash",
        };
        let results = fan_out(&self.masters, |m| lock_exists(m, name, key_type)).await;
        // A key that is not a lock is reported as lock() reports it (attempt.rs).
        if let Some(e) = results.iter().find_map(|r| r.as_ref().err())
            && e.is_permanent()
        {
            return Err(e.clone());
        }
        let exists = answers(&self.masters, results, self.quorum)?;
        Ok(majority_true(&exists, self.quorum))
    }

    /// The caller's reentrant hold count (what a majority agrees on at least); 0 if
    /// it does not hold `spec` (Engine::callers_holder says who the caller is).
    pub(crate) async fn hold_count(&self, spec: &LockSpec) -> Result<u32> {
        self.check_name(&spec.name, spec.kind)?;
        // Nobody here holds it: still asked (of a holder id no call ever takes), so a
        // key that is not a lock is reported as such.
        let holder = (self.callers_holder(spec))
            .unwrap_or_else(|| format!("{}0", self.holder_prefix).into());
        let (cmd, count) = spec.kind.protocol().hold_query(&spec.name, &holder);
        let v = self.query(spec, &cmd).await?;
        let counts = v.iter().map(|x| count(x, &holder)).collect();
        Ok(majority_floor(counts, self.quorum))
    }

    /// How long `spec` stays held unless renewed (what a majority agrees on at least);
    /// `None` if it is not locked or has no expiry.
    ///
    /// A PTTL of 0 is a lease in its last millisecond (Redis keeps a key until its
    /// millisecond clock has passed the expiry): still held, `Some(ZERO)`, not "free".
    pub(crate) async fn remaining_ttl(&self, spec: &LockSpec) -> Result<Option<Duration>> {
        let v = self
            .query(spec, redis::cmd("PTTL").arg(&*spec.name))
            .await?;
        let ttl = majority_floor(v.iter().map(as_int).collect(), self.quorum);
        Ok(lease_left(ttl))
    }

    /// Deletes `spec` whoever holds it and wakes its waiters; true if a lock was
    /// deleted. This client's holds of it taken before the deletion was sent are
    /// declared lost; one taken while it was in flight is renewed at once by the
    /// watchdog, which finds out whether it was deleted.
    pub(crate) async fn force_unlock(&self, spec: &LockSpec) -> Result<bool> {
        self.check_name(&spec.name, spec.kind)?;
        let (name, kind) = (&*spec.name, spec.kind);
        // Read before sending: the deletion wakes the waiters, this client's too, and
        // one may be granted the free lock before the replies are read here. That hold
        // is sound; declaring it lost (as every hold of the name found after the
        // replies was) made its unlock fail with NotHeld and left its key in Redis,
        // unwatched, until its lease ran out.
        let before = self.holds.named(name);
        let forcing = |on: bool| {
            for hold in &before {
                hold.forcing.store(on, std::sync::atomic::Ordering::Release);
            }
        };
        forcing(true);
        // Cleared on every way out: a hold the force did not delete stays as it was.
        let _cleared = scopeguard::guard((), |()| forcing(false));
        let notice = self.settings.books.notice_prefix();
        let notice = notice.as_deref();
        let results = fan_out(&self.masters, |m| {
            kinds::force_release(m, kind, name, notice)
        })
        .await;
        if let Some(Error::WrongType { .. }) = results.iter().find_map(|r| r.as_ref().err()) {
            return Err(results.into_iter().find_map(Result::err).expect("an error"));
        }
        let deleted = answers(&self.masters, results, self.quorum)?.contains(&true);
        // A read-write lock in the other mode was left alone: its holds are not lost.
        if deleted || !kind.protocol().force_may_spare() {
            for hold in &before {
                self.holds.lose(hold, LostReason::ForceUnlocked);
            }
            for hold in self.holds.named(name) {
                if !before.iter().any(|b| Arc::ptr_eq(b, &hold)) {
                    self.urgent.now(&hold);
                }
            }
        }
        self.pubsub.notify_local(&kind.channel(name));
        Ok(deleted)
    }

    /// Reads what every master holds under `key`, every kind's layout
    /// (kinds/inspect.rs); one answer per master, in order, with the server that
    /// answered and its replicas. A master that cannot be read answers why.
    pub(crate) async fn inspect(&self, key: &str) -> Vec<Inspected> {
        let pipe = &inspect::pipeline(&kinds::SECTIONS, key);
        let results = fan_out(&self.masters, |m| async move {
            let v = m.pipe(pipe).await?;
            let state = inspect::read(&kinds::SECTIONS, &m.decode::<Vec<Value>>(v)?);
            let waiters = match &state {
                Ok(st) => observe::waiters::listeners(m, key, st).await,
                Err(_) => 0,
            };
            Ok((state, waiters))
        })
        .await;
        (self.masters.iter().zip(results))
            .map(|(m, reply)| {
                let (state, waiters) = match reply {
                    Ok((state, waiters)) => (state, waiters),
                    Err(e) => (Err(e.to_string()), 0),
                };
                Inspected {
                    serving: m.link().serving(key.as_bytes()),
                    replicas: m.link().replica_sync(key.as_bytes()),
                    state,
                    waiters,
                }
            })
            .collect()
    }

    /// Runs a read on every master; the answers of at least a majority.
    async fn query(&self, spec: &LockSpec, cmd: &redis::Cmd) -> Result<Vec<Value>> {
        self.check_name(&spec.name, spec.kind)?;
        let name = &*spec.name;
        let results = fan_out(&self.masters, |m| async move {
            m.query::<Value>(cmd).await.map_err(|e| typed(name, e))
        })
        .await;
        answers(&self.masters, results, self.quorum)
    }
}

/// Whether lock `name` exists on `m`: a key of type `want` (a hash, but for a kind
/// kept in another type) with a lease. Another type is `WrongType`, a lock without
/// expiry `BadData` ([`no_expiry`]).
async fn lock_exists(m: &Master, name: &str, want: &str) -> Result<bool> {
    let mut pipe = redis::pipe();
    pipe.cmd("TYPE").arg(name).cmd("PTTL").arg(name);
    let v = m.pipe(&pipe).await.map_err(|e| typed(name, e))?;
    let (key_type, pttl): (String, i64) = m.decode(v)?;
    let addr = || m.link().serving(name.as_bytes());
    match key_type.as_str() {
        "none" => Ok(false),
        t if t == want && pttl == -1 => Err(no_expiry(name, addr())),
        t if t == want => Ok(true),
        _ => Err(Error::WrongType {
            name: name.to_string(),
            addr: addr(),
        }),
    }
}

fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

impl Engine {
    /// The values of `spec` as the caller (Engine::callers_holder) sees them, by
    /// majority: locked / held when a majority says so, the count and the time left
    /// that a majority reaches at least.
    pub(crate) async fn group_status(&self, spec: &LockSpec) -> Result<group::Status> {
        self.check_name(&spec.name, spec.kind)?;
        let holder = self.callers_holder(spec);
        let (name, holder) = (&*spec.name, holder.as_deref().unwrap_or(""));
        let results = fan_out(&self.masters, |m| async move {
            group::status(m, name, holder).await
        })
        .await;
        if let Some(Error::WrongType { .. }) = results.iter().find_map(|r| r.as_ref().err()) {
            return Err(results.into_iter().find_map(Result::err).expect("an error"));
        }
        let all = answers(&self.masters, results, self.quorum)?;
        let locked: Vec<bool> = all.iter().map(|s| s.locked).collect();
        let held: Vec<bool> = all.iter().map(|s| s.held).collect();
        let left = all
            .iter()
            .map(|s| s.left.map_or(-1, |d| d.as_millis() as i64));
        let left = majority_floor(left.collect(), self.quorum);
        let held = majority_true(&held, self.quorum);
        Ok(group::Status {
            locked: majority_true(&locked, self.quorum),
            held,
            count: if held {
                majority_floor(all.iter().map(|s| s.count).collect(), self.quorum)
            } else {
                0
            },
            left: (held && left >= 0).then(|| Duration::from_millis(left as u64)),
        })
    }
}
