//! [`Lock`]: one named lock, held per thread.

use std::sync::Arc;
use std::time::Duration;

use super::{LockGuard, Runtime};
use crate::api::status::MasterStatus;
use crate::error::Result;
use crate::Kind;

/// A blocking [`crate::Lock`]: one named lock (plain, fair, fenced, spin, non-reentrant,
/// a read or a write lock), held per **thread**: nested `lock()` calls on one thread
/// re-enter, other threads wait. Each method is its async namesake run on the client's
/// runtime (the examples are there).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use std::time::Duration;
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let lock = client.lock("billing-run");
/// let guard = lock.lock()?;
/// let nested = lock.lock()?; // the same thread re-enters
/// assert_eq!(lock.hold_count()?, 2);
/// let busy = std::thread::scope(|s| s.spawn(|| lock.try_lock(Duration::ZERO)).join().unwrap());
/// assert!(busy?.is_none()); // another thread is another holder
/// drop(nested);
/// guard.unlock()?;
/// assert!(!lock.is_locked()?);
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct Lock {
    pub(super) inner: crate::Lock,
    pub(super) rt: Arc<Runtime>,
}

impl Lock {
    /// The lock's name; as [`crate::Lock::name`] (example there).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Its kind; as [`crate::Lock::kind`] (example there).
    pub fn kind(&self) -> Kind {
        self.inner.kind()
    }

    /// Blocking [`crate::Lock::lock`] (its example and errors are there).
    pub fn lock(&self) -> Result<LockGuard> {
        self.rt.hold(self.inner.lock())
    }

    /// Blocking [`crate::Lock::lock_with_lease`] (its example and errors are there).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.rt.hold(self.inner.lock_with_lease(lease))
    }

    /// Blocking [`crate::Lock::try_lock`] (its example and errors are there).
    pub fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.rt.try_hold(self.inner.try_lock(wait))
    }

    /// Blocking [`crate::Lock::try_lock_with_lease`] (its example and errors are there).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.rt
            .try_hold(self.inner.try_lock_with_lease(wait, lease))
    }

    /// Blocking [`crate::Lock::is_locked`] (its example and errors are there).
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.call(self.inner.is_locked())
    }

    /// [`crate::Lock::is_held_by_current_task`] for a thread (see the [`Lock`] example).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.rt.call(self.inner.is_held_by_current_task())
    }

    /// Blocking [`crate::Lock::hold_count`] (its example and errors are there).
    pub fn hold_count(&self) -> Result<u32> {
        self.rt.call(self.inner.hold_count())
    }

    /// Blocking [`crate::Lock::remaining_ttl`] (its example and errors are there).
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.rt.call(self.inner.remaining_ttl())
    }

    /// Blocking [`crate::Lock::force_unlock`] (its example and errors are there).
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.call(self.inner.force_unlock())
    }

    /// Blocking [`crate::Lock::status`] (its example and errors are there).
    pub fn status(&self) -> Result<Vec<MasterStatus>> {
        self.rt.call(self.inner.status())
    }
}
