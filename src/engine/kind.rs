//! [`Kind`]: which flavour of lock an operation is for.

/// Which flavour of lock an operation is for. More kinds will come (Redisson's
/// non-reentrant and spin locks, issue 24), so a `match` on it needs a wildcard arm.
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
    /// Many values under one key, taken all or none (Redisson's faster multi-lock,
    /// `getMultiLock(group, values)`; see [`FasterMultiLock`](crate::FasterMultiLock)).
    Group,
}

impl Kind {
    /// `plain`, `fair`, `fenced`, `read`, `write` or `group`: the `kind` of spans and metrics.
    pub(crate) fn label(self) -> &'static str {
        self.protocol().label()
    }

    /// The channel a release of this kind of lock publishes on (a fair lock's waiters
    /// listen on their own channels besides).
    pub(crate) fn channel(self, name: &str) -> String {
        self.protocol().channel(name)
    }

    /// A side of a read-write lock.
    pub(crate) fn is_rw(self) -> bool {
        matches!(self, Kind::Read | Kind::Write)
    }
}
