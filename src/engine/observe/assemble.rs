//! One [`LockListing`] from what every master holds under a name (kinds/inspect.rs's
//! [`State`]s), its waiter counts, and the clients' records and ledgers.

use std::collections::HashMap;

use super::listing::{HolderInfo, ListedHolder, LockListing, QueuedWaiter};
use super::records::{parse_holder, Ledgers, Record};
use crate::engine::kinds::inspect::State;
use crate::engine::kinds::listed::{Holder, Listed};

/// What the masters said of one name, before records are resolved.
pub(super) struct Found {
    pub(super) name: String,
    pub(super) key: String,
    /// Its entry in the one list of kinds (kinds/listed.rs).
    pub(super) kind: &'static Listed,
    /// Each master's state where the key exists there.
    pub(super) states: Vec<State>,
    /// The most listeners any master counted.
    pub(super) listeners: u64,
}

impl Found {
    /// Every holder and queued waiter id, for their clients' records.
    pub(super) fn ids(&self) -> impl Iterator<Item = &str> {
        self.states.iter().flat_map(move |st| {
            let holders = holder_counts(self.kind, st)
                .into_iter()
                .map(|(id, _, _)| id);
            let queued = st.queue.iter().map(|(id, _)| id.as_str());
            holders.collect::<Vec<_>>().into_iter().chain(queued)
        })
    }

    /// The listing, holders and waiters resolved against `records` and `ledgers`.
    pub(super) fn listing(
        &self,
        records: &HashMap<String, Record>,
        ledgers: &Ledgers,
    ) -> LockListing {
        let mut holders: Vec<ListedHolder> = Vec::new();
        for st in &self.states {
            for (id, count, expires_at) in holder_counts(self.kind, st) {
                match holders.iter_mut().find(|h| h.holder.id == id) {
                    Some(h) => h.count = h.count.max(count),
                    None => holders.push(ListedHolder {
                        holder: HolderInfo {
                            id: id.to_string(),
                            acquired: ledgers.held_since(id, &self.name),
                            ..HolderInfo::default()
                        },
                        count,
                        expires_at,
                        ..ListedHolder::default()
                    }),
                }
            }
        }
        for h in &mut holders {
            resolve(h, records);
        }
        let queue = longest_queue(&self.states);
        let queue: Vec<QueuedWaiter> = (queue.iter())
            .map(|(id, deadline)| {
                let since = ledgers.waiting_since(id, &self.name);
                waiter(id, *deadline, since, records)
            })
            .collect();
        let (waiters, waiting) = match self.kind.queued {
            true => (queue.len() as u64, queue.clone()),
            false => {
                let named = ledgers.waiters_of(&self.name);
                let waiting = (named.iter())
                    .map(|(id, since)| waiter(id, None, Some(*since), records))
                    .collect();
                (self.listeners.max(ledgers.waiting_for(&self.name)), waiting)
            }
        };
        LockListing {
            name: self.name.clone(),
            kind: self.kind.kind,
            key: self.key.clone(),
            holders,
            ttl: self.states.iter().filter_map(|s| s.ttl).max(),
            waiters,
            waiting,
            queue,
            count: self.states.iter().find_map(|s| s.counter),
            mode: self.states.iter().find_map(|s| s.mode.clone()),
            fencing_counter: self.states.iter().filter_map(|s| s.fencing_counter).max(),
            masters: self.states.len(),
        }
    }
}

/// A waiter, resolved against its client's record as a holder is.
pub(super) fn waiter(
    id: &str,
    deadline_ms: Option<i64>,
    waiting_since: Option<i64>,
    records: &HashMap<String, Record>,
) -> QueuedWaiter {
    let record = parse_holder(id).and_then(|(uuid, _)| records.get(uuid));
    QueuedWaiter {
        id: id.to_string(),
        deadline_ms,
        waiting_since,
        host: record.and_then(|r| r.host.clone()),
        pid: record.and_then(|r| r.pid),
        app: record.and_then(|r| r.app.clone()),
    }
}

/// A client's record on a holder; a job's holder (ShedLock's value) names its host
/// and start.
fn resolve(h: &mut ListedHolder, records: &HashMap<String, Record>) {
    if let Some(job) = crate::engine::kinds::shedlock::parse(&h.holder.id) {
        h.holder.host = Some(job.host);
        h.holder.acquired = (job.since.duration_since(std::time::UNIX_EPOCH))
            .ok()
            .map(|d| d.as_millis() as i64);
        return;
    }
    let Some(r) = parse_holder(&h.holder.id).and_then(|(uuid, _)| records.get(uuid)) else {
        return;
    };
    h.record = true;
    let who = &mut h.holder;
    who.host = r.host.clone();
    who.pid = r.pid;
    who.app = r.app.clone();
    who.version = r.version.clone();
    who.since = r.since;
}

/// The queue of the master that has the longest (under Redlock each master keeps its
/// own).
fn longest_queue(states: &[State]) -> &[(String, Option<i64>)] {
    (states.iter().map(|s| s.queue.as_slice()))
        .max_by_key(|q| q.len())
        .unwrap_or(&[])
}

/// The holders a state names, with their counts and (a permit) expiry, as its kind's
/// entry reads them (a faster multi-lock's live holders with the number of values each
/// holds, an expirable semaphore's permits, else the hold counts).
fn holder_counts<'a>(kind: &Listed, st: &'a State) -> Vec<Holder<'a>> {
    (kind.holders)(st)
}
