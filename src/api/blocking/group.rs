//! [`FasterMultiLock`]: the blocking faster multi-lock, held per thread.

use std::sync::Arc;
use std::time::Duration;

use super::{Lock, LockGuard, Runtime};
use crate::error::Result;

/// A blocking [`crate::FasterMultiLock`]: many values under one group key, all or
/// none, held per thread as Redisson's `getMultiLock(group, values)` is (a thread that
/// locks it again re-enters, counting each value once more).
#[derive(Clone)]
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

    /// The group: the Redis key every value lives under.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001", "Mary_002"])?;
    /// assert_eq!(lock.group(), "class_100");
    /// assert_eq!(lock.value_count(), 2);
    /// # Ok(()) }) }
    /// ```
    pub fn group(&self) -> &str {
        self.inner.group()
    }

    /// How many values it locks.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.faster_multi_lock("g", ["a", "b", "c"])?.value_count(), 3);
    /// # Ok(()) }) }
    /// ```
    pub fn value_count(&self) -> usize {
        self.inner.value_count()
    }

    /// Blocks until every value is held, under the watchdog (see
    /// [`crate::FasterMultiLock::lock`]).
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001", "Mary_002"])?;
    /// let guard = lock.lock()?;
    /// let again = lock.lock()?; // this thread again: re-enters
    /// assert_eq!(lock.hold_count()?, 2);
    /// drop(again);
    /// guard.unlock()?;
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn lock(&self) -> Result<LockGuard> {
        self.lock.lock()
    }

    /// Blocks until every value is held for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::lock_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// let guard = lock.lock_with_lease(Duration::from_secs(10))?;
    /// assert!(lock.remaining_ttl()?.unwrap() <= Duration::from_secs(10));
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.lock.lock_with_lease(lease)
    }

    /// Blocks at most `wait` for every value; `Ok(None)` if some value stayed held by
    /// another holder.
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::try_lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001", "Mary_002"])?;
    /// let guard = lock.lock()?;
    /// let other = client.faster_multi_lock("class_100", ["Mary_002"])?;
    /// let there = std::thread::spawn(move || other.try_lock(Duration::ZERO).map(|g| g.is_some()));
    /// assert!(!there.join().unwrap()?); // another thread: Mary is held
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.lock.try_lock(wait)
    }

    /// Blocks at most `wait`, then holds every value for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::try_lock_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// let guard = lock
    ///     .try_lock_with_lease(Duration::from_millis(100), Duration::from_secs(5))?
    ///     .expect("free");
    /// assert!(lock.remaining_ttl()?.unwrap() <= Duration::from_secs(5));
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.lock.try_lock_with_lease(wait, lease)
    }

    /// True if any of its values is held by anyone.
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::is_locked`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001", "Mary_002"])?;
    /// let jack = client.faster_multi_lock("class_100", ["Jack_001"])?.lock()?;
    /// assert!(lock.is_locked()?);
    /// drop(jack);
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.lock.rt.block_on(self.inner.is_locked())
    }

    /// True if the calling thread holds every value.
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::is_locked`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// let _guard = lock.lock()?;
    /// assert!(lock.is_held_by_current_thread()?);
    /// let other = lock.clone();
    /// assert!(!std::thread::spawn(move || other.is_held_by_current_thread()).join().unwrap()?);
    /// # Ok(()) }) }
    /// ```
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.lock.rt.block_on(self.inner.is_held_by_current_task())
    }

    /// The calling thread's reentrant count (the smallest over its values).
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::hold_count`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// assert_eq!(lock.hold_count()?, 0);
    /// let _guard = lock.lock()?;
    /// assert_eq!(lock.hold_count()?, 1);
    /// # Ok(()) }) }
    /// ```
    pub fn hold_count(&self) -> Result<u32> {
        self.lock.rt.block_on(self.inner.hold_count())
    }

    /// The least lease left of the calling thread's values; `None` unless it holds
    /// every value.
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::remaining_ttl`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// assert_eq!(lock.remaining_ttl()?, None);
    /// let _guard = lock.lock_with_lease(Duration::from_secs(5))?;
    /// assert!(lock.remaining_ttl()?.unwrap() <= Duration::from_secs(5));
    /// # Ok(()) }) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.lock.rt.block_on(self.inner.remaining_ttl())
    }

    /// Frees every value whoever holds it; true if any had a holder.
    ///
    /// # Errors
    /// As [`crate::FasterMultiLock::force_unlock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// let guard = lock.lock()?;
    /// assert!(lock.force_unlock()?);
    /// assert!(guard.is_lost());
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.lock.rt.block_on(self.inner.force_unlock())
    }
}

impl std::fmt::Debug for FasterMultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}
