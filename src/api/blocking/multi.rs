//! [`MultiLock`]: several blocking locks taken as one.

use std::sync::Arc;
use std::time::Duration;

use super::{Lock, MultiGuard, Runtime};
use crate::error::Result;

/// A blocking [`crate::MultiLock`] (Redisson `RedissonMultiLock`): all the locks or
/// none, without deadlock between overlapping sets; held by the calling thread. Each
/// method is its async namesake run on the client's runtime (the examples are there).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use std::time::Duration;
/// use redlatch::blocking::{Client, MultiLock};
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let both = MultiLock::new([client.lock("b"), client.lock("a")]);
/// assert_eq!(both.names(), ["a", "b"]); // one order for every caller
/// let guard = both.lock()?;
/// assert_eq!(guard.names(), ["a", "b"]);
/// let one = client.multi_lock(["b", "c"]);
/// let busy = std::thread::scope(|s| s.spawn(|| one.try_lock(Duration::ZERO)).join().unwrap());
/// assert!(busy?.is_none()); // "b" is held by another thread: none of them is taken
/// assert!(!client.lock("c").is_locked()?);
/// guard.unlock()?;
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    inner: crate::MultiLock,
    rt: Arc<Runtime>,
}

impl MultiLock {
    /// The locks as one (see [`crate::MultiLock::new`] and its example).
    ///
    /// # Panics
    /// If `locks` is empty (there is no client's runtime to run it on).
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Self {
        let locks: Vec<Lock> = locks.into_iter().collect();
        let rt = locks
            .first()
            .map(|l| l.rt.clone())
            .expect("a multi-lock needs at least one lock");
        MultiLock {
            inner: crate::MultiLock::new(locks.into_iter().map(|l| l.inner)),
            rt,
        }
    }

    /// The locks' names, in the order they are taken (see the [`MultiLock`] example).
    pub fn names(&self) -> Vec<&str> {
        self.inner.locks().iter().map(crate::Lock::name).collect()
    }

    /// Blocking [`crate::MultiLock::lock`] (its example and errors are there).
    pub fn lock(&self) -> Result<MultiGuard> {
        self.rt.hold(self.inner.lock())
    }

    /// Blocking [`crate::MultiLock::lock_with_lease`] (its example and errors are there).
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        self.rt.hold(self.inner.lock_with_lease(lease))
    }

    /// Blocking [`crate::MultiLock::try_lock`] (its example and errors are there).
    pub fn try_lock(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.rt.try_hold(self.inner.try_lock(wait))
    }

    /// Blocking [`crate::MultiLock::try_lock_with_lease`] (its example and errors are there).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.rt
            .try_hold(self.inner.try_lock_with_lease(wait, lease))
    }
}
