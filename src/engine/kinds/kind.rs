//! [`Kind`]: which flavour of lock an operation is for.

/// Which flavour of lock an operation is for. More kinds may come, so a `match` on it
/// needs a wildcard arm.
///
/// # Examples
/// ```
/// use redlatch::Kind;
/// /// The Redisson class a lock of this kind interoperates with.
/// fn redisson_class(kind: Kind) -> &'static str {
///     match kind {
///         Kind::Plain => "RLock",
///         Kind::Fair => "RFairLock",
///         Kind::Fenced => "RFencedLock",
///         Kind::Read => "RReadWriteLock.readLock()",
///         Kind::Write => "RReadWriteLock.writeLock()",
///         _ => "another Redisson class",
///     }
/// }
/// assert_eq!(redisson_class(Kind::Fair), "RFairLock");
/// assert_ne!(Kind::Plain, Kind::Fenced);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// Reentrant, non-fair (Redisson `RLock`).
    Plain,
    /// Reentrant, FIFO (Redisson `RFairLock`).
    Fair,
    /// Reentrant with fencing tokens (Redisson `RFencedLock`).
    Fenced,
    /// The shared side of a read-write lock (Redisson `RReadWriteLock.readLock()`).
    Read,
    /// The exclusive side of a read-write lock (Redisson `RReadWriteLock.writeLock()`).
    Write,
    /// Non-reentrant, non-fair (Redisson `getNonReentrantLock`): a second acquisition by
    /// the holder fails with [`Error::Reentry`](crate::Error::Reentry).
    NonReentrant,
    /// Non-reentrant, FIFO (Redisson `getNonReentrantFairLock`).
    NonReentrantFair,
    /// Reentrant, waited for without pub/sub: retried after an exponential back-off
    /// with jitter (Redisson `getSpinLock`; [`BackOff`](crate::BackOff)).
    Spin,
    /// Many values under one key, taken all or none (Redisson's faster multi-lock,
    /// `getMultiLock(group, values)`; see [`FasterMultiLock`](crate::FasterMultiLock)).
    Group,
    /// The single-key lock of the Redlock reference clients (redsync, node-redlock,
    /// redis-py's `Lock`): `SET name token NX PX lease`, released by compare-and-delete;
    /// not reentrant, waited for by polling ([`Client::simple_lock`](crate::Client::simple_lock)).
    Simple,
}

impl Kind {
    /// The non-reentrant variant of this kind (its holder's second acquisition is
    /// refused), where it has one: plain and fair; the kind itself otherwise.
    pub(crate) fn non_reentrant(self) -> Kind {
        match self {
            Kind::Plain => Kind::NonReentrant,
            Kind::Fair => Kind::NonReentrantFair,
            other => other,
        }
    }

    /// `plain`, `fair`, `fenced`, `read`, `write`, `non_reentrant`,
    /// `non_reentrant_fair`, `spin`, `group` or `simple`: the `kind` of spans and metrics.
    pub(crate) fn label(self) -> &'static str {
        self.protocol().label()
    }

    /// The channel a release of this kind of lock publishes on (a fair lock's waiters
    /// listen on their own channels besides).
    pub(crate) fn channel(self, name: &str) -> String {
        self.protocol().channel(name)
    }
}
