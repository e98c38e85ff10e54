//! The typed calls of the plain, fair and fenced lock scripts on one master: acquire,
//! release, hand-over, leaving the waiter registry or the fair queue, force-release,
//! dropping a lost hold, fencing write-back. Plain acquires and releases go through the
//! master's group commit (plain_ops.rs); the scripts themselves are in catalogue.rs.

use std::sync::{Arc, LazyLock};

use redis::Value;

use super::master::Master;
use super::plain_ops::{PlainOp, RELEASE};
use super::wire::{int, protocol, wrong_type, WRONG_TYPE};
use super::Kind;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

pub(crate) use super::renew::renew;
pub(crate) use super::wire::{typed, Acquire, HandOver, Release};

pub(crate) static UNWAIT: LazyLock<Script> = lua!("pass_on.lua", "unwait.lua");
pub(crate) static FORCE: LazyLock<Script> = lua!("force_release.lua");
static FENCED_ACQUIRE: LazyLock<Script> = lua!("fenced_acquire.lua");
static FENCED_SYNC: LazyLock<Script> = lua!("fenced_sync.lua");
static FAIR_ACQUIRE: LazyLock<Script> = lua!("fair_evict.lua", "fair_acquire.lua");
static FAIR_RELEASE: LazyLock<Script> = lua!("fair_evict.lua", "fair_release.lua");
static FAIR_CANCEL: LazyLock<Script> = lua!("fair_evict.lua", "fair_cancel.lua");
static FAIR_FORCE: LazyLock<Script> = lua!("fair_evict.lua", "fair_force_release.lua");
pub(crate) static DROP: LazyLock<Script> = lua!("fair_evict.lua", "drop.lua");

/// These scripts, for the catalogue (catalogue.rs).
pub(crate) fn all() -> [&'static LazyLock<Script>; 9] {
    [
        &UNWAIT,
        &FORCE,
        &FENCED_ACQUIRE,
        &FENCED_SYNC,
        &FAIR_ACQUIRE,
        &FAIR_RELEASE,
        &FAIR_CANCEL,
        &FAIR_FORCE,
        &DROP,
    ]
}

/// How the acquire script is chosen.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AcquireMode {
    Plain,
    /// `redlock`: more than one master, so the counter's epoch is read too.
    Fenced {
        redlock: bool,
    },
    /// Fair: `join` the queue when busy; alive for `stale_ms` (also the margin kept
    /// behind another entry), wait time `wait_ms` (Redisson's threadWaitTime), see
    /// `lua/fair_evict.lua`.
    Fair {
        join: bool,
        stale_ms: u64,
        wait_ms: u64,
    },
    /// The read lock of a read-write lock (rw.rs).
    Read,
    /// The write lock of a read-write lock; when refused, record an intent that keeps
    /// new readers out for `intent_ms` (0: none).
    Write {
        intent_ms: u64,
    },
}

impl AcquireMode {
    /// The kind of lock whose release script undoes this acquire.
    pub(crate) fn release_kind(self) -> Kind {
        match self {
            AcquireMode::Plain | AcquireMode::Fenced { .. } => Kind::Plain,
            AcquireMode::Fair { .. } => Kind::Fair,
            AcquireMode::Read => Kind::Read,
            AcquireMode::Write { .. } => Kind::Write,
        }
    }
}

/// Acquire on one master. Plain acquires go through the master's group commit;
/// `waiting` (plain only): the ticket of a registering waiter, see [`PlainOp`].
pub(crate) async fn acquire(
    m: &Master,
    name: &str,
    lease_ms: u64,
    holder: &str,
    mode: AcquireMode,
    waiting: Option<Arc<str>>,
) -> Result<Acquire> {
    let mut inv = match mode {
        AcquireMode::Plain => {
            let op = PlainOp {
                release: false,
                name: name.into(),
                holder: holder.into(),
                lease_ms,
                waiting,
            };
            let (status, value) = m.plain.submit(op).await?;
            return acquire_reply(m, name, mode, status, value, (None, false));
        }
        AcquireMode::Fenced { redlock } => {
            let mut inv = FENCED_ACQUIRE.call();
            inv.key(name).key(keys::token(name));
            if redlock {
                inv.key(keys::token_epoch(name));
            }
            inv
        }
        AcquireMode::Fair { .. } => fair_call(&FAIR_ACQUIRE, name),
        AcquireMode::Read | AcquireMode::Write { .. } => {
            let write = matches!(mode, AcquireMode::Write { .. });
            let (mut inv, extra) = super::rw::acquire_call(name, holder, write);
            inv.arg(lease_ms).arg(holder);
            for a in extra {
                inv.arg(a);
            }
            if let AcquireMode::Write { intent_ms } = mode {
                inv.arg(intent_ms);
            }
            return eval_acquire(m, name, mode, inv).await;
        }
    };
    inv.arg(lease_ms).arg(holder);
    if let AcquireMode::Fair {
        join,
        stale_ms,
        wait_ms,
    } = mode
    {
        inv.arg(stale_ms)
            .arg(if join { "1" } else { "0" })
            .arg(wait_ms);
    }
    eval_acquire(m, name, mode, inv).await
}

/// Runs an acquire script (waiting for replicas as configured, `Master::eval_acquire`)
/// and reads its `{status, value[, token, current]}` reply.
async fn eval_acquire(
    m: &Master,
    name: &str,
    mode: AcquireMode,
    inv: Invocation,
) -> Result<Acquire> {
    let (v, short) = m.eval_acquire(&inv).await.map_err(|e| typed(name, e))?;
    let Value::Array(items) = &v else {
        return Err(protocol(m.addr(), "acquire", &v));
    };
    let (status, value) = match (items.first().and_then(int), items.get(1).and_then(int)) {
        (Some(s), Some(x)) => (s, x),
        _ => return Err(protocol(m.addr(), "acquire", &v)),
    };
    let token = items.get(2).and_then(int).map(|t| t as u64);
    let current = items.get(3).and_then(int) == Some(1);
    match (
        acquire_reply(m, name, mode, status, value, (token, current))?,
        short,
    ) {
        (Acquire::Granted { .. }, Some(e)) => Err(e),
        (reply, _) => Ok(reply),
    }
}

fn acquire_reply(
    m: &Master,
    name: &str,
    mode: AcquireMode,
    status: i64,
    value: i64,
    (token, current): (Option<u64>, bool),
) -> Result<Acquire> {
    let fenced = matches!(mode, AcquireMode::Fenced { .. });
    Ok(match status {
        0 => Acquire::Busy { pttl_ms: value },
        1 | 2 => Acquire::Granted {
            fresh: status == 1,
            token: token.filter(|_| fenced),
            current: current && fenced,
        },
        WRONG_TYPE => return Err(wrong_type(m.addr(), name)),
        _ => return Err(protocol(m.addr(), "acquire", &Value::Int(status))),
    })
}

/// Release on one master. Plain releases go through the master's group commit.
pub(crate) async fn release(
    m: &Master,
    name: &str,
    lease_ms: u64,
    holder: &str,
    kind: Kind,
) -> Result<Release> {
    if kind.is_rw() {
        return super::rw::release(m, name, lease_ms, holder).await;
    }
    if kind != Kind::Fair {
        let op = PlainOp {
            release: true,
            name: name.into(),
            holder: holder.into(),
            lease_ms,
            waiting: None,
        };
        return match m.plain.submit(op).await?.0 {
            -1 => Ok(Release::NotHeld),
            0 => Ok(Release::StillHeld),
            1 => Ok(Release::Released),
            WRONG_TYPE => Err(wrong_type(m.addr(), name)),
            other => Err(protocol(m.addr(), "release", &Value::Int(other))),
        };
    }
    // fair_release.lua without offers: an ordinary release.
    Ok(
        match fair_hand_over(m, name, (holder, lease_ms), 0, &[]).await? {
            HandOver::NotHeld => Release::NotHeld,
            HandOver::StillHeld => Release::StillHeld,
            HandOver::Released | HandOver::To(_) => Release::Released,
        },
    )
}

/// Releases `from`'s last hold of `name` and, unless another client waits, gives the
/// lock to `to` in the same script (lock lane, so in order with our other scripts);
/// `to`'s ticket, if it registered one, leaves the waiter registry with it.
pub(crate) async fn hand_over(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    (to, to_lease_ms, ticket): (&str, u64, Option<&str>),
) -> Result<HandOver> {
    let mut inv = RELEASE.call();
    inv.key(name)
        .key(keys::waiters(name))
        .arg(keys::channel(name))
        .arg("0")
        .arg(from_lease_ms)
        .arg(from)
        .arg(to)
        .arg(to_lease_ms);
    if let Some(ticket) = ticket {
        inv.arg(ticket);
    }
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(match m.decode::<Option<i64>>(v)? {
        None => HandOver::NotHeld,
        Some(0) => HandOver::StillHeld,
        Some(1) => HandOver::Released,
        Some(_) => HandOver::To(0),
    })
}

/// Releases `from`'s last hold of a fair `name` and, when the queue head is one of
/// `offered` (holder id, lease in ms; all with wait time `wait_ms`), grants it the lock
/// in the same script.
pub(crate) async fn fair_hand_over(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    wait_ms: u64,
    offered: &[(&str, u64)],
) -> Result<HandOver> {
    let mut inv = fair_call(&FAIR_RELEASE, name);
    inv.arg("0").arg(from_lease_ms).arg(from).arg(wait_ms);
    for (holder, lease_ms) in offered {
        inv.arg(*holder).arg(*lease_ms);
    }
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    let to = match &v {
        Value::Nil => return Ok(HandOver::NotHeld),
        Value::Int(0) => return Ok(HandOver::StillHeld),
        Value::Int(_) => return Ok(HandOver::Released),
        Value::BulkString(to) => offered.iter().position(|(h, _)| h.as_bytes() == to),
        _ => None,
    };
    to.map(HandOver::To)
        .ok_or_else(|| protocol(m.addr(), "fair_hand_over", &v))
}

/// `ticket` stops waiting for the plain lock `name` (lua/unwait.lua): it leaves the
/// waiter registry, a hand-over to it nobody claimed is released, and a free lock is
/// passed on to the next waiter.
pub(crate) async fn unwait(m: &Master, name: &str, ticket: &str) -> Result<()> {
    let mut inv = UNWAIT.call();
    inv.key(name)
        .key(keys::waiters(name))
        .arg(keys::channel(name))
        .arg(ticket);
    m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(())
}

/// Deletes `name` whoever holds it and wakes its waiters; true if it was deleted.
pub(crate) async fn force_release(m: &Master, name: &str, fair: bool) -> Result<bool> {
    let mut inv = if fair {
        fair_call(&FAIR_FORCE, name)
    } else {
        let mut inv = FORCE.call();
        inv.key(name)
            .key(keys::waiters(name))
            .arg(keys::channel(name));
        inv
    };
    inv.arg("0");
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// Deletes `name` if `holder` still holds it (a hold declared lost) and wakes the next
/// waiter; true if it was deleted.
pub(crate) async fn drop_lost(m: &Master, name: &str, holder: &str) -> Result<bool> {
    let mut inv = fair_call(&DROP, name);
    inv.arg(holder).arg("0");
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// A call of a script over the fair lock's keys: the lock, its queue, its deadlines,
/// its channel prefix and its liveness set (KEYS[1..5] of every fair script and of
/// drop.lua).
fn fair_call(script: &'static Script, name: &str) -> Invocation {
    let mut inv = script.call();
    inv.key(name)
        .key(keys::queue(name))
        .key(keys::timeouts(name))
        .key(keys::channel(name))
        .key(keys::fair_alive(name));
    inv
}

/// Removes `holder` (wait time `wait_ms`) from the fair queue of `name`, taking its
/// wait off the deadlines behind it as Redisson's failed acquire does; true if it was
/// queued.
pub(crate) async fn fair_cancel(
    m: &Master,
    name: &str,
    holder: &str,
    wait_ms: u64,
) -> Result<bool> {
    let mut inv = fair_call(&FAIR_CANCEL, name);
    inv.arg(holder).arg(wait_ms);
    let v = m.eval(Lane::Lock, &inv).await?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// Raises the fencing counter of `name` to at least `token` and, if `holder` holds the
/// lock there, marks the master current (its epoch := its run_id); returns the counter.
/// Redlock only.
pub(crate) async fn fenced_sync(m: &Master, name: &str, holder: &str, token: u64) -> Result<u64> {
    let mut inv = FENCED_SYNC.call();
    inv.key(keys::token(name))
        .key(keys::token_epoch(name))
        .key(name)
        .arg(token)
        .arg(holder);
    let v = m.eval(Lane::Lock, &inv).await?;
    m.decode(v)
}
