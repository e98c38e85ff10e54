//! The count-down latch (Redisson `RCountDownLatch`, `lua/latch_*.lua`), on one
//! master: set once, counted down, waited for on its channel (`keys::latch_channel`) until it
//! reaches zero; nothing is held or renewed.

use std::sync::LazyLock;

use redis::Value;

use crate::engine::kinds::semaphore::run;
use crate::engine::masters::master::Master;
use crate::engine::masters::replies::typed;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::Script;

pub(crate) static LATCH_SET: LazyLock<Script> = lua!("latch_set.lua");
pub(crate) static LATCH_COUNT_DOWN: LazyLock<Script> = lua!("latch_count_down.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 2] {
    [&LATCH_SET, &LATCH_COUNT_DOWN]
}

/// Sets the latch's count if it is not set; true if set.
pub(crate) async fn set(m: &Master, name: &str, count: i64) -> Result<bool> {
    let mut inv = LATCH_SET.call();
    inv.key(name)
        .key(keys::latch_channel(name))
        .arg("1")
        .arg(count);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Counts the latch down; the count left.
pub(crate) async fn count_down(m: &Master, name: &str) -> Result<i64> {
    let mut inv = LATCH_COUNT_DOWN.call();
    inv.key(name).key(keys::latch_channel(name)).arg("0");
    Ok(run::<i64>(m, name, &inv).await?.max(0))
}

/// The latch's count (0 when not set).
pub(crate) async fn count(m: &Master, name: &str) -> Result<i64> {
    let v: Value = m
        .query(redis::cmd("GET").arg(name))
        .await
        .map_err(|e| typed(name, e))?;
    let n: Option<i64> = m.decode(v)?;
    Ok(n.unwrap_or(0).max(0))
}
