//! The fair lock (Redisson `RFairLock`): a FIFO queue on each master
//! (`lua/fair_evict.lua` and the `fair_*.lua` scripts). A refused waiter joins the
//! queue, listens on its own channel, refreshes its liveness while it waits and leaves
//! the queue however the wait ends (`fair_cancel.lua`); a release on one master may
//! hand the lock to the queue head when it is a waiting task of this client.

use std::sync::Arc;
use std::sync::LazyLock;

use redis::Value;

use crate::engine::kinds::inspect::{scored, scores, text, Section};
use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::kinds::{
    AcquireParams, Gate, OfferPolicy, Protocol, Queue, ScriptOrBatch, WaitPolicy,
};
use crate::engine::masters::master::Master;
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{protocol, read_acquire, typed, Acquire, HandOver, Release};
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

static FAIR_ACQUIRE: LazyLock<Script> = lua!("fair_evict.lua", "fair_acquire.lua");
static FAIR_RELEASE: LazyLock<Script> = lua!("fair_evict.lua", "fair_release.lua");
static FAIR_CANCEL: LazyLock<Script> = lua!("fair_evict.lua", "fair_cancel.lua");
static FAIR_FORCE: LazyLock<Script> = lua!(
    "fair_evict.lua",
    "tell_holders.lua",
    "fair_force_release.lua"
);
/// Shared by every kind but the read-write lock's (over the fair layout's keys):
/// drops a lost hold, fair queues evicted on the way.
pub(crate) static DROP: LazyLock<Script> = lua!("fair_evict.lua", "drop.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 5] {
    [
        &FAIR_ACQUIRE,
        &FAIR_RELEASE,
        &FAIR_CANCEL,
        &FAIR_FORCE,
        &DROP,
    ]
}

/// Redisson `RFairLock`.
pub(crate) struct Fair;

impl Protocol for Fair {
    fn label(&self) -> &'static str {
        "fair"
    }

    fn listed(&self) -> &'static Listed {
        &LISTED
    }

    fn wake_channel(&self, name: &str, holder: &str) -> String {
        keys::waiter_channel(name, holder)
    }

    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        params: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let inv = acquire_call(&FAIR_ACQUIRE, (name, lease_ms, holder), params);
        ScriptOrBatch::Script(inv, read_acquire)
    }

    /// fair_release.lua without offers: an ordinary release.
    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        let mut inv = call(&FAIR_RELEASE, name);
        inv.arg("0").arg(lease_ms).arg(&**holder).arg(0);
        ScriptOrBatch::Script(inv, |addr, _, v| {
            Ok(match read_hand_over(addr, &[], v)? {
                HandOver::NotHeld => Release::NotHeld,
                HandOver::StillHeld => Release::StillHeld,
                HandOver::Released | HandOver::To(_) => Release::Released,
            })
        })
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        drop_lost(name, holder)
    }

    /// Removes `holder` from the queue, taking its wait off the deadlines behind it as
    /// Redisson's failed acquire does.
    fn leave(&self, name: &str, holder: &str, params: &AcquireParams) -> Option<Invocation> {
        let mut inv = call(&FAIR_CANCEL, name);
        inv.arg(holder).arg(params.wait_ms);
        Some(inv)
    }

    fn policy(&self) -> WaitPolicy {
        POLICY
    }

    /// Its queue keys are named too.
    fn validate(&self, key: &str) -> Result<()> {
        keys::validate_fair(key)
    }

    fn force_release(&self, name: &str, notice: Option<&str>) -> Invocation {
        force_release(name, notice)
    }
}

/// The fair lock's waiters: on one master its Redis queue orders every waiter, under
/// Redlock one waiter per client queues at a time (waiter/mod.rs invariant 8); a waiter
/// queues unless it tries once, is offered the lock one per task, and listens on its
/// own channel (a release wakes nobody on the shared one).
const POLICY: WaitPolicy = WaitPolicy {
    gate: Gate::Redlock,
    queue: Queue::Waiting,
    offers: Some(OfferPolicy::Fair),
    wakes_locally: false,
    ..WaitPolicy::CONSERVATIVE
};

/// A fair acquire of `holder` over `script` (fair_acquire.lua, or it guarded:
/// kinds/nonreentrant.rs).
pub(crate) fn acquire_call(
    script: &'static Script,
    (name, lease_ms, holder): (&str, u64, &str),
    params: &AcquireParams,
) -> Invocation {
    let mut inv = call(script, name);
    inv.arg(lease_ms)
        .arg(holder)
        .arg(params.stale_ms)
        .arg(if params.once { "0" } else { "1" })
        .arg(params.wait_ms);
    inv
}

/// drop.lua for `holder`'s lost hold of `name` (every kind but read-write).
pub(crate) fn drop_lost(name: &str, holder: &str) -> Invocation {
    let mut inv = call(&DROP, name);
    inv.arg(holder).arg("0");
    inv
}

/// A call of a script over the fair lock's keys: the lock, its queue, its deadlines,
/// its channel prefix and its liveness set (KEYS[1..5] of every fair script and of
/// drop.lua).
pub(crate) fn call(script: &'static Script, name: &str) -> Invocation {
    let mut inv = script.call();
    inv.key(name)
        .key(keys::queue(name))
        .key(keys::timeouts(name))
        .key(keys::channel(name))
        .key(keys::fair_alive(name));
    inv
}

/// Releases `from`'s last hold of a fair `name` and, when the queue head is one of
/// `offered` (holder id, lease in ms; all with wait time `wait_ms`), grants it the lock
/// in the same script.
pub(crate) async fn hand_over(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    wait_ms: u64,
    offered: &[(&str, u64)],
) -> Result<HandOver> {
    let mut inv = call(&FAIR_RELEASE, name);
    inv.arg("0").arg(from_lease_ms).arg(from).arg(wait_ms);
    for (holder, lease_ms) in offered {
        inv.arg(*holder).arg(*lease_ms);
    }
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    read_hand_over(m.addr(), offered, v)
}

fn read_hand_over(addr: &str, offered: &[(&str, u64)], v: Value) -> Result<HandOver> {
    let to = match &v {
        Value::Nil => return Ok(HandOver::NotHeld),
        Value::Int(0) => return Ok(HandOver::StillHeld),
        Value::Int(_) => return Ok(HandOver::Released),
        Value::BulkString(to) => offered.iter().position(|(h, _)| h.as_bytes() == to),
        _ => None,
    };
    to.map(HandOver::To)
        .ok_or_else(|| protocol(addr, "fair_hand_over", &v))
}

/// The force-release of a fair lock: deletes it whoever holds it and wakes the head.
pub(crate) fn force_release(name: &str, notice: Option<&str>) -> Invocation {
    let mut inv = call(&FAIR_FORCE, name);
    inv.arg("0");
    if let Some(notice) = notice {
        inv.arg(notice);
    }
    inv
}

/// Its part of an inspection (kinds/inspect.rs): the queue in order, each waiter with
/// its deadline.
/// A fair lock's listing: a lock's hash with a waiter queue, whose waiters are its
/// queue; its queue and timeout keys are parts of its layout.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::Fair,
    name: "fair",
    is: |st, _| listed::lock_hash(st) && !st.queue.is_empty(),
    part: |key| {
        key.starts_with("redisson_lock_queue:") || key.starts_with("redisson_lock_timeout:")
    },
    channels: listed::no_channel,
    holders: listed::hold_counts,
    queued: true,
};

pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| {
        pipe.cmd("LRANGE").arg(keys::queue(name)).arg(0).arg(-1);
        scores(pipe, keys::timeouts(name));
    },
    replies: 2,
    read: |v, st| {
        let deadlines = scored(&v[1], text);
        if let Value::Array(items) = &v[0] {
            st.queue = (items.iter().filter_map(text))
                .map(|w| {
                    let d = deadlines.iter().find(|(h, _)| *h == w).map(|(_, d)| *d);
                    (w, d)
                })
                .collect();
        }
    },
};
