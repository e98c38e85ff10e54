//! What a listing says ([`Engine::list`](crate::engine::Engine)): the public types of
//! `Client::list` and `redlatch list --json`, one [`LockListing`] per name found.

use std::time::Duration;

pub use crate::engine::kinds::listed::ListedKind;

/// Every lock found under a pattern, on every master, and what could not be read.
///
/// With the `serde` feature it implements `Serialize` as `{"locks": [...],
/// "incomplete": bool, "unread": [{"master", "error"}]}`.
///
/// # Examples
/// See the example on [`Client::list`](crate::Client::list).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Listing {
    /// The names found, sorted by name.
    pub locks: Vec<LockListing>,
    /// True when part of the deployment was not read (see `unread`): a name held only
    /// there is missing, and a name's holders may be missing from its entry.
    pub incomplete: bool,
    /// The masters (a cluster's primaries) not read to the end, and why.
    pub unread: Vec<Unread>,
}

/// A master, or a cluster's primary, that a listing did not read to the end.
///
/// # Examples
/// See the example on [`Client::list`](crate::Client::list).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Unread {
    /// `host:port`.
    pub master: String,
    /// Why: its error, or that the listing's deadline passed.
    pub error: String,
}

/// One name found by a listing: its kind, holders, lease and waiters, merged over the
/// masters.
///
/// With the `serde` feature it implements `Serialize` as `{"name", "kind", "key",
/// "holders": [ListedHolder], "ttl_ms", "waiters", "waiting": [QueuedWaiter], "queue":
/// [QueuedWaiter], "count", "mode", "fencing_counter", "masters"}`.
///
/// # Examples
/// See the example on [`Client::list`](crate::Client::list).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LockListing {
    /// The name the lock (or election) is used under.
    pub name: String,
    /// What it is.
    pub kind: ListedKind,
    /// The Redis key it lives in (an election's is `redlatch_election:{name}`).
    pub key: String,
    /// Who holds it (a faster multi-lock: each holder of one of its values; an
    /// expirable semaphore: each permit taken), with who they are where their client
    /// left a record.
    pub holders: Vec<ListedHolder>,
    /// The lease left (the longest over the masters that hold it); `None` when the
    /// key has no expiry (a counter).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "ttl_ms", serialize_with = "ser::millis")
    )]
    pub ttl: Option<Duration>,
    /// How many wait for it, at least: a fair lock's queue; else the connections
    /// subscribed to its channel (a client with several waiting tasks counts once), or
    /// the waits its clients' ledgers record, whichever is more.
    pub waiters: u64,
    /// Each redlatch waiter, named (host, pid, app, since when it waits): a fair
    /// lock's queue in order; for the other kinds the waits its clients' ledgers
    /// record (flushed at most once a second), longest first. A waiter of another
    /// library (a Redisson thread) is counted in [`waiters`](Self::waiters) only.
    pub waiting: Vec<QueuedWaiter>,
    /// A fair lock's queue, in order.
    pub queue: Vec<QueuedWaiter>,
    /// A counter's value (a semaphore's permits left, a latch's count), or an expirable
    /// semaphore's permits left.
    pub count: Option<i64>,
    /// A read-write lock's mode (`read` or `write`).
    pub mode: Option<String>,
    /// A fenced lock's (or an election's) counter: the last token (term) given.
    pub fencing_counter: Option<u64>,
    /// On how many masters the key was found.
    pub masters: usize,
}

/// A holder id with what its client's record says: the host, process, app and
/// library version of the client, when it connected, and when the hold was taken.
///
/// A holder of another client library (a Redisson holder) or of a client that is
/// gone has no record: every field but `id` is then `None`. `acquired` is `None` too
/// for a hold younger than about a second (the ledger is written at most once a
/// second) and for a holder that is not a lock's (a permit). Times are in ms since
/// the Unix epoch. With the `serde` feature it implements `Serialize` with these
/// field names.
///
/// # Examples
/// See the example on [`Lock::status`](crate::Lock::status).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HolderInfo {
    /// The holder id as the lock stores it (`uuid:n`, a writer's `uuid:n:write`).
    pub id: String,
    /// The client's host name.
    pub host: Option<String>,
    /// The client's process id.
    pub pid: Option<u32>,
    /// The client's app name ([`Config::app`](crate::Config::app)).
    pub app: Option<String>,
    /// The redlatch version of the client.
    pub version: Option<String>,
    /// When the client connected, ms since the epoch.
    pub since: Option<i64>,
    /// When the hold was taken, ms since the epoch.
    pub acquired: Option<i64>,
}

/// A holder as a listing shows it: who it is ([`HolderInfo`], the same as
/// [`Lock::status`](crate::Lock::status)'s holders), its count, whether its client
/// left a record, and when a permit's or a faster multi-lock's hold expires.
///
/// With the `serde` feature it implements `Serialize` as one object: `HolderInfo`'s
/// fields (`id`, `host`, `pid`, `app`, `version`, `since`, `acquired`) beside
/// `count`, `record` and `expires_at`.
///
/// # Examples
/// See the example on [`Client::list`](crate::Client::list).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ListedHolder {
    /// Who holds: the holder id as the lock stores it (an expirable semaphore's
    /// permit id in hex) and what its client's record says.
    #[cfg_attr(feature = "serde", serde(flatten))]
    pub holder: HolderInfo,
    /// Its hold count (a faster multi-lock: how many values it holds).
    pub count: u64,
    /// Its client left a record.
    pub record: bool,
    /// When a permit (an expirable semaphore) or a faster multi-lock's hold expires, in
    /// ms since the epoch.
    pub expires_at: Option<i64>,
}

/// One waiter: of a fair lock's queue, or (without a deadline) a waiting call its
/// client's ledger records.
///
/// With the `serde` feature it implements `Serialize` as `{"id", "deadline_ms",
/// "waiting_since", "host", "pid", "app"}`.
///
/// # Examples
/// See the example on [`Client::list`](crate::Client::list).
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// Its holder id.
    pub id: String,
    /// When its place lapses unless it is renewed, in ms since the epoch.
    pub deadline_ms: Option<i64>,
    /// Since when it waits, in ms since the epoch, as its client's ledger says.
    pub waiting_since: Option<i64>,
    /// Its client's host, if its client left a record.
    pub host: Option<String>,
    /// Its client's process id, if its client left a record.
    pub pid: Option<u32>,
    /// Its client's app name, if its client left a record.
    pub app: Option<String>,
}

/// `Serialize` helpers: durations as milliseconds.
#[cfg(feature = "serde")]
mod ser {
    use std::time::Duration;

    use serde::ser::{Serialize, Serializer};

    pub(super) fn millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .serialize(s)
    }
}
