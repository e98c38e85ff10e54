//! [`ReadWriteLock`]: the blocking read-write lock.

use std::sync::Arc;

use super::{Lock, Runtime};

/// A blocking [`crate::ReadWriteLock`] (Redisson `RReadWriteLock`): its
/// [`read`](Self::read) and [`write`](Self::write) locks are blocking [`Lock`]s held
/// per thread, as Redisson's are. Downgrades and upgrades behave as described at
/// [`crate::ReadWriteLock`].
#[derive(Clone)]
pub struct ReadWriteLock {
    inner: crate::ReadWriteLock,
    rt: Arc<Runtime>,
}

impl ReadWriteLock {
    pub(super) fn new(inner: crate::ReadWriteLock, rt: Arc<Runtime>) -> Self {
        ReadWriteLock { inner, rt }
    }

    fn wrap(&self, lock: crate::Lock) -> Lock {
        Lock {
            inner: lock.per_thread(),
            rt: self.rt.clone(),
        }
    }

    /// The lock's name (its Redis key).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.read_write_lock("catalog").name(), "catalog");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same lock with writer preference on or off (see
    /// [`crate::ReadWriteLock::prefer_writers`]).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let rw = client.read_write_lock("catalog").prefer_writers(false);
    /// assert!(!rw.prefers_writers());
    /// # Ok(()) }) }
    /// ```
    pub fn prefer_writers(self, prefer: bool) -> Self {
        ReadWriteLock {
            inner: self.inner.prefer_writers(prefer),
            rt: self.rt,
        }
    }

    /// True if waiting writers keep new readers out (the default).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert!(client.read_write_lock("catalog").prefers_writers());
    /// # Ok(()) }) }
    /// ```
    pub fn prefers_writers(&self) -> bool {
        self.inner.prefers_writers()
    }

    /// The read lock: shared between readers, exclusive of the writer.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::{Config, Kind};
    /// let client = Client::connect(Config::single(url))?;
    /// let read = client.read_write_lock("catalog").read();
    /// assert_eq!(read.kind(), Kind::Read);
    /// let a = read.lock()?;
    /// let b = std::thread::scope(|s| s.spawn(|| read.try_lock(std::time::Duration::ZERO).map(|g| g.is_some())).join().unwrap())?;
    /// assert!(b); // another thread reads too
    /// drop(a);
    /// # Ok(()) }) }
    /// ```
    pub fn read(&self) -> Lock {
        self.wrap(self.inner.read())
    }

    /// The write lock: exclusive of readers and other writers.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let rw = client.read_write_lock("catalog");
    /// let w = rw.write().lock()?;
    /// let read = rw.read();
    /// let other = std::thread::scope(|s| s.spawn(|| read.try_lock(Duration::from_millis(50)).map(|g| g.is_some())).join().unwrap())?;
    /// assert!(!other); // no reader while written
    /// w.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn write(&self) -> Lock {
        self.wrap(self.inner.write())
    }
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::ReadWriteLock")
            .field(&self.inner)
            .finish()
    }
}
