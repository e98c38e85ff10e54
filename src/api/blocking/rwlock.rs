//! [`ReadWriteLock`]: the blocking read-write lock.

use std::sync::Arc;

use super::{Lock, Runtime};

/// A blocking [`crate::ReadWriteLock`] (Redisson `RReadWriteLock`): its
/// [`read`](Self::read) and [`write`](Self::write) locks are blocking [`Lock`]s held
/// per thread, as Redisson's are. Downgrades and upgrades behave as described at
/// [`crate::ReadWriteLock`].
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use std::time::Duration;
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let rw = client.read_write_lock("catalog");
/// assert!(rw.prefers_writers() && rw.name() == "catalog");
/// let write = rw.write().lock()?;
/// let read = rw.read().lock()?; // the writer's thread may read (a downgrade)
/// let other = std::thread::scope(|s| s.spawn(|| rw.read().try_lock(Duration::ZERO)).join().unwrap());
/// assert!(other?.is_none()); // other threads wait for the writer
/// drop(write);
/// drop(read);
/// assert!(!rw.prefer_writers(false).prefers_writers());
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
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

    /// The lock's name; as [`crate::ReadWriteLock::name`] (example there).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// As [`crate::ReadWriteLock::prefer_writers`] (example there).
    pub fn prefer_writers(self, prefer: bool) -> Self {
        ReadWriteLock {
            inner: self.inner.prefer_writers(prefer),
            rt: self.rt,
        }
    }

    /// As [`crate::ReadWriteLock::prefers_writers`] (example there).
    pub fn prefers_writers(&self) -> bool {
        self.inner.prefers_writers()
    }

    /// The read lock, held per thread; as [`crate::ReadWriteLock::read`] (example there).
    pub fn read(&self) -> Lock {
        self.wrap(self.inner.read())
    }

    /// The write lock, held per thread; as [`crate::ReadWriteLock::write`] (example there).
    pub fn write(&self) -> Lock {
        self.wrap(self.inner.write())
    }
}
