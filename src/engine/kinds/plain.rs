//! The plain lock (Redisson `RLock`): acquires and releases go through the master's
//! group commit (masters/plain_ops.rs sends this kind's `SCRIPTS`: `acquire.lua`,
//! `release.lua` alone, `batch.lua` / `batch_node.lua` several at once); a release
//! may hand the lock to a waiting task of this client (`release.lua`'s receiver) or to
//! another client's registered waiter (`lua/pass_on.lua`); a waiter that stops waiting
//! leaves the registry (`unwait.lua`).

use std::sync::Arc;
use std::sync::LazyLock;

use redis::Value;

use crate::engine::kinds::inspect::{int, lease_left, text, Section};
use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::kinds::{fair, AcquireParams, OfferPolicy, Protocol, ScriptOrBatch, WaitPolicy};
use crate::engine::masters::master::Master;
use crate::engine::masters::plain_ops::{PlainOp, PlainScripts, Waiting};
use crate::engine::masters::replies::{typed, Acquire, HandOver, Release};
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

pub(crate) static ACQUIRE: LazyLock<Script> = lua!("acquire.lua");
pub(crate) static RELEASE: LazyLock<Script> = lua!("pass_on.lua", "release.lua");
pub(crate) static BATCH: LazyLock<Script> = lua!("pass_on.lua", "acquire_op.lua", "batch.lua");
pub(crate) static BATCH_NODE: LazyLock<Script> =
    lua!(cross_slot_writes "pass_on.lua", "acquire_op.lua", "batch_node.lua");
/// The scripts of the group commit's plain path (masters/plain_ops.rs), given to each
/// master when the engine starts (facade/mod.rs).
pub(crate) static SCRIPTS: PlainScripts = PlainScripts {
    acquire: &ACQUIRE,
    release: &RELEASE,
    batch: &BATCH,
    batch_node: &BATCH_NODE,
};
pub(crate) static UNWAIT: LazyLock<Script> = lua!("pass_on.lua", "unwait.lua");
pub(crate) static FORCE: LazyLock<Script> = lua!("tell_holders.lua", "force_release.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 6] {
    [&ACQUIRE, &RELEASE, &BATCH, &BATCH_NODE, &UNWAIT, &FORCE]
}

/// Redisson `RLock`.
pub(crate) struct Plain;

impl Protocol for Plain {
    fn label(&self) -> &'static str {
        "plain"
    }

    fn listed(&self) -> &'static Listed {
        &LISTED
    }

    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        _ask: &AcquireParams,
        waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        ScriptOrBatch::Batched(PlainOp {
            release: false,
            name: name.clone(),
            holder: holder.clone(),
            lease_ms,
            waiting,
        })
    }

    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        ScriptOrBatch::Batched(PlainOp {
            release: true,
            name: name.clone(),
            holder: holder.clone(),
            lease_ms,
            waiting: None,
        })
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        fair::drop_lost(name, holder)
    }

    fn policy(&self) -> WaitPolicy {
        POLICY
    }

    fn force_release(&self, name: &str, notice: Option<&str>) -> Invocation {
        force_release(name, notice)
    }
}

/// The plain lock's waiters: a majority suffices, local hand-overs to the gate holder,
/// the local-hold shortcut and the waiter registry.
const POLICY: WaitPolicy = WaitPolicy {
    majority_suffices: true,
    offers: Some(OfferPolicy::Plain),
    local_shortcut: true,
    registers: true,
    ..WaitPolicy::CONSERVATIVE
};

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

/// The force-release of a plain (or fenced) lock: deletes it whoever holds it and
/// passes it on.
pub(crate) fn force_release(name: &str, notice: Option<&str>) -> Invocation {
    let mut inv = FORCE.call();
    inv.key(name)
        .key(keys::waiters(name))
        .arg(keys::channel(name))
        .arg("0");
    if let Some(notice) = notice {
        inv.arg(notice);
    }
    inv
}

/// Its part of an inspection (kinds/inspect.rs): the key's type, its lease and the
/// holders of the lock hash (every hash-kept lock's: plain, fenced, fair, read-write).
/// A plain lock's listing (a spin or non-reentrant lock's too: one layout): a hash of
/// hold counts with a lease.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::Lock,
    name: "lock",
    is: |st, _| listed::lock_hash(st),
    part: listed::no_part,
    channels: listed::key_channel,
    holders: listed::hold_counts,
    queued: false,
};

pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| {
        pipe.cmd("TYPE").arg(name);
        pipe.cmd("PTTL").arg(name);
        pipe.cmd("HGETALL").arg(name);
    },
    replies: 3,
    read: |v, st| {
        st.key_type = text(&v[0]).unwrap_or_default();
        st.ttl = int(&v[1]).and_then(lease_left);
        if let Value::Array(items) = &v[2] {
            st.holders = items
                .chunks(2)
                .filter_map(|p| Some((text(&p[0])?, int(p.get(1)?)?.max(0) as u64)))
                .collect();
        }
    },
};
