//! [`FasterMultiLock`]: the blocking faster multi-lock, held per thread.

use std::sync::Arc;
use std::time::Duration;

use super::{Lock, LockGuard, Runtime};
use crate::error::Result;

/// A blocking [`crate::FasterMultiLock`]: many values under one group key, all or
/// none, held per thread as Redisson's `getMultiLock(group, values)` is (a thread that
/// locks it again re-enters, counting each value once more). Each method is its async
/// namesake run on the client's runtime (the examples are there).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use std::time::Duration;
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let group = client.faster_multi_lock("seats", ["1A", "1B"])?;
/// assert_eq!((group.group(), group.value_count()), ("seats", 2));
/// let guard = group.lock()?;
/// let again = group.lock()?; // the same thread re-enters
/// assert_eq!(group.hold_count()?, 2);
/// let overlap = client.faster_multi_lock("seats", ["1B", "1C"])?;
/// let busy = std::thread::scope(|s| s.spawn(|| overlap.try_lock(Duration::ZERO)).join().unwrap());
/// assert!(busy?.is_none()); // 1B is taken by another thread
/// drop(again);
/// guard.unlock()?;
/// assert!(!group.is_locked()?);
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct FasterMultiLock {
    inner: crate::FasterMultiLock,
    lock: Lock,
}

impl FasterMultiLock {
    pub(super) fn new(inner: crate::FasterMultiLock, rt: Arc<Runtime>) -> Self {
        let inner = inner.per_thread();
        let lock = Lock {
            inner: inner.as_lock().clone(),
            rt,
        };
        FasterMultiLock { inner, lock }
    }

    /// The group; as [`crate::FasterMultiLock::group`] (example there).
    pub fn group(&self) -> &str {
        self.inner.group()
    }

    /// How many values; as [`crate::FasterMultiLock::value_count`] (example there).
    pub fn value_count(&self) -> usize {
        self.inner.value_count()
    }

    /// Blocking [`crate::FasterMultiLock::lock`] (its example and errors are there).
    pub fn lock(&self) -> Result<LockGuard> {
        self.lock.lock()
    }

    /// Blocking [`crate::FasterMultiLock::lock_with_lease`] (its example and errors are there).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.lock.lock_with_lease(lease)
    }

    /// Blocking [`crate::FasterMultiLock::try_lock`] (its example and errors are there).
    pub fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.lock.try_lock(wait)
    }

    /// Blocking [`crate::FasterMultiLock::try_lock_with_lease`] (its example and errors are there).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.lock.try_lock_with_lease(wait, lease)
    }

    /// Blocking [`crate::FasterMultiLock::is_locked`] (its example and errors are there).
    pub fn is_locked(&self) -> Result<bool> {
        self.lock.rt.call(self.inner.is_locked())
    }

    /// Blocking [`crate::FasterMultiLock::hold_count`] (its example and errors are there).
    pub fn hold_count(&self) -> Result<u32> {
        self.lock.rt.call(self.inner.hold_count())
    }

    /// Blocking [`crate::FasterMultiLock::remaining_ttl`] (its example and errors are there).
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.lock.rt.call(self.inner.remaining_ttl())
    }

    /// Blocking [`crate::FasterMultiLock::force_unlock`] (its example and errors are there).
    pub fn force_unlock(&self) -> Result<bool> {
        self.lock.rt.call(self.inner.force_unlock())
    }

    /// [`crate::FasterMultiLock::is_held_by_current_task`] for a thread (example there).
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.lock.rt.call(self.inner.is_held_by_current_task())
    }
}
