//! The call descriptions: [`LockSpec`], a lock as an API handle names it, and
//! [`Call`], one acquisition as the façade hands it to the waiter and the hold table
//! (instead of loose name, holder, kind and lease arguments).

use std::sync::Arc;
use std::time::Duration;

use crate::engine::kinds::backoff::BackOff;
use crate::engine::kinds::kind::Kind;

/// Parameters of one `lock`/`try_lock` call.
pub(crate) struct Call {
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    pub(crate) kind: Kind,
    /// The lease asked for, or the watchdog timeout when `watchdog`.
    pub(crate) lease: Duration,
    /// No explicit lease: the watchdog keeps the hold.
    pub(crate) watchdog: bool,
    /// None: wait as long as it takes.
    pub(crate) wait: Option<Duration>,
    /// A writer of a read-write lock records its intent while it waits, keeping new
    /// readers out (writer preference).
    pub(crate) intent: bool,
}

/// Who holds what a lock handle acquires (holding/holder_id.rs invariants 1-4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holding {
    /// Each call is its own holder, re-entering only in a guard's scope.
    PerCall,
    /// The calling OS thread (the blocking API).
    PerThread,
    /// One explicit owner for every call (the API's `Owner`).
    Owner(u64),
}

/// One lock as an API handle names it: what every call on it describes.
#[derive(Clone, Debug)]
pub(crate) struct LockSpec {
    pub(crate) name: Arc<str>,
    pub(crate) kind: Kind,
    pub(crate) holding: Holding,
    /// A writer of a read-write lock keeps new readers out while it waits.
    pub(crate) intent: bool,
    /// A spin lock's sleeps between tries (other kinds wait for a message).
    pub(crate) backoff: BackOff,
}

impl LockSpec {
    /// A lock of `kind` on `name`, each call its own holder.
    pub(crate) fn new(name: Arc<str>, kind: Kind) -> LockSpec {
        LockSpec {
            name,
            kind,
            holding: Holding::PerCall,
            intent: false,
            backoff: BackOff::default(),
        }
    }
}
