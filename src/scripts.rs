//! One [`redis::Script`] per file in `lua/` and typed async wrappers around them.
//!
//! Scripts run with EVALSHA; after `SCRIPT FLUSH` or a restart, NOSCRIPT makes
//! `redis::Script` load the script and retry once. Every value is passed as KEYS/ARGV.

use std::sync::{Arc, LazyLock};

use redis::{Script, Value};

use crate::batch::{Op, Reply};

use crate::error::{Error, Result};
use crate::master::Master;
use crate::names;

macro_rules! fair_script {
    ($file:literal) => {
        concat!(
            include_str!("../lua/fair_evict.lua"),
            include_str!(concat!("../lua/", $file))
        )
    };
}

static BATCH: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/batch.lua")));
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/release.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/renew.lua")));
static FORCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/force_release.lua")));
static FENCED_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/fenced_acquire.lua")));
static FENCED_SYNC: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/fenced_sync.lua")));
static FAIR_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(fair_script!("fair_acquire.lua")));
static FAIR_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(fair_script!("fair_release.lua")));
static FAIR_CANCEL: LazyLock<Script> =
    LazyLock::new(|| Script::new(fair_script!("fair_cancel.lua")));
static FAIR_FORCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(fair_script!("fair_force_release.lua")));

/// What an acquire script answered on one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Granted: `fresh` if the key was created, else re-entered; `token` for fenced locks.
    Granted { fresh: bool, token: Option<u64> },
    /// Held by someone else for `pttl_ms` more (-1: no expiry, -2: free but queued).
    Busy { pttl_ms: i64 },
}

/// What a release script answered on one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    NotHeld,
    StillHeld,
    Released,
}

/// How the acquire script is chosen.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AcquireMode {
    Plain,
    Fenced,
    /// Fair: `join` the queue when busy; waiter deadline = now + `stale_ms`.
    Fair {
        join: bool,
        stale_ms: u64,
    },
}

/// Maps a WRONGTYPE reply to [`Error::WrongType`].
pub(crate) fn typed(name: &str, e: Error) -> Error {
    match e {
        Error::Redis { source, addr } if source.to_string().contains("WRONGTYPE") => {
            Error::WrongType {
                name: name.to_string(),
                addr,
            }
        }
        other => other,
    }
}

fn protocol(master: &Master, what: &str, v: &Value) -> Error {
    master.err(redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected script reply",
        format!("{what}: {v:?}"),
    )))
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// Acquire on one master. Plain acquires go through the master's group commit.
pub(crate) async fn acquire(
    m: &Arc<Master>,
    name: &str,
    lease_ms: u64,
    holder: &str,
    mode: AcquireMode,
) -> Result<Acquire> {
    let mut inv = match mode {
        AcquireMode::Plain => {
            let op = Op {
                release: false,
                name: name.into(),
                holder: holder.into(),
                lease_ms,
            };
            let (status, value) = m.submit(op).await?;
            return acquire_reply(m, name, mode, status, value, None);
        }
        AcquireMode::Fenced => FENCED_ACQUIRE.key(name),
        AcquireMode::Fair { .. } => FAIR_ACQUIRE.key(name),
    };
    match mode {
        AcquireMode::Plain => {}
        AcquireMode::Fenced => {
            inv.key(names::token(name));
        }
        AcquireMode::Fair { .. } => {
            inv.key(names::queue(name))
                .key(names::timeouts(name))
                .key(names::channel(name));
        }
    }
    inv.arg(lease_ms).arg(holder);
    if let AcquireMode::Fair { join, stale_ms } = mode {
        inv.arg(stale_ms).arg(if join { "1" } else { "0" });
    }
    let v: Value = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await
        .map_err(|e| typed(name, e))?;
    let Value::Array(items) = &v else {
        return Err(protocol(m, "acquire", &v));
    };
    let (status, value) = match (items.first().and_then(int), items.get(1).and_then(int)) {
        (Some(s), Some(x)) => (s, x),
        _ => return Err(protocol(m, "acquire", &v)),
    };
    let token = items.get(2).and_then(int).map(|t| t as u64);
    acquire_reply(m, name, mode, status, value, token)
}

fn acquire_reply(
    m: &Master,
    name: &str,
    mode: AcquireMode,
    status: i64,
    value: i64,
    token: Option<u64>,
) -> Result<Acquire> {
    Ok(match status {
        0 => Acquire::Busy { pttl_ms: value },
        1 | 2 => Acquire::Granted {
            fresh: status == 1,
            token: token.filter(|_| matches!(mode, AcquireMode::Fenced)),
        },
        WRONG_TYPE => return Err(wrong_type(m, name)),
        _ => return Err(protocol(m, "acquire", &Value::Int(status))),
    })
}

/// Release on one master. Plain releases go through the master's group commit.
pub(crate) async fn release(
    m: &Arc<Master>,
    name: &str,
    lease_ms: u64,
    holder: &str,
    fair: bool,
) -> Result<Release> {
    if !fair {
        let op = Op {
            release: true,
            name: name.into(),
            holder: holder.into(),
            lease_ms,
        };
        return match m.submit(op).await?.0 {
            -1 => Ok(Release::NotHeld),
            0 => Ok(Release::StillHeld),
            1 => Ok(Release::Released),
            WRONG_TYPE => Err(wrong_type(m, name)),
            other => Err(protocol(m, "release", &Value::Int(other))),
        };
    }
    // fair_release.lua without offers: an ordinary release.
    Ok(
        match fair_handover(m, name, (holder, lease_ms), &[]).await? {
            Handover::NotHeld => Release::NotHeld,
            Handover::StillHeld => Release::StillHeld,
            Handover::Released | Handover::HandedOver(_) => Release::Released,
        },
    )
}

/// `batch.lua`'s status for a key of another type.
const WRONG_TYPE: i64 = 3;

fn wrong_type(m: &Master, name: &str) -> Error {
    Error::WrongType {
        name: name.to_string(),
        addr: m.addr().to_string(),
    }
}

/// One plain operation with its own script (acquire.lua / release.lua), answered in
/// `batch.lua`'s terms.
pub(crate) async fn single(m: &Master, op: &Op) -> Result<Reply> {
    let name = &*op.name;
    let reply = if op.release {
        let mut inv = RELEASE.key(name);
        inv.key(names::channel(name))
            .arg("0")
            .arg(op.lease_ms)
            .arg(&*op.holder);
        m.run(|mut c| async move { inv.invoke_async::<Option<i64>>(&mut c).await })
            .await
            .map(|v| (v.map_or(-1, |x| x.min(1)), 0))
    } else {
        let mut inv = ACQUIRE.key(name);
        inv.arg(op.lease_ms).arg(&*op.holder);
        m.run(|mut c| async move { inv.invoke_async::<(i64, i64)>(&mut c).await })
            .await
    };
    match reply.map_err(|e| typed(name, e)) {
        Err(Error::WrongType { .. }) => Ok((WRONG_TYPE, 0)),
        other => other,
    }
}

/// Many plain operations in one `batch.lua` call.
pub(crate) async fn batch(m: &Master, ops: &[&Op]) -> Result<Vec<Reply>> {
    let mut inv = BATCH.prepare_invoke();
    for op in ops {
        inv.key(&*op.name);
        if op.release {
            inv.key(names::channel(&op.name)).arg("r");
        } else {
            inv.arg("a");
        }
        inv.arg(op.lease_ms).arg(&*op.holder);
    }
    let v: Value = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await?;
    crate::batch::pairs(m, v, ops.len())
}

/// What a release with a hand-over (`release.lua`, `fair_release.lua`) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handover {
    NotHeld,
    StillHeld,
    /// Released normally (another client waits, or no offered waiter is next): the
    /// next waiter was woken.
    Released,
    /// The offered waiter at this index holds the lock now.
    HandedOver(usize),
}

/// Releases `from`'s last hold of `name` and, unless another client waits, gives the
/// lock to `to` in the same script (lock lane, so in order with our other scripts).
pub(crate) async fn handover(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    (to, to_lease_ms): (&str, u64),
) -> Result<Handover> {
    let mut inv = RELEASE.key(name);
    inv.key(names::channel(name))
        .arg("0")
        .arg(from_lease_ms)
        .arg(from)
        .arg(to)
        .arg(to_lease_ms);
    let v: Option<i64> = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await
        .map_err(|e| typed(name, e))?;
    Ok(match v {
        None => Handover::NotHeld,
        Some(0) => Handover::StillHeld,
        Some(1) => Handover::Released,
        Some(_) => Handover::HandedOver(0),
    })
}

/// Releases `from`'s last hold of a fair `name` and, when the queue head is one of
/// `offered` (holder id, lease in ms), grants it the lock in the same script.
pub(crate) async fn fair_handover(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    offered: &[(&str, u64)],
) -> Result<Handover> {
    let mut inv = FAIR_RELEASE.key(name);
    inv.key(names::queue(name))
        .key(names::timeouts(name))
        .key(names::channel(name))
        .arg("0")
        .arg(from_lease_ms)
        .arg(from);
    for (holder, lease_ms) in offered {
        inv.arg(*holder).arg(*lease_ms);
    }
    let v: Value = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await
        .map_err(|e| typed(name, e))?;
    let to = match &v {
        Value::Nil => return Ok(Handover::NotHeld),
        Value::Int(0) => return Ok(Handover::StillHeld),
        Value::Int(_) => return Ok(Handover::Released),
        Value::BulkString(to) => offered.iter().position(|(h, _)| h.as_bytes() == to),
        _ => None,
    };
    to.map(Handover::HandedOver)
        .ok_or_else(|| protocol(m, "fair_handover", &v))
}

/// Renews `(name, holder)` pairs to `lease_ms`; one bool per pair, true = still held.
pub(crate) async fn renew(
    m: &Master,
    locks: &[(&str, &str)],
    lease_ms: u64,
    timeout: std::time::Duration,
) -> Result<Vec<bool>> {
    let mut inv = RENEW.prepare_invoke();
    inv.arg(lease_ms);
    for (name, holder) in locks {
        inv.key(*name).arg(*holder);
    }
    let v: Vec<i64> = m
        .run_side(
            timeout,
            |mut c| async move { inv.invoke_async(&mut c).await },
        )
        .await?;
    if v.len() != locks.len() {
        return Err(protocol(m, "renew", &Value::Int(v.len() as i64)));
    }
    Ok(v.into_iter().map(|x| x == 1).collect())
}

pub(crate) async fn force_release(m: &Master, name: &str, fair: bool) -> Result<bool> {
    let mut inv = if fair {
        let mut inv = FAIR_FORCE.key(name);
        inv.key(names::queue(name))
            .key(names::timeouts(name))
            .key(names::channel(name));
        inv
    } else {
        let mut inv = FORCE.key(name);
        inv.key(names::channel(name));
        inv
    };
    inv.arg("0");
    let v: i64 = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await
        .map_err(|e| typed(name, e))?;
    Ok(v == 1)
}

/// Removes `holder` from the fair queue of `name`; true if it was queued.
pub(crate) async fn fair_cancel(m: &Master, name: &str, holder: &str) -> Result<bool> {
    let mut inv = FAIR_CANCEL.key(name);
    inv.key(names::queue(name))
        .key(names::timeouts(name))
        .key(names::channel(name))
        .arg(holder);
    let v: i64 = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await?;
    Ok(v == 1)
}

/// Raises the fencing counter of `name` to at least `token`; returns the counter.
pub(crate) async fn fenced_sync(m: &Master, name: &str, token: u64) -> Result<u64> {
    let mut inv = FENCED_SYNC.key(names::token(name));
    inv.arg(token);
    let v: u64 = m
        .run(|mut c| async move { inv.invoke_async(&mut c).await })
        .await?;
    Ok(v)
}

/// The script sources, for tools that load them by hand (`redlatch bench`).
pub fn sources() -> [(&'static str, &'static str); 2] {
    [
        ("acquire", include_str!("../lua/acquire.lua")),
        ("release", include_str!("../lua/release.lua")),
    ]
}
