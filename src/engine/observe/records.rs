//! Who holders and waiters are: each redlatch client's record
//! (`redlatch_client:{<uuid>}`, a hash of `host`, `pid`, `app`, `version`, `since`) and
//! ledger (`redlatch_ledger:{<uuid>}`, fields `h|<n>|<lock name>` -> acquired at and
//! `w|<n>|<lock name>` -> waiting since, unix ms), where `<uuid>:<n>` is the holder id a
//! lock stores. A Redisson (Java) holder, or a client that is gone, has neither.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::join_all;
use tokio::time::Instant;

use crate::engine::masters::master::Master;
use crate::keys::books::Books;
use crate::transport::{Lane, Request};

/// The client uuid and hold number of a holder id `uuid:n` (`uuid:n:write`).
pub(super) fn parse_holder(id: &str) -> Option<(&str, &str)> {
    let mut parts = id.splitn(3, ':');
    let (uuid, n) = (parts.next()?, parts.next()?);
    (!uuid.is_empty() && !n.is_empty()).then_some((uuid, n))
}

/// A client's record.
#[derive(Clone, Debug, Default)]
pub(super) struct Record {
    pub(super) host: Option<String>,
    pub(super) pid: Option<u32>,
    pub(super) app: Option<String>,
    pub(super) version: Option<String>,
    pub(super) since: Option<i64>,
}

/// What every ledger read says: holds and waits by (client uuid, hold number, lock
/// name), each with its time in unix ms.
#[derive(Debug, Default)]
pub(super) struct Ledgers {
    pub(super) holds: HashMap<(String, String, String), i64>,
    pub(super) waits: HashMap<(String, String, String), i64>,
}

impl Ledgers {
    /// Adds one ledger's fields (`h|<n>|<name>` / `w|<n>|<name>` -> unix ms).
    pub(super) fn add(&mut self, uuid: &str, fields: HashMap<String, String>) {
        for (field, at) in fields {
            let mut parts = field.splitn(3, '|');
            let (Some(tag), Some(n), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(at) = at.parse::<i64>() else { continue };
            let entry = (uuid.to_string(), n.to_string(), name.to_string());
            match tag {
                "h" => self.holds.insert(entry, at),
                "w" => self.waits.insert(entry, at),
                _ => None,
            };
        }
    }

    /// How many waits for `name` the ledgers record. A wait is written under the
    /// waiting call's holder number and again under those of the holds its task took
    /// (observe/mod.rs invariant 3), all with one waiting-since time. So within one
    /// client's waits begun in the same millisecond, each number that holds nothing
    /// is a waiting call of its own; a group whose numbers all hold something is one
    /// wait (a task waiting under an owner's number that also holds).
    pub(super) fn waiting_for(&self, name: &str) -> u64 {
        let holds: std::collections::HashSet<(&str, &str)> = (self.holds.keys())
            .map(|(uuid, n, _)| (uuid.as_str(), n.as_str()))
            .collect();
        let mut groups: HashMap<(&str, i64), u64> = HashMap::new();
        for ((uuid, n, _), since) in self.waits.iter().filter(|((_, _, l), _)| l == name) {
            let calls = groups.entry((uuid.as_str(), *since)).or_default();
            if !holds.contains(&(uuid.as_str(), n.as_str())) {
                *calls += 1;
            }
        }
        groups.values().map(|calls| (*calls).max(1)).sum()
    }

    /// The waiting calls of `name` the ledgers record, as holder ids with the time
    /// each began, longest waiting first: a number that holds nothing is a call of its
    /// own; of a group begun in the same millisecond whose numbers all hold something
    /// (a task waiting under an owner's number), one ([`waiting_for`](Self::waiting_for)'s count).
    pub(super) fn waiters_of(&self, name: &str) -> Vec<(String, i64)> {
        let holds: std::collections::HashSet<(&str, &str)> = (self.holds.keys())
            .map(|(uuid, n, _)| (uuid.as_str(), n.as_str()))
            .collect();
        let mut waits: Vec<(&str, &str, i64)> = (self.waits.iter())
            .filter(|((_, _, l), _)| l == name)
            .map(|((uuid, n, _), since)| (uuid.as_str(), n.as_str(), *since))
            .collect();
        waits.sort();
        let mut out: Vec<(String, i64)> = Vec::new();
        let mut groups: Vec<(&str, i64, bool)> = Vec::new();
        for (uuid, n, since) in &waits {
            if !holds.contains(&(*uuid, *n)) {
                out.push((format!("{uuid}:{n}"), *since));
                groups.push((uuid, *since, true));
            }
        }
        for (uuid, n, since) in &waits {
            if !groups.iter().any(|(u, s, _)| u == uuid && s == since) {
                out.push((format!("{uuid}:{n}"), *since));
                groups.push((uuid, *since, true));
            }
        }
        out.sort_by_key(|(id, since)| (*since, id.clone()));
        out
    }

    /// The client uuids of every recorded wait.
    pub(super) fn waiting_clients(&self) -> impl Iterator<Item = &str> {
        self.waits.keys().map(|(uuid, _, _)| uuid.as_str())
    }

    /// When holder `id` took `name`, if its ledger says (a faster multi-lock's hold is
    /// recorded under `<group>#<values>`).
    pub(super) fn held_since(&self, id: &str, name: &str) -> Option<i64> {
        let (uuid, n) = parse_holder(id)?;
        let key = (uuid.to_string(), n.to_string(), name.to_string());
        self.holds.get(&key).copied().or_else(|| {
            let group = format!("{name}#");
            (self.holds.iter())
                .filter(|((u, h, l), _)| u == uuid && h == n && l.starts_with(&group))
                .map(|(_, at)| *at)
                .min()
        })
    }

    /// Since when waiter `id` waits for `name`, if its ledger says.
    pub(super) fn waiting_since(&self, id: &str, name: &str) -> Option<i64> {
        let (uuid, n) = parse_holder(id)?;
        let key = (uuid.to_string(), n.to_string(), name.to_string());
        self.waits.get(&key).copied()
    }
}

/// Reads a hash (HGETALL) of `key` on the first master that has it, within `deadline`.
async fn first_hash(
    masters: &[Arc<Master>],
    key: &str,
    deadline: Instant,
) -> Option<HashMap<String, String>> {
    for m in masters {
        let timeout = deadline.saturating_duration_since(Instant::now());
        if timeout.is_zero() {
            return None;
        }
        let cmd = redis::cmd("HGETALL").arg(key).clone();
        let reply = m
            .link()
            .send(Lane::Side, timeout.min(m.timeout()), Request::Cmd(&cmd));
        match reply
            .await
            .map(redis::from_redis_value::<HashMap<String, String>>)
        {
            Ok(Ok(h)) if !h.is_empty() => return Some(h),
            _ => continue,
        }
    }
    None
}

/// The ledgers under `keys` (ledger keys found by the scan), read within `deadline`.
pub(super) async fn ledgers(
    masters: &[Arc<Master>],
    books: &Books,
    keys: &[String],
    deadline: Instant,
) -> Ledgers {
    let keys = keys.iter().filter(|_| books.is_on());
    let reads = keys.filter_map(|k| {
        let uuid = books.ledger_owner(k)?;
        Some(async move { (uuid, first_hash(masters, k, deadline).await) })
    });
    let mut all = Ledgers::default();
    for (uuid, fields) in join_all(reads).await {
        all.add(uuid, fields.unwrap_or_default());
    }
    all
}

/// The records of clients `uuids`, read within `deadline` (missing: no record).
pub(super) async fn records(
    masters: &[Arc<Master>],
    books: &Books,
    uuids: impl Iterator<Item = String>,
    deadline: Instant,
) -> HashMap<String, Record> {
    let reads = uuids.filter(|_| books.is_on()).map(|uuid| async move {
        let h = first_hash(masters, &books.record(&uuid), deadline).await;
        (uuid, h.map(record))
    });
    join_all(reads)
        .await
        .into_iter()
        .filter_map(|(uuid, r)| Some((uuid, r?)))
        .collect()
}

fn record(mut h: HashMap<String, String>) -> Record {
    Record {
        host: h.remove("host"),
        pid: h.get("pid").and_then(|p| p.parse().ok()),
        app: h.remove("app"),
        version: h.remove("version"),
        since: h.get("since").and_then(|s| s.parse().ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_ids_name_their_client_and_number() {
        assert_eq!(parse_holder("u-1:7"), Some(("u-1", "7")));
        assert_eq!(parse_holder("u-1:7:write"), Some(("u-1", "7")));
        assert_eq!(parse_holder("nocolon"), None);
    }

    #[test]
    fn a_ledger_says_when_holds_began_and_who_waits() {
        let mut l = Ledgers::default();
        let fields = [
            ("h|3|orders:1", "1000"),
            ("w|4|orders:1", "2000"),
            ("w|5|orders:1", "2500"),
            // The wait of holder 5, also listed under a hold of its task (number 3).
            ("w|3|orders:1", "2500"),
            // Another call's wait, begun in the same millisecond as holder 4's.
            ("w|8|orders:1", "2000"),
            ("h|6|g#AAA,BBB", "3000"),
            ("junk", "1"),
            ("h|7|bad", "x"),
        ];
        l.add(
            "u",
            fields
                .iter()
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect(),
        );
        assert_eq!(l.held_since("u:3", "orders:1"), Some(1000));
        assert_eq!(l.held_since("u:3:write", "orders:1"), Some(1000));
        assert_eq!(l.held_since("u:4", "orders:1"), None);
        assert_eq!(l.waiting_since("u:4", "orders:1"), Some(2000));
        assert_eq!(
            l.waiting_for("orders:1"),
            3,
            "4 and 8, and 5 (listed twice)"
        );
        assert_eq!(l.held_since("u:6", "g"), Some(3000));
        assert_eq!(l.held_since("u:7", "bad"), None);
    }
}
