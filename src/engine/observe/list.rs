//! Listing a deployment (`Engine::list` and `Engine::waiting`, facade/observe.rs): scan,
//! classify, inspect, resolve, all within the call's one deadline.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{self, StreamExt};
use redis::Value;
use tokio::time::Instant;

use super::assemble::Found;
use super::classify::Candidate;
use super::listing::{Listing, QueuedWaiter, Unread};
use super::{assemble, classify, records, scan, waiters};
use crate::engine::kinds::{self, inspect};
use crate::engine::masters::master::Master;
use crate::error::{Error, Result};
use crate::keys::books::Books;
use crate::transport::{Lane, Request};

/// Names inspected at once.
const IN_FLIGHT: usize = 32;

/// Every lock, semaphore, latch and election whose name matches the glob `pattern`, on
/// every master of `masters`, read within `within` (`books`: where this client's
/// bookkeeping is): what could not be read by then is named in [`Listing::unread`].
pub(crate) async fn list(
    masters: &[Arc<Master>],
    books: &Books,
    pattern: &str,
    within: Duration,
) -> Result<Listing> {
    if pattern.is_empty() {
        return Err(Error::InvalidName("the pattern is empty".into()));
    }
    let deadline = Instant::now() + within;
    let patterns = scan_patterns(pattern, books);
    let patterns: Vec<&str> = patterns.iter().map(String::as_str).collect();
    let (keys, mut unread) = scan::keys(masters, &patterns, deadline).await;
    let ledger_keys: Vec<String> = (keys.iter())
        .filter(|k| books.ledger_owner(k).is_some())
        .cloned()
        .collect();
    let candidates: Vec<Candidate> = (keys.iter())
        .filter(|k| !books.owns(k))
        .filter_map(|k| classify::candidate(k, pattern))
        .collect();
    let total = candidates.len();
    let mut inspections = stream::iter(candidates)
        .map(|c| inspect_name(masters, c, deadline))
        .buffer_unordered(IN_FLIGHT);
    let (mut found, mut read) = (Vec::new(), 0);
    while let Ok(Some(next)) = tokio::time::timeout_at(deadline, inspections.next()).await {
        read += 1;
        found.extend(next);
    }
    if read < total {
        unread.push(Unread {
            master: "*".into(),
            error: format!(
                "the listing's deadline passed before {} of {total} names were read",
                total - read
            ),
        });
    }
    let ledgers = records::ledgers(masters, books, &ledger_keys, deadline).await;
    let mut uuids: HashSet<String> = (found.iter().flat_map(Found::ids))
        .filter_map(|id| records::parse_holder(id).map(|(uuid, _)| uuid.to_string()))
        .collect();
    // The waiters the ledgers name are resolved as holders are.
    uuids.extend(ledgers.waiting_clients().map(str::to_string));
    let records = records::records(masters, books, uuids.into_iter(), deadline).await;
    let mut locks: Vec<_> = found
        .iter()
        .map(|f| f.listing(&records, &ledgers))
        .collect();
    locks.sort_by(|a, b| a.name.cmp(&b.name).then(a.key.cmp(&b.key)));
    Ok(Listing {
        locks,
        incomplete: !unread.is_empty(),
        unread,
    })
}

/// The redlatch waiters of lock `name` on `masters`, named, for each master's entry of a
/// status: where `queues[i]` (master i's fair queue) is not empty, that queue in order;
/// else the waits the clients' ledgers (under `books`) record (the same on every entry).
/// Each is resolved against its client's record as a holder is; read within `within`.
pub(crate) async fn waiting(
    masters: &[Arc<Master>],
    books: &Books,
    name: &str,
    queues: &[Vec<(String, Option<i64>)>],
    within: Duration,
) -> Vec<Vec<QueuedWaiter>> {
    let deadline = Instant::now() + within;
    let keys: Vec<String> = match books.is_on() {
        true => {
            let pattern = books.ledger_pattern();
            let (keys, _) = scan::keys(masters, &[pattern.as_str()], deadline).await;
            keys.into_iter().collect()
        }
        false => Vec::new(),
    };
    let ledgers = records::ledgers(masters, books, &keys, deadline).await;
    let named = ledgers.waiters_of(name);
    let queued = queues.iter().flatten().map(|(id, _)| id.as_str());
    let uuids: HashSet<String> = (named.iter().map(|(id, _)| id.as_str()).chain(queued))
        .filter_map(|id| records::parse_holder(id).map(|(uuid, _)| uuid.to_string()))
        .collect();
    let records = records::records(masters, books, uuids.into_iter(), deadline).await;
    let by_ledger: Vec<QueuedWaiter> = (named.iter())
        .map(|(id, since)| assemble::waiter(id, None, Some(*since), &records))
        .collect();
    (queues.iter())
        .map(|queue| match queue.is_empty() {
            true => by_ledger.clone(),
            false => (queue.iter())
                .map(|(id, deadline)| {
                    let since = ledgers.waiting_since(id, name);
                    assemble::waiter(id, *deadline, since, &records)
                })
                .collect(),
        })
        .collect()
}

/// The `SCAN MATCH` patterns of a listing under `pattern`: the names, redlatch's own
/// keys (elections, jobs, registries) and the ledgers under this client's bookkeeping
/// prefix.
fn scan_patterns(pattern: &str, books: &Books) -> Vec<String> {
    if pattern == "*" {
        return vec!["*".into()];
    }
    let mut out = vec![pattern.to_string(), "redlatch_*".to_string()];
    if books.is_on() && !books.ledger_start().starts_with("redlatch_") {
        out.push(books.ledger_pattern());
    }
    out
}

/// What every master holds under one candidate's key, and its listeners; `None` when
/// it is no lock of any kind (or gone).
async fn inspect_name(masters: &[Arc<Master>], c: Candidate, deadline: Instant) -> Option<Found> {
    let reads = masters.iter().map(|m| state_on(m, &c.key, deadline));
    let states: Vec<inspect::State> = (join_all(reads).await.into_iter())
        .flatten()
        .filter(|st| st.key_type != "none")
        .collect();
    let kind = states
        .iter()
        .find_map(|st| classify::kind(st, c.election))?;
    let counts = masters
        .iter()
        .map(|m| waiters::count(m, kind, (&c.name, &c.key), deadline));
    let listeners = join_all(counts).await.into_iter().max().unwrap_or(0);
    Some(Found {
        name: c.name,
        key: c.key,
        kind,
        states,
        listeners,
    })
}

/// One master's state under `key` (every kind's layout, kinds/inspect.rs); `None` if
/// it could not be read by `deadline`.
async fn state_on(m: &Master, key: &str, deadline: Instant) -> Option<inspect::State> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return None;
    }
    let pipe = inspect::pipeline(&kinds::SECTIONS, key);
    let reply = m
        .link()
        .send(Lane::Side, left.min(m.timeout()), Request::Pipe(&pipe));
    let replies: Vec<Value> = redis::from_redis_value(reply.await.ok()?).ok()?;
    inspect::read(&kinds::SECTIONS, &replies).ok()
}
