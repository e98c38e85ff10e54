//! The read-write lock's layout and scripts (`lua/rw_*.lua`, Redisson's
//! `RReadWriteLock`), shared by its two sides, whose protocols are kinds/read.rs and
//! kinds/write.rs. The engine runs a read or write lock like any other lock (the
//! waiter, attempts, holds, watchdog); this file is what differs on the wire.
//!
//! * Readers hold with their task's holder id `<uuid>:<n>`, writers with
//!   `<uuid>:<n>:write` ([`writer`]), so one holder may hold both (a downgrade).
//! * Every read hold has its own timeout key ([`keys::rw_timeout_prefix`]); the
//!   watchdog renews a reader's keys with [`renew_reads`], a writer's field with the
//!   plain `renew.lua`.
//! * Waiting writers may record an intent that keeps new readers out (writer preference,
//!   `lua/rw_write_acquire.lua`); a writer that stops waiting removes it ([`leave_call`]).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Value;

use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::kinds::renew::renew_pairs;
use crate::engine::masters::master::Master;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static READ_ACQUIRE: LazyLock<Script> = lua!("rw_common.lua", "rw_read_acquire.lua");
static WRITE_ACQUIRE: LazyLock<Script> = lua!("rw_common.lua", "rw_write_acquire.lua");
static READ_RELEASE: LazyLock<Script> = lua!("rw_common.lua", "rw_read_release.lua");
static WRITE_RELEASE: LazyLock<Script> = lua!("rw_common.lua", "rw_write_release.lua");
static DROP: LazyLock<Script> = lua!("rw_common.lua", "rw_drop.lua");
static RENEW_READS: LazyLock<Script> = lua!("rw_renew.lua");
static FORCE: LazyLock<Script> = lua!("rw_force_release.lua");
static LEAVE: LazyLock<Script> = lua!("rw_leave.lua");

/// Redisson's `UNLOCK_MESSAGE`, published when the last reader leaves.
const UNLOCK: &str = "0";
/// Redisson's `READ_UNLOCK_MESSAGE`, published when a writer leaves: every waiter retries.
const READ_UNLOCK: &str = "1";

/// A read-write lock's listing (both sides: one layout): a hash with its mode; each
/// reader's timeout key is a part of its layout.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::ReadWrite,
    name: "read_write",
    is: |st, _| st.key_type == "hash" && st.mode.is_some(),
    part: |key| key.contains(":rwlock_timeout"),
    channels: |name, _| vec![keys::rw_channel(name)],
    holders: listed::hold_counts,
    queued: false,
};

/// The read-write lock's scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn all() -> [&'static LazyLock<Script>; 8] {
    [
        &READ_ACQUIRE,
        &WRITE_ACQUIRE,
        &READ_RELEASE,
        &WRITE_RELEASE,
        &DROP,
        &RENEW_READS,
        &FORCE,
        &LEAVE,
    ]
}

/// The writer id of the task whose reader id is `reader` (Redisson's `getWriteLockName`).
pub(crate) fn writer(reader: &str) -> Arc<str> {
    format!("{reader}:write").into()
}

/// True for a writer id.
pub(crate) fn is_writer(holder: &str) -> bool {
    holder.ends_with(":write")
}

/// The acquire call of a reader (`write` false) or writer, with its KEYS and ARGV;
/// `intent_ms`: a refused writer records an intent that keeps new readers out this
/// long (0: none).
pub(crate) fn acquire_call(
    name: &str,
    lease_ms: u64,
    holder: &str,
    write: bool,
    intent_ms: u64,
) -> Invocation {
    if write {
        let mut inv = WRITE_ACQUIRE.call();
        inv.key(name)
            .key(keys::rw_writers(name))
            .arg(lease_ms)
            .arg(holder)
            .arg(intent_ms);
        inv
    } else {
        let mut inv = READ_ACQUIRE.call();
        inv.key(name)
            .key(keys::rw_timeout_prefix(name, holder))
            .key(keys::rw_writers(name))
            .arg(lease_ms)
            .arg(holder)
            .arg(&*writer(holder));
        inv
    }
}

/// The release of one read or write hold of `holder` (a writer id for the write lock).
pub(crate) fn release_call(name: &str, lease_ms: u64, holder: &str) -> Invocation {
    if is_writer(holder) {
        let mut inv = WRITE_RELEASE.call();
        inv.key(name)
            .key(keys::rw_channel(name))
            .key(keys::rw_tag(name))
            .arg(READ_UNLOCK)
            .arg(lease_ms)
            .arg(holder);
        inv
    } else {
        let mut inv = READ_RELEASE.call();
        inv.key(name)
            .key(keys::rw_channel(name))
            .key(keys::rw_timeout_prefix(name, holder))
            .key(keys::rw_tag(name))
            .arg(UNLOCK)
            .arg(holder);
        inv
    }
}

/// Renews read holds `(name, reader id)` to `lease_ms`; one result per pair (true =
/// still held), one script call per hash slot on a cluster ([`renew_pairs`]).
pub(crate) async fn renew_reads(
    m: &Master,
    pairs: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Vec<Result<bool>> {
    renew_pairs(
        m,
        &RENEW_READS,
        pairs,
        lease_ms,
        timeout,
        |inv, name, holder| {
            inv.key(name)
                .key(keys::rw_timeout_prefix(name, holder))
                .arg(holder);
        },
    )
    .await
}

/// Removes a lost hold of `holder` (reader or writer id), waking the waiters if that
/// frees the lock; answers 1 if there was one.
pub(crate) fn drop_call(name: &str, holder: &str) -> Invocation {
    let mut inv = DROP.call();
    inv.key(name)
        .key(keys::rw_channel(name))
        .key(keys::rw_timeout_prefix(name, holder))
        .key(keys::rw_tag(name))
        .arg(holder)
        .arg(READ_UNLOCK);
    inv
}

/// Deletes the lock if it is in write mode (`write`) or read mode, whoever holds it,
/// and wakes its waiters; answers 1 if it was deleted.
pub(crate) fn force_call(name: &str, write: bool) -> Invocation {
    let mut inv = FORCE.call();
    inv.key(name).key(keys::rw_channel(name));
    if write {
        inv.arg("write").arg(READ_UNLOCK);
    } else {
        inv.arg("read").arg(UNLOCK);
    }
    inv
}

/// A waiting writer gives up: removes its intent and wakes the readers it kept out;
/// answers 1 if there was one.
pub(crate) fn leave_call(name: &str, writer: &str) -> Invocation {
    let mut inv = LEAVE.call();
    inv.key(keys::rw_writers(name))
        .key(keys::rw_channel(name))
        .arg(writer)
        .arg(READ_UNLOCK);
    inv
}

/// What a read-write lock's hash says: its mode (`None` when free) and holder fields.
pub(crate) fn parse_state(v: &Value) -> (Option<String>, usize) {
    let pairs: Vec<(&Value, &Value)> = match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((&p[0], p.get(1)?)))
            .collect(),
        Value::Map(items) => items.iter().map(|(k, v)| (k, v)).collect(),
        _ => return (None, 0),
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    let mut mode = None;
    let mut holders = 0;
    for (field, value) in pairs {
        match text(field).as_deref() {
            Some("mode") => mode = text(value),
            Some(_) => holders += 1,
            None => {}
        }
    }
    (mode, holders)
}
