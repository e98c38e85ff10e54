//! The one list of what a listing (`Client::list`, `redlatch list` and `top`) finds:
//! [`ListedKind`], the public name of each, and its entry, a [`Listed`], declared in
//! the file of the kind it lists (beside its inspection's `Section`) and gathered in
//! [`LISTED`] (kinds/mod.rs). observe/ derives everything it lists from
//! these entries: which keys are parts of another name's layout, what a key's
//! inspection is, where its waiters listen and who holds it. A lock [`Kind`](super::Kind)
//! names its entry ([`Protocol::listed`](super::Protocol::listed)); kinds that share a
//! layout share one (plain, spin and non-reentrant locks list as `lock`). Adding a kind
//! is adding its entry here, in its file, and in `LISTED`: a unit test checks that every
//! kind has one and that their names are unique.

use crate::engine::kinds::inspect::State;
use crate::engine::kinds::LISTED;
use crate::keys;

/// What a name found by a listing is, told by its keys' types and shapes.
///
/// With the `serde` feature it implements `Serialize` as its [`as_str`](Self::as_str)
/// name.
///
/// A plain lock, a spin lock and a non-reentrant lock share one layout, and so do a
/// semaphore and a count-down latch: each pair lists as one kind. A multi-lock is
/// its locks, each listed under its own name.
///
/// # Examples
/// See the example on [`Client::list`](crate::Client::list).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ListedKind {
    /// A plain, spin or non-reentrant lock (one hash of hold counts).
    Lock,
    /// A fair lock: a lock with a waiter queue.
    Fair,
    /// A fenced lock: a lock with a fencing counter.
    Fenced,
    /// A read-write lock (its mode in `mode`).
    ReadWrite,
    /// A faster multi-lock's group (one hash of many values).
    FasterMulti,
    /// A semaphore or a count-down latch: a number (in `count`).
    Counter,
    /// A permit-expirable semaphore (permits left in `count`, taken in `holders`).
    ExpirableSemaphore,
    /// A leader election (its leader in `holders`).
    Election,
    /// A simple lock (`SET NX PX`, the Redlock reference clients' wire): a string
    /// holding its holder's token, with a lease.
    Simple,
    /// A scheduled job's lock (ShedLock's wire, [`Client::job`](crate::Client::job)):
    /// a string holding `ADDED:<instant>@<host>:<uuid>`, with a lease; its holder's
    /// host and start are read from the value.
    Job,
}

impl ListedKind {
    /// The name `--json` and the table print (`lock`, `fair`, `read_write`, ...): its
    /// entry's.
    ///
    /// # Examples
    /// See the example on [`Client::list`](crate::Client::list).
    pub fn as_str(self) -> &'static str {
        LISTED
            .iter()
            .find(|l| l.kind == self)
            .map_or("unknown", |l| l.name)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for ListedKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One holder a state names: its id, its count (of holds, or of a group's values) and,
/// for a permit, its expiry in ms since the epoch.
pub(crate) type Holder<'a> = (&'a str, u64, Option<i64>);

/// How a listing finds and reads one kind: its entry in [`LISTED`].
pub(crate) struct Listed {
    /// The public name of what is found.
    pub(crate) kind: ListedKind,
    /// Its name in `--json` and the table.
    pub(crate) name: &'static str,
    /// Whether a key's inspection (kinds/inspect.rs) is this kind's layout; the flag
    /// says the key is an election's lock (`redlatch_election:{name}`). Asked in
    /// [`LISTED`]'s order: the first entry that says yes names the key.
    pub(crate) is: fn(&State, bool) -> bool,
    /// Whether a key is a part of this kind's layout kept for another name (a fair
    /// lock's queue): never listed itself.
    pub(crate) part: fn(&str) -> bool,
    /// The channels its waiters listen on, from its name and key: none where they
    /// poll, or listen each on their own (a fair lock's queue says who waits).
    pub(crate) channels: fn(&str, &str) -> Vec<String>,
    /// Its holders in one master's state.
    pub(crate) holders: for<'a> fn(&'a State) -> Vec<Holder<'a>>,
    /// Its waiters are its queue, in order (a fair lock), not its listeners.
    pub(crate) queued: bool,
}

/// No key of another name's layout.
pub(crate) fn no_part(_: &str) -> bool {
    false
}

/// Waiters that listen on no shared channel.
pub(crate) fn no_channel(_: &str, _: &str) -> Vec<String> {
    Vec::new()
}

/// Waiters that listen on the key's lock channel (`redisson_lock__channel:{key}`).
pub(crate) fn key_channel(_: &str, key: &str) -> Vec<String> {
    vec![keys::channel(key)]
}

/// The holders of a hash of hold counts (or a string's token): every field that is a
/// holder id (`uuid:n…`), with its count.
pub(crate) fn hold_counts(st: &State) -> Vec<Holder<'_>> {
    (st.holders.iter())
        .filter(|(id, _)| id.contains(':'))
        .map(|(id, n)| (id.as_str(), *n, None))
        .collect()
}

/// A lock's hash: hold counts under holder ids, with a lease (a hash without either is
/// no lock of any kind).
pub(crate) fn lock_hash(st: &State) -> bool {
    st.key_type == "hash" && st.ttl.is_some() && st.holders.iter().any(|(h, _)| h.contains(':'))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::engine::Kind;

    /// Every lock kind: the match fails to compile when a kind is added without it.
    fn every_kind() -> Vec<Kind> {
        let all = [
            Kind::Plain,
            Kind::Fair,
            Kind::Fenced,
            Kind::Read,
            Kind::Write,
            Kind::NonReentrant,
            Kind::NonReentrantFair,
            Kind::Spin,
            Kind::Group,
            Kind::Simple,
        ];
        for k in all {
            match k {
                Kind::Plain
                | Kind::Fair
                | Kind::Fenced
                | Kind::Read
                | Kind::Write
                | Kind::NonReentrant
                | Kind::NonReentrantFair
                | Kind::Spin
                | Kind::Group
                | Kind::Simple => {}
            }
        }
        all.to_vec()
    }

    /// Every listed kind, likewise.
    fn every_listed() -> Vec<ListedKind> {
        use ListedKind::*;
        let all = [
            Lock,
            Fair,
            Fenced,
            ReadWrite,
            FasterMulti,
            Counter,
            ExpirableSemaphore,
            Election,
            Simple,
            Job,
        ];
        for k in all {
            match k {
                Lock | Fair | Fenced | ReadWrite | FasterMulti | Counter | ExpirableSemaphore
                | Election | Simple | Job => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn every_kind_lists_under_an_entry_of_the_one_list() {
        for kind in every_kind() {
            let listed = kind.protocol().listed();
            assert!(
                LISTED.iter().any(|l| std::ptr::eq(*l, listed)),
                "{kind:?} lists under an entry missing from LISTED"
            );
            assert!(!listed.name.is_empty(), "{kind:?} has no listed name");
        }
    }

    #[test]
    fn every_listed_kind_has_one_entry_and_the_names_are_unique() {
        for kind in every_listed() {
            let entries = LISTED.iter().filter(|l| l.kind == kind).count();
            assert_eq!(entries, 1, "{kind:?} has {entries} entries in LISTED");
        }
        assert_eq!(LISTED.len(), every_listed().len());
        let names: HashSet<&str> = LISTED.iter().map(|l| l.name).collect();
        assert_eq!(names.len(), LISTED.len(), "two entries share a name");
        assert!(LISTED.iter().all(|l| l.kind.as_str() == l.name));
    }

    /// With serde, a kind is its name, as the derived `snake_case` form printed it.
    #[cfg(feature = "serde")]
    #[test]
    fn serde_writes_the_listed_name() {
        for kind in every_listed() {
            let json = serde_json::to_string(&kind).expect("a string");
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }

    /// The names `redlatch list --json` has always printed (a rename breaks scripts
    /// that read it).
    #[test]
    fn the_listed_names_are_those_the_cli_prints() {
        let names: Vec<&str> = every_listed().into_iter().map(ListedKind::as_str).collect();
        assert_eq!(
            names,
            [
                "lock",
                "fair",
                "fenced",
                "read_write",
                "faster_multi",
                "counter",
                "expirable_semaphore",
                "election",
                "simple",
                "job"
            ]
        );
    }
}
