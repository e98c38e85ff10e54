//! The semaphore (Redisson `RSemaphore`): a counter of permits (`lua/sem_*.lua`) on one
//! master (a counter has no majority protocol, docs/deployments.md). Acquiring takes
//! permits if enough are there; a waiter listens on the semaphore's channel
//! (`keys::sem_channel`), where a release or a raise publishes; nothing is renewed.

use std::sync::LazyLock;

use crate::engine::kinds::inspect::{int, Section};
use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::masters::master::Master;
use crate::engine::masters::replies::typed;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

pub(crate) static SEM_ACQUIRE: LazyLock<Script> = lua!("sem_acquire.lua");
pub(crate) static SEM_RELEASE: LazyLock<Script> = lua!("sem_release.lua");
pub(crate) static SEM_SET: LazyLock<Script> = lua!("sem_set.lua");
pub(crate) static SEM_DRAIN: LazyLock<Script> = lua!("sem_drain.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 4] {
    [&SEM_ACQUIRE, &SEM_RELEASE, &SEM_SET, &SEM_DRAIN]
}

/// Runs a counter script on the lock lane and decodes its reply.
pub(crate) async fn run<T: redis::FromRedisValue>(
    m: &Master,
    name: &str,
    inv: &Invocation,
) -> Result<T> {
    let v = m.eval(Lane::Lock, inv).await.map_err(|e| typed(name, e))?;
    m.decode(v)
}

/// Takes `permits` if available; true if taken.
pub(crate) async fn acquire(m: &Master, name: &str, permits: i64) -> Result<bool> {
    let mut inv = SEM_ACQUIRE.call();
    inv.key(name).arg(permits);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Gives `permits` back; the new count. With `if_exists`, only into an existing
/// counter (`None`: there was none, nothing changed).
pub(crate) async fn release(
    m: &Master,
    name: &str,
    permits: i64,
    if_exists: bool,
) -> Result<Option<i64>> {
    let mut inv = SEM_RELEASE.call();
    inv.key(name)
        .key(keys::sem_channel(name))
        .arg(permits)
        .arg(if if_exists { "exists" } else { "any" });
    run(m, name, &inv).await
}

/// Takes every available permit; how many there were (0 without a counter).
pub(crate) async fn drain(m: &Master, name: &str) -> Result<i64> {
    let mut inv = SEM_DRAIN.call();
    inv.key(name);
    run(m, name, &inv).await
}

/// How [`set`] changes the counter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Set {
    /// Whatever is there.
    Always,
    /// Only when the semaphore does not exist.
    IfAbsent,
    /// Add to what is there.
    Add,
}

/// Sets, sets if absent (then with a time to live of `ttl_ms` if given), or adds to
/// the permits; true if the counter was written.
pub(crate) async fn set(
    m: &Master,
    name: &str,
    how: Set,
    permits: i64,
    ttl_ms: Option<u64>,
) -> Result<bool> {
    let mut inv = SEM_SET.call();
    let how = match how {
        Set::Always => "set",
        Set::IfAbsent => "try",
        Set::Add => "add",
    };
    inv.key(name)
        .key(keys::sem_channel(name))
        .arg(how)
        .arg(permits);
    if let Some(ttl) = ttl_ms {
        inv.arg(ttl);
    }
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// The available permits (0 when the semaphore does not exist).
pub(crate) async fn available(m: &Master, name: &str) -> Result<i64> {
    let v: Option<i64> = m
        .query(redis::cmd("GET").arg(name))
        .await
        .map_err(|e| typed(name, e))?;
    Ok(v.unwrap_or(0))
}

/// Its part of an inspection (kinds/inspect.rs): the value of a string key, a
/// semaphore's available permits or a latch's count (the same layout).
/// A semaphore's or a count-down latch's listing (kinds/latch.rs: one layout, a
/// number): a counter, with no holder; its waiters listen on both kinds' channels.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::Counter,
    name: "counter",
    is: |st, _| st.key_type == "string" && st.counter.is_some(),
    part: listed::no_part,
    channels: |name, _| vec![keys::sem_channel(name), keys::latch_channel(name)],
    holders: listed::hold_counts,
    queued: false,
};

pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| {
        pipe.cmd("GET").arg(name);
    },
    replies: 1,
    read: |v, st| st.counter = (st.key_type == "string").then(|| int(&v[0])).flatten(),
};
