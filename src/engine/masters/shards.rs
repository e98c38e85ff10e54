//! Grouping the items of one batched call by where they may travel together: by hash
//! slot ([`Transport::shard`]) for calls that declare their keys, by node
//! ([`Transport::node`]) for renewals. A single server is one group.

use futures_util::future::join_all;

use crate::error::Result;
use crate::transport::{BoxFuture, Transport};

/// Runs `call` once per group of `items` whose keys may share one script call
/// ([`Transport::shard`]: one hash slot on a cluster), concurrently, and returns one
/// result per item, in order. A single server is one group. Every group's call is polled once before this
/// returns Pending, so all are written in this poll (batch.rs invariant 4).
pub(crate) async fn by_shard<'a, T, R: Clone>(
    link: &'a dyn Transport,
    items: &'a [&'a T],
    key: impl Fn(&T) -> &str,
    call: impl Fn(&'a dyn Transport, Vec<&'a T>) -> BoxFuture<'a, Vec<Result<R>>>,
) -> Vec<Result<R>> {
    grouped(link, items, |i| link.shard(key(i).as_bytes()), call).await
}

/// Runs `call` once per group of `items` with the same `group` number, concurrently;
/// one result per item, in order (see [`by_shard`]).
pub(crate) async fn grouped<'a, T, R: Clone>(
    link: &'a dyn Transport,
    items: &'a [&'a T],
    group: impl Fn(&T) -> usize,
    call: impl Fn(&'a dyn Transport, Vec<&'a T>) -> BoxFuture<'a, Vec<Result<R>>>,
) -> Vec<Result<R>> {
    // One group (always, on a single server): no bookkeeping.
    let first = items.first().map(|i| group(i));
    if items.iter().all(|i| Some(group(i)) == first) {
        return call(link, items.to_vec()).await;
    }
    let shards: Vec<usize> = items.iter().map(|i| group(i)).collect();
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        match groups.iter_mut().find(|(s, _)| s == shard) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((*shard, vec![i])),
        }
    }
    let calls = groups.iter().map(|(_, idx)| {
        let group: Vec<&T> = idx.iter().map(|&i| items[i]).collect();
        call(link, group)
    });
    let replies = join_all(calls).await;
    let mut out: Vec<Option<Result<R>>> = vec![None; items.len()];
    for ((_, idx), replies) in groups.iter().zip(replies) {
        for (&i, r) in idx.iter().zip(replies) {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|r| r.expect("every item has a reply"))
        .collect()
}
