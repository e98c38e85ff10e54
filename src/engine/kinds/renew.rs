//! Renewal calls: the lock field renewal (`renew.lua`, one call per cluster node) and
//! the per-pair renewals of read holds and expirable permits ([`renew_pairs`], one call
//! per hash slot). A renewal the replicas did not acknowledge is not a renewal
//! (watchdog.rs invariant 6).

use std::sync::LazyLock;
use std::time::Duration;

use futures_util::future::join_all;
use redis::Value;

use crate::engine::masters::master::Master;
use crate::engine::masters::replies::{protocol, typed, unreplicated};
use crate::engine::masters::shards::{by_shard, grouped};
use crate::error::{Error, Result};
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

pub(crate) static RENEW: LazyLock<Script> = lua!(cross_slot "renew.lua");

/// Renews `(name, holder)` pairs to `lease_ms` with `script` (`ARGV[1]` the lease, then
/// what `add` declares per pair; the script answers 1 per pair still held), one call
/// per hash slot on a cluster ([`by_shard`]); one result per pair, in order. The
/// watchdog's renewal of read holds and of expirable-semaphore permits.
pub(crate) async fn renew_pairs(
    m: &Master,
    script: &'static Script,
    pairs: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
    add: fn(&mut Invocation, &str, &str),
) -> Vec<Result<bool>> {
    let items: Vec<&(&str, &str)> = pairs.iter().collect();
    by_shard(
        m.link(),
        &items,
        |p| p.0,
        |_, group| {
            Box::pin(async move {
                let mut inv = script.call();
                inv.arg(lease_ms);
                for (name, holder) in &group {
                    add(&mut inv, name, holder);
                }
                let first = group.first().map_or("", |p| p.0);
                let (reply, short) = match m.eval_renewal(timeout, &inv).await {
                    Err(e) => (Err(typed(first, e)), None),
                    Ok((v, short)) => (Ok(v), short),
                };
                let held = match reply {
                    Err(e) => Err(e),
                    Ok(v) => m.decode::<Vec<i64>>(v).and_then(|v| {
                        if v.len() == group.len() {
                            Ok(v)
                        } else {
                            Err(m.err(redis::RedisError::from((
                                redis::ErrorKind::Parse,
                                "unexpected script reply",
                                format!("{} answers for {} holds", v.len(), group.len()),
                            ))))
                        }
                    }),
                };
                // Renewed but not replicated: not a renewal (watchdog.rs invariant 6).
                match held {
                    Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
                    Ok(v) => (v.into_iter())
                        .map(|x| unreplicated(x == 1, &short))
                        .collect(),
                }
            })
        },
    )
    .await
}

/// Renews `(name, holder)` pairs to `lease_ms`; one answer per pair, true = still
/// held. On a cluster, one call per primary (the locks' names travel as arguments, so
/// one call may touch every slot the node serves); a lock the node no longer serves
/// (a slot moved since the map was read) is renewed alone, routed by its own name.
pub(crate) async fn renew(
    m: &Master,
    locks: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Vec<Result<bool>> {
    let items: Vec<&(&str, &str)> = locks.iter().collect();
    let link = m.link();
    grouped(
        link,
        &items,
        |l| link.node(l.0.as_bytes()),
        |_, group| {
            Box::pin(async move {
                let (answers, short) = match renew_group(m, &group, lease_ms, timeout).await {
                    Err(e) => return group.iter().map(|_| Err(e.clone())).collect(),
                    Ok(answers) => answers,
                };
                let elsewhere = group.iter().zip(&answers).filter(|(_, a)| a.is_none());
                let alone = join_all(elsewhere.map(|(l, _)| async move {
                    let (v, short) = renew_group(m, &[*l], lease_ms, timeout).await?;
                    let held = v[0].ok_or_else(|| protocol(m.addr(), "renew", &Value::Int(-1)))?;
                    unreplicated(held, &short)
                }))
                .await;
                let mut alone = alone.into_iter();
                answers
                    .into_iter()
                    .map(|a| match a {
                        Some(held) => unreplicated(held, &short),
                        None => alone.next().expect("one answer per lock renewed alone"),
                    })
                    .collect()
            })
        },
    )
    .await
}

/// One renew call for `locks` (all served by one node on a cluster), with one `WAIT`
/// for the node's replicas when renewals are synced: per lock, whether it is still
/// held, or `None` when the node does not serve it; and the error that makes the
/// renewals not count when the replicas did not acknowledge them.
async fn renew_group(
    m: &Master,
    locks: &[&(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Result<(Vec<Option<bool>>, Option<Error>)> {
    let first = locks.first().map_or("", |l| l.0);
    let mut inv = RENEW.call();
    inv.key(first).arg(lease_ms);
    for (name, holder) in locks {
        inv.arg(*name).arg(*holder);
    }
    let (v, short) = (m.eval_renewal(timeout, &inv).await).map_err(|e| typed(first, e))?;
    let v: Vec<i64> = m.decode(v)?;
    if v.len() != locks.len() {
        return Err(protocol(m.addr(), "renew", &Value::Int(v.len() as i64)));
    }
    let answers = v.into_iter().map(|x| (x >= 0).then_some(x == 1)).collect();
    Ok((answers, short))
}
