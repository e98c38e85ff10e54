//! Counting a name's waiters from pub/sub (lua/observe_waiters.lua): the connections
//! subscribed to the channels its kind's waiters listen on, on the primary serving it
//! (on a Redis 7 cluster: sharded subscribers plus classic ones that are not redlatch's
//! own twins, transport/cluster/sharded.rs invariant 4).

use std::sync::LazyLock;

use tokio::time::Instant;

use super::classify;
use crate::engine::kinds::inspect::State;
use crate::engine::kinds::listed::Listed;
use crate::engine::masters::master::Master;
use crate::transport::script::lua;
use crate::transport::{Lane, Request, Script};

static WAITERS: LazyLock<Script> = lua!("observe_waiters.lua");

/// These scripts, for the catalogue (catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 1] {
    [&WAITERS]
}

/// The connections listening for `name`'s releases on `m`, within `deadline`; 0 if
/// they cannot be counted.
pub(super) async fn count(
    m: &Master,
    kind: &Listed,
    (name, key): (&str, &str),
    deadline: Instant,
) -> u64 {
    // Where its kind's waiters listen (kinds/listed.rs): none for a fair lock (each
    // waiter listens on its own, its queue says who waits) or a polling kind.
    let channels = (kind.channels)(name, key);
    let left = deadline.saturating_duration_since(Instant::now());
    if channels.is_empty() || left.is_zero() {
        return 0;
    }
    let mut inv = WAITERS.call();
    inv.key(key);
    for channel in &channels {
        inv.arg(channel);
    }
    let reply = m
        .link()
        .send(Lane::Side, left.min(m.timeout()), Request::Eval(&inv))
        .await;
    let counts: Vec<i64> = reply
        .ok()
        .and_then(|v| redis::from_redis_value(v).ok())
        .unwrap_or_default();
    counts.into_iter().map(|n| n.max(0) as u64).sum()
}

/// The connections listening for releases of `key` on `m`, as the kind its state
/// shows has its waiters listen (`Lock::status`); 0 for none or no lock.
pub(crate) async fn listeners(m: &Master, key: &str, st: &State) -> u64 {
    match classify::kind(st, false) {
        Some(kind) => count(m, kind, (key, key), Instant::now() + m.timeout()).await,
        None => 0,
    }
}
