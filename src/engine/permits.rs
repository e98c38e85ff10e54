//! Semaphores and count-down latches (Redisson `RSemaphore`,
//! `RPermitExpirableSemaphore`, `RCountDownLatch` layouts): one typed call per
//! `lua/sem_*.lua`, `lua/xsem_*.lua`, `lua/latch_*.lua` script. They run on one master
//! only: a counter has no majority protocol (docs/deployments.md).

use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;

use super::master::Master;
use super::renew::renew_pairs;
use super::wire::typed;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

static SEM_ACQUIRE: LazyLock<Script> = lua!("sem_acquire.lua");
static SEM_RELEASE: LazyLock<Script> = lua!("sem_release.lua");
static SEM_SET: LazyLock<Script> = lua!("sem_set.lua");
static XSEM_ACQUIRE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_acquire.lua");
static XSEM_RELEASE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_release.lua");
static XSEM_RENEW: LazyLock<Script> = lua!("xsem_common.lua", "xsem_renew.lua");
static XSEM_AVAILABLE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_available.lua");
static LATCH_SET: LazyLock<Script> = lua!("latch_set.lua");
static LATCH_COUNT_DOWN: LazyLock<Script> = lua!("latch_count_down.lua");

/// These scripts, for the catalogue (catalogue.rs).
pub(crate) fn all() -> [&'static LazyLock<Script>; 9] {
    [
        &SEM_ACQUIRE,
        &SEM_RELEASE,
        &SEM_SET,
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
pub(crate) async fn acquire(m: &Master, name: &str, permits: u32) -> Result<bool> {
    let mut inv = SEM_ACQUIRE.call();
    inv.key(name).arg(permits);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Gives `permits` back; the new count.
pub(crate) async fn release(m: &Master, name: &str, permits: u32) -> Result<i64> {
    let mut inv = SEM_RELEASE.call();
    inv.key(name).key(keys::sem_channel(name)).arg(permits);
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

/// Sets, sets if absent, or adds to the permits; true if the counter was written.
pub(crate) async fn set(m: &Master, name: &str, how: Set, permits: i64) -> Result<bool> {
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

/// Takes one permit under `id` for `lease_ms`: `Ok(Ok(()))` taken, `Ok(Err(wait))` none
/// available, `wait` = until the first acquired permit expires (`None`: none will).
pub(crate) async fn take_permit(
    m: &Master,
    name: &str,
    id: &str,
    lease_ms: u64,
) -> Result<std::result::Result<(), Option<Duration>>> {
    let mut inv = xsem_call(&XSEM_ACQUIRE, name);
    inv.arg(lease_ms).arg(id_bytes(id));
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

/// Renews `(semaphore, permit id)` pairs to `lease_ms`; one result per pair (true =
/// still held), one script call per hash slot on a cluster ([`renew_pairs`]).
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
pub(crate) async fn latch_set(m: &Master, name: &str, count: u64) -> Result<bool> {
    let mut inv = LATCH_SET.call();
    inv.key(name)
        .key(keys::latch_channel(name))
        .arg("1")
        .arg(count);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Counts the latch down; the count left.
pub(crate) async fn latch_count_down(m: &Master, name: &str) -> Result<u64> {
    let mut inv = LATCH_COUNT_DOWN.call();
    inv.key(name).key(keys::latch_channel(name)).arg("0");
    Ok(run::<i64>(m, name, &inv).await?.max(0) as u64)
}

/// The latch's count (0 when not set).
pub(crate) async fn latch_count(m: &Master, name: &str) -> Result<u64> {
    let v: Value = m
        .query(redis::cmd("GET").arg(name))
        .await
        .map_err(|e| typed(name, e))?;
    let n: Option<i64> = m.decode(v)?;
    Ok(n.unwrap_or(0).max(0) as u64)
}
