//! The fenced lock (Redisson `RFencedLock`): a plain lock whose grants carry a token
//! from a counter (`fenced_acquire.lua`); under Redlock the largest token is written
//! back to a majority first (`fenced_sync.lua`, attempt.rs `confirm`). Released,
//! dropped and waited for as a plain lock.

use std::sync::Arc;
use std::sync::LazyLock;

use crate::engine::kinds::inspect::{int, Section};
use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::kinds::{fair, plain, AcquireParams, Protocol, ScriptOrBatch, WaitPolicy};
use crate::engine::masters::master::Master;
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{read_fenced, Acquire, Release};
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

static FENCED_ACQUIRE: LazyLock<Script> = lua!("fenced_acquire.lua");
static FENCED_SYNC: LazyLock<Script> = lua!("fenced_sync.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 2] {
    [&FENCED_ACQUIRE, &FENCED_SYNC]
}

/// Redisson `RFencedLock`.
pub(crate) struct Fenced;

impl Protocol for Fenced {
    fn label(&self) -> &'static str {
        "fenced"
    }

    fn listed(&self) -> &'static Listed {
        &LISTED
    }

    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        params: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let mut inv = FENCED_ACQUIRE.call();
        inv.key(&**name).key(keys::token(name));
        if params.redlock {
            inv.key(keys::token_epoch(name));
        }
        inv.arg(lease_ms).arg(&**holder);
        ScriptOrBatch::Script(inv, read_fenced)
    }

    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        plain::Plain.release(name, lease_ms, holder)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        fair::drop_lost(name, holder)
    }

    fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            local_shortcut: true,
            ..WaitPolicy::CONSERVATIVE
        }
    }

    fn force_release(&self, name: &str, notice: Option<&str>) -> Invocation {
        plain::force_release(name, notice)
    }
}

/// Raises the fencing counter of `name` to at least `token` and, if `holder` holds the
/// lock there, marks the master current (its epoch := its run_id); returns the counter.
/// Redlock only.
pub(crate) async fn sync(m: &Master, name: &str, holder: &str, token: u64) -> Result<u64> {
    let mut inv = FENCED_SYNC.call();
    inv.key(keys::token(name))
        .key(keys::token_epoch(name))
        .key(name)
        .arg(token)
        .arg(holder);
    let v = m.eval(Lane::Lock, &inv).await?;
    m.decode(v)
}

/// Its part of an inspection (kinds/inspect.rs): the fencing counter, if the name was
/// ever used as a fenced lock.
/// A fenced lock's listing: a lock's hash with a fencing counter (its token key, a
/// part of its layout).
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::Fenced,
    name: "fenced",
    is: |st, _| listed::lock_hash(st) && st.fencing_counter.is_some(),
    part: |key| key.starts_with("redisson_lock_token:"),
    channels: listed::key_channel,
    holders: listed::hold_counts,
    queued: false,
};

/// A leader election's listing (coordination/election.rs): its lock is a fenced lock
/// under `redlatch_election:{name}`, listed under the election's name with its leader
/// as holder.
pub(crate) static LISTED_ELECTION: Listed = Listed {
    kind: ListedKind::Election,
    name: "election",
    is: |st, election| election && st.key_type == "hash",
    part: listed::no_part,
    channels: listed::key_channel,
    holders: listed::hold_counts,
    queued: false,
};

pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| {
        pipe.cmd("GET").arg(keys::token(name));
    },
    replies: 1,
    read: |v, st| st.fencing_counter = int(&v[0]).map(|t| t.max(0) as u64),
};
