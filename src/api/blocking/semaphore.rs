//! [`Semaphore`]: the blocking counter semaphore.

use std::sync::Arc;
use std::time::Duration;

use super::{Runtime, SemaphorePermit};
use crate::error::Result;

/// A blocking [`crate::Semaphore`] (Redisson `RSemaphore`): the same calls, each
/// blocking the calling thread (the examples are at the async methods). Permits
/// belong to nobody, so the thread does not matter: a permit taken on one thread may
/// be given back on another.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let sem = client.semaphore("pool");
/// assert!(sem.try_set_permits(2)?);
/// let two = sem.acquire_many(2)?;
/// assert_eq!(two.permits(), 2);
/// assert!(sem.try_acquire(std::time::Duration::from_millis(20))?.is_none()); // none left
/// std::thread::spawn(move || drop(two)).join().unwrap(); // given back on another thread
/// assert_eq!(sem.available()?, 2);
/// sem.acquire()?.forget(); // kept taken
/// assert_eq!(sem.available()?, 1);
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    inner: crate::Semaphore,
    rt: Arc<Runtime>,
}

impl Semaphore {
    pub(super) fn new(inner: crate::Semaphore, rt: Arc<Runtime>) -> Self {
        Semaphore { inner, rt }
    }

    /// The semaphore's name; as [`crate::Semaphore::name`] (example there).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Blocking [`crate::Semaphore::acquire`] (its example and errors are there).
    pub fn acquire(&self) -> Result<SemaphorePermit> {
        self.rt.hold(self.inner.acquire())
    }

    /// Blocking [`crate::Semaphore::acquire_many`] (its example and errors are there).
    pub fn acquire_many(&self, permits: i64) -> Result<SemaphorePermit> {
        self.rt.hold(self.inner.acquire_many(permits))
    }

    /// Blocking [`crate::Semaphore::try_acquire`] (its example and errors are there).
    pub fn try_acquire(&self, wait: Duration) -> Result<Option<SemaphorePermit>> {
        self.rt.try_hold(self.inner.try_acquire(wait))
    }

    /// Blocking [`crate::Semaphore::try_acquire_many`] (its example and errors are there).
    pub fn try_acquire_many(
        &self,
        permits: i64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermit>> {
        self.rt.try_hold(self.inner.try_acquire_many(permits, wait))
    }

    /// Blocking [`crate::Semaphore::release`] (its example and errors are there).
    pub fn release(&self) -> Result<()> {
        self.rt.call(self.inner.release())
    }

    /// Blocking [`crate::Semaphore::release_many`] (its example and errors are there).
    pub fn release_many(&self, permits: i64) -> Result<()> {
        self.rt.call(self.inner.release_many(permits))
    }

    /// Blocking [`crate::Semaphore::release_if_exists`] (its example and errors are there).
    #[must_use = "false means nothing was given back: the semaphore does not exist"]
    pub fn release_if_exists(&self, permits: i64) -> Result<bool> {
        self.rt.call(self.inner.release_if_exists(permits))
    }

    /// Blocking [`crate::Semaphore::drain_permits`] (its example and errors are there).
    pub fn drain_permits(&self) -> Result<i64> {
        self.rt.call(self.inner.drain_permits())
    }

    /// Blocking [`crate::Semaphore::available`] (its example and errors are there).
    pub fn available(&self) -> Result<i64> {
        self.rt.call(self.inner.available())
    }

    /// Blocking [`crate::Semaphore::set_permits`] (its example and errors are there).
    pub fn set_permits(&self, permits: i64) -> Result<()> {
        self.rt.call(self.inner.set_permits(permits))
    }

    /// Blocking [`crate::Semaphore::try_set_permits`] (its example and errors are there).
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.rt.call(self.inner.try_set_permits(permits))
    }

    /// Blocking [`crate::Semaphore::try_set_permits_with_ttl`] (its example and errors are there).
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub fn try_set_permits_with_ttl(&self, permits: i64, ttl: Duration) -> Result<bool> {
        self.rt
            .call(self.inner.try_set_permits_with_ttl(permits, ttl))
    }

    /// Blocking [`crate::Semaphore::add_permits`] (its example and errors are there).
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.rt.call(self.inner.add_permits(delta))
    }
}
