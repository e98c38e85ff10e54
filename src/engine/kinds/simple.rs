//! The simple lock: the single-key lock of Redis's "Distributed Locks with Redis" page
//! and of the Redlock reference clients (redsync, node-redlock, redis-py's `Lock`,
//! rslock), so a Rust service and Go, Node or Python services that lock with them
//! exclude each other on the same names. The key is a string holding the holder's
//! token: acquire is `SET name token NX PX lease` (`lua/simple_acquire.lua`), release
//! and dropping a lost hold compare-and-delete (`lua/simple_release.lua`), the watchdog
//! compare-and-pexpires (`lua/simple_renew.lua`). Redlock over several masters is the
//! engine's fan-out and majority, as for every kind.
//!
//! The reference clients' wire has no channel: they poll after a retry delay. This
//! kind's waiters poll too, with a back-off the user sets (`Client::simple_lock_with`,
//! engine/acquire/spin_wait.rs), and listen on a channel beside the key
//! ([`keys::simple_channel`]): a redlatch release (and force-unlock) publishes `"0"`
//! there when anyone listens, so a redlatch waiter takes a lock a redlatch holder gave
//! back at once, and a foreign holder's release is seen at the next poll. Foreign
//! clients listen on no such channel. It is not
//! reentrant: the value is one holder's token, and a second acquisition by the holder
//! is refused with [`Error::Reentry`] (the reference clients would wait for themselves
//! until the lease ran out).

use std::sync::Arc;
use std::sync::LazyLock;

use redis::Value;

use crate::engine::kinds::inspect::{text, Section};
use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::kinds::{
    AcquireParams, PairRenewal, Probe, Protocol, Renewal, ScriptOrBatch, Wait, WaitPolicy,
};
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{int, protocol, read_acquire, Acquire, Release};
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static ACQUIRE: LazyLock<Script> = lua!("simple_acquire.lua");
static RELEASE: LazyLock<Script> = lua!("simple_release.lua");
static RENEW: LazyLock<Script> = lua!("simple_renew.lua");
static FORCE: LazyLock<Script> = lua!("simple_force_release.lua");

/// These scripts, for the catalogue (catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 4] {
    [&ACQUIRE, &RELEASE, &RENEW, &FORCE]
}

/// The status `lua/simple_acquire.lua` answers when the token holds the lock already.
const REACQUIRE: i64 = 4;

/// The watchdog's compare-and-pexpire, many locks of a slot per call.
static RENEWAL: PairRenewal = PairRenewal {
    script: &RENEW,
    add: |inv, name, holder| {
        inv.key(name).arg(holder);
    },
};

/// The Redlock reference clients' lock (`SET NX PX`, compare-and-delete).
pub(crate) struct Simple;

/// An acquire reply, a second acquisition by the holder typed as [`Error::Reentry`].
fn read(addr: &str, name: &str, v: Value) -> Result<Acquire> {
    if let Value::Array(items) = &v
        && items.first().and_then(int) == Some(REACQUIRE)
    {
        return Err(Error::Reentry {
            name: name.to_string(),
        });
    }
    read_acquire(addr, name, v)
}

/// simple_release.lua's 1 (deleted) or 0 (not held).
fn read_release(addr: &str, _name: &str, v: Value) -> Result<Release> {
    match int(&v) {
        Some(1) => Ok(Release::Released),
        Some(0) => Ok(Release::NotHeld),
        _ => Err(protocol(addr, "release", &v)),
    }
}

impl Protocol for Simple {
    fn label(&self) -> &'static str {
        "simple"
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
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let mut inv = ACQUIRE.call();
        inv.key(&**name).arg(lease_ms).arg(&**holder);
        ScriptOrBatch::Script(inv, read)
    }

    /// Its waiters' wake channel, published on by its releases.
    fn channel(&self, name: &str) -> String {
        keys::simple_channel(name)
    }

    /// Compare-and-delete: a hold count is always 1, so it frees the lock.
    fn release(
        &self,
        name: &Arc<str>,
        _lease_ms: u64,
        holder: &Arc<str>,
    ) -> ScriptOrBatch<Release> {
        ScriptOrBatch::Script(drop_lost(name, holder), read_release)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        drop_lost(name, holder)
    }

    /// Polls with a back-off, woken early by a redlatch release (here at once, elsewhere
    /// by its message); a majority suffices; not reentrant.
    fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            wait: Wait::SpinWoken,
            majority_suffices: true,
            wakes_locally: true,
            reentrant: false,
            ..WaitPolicy::CONSERVATIVE
        }
    }

    fn renewal(&self) -> Renewal {
        Renewal::Pairs(&RENEWAL)
    }

    fn probe(&self) -> Probe {
        Probe::Key("string")
    }

    /// 1 if the key holds the holder's token, else 0.
    fn hold_query(&self, name: &str, _holder: &str) -> (redis::Cmd, fn(&Value, &str) -> u32) {
        let mut cmd = redis::cmd("GET");
        cmd.arg(name);
        (cmd, |v, holder| {
            u32::from(text(v).as_deref() == Some(holder))
        })
    }

    fn force_release(&self, name: &str, _notice: Option<&str>) -> Invocation {
        let mut inv = FORCE.call();
        inv.key(name).arg(keys::simple_channel(name));
        inv
    }
}

/// The compare-and-delete of `holder`'s token (a release, or a lost hold dropped).
fn drop_lost(name: &str, holder: &str) -> Invocation {
    let mut inv = RELEASE.call();
    inv.key(name).arg(holder).arg(keys::simple_channel(name));
    inv
}

/// Its part of an inspection (kinds/inspect.rs): a string key with a lease holds its
/// holder's token (a counter's value is a number, and stays the counter's; a string
/// without expiry is nobody's lock).
/// A simple lock's listing: a string holding its holder's token, with a lease
/// (waiters poll: no channel).
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::Simple,
    name: "simple",
    is: |st, _| st.key_type == "string" && !st.holders.is_empty(),
    part: listed::no_part,
    channels: listed::no_channel,
    holders: listed::hold_counts,
    queued: false,
};

pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| {
        pipe.cmd("GET").arg(name);
    },
    replies: 1,
    read: |v, st| {
        if st.key_type == "string"
            && st.ttl.is_some()
            && let Some(token) = text(&v[0]).filter(|t| t.parse::<f64>().is_err())
        {
            st.holders = vec![(token, 1)];
        }
    },
};
