//! [`MultiLock`] and [`MultiGuard`]: several blocking locks taken as one.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{finish, Lock, Runtime};
use crate::error::Result;

/// A blocking [`crate::MultiLock`] (Redisson `RedissonMultiLock`): all the locks or
/// none, without deadlock between overlapping sets; held by the calling thread.
#[derive(Clone)]
pub struct MultiLock {
    inner: crate::MultiLock,
    rt: Arc<Runtime>,
}

impl MultiLock {
    /// The given blocking locks (of any kind, of one client) as one.
    ///
    /// # Panics
    /// When `locks` is empty and so names no client to run on.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::{Client, MultiLock};
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let both = MultiLock::new([client.fair_lock("queue:a"), client.read_write_lock("catalog").write()]);
    /// let guard = both.lock()?;
    /// assert_eq!(guard.names().len(), 2);
    /// # Ok(()) }) }
    /// ```
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

    fn guard(&self, inner: crate::MultiGuard) -> MultiGuard {
        MultiGuard {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    /// The names of the locks, in the order they are taken.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let m = client.multi_lock(["b", "a"]);
    /// assert_eq!(m.names(), ["a", "b"]); // a fixed order for every caller
    /// # Ok(()) }) }
    /// ```
    pub fn names(&self) -> Vec<&str> {
        self.inner.locks().iter().map(crate::Lock::name).collect()
    }

    /// Blocks until every lock is held, under the watchdog.
    ///
    /// # Errors
    /// As [`crate::MultiLock::lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["account:1", "account:2"]).lock()?;
    /// assert!(client.lock("account:1").is_locked()?);
    /// drop(guard); // both released before drop returns
    /// assert!(!client.lock("account:1").is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn lock(&self) -> Result<MultiGuard> {
        let guard = self.rt.block_on(self.inner.lock())?;
        Ok(self.guard(guard))
    }

    /// Blocks until every lock is held for `lease`, without the watchdog.
    ///
    /// # Errors
    /// As [`crate::MultiLock::lock_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["a", "b"]).lock_with_lease(Duration::from_secs(5))?;
    /// assert!(guard.validity() < Duration::from_secs(5));
    /// # Ok(()) }) }
    /// ```
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        let guard = self.rt.block_on(self.inner.lock_with_lease(lease))?;
        Ok(self.guard(guard))
    }

    /// Blocks at most `wait`; `Ok(None)` if the locks could not all be taken.
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let m = client.multi_lock(["a", "b"]);
    /// let _b = client.lock("b").lock()?;
    /// let other = std::thread::scope(|s| s.spawn(|| m.try_lock(Duration::from_millis(50)).map(|g| g.is_some())).join().unwrap())?;
    /// assert!(!other); // "b" is held by this thread
    /// assert!(!client.lock("a").is_locked()?); // and "a" was not kept
    /// # Ok(()) }) }
    /// ```
    pub fn try_lock(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        let guard = self.rt.block_on(self.inner.try_lock(wait))?;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Blocks at most `wait`, then holds every lock for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_lock_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let m = client.multi_lock(["a", "b"]);
    /// let guard = m.try_lock_with_lease(Duration::ZERO, Duration::from_secs(5))?.expect("free");
    /// assert!(client.lock("b").is_locked()?);
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        let guard = (self.rt).block_on(self.inner.try_lock_with_lease(wait, lease))?;
        Ok(guard.map(|g| self.guard(g)))
    }
}

impl std::fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::MultiLock")
            .field(&self.inner)
            .finish()
    }
}

/// Every lock of a [`MultiLock`], released when dropped (before `drop` returns) or by
/// [`unlock`](Self::unlock), which reports what happened.
#[must_use = "dropping the guard releases the locks at once"]
pub struct MultiGuard {
    inner: Option<crate::MultiGuard>,
    rt: Arc<Runtime>,
}

impl MultiGuard {
    fn get(&self) -> &crate::MultiGuard {
        self.inner
            .as_ref()
            .expect("present until unlocked or dropped")
    }

    /// The names of the locks held.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["x", "y"]).lock()?;
    /// assert_eq!(guard.names(), ["x", "y"]);
    /// # Ok(()) }) }
    /// ```
    pub fn names(&self) -> Vec<&str> {
        self.get().names()
    }

    /// True once any of the locks is known to be lost.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["x", "y"]).lock()?;
    /// assert!(!guard.is_lost());
    /// client.lock("y").force_unlock()?;
    /// let lost = guard.lost();
    /// let rt = tokio::runtime::Runtime::new().unwrap();
    /// rt.block_on(async { tokio::time::timeout(std::time::Duration::from_secs(5), lost.cancelled()).await }).unwrap();
    /// assert!(guard.is_lost());
    /// # Ok(()) }) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.get().lost().is_cancelled()
    }

    /// Cancelled as soon as any of the locks is known to be lost.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["x", "y"]).lock()?;
    /// assert!(!guard.lost().is_cancelled());
    /// # Ok(()) }) }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.get().lost()
    }

    /// The shortest validity of the locks held (see [`crate::MultiGuard::validity`]).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["x"]).lock_with_lease(Duration::from_secs(2))?;
    /// assert!(guard.validity() < Duration::from_secs(2));
    /// # Ok(()) }) }
    /// ```
    pub fn validity(&self) -> Duration {
        self.get().validity()
    }

    /// Releases every lock now.
    ///
    /// # Errors
    /// As [`crate::MultiGuard::unlock`].
    ///
    /// # Panics
    /// Inside an async runtime.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.multi_lock(["x", "y"]).lock()?;
    /// client.lock("x").force_unlock()?;
    /// assert!(guard.unlock().unwrap_err().is_not_held()); // "y" is released all the same
    /// assert!(!client.lock("y").is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn unlock(mut self) -> Result<()> {
        let inner = self
            .inner
            .take()
            .expect("present until unlocked or dropped");
        self.rt.block_on(inner.unlock())
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        finish(&self.rt, async move {
            if let Err(e) = inner.unlock().await {
                if !e.is_not_held() {
                    tracing::warn!(error = %e, "multi-lock release on drop failed");
                }
            }
        });
    }
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_tuple("blocking::MultiGuard");
        match &self.inner {
            Some(g) => d.field(g),
            None => d.field(&"released"),
        }
        .finish()
    }
}
