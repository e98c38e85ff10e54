//! Semaphores and count-down latches (Redisson `RSemaphore`,
//! `RPermitExpirableSemaphore`, `RCountDownLatch` layouts): one typed call per
//! `lua/sem_*.lua`, `lua/xsem_*.lua`, `lua/latch_*.lua` script. They run on one master
//! only: a counter has no majority protocol (docs/deployments.md).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Value;

use super::master::Master;
use super::scripts::{renew_pairs, typed};
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

static SEM_ACQUIRE: LazyLock<Script> = lua!("sem_acquire.lua");
static SEM_RELEASE: LazyLock<Script> = lua!("sem_release.lua");
static SEM_SET: LazyLock<Script> = lua!("sem_set.lua");
static SEM_DRAIN: LazyLock<Script> = lua!("sem_drain.lua");
static XSEM_ACQUIRE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_acquire.lua");
static XSEM_RELEASE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_release.lua");
static XSEM_RENEW: LazyLock<Script> = lua!("xsem_common.lua", "xsem_renew.lua");
static XSEM_AVAILABLE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_available.lua");
static XSEM_RELEASE_MANY: LazyLock<Script> = lua!("xsem_common.lua", "xsem_release_many.lua");
static XSEM_LEASE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_lease.lua");
static XSEM_SET: LazyLock<Script> = lua!("xsem_common.lua", "xsem_set.lua");
static LATCH_SET: LazyLock<Script> = lua!("latch_set.lua");
static LATCH_COUNT_DOWN: LazyLock<Script> = lua!("latch_count_down.lua");

/// These scripts, for [`super::scripts::all`].
pub(crate) fn all() -> [&'static LazyLock<Script>; 13] {
    [
        &SEM_ACQUIRE,
        &SEM_RELEASE,
        &SEM_SET,
        &SEM_DRAIN,
        &XSEM_RELEASE_MANY,
        &XSEM_LEASE,
        &XSEM_SET,
        &XSEM_ACQUIRE,
        &XSEM_RELEASE,
        &XSEM_RENEW,
        &XSEM_AVAILABLE,
        &LATCH_SET,
        &LATCH_COUNT_DOWN,
    ]
}

async fn run<T: redis::FromRedisValue>(m: &Master, name: &str, inv: &Invocation) -> Result<T> {
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

/// A permit id as Redisson stores it: its 16 bytes, from the 32 hex digits we show.
pub(crate) fn id_bytes(id: &str) -> Vec<u8> {
    (0..id.len() / 2)
        .filter_map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn xsem_call(script: &'static Script, name: &str) -> Invocation {
    let mut inv = script.call();
    inv.key(name)
        .key(keys::permit_timeouts(name))
        .key(keys::sem_channel(name));
    inv
}

/// Takes one permit per id (distinct, at least one), all or none, for `lease_ms`:
/// `Ok(Ok(()))` taken, `Ok(Err(wait))` too few available, `wait` = until the first
/// acquired permit expires (`None`: none will).
pub(crate) async fn take_permits(
    m: &Master,
    name: &str,
    ids: &[Arc<str>],
    lease_ms: u64,
) -> Result<std::result::Result<(), Option<Duration>>> {
    let mut inv = xsem_call(&XSEM_ACQUIRE, name);
    inv.arg(lease_ms);
    for id in ids {
        inv.arg(id_bytes(id));
    }
    let (taken, ms): (i64, i64) = run(m, name, &inv).await?;
    Ok(match (taken, ms) {
        (1, _) => Ok(()),
        (_, ms) if ms > 0 => Err(Some(Duration::from_millis(ms as u64))),
        _ => Err(None),
    })
}

/// Gives the permit `id` back; true if it was held (not released, not expired).
pub(crate) async fn return_permit(m: &Master, name: &str, id: &str) -> Result<bool> {
    let mut inv = xsem_call(&XSEM_RELEASE, name);
    inv.arg(id_bytes(id));
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Gives back every permit of `ids` (distinct, at least one) or none: the number
/// given back, `ids.len()` or 0 when any of them was not held.
pub(crate) async fn return_permits(m: &Master, name: &str, ids: &[&str]) -> Result<i64> {
    let mut inv = xsem_call(&XSEM_RELEASE_MANY, name);
    for id in ids {
        inv.arg(id_bytes(id));
    }
    run(m, name, &inv).await
}

/// A permit's lease left: `Ok(Some(Some(d)))` expires in `d`, `Ok(Some(None))` never
/// expires on its own (a Redisson permit without lease), `Ok(None)` not held.
pub(crate) async fn permit_lease(
    m: &Master,
    name: &str,
    id: &str,
) -> Result<Option<Option<Duration>>> {
    let mut inv = xsem_call(&XSEM_LEASE, name);
    inv.arg(id_bytes(id)).arg("get");
    Ok(match run::<i64>(m, name, &inv).await? {
        -1 => Some(None),
        ms if ms > 0 => Some(Some(Duration::from_millis(ms as u64))),
        _ => None,
    })
}

/// Sets an expirable semaphore's permits in all (available and acquired) to `total`.
pub(crate) async fn set_total(m: &Master, name: &str, total: i64) -> Result<()> {
    let mut inv = xsem_call(&XSEM_SET, name);
    inv.arg(total);
    run::<i64>(m, name, &inv).await.map(drop)
}

/// Makes the permit `id` expire `lease_ms` from now; true if it was held.
pub(crate) async fn set_permit_lease(
    m: &Master,
    name: &str,
    id: &str,
    lease_ms: u64,
) -> Result<bool> {
    let mut inv = xsem_call(&XSEM_LEASE, name);
    inv.arg(id_bytes(id)).arg("set").arg(lease_ms);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Renews `(semaphore, permit id)` pairs to `lease_ms`; one result per pair (true =
/// still held), one script call per hash slot on a cluster (scripts::renew_pairs).
pub(crate) async fn renew_permits(
    m: &Master,
    pairs: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Vec<Result<bool>> {
    renew_pairs(m, &XSEM_RENEW, pairs, lease_ms, timeout, |inv, name, id| {
        inv.key(keys::permit_timeouts(name)).arg(id_bytes(id));
    })
    .await
}

/// `(available, acquired)` permits of an expirable semaphore, expired ones reclaimed.
pub(crate) async fn permits_state(m: &Master, name: &str) -> Result<(i64, i64)> {
    run(m, name, &xsem_call(&XSEM_AVAILABLE, name)).await
}

/// Sets the latch's count if it is not set; true if set.
pub(crate) async fn latch_set(m: &Master, name: &str, count: i64) -> Result<bool> {
    let mut inv = LATCH_SET.call();
    inv.key(name)
        .key(keys::latch_channel(name))
        .arg("1")
        .arg(count);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Counts the latch down; the count left.
pub(crate) async fn latch_count_down(m: &Master, name: &str) -> Result<i64> {
    let mut inv = LATCH_COUNT_DOWN.call();
    inv.key(name).key(keys::latch_channel(name)).arg("0");
    Ok(run::<i64>(m, name, &inv).await?.max(0))
}

/// The latch's count (0 when not set).
pub(crate) async fn latch_count(m: &Master, name: &str) -> Result<i64> {
    let v: Value = m
        .query(redis::cmd("GET").arg(name))
        .await
        .map_err(|e| typed(name, e))?;
    let n: Option<i64> = m.decode(v)?;
    Ok(n.unwrap_or(0).max(0))
}
