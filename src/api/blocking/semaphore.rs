//! [`Semaphore`] and [`SemaphorePermit`]: the blocking counter semaphore.

use std::sync::Arc;
use std::time::Duration;

use super::{finish, Runtime};
use crate::error::Result;

/// A blocking [`crate::Semaphore`] (Redisson `RSemaphore`): the same calls, each
/// blocking the calling thread. Permits belong to nobody, so the thread does not
/// matter: a permit taken on one thread may be given back on another.
#[derive(Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    rt: Arc<Runtime>,
}

impl Semaphore {
    pub(super) fn new(inner: crate::Semaphore, rt: Arc<Runtime>) -> Self {
        Semaphore { inner, rt }
    }

    fn permit(&self, inner: crate::SemaphorePermit) -> SemaphorePermit {
        SemaphorePermit {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    /// The semaphore's name (its Redis key).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.semaphore("slots").name(), "slots");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Blocks until one permit is taken (see [`crate::Semaphore::acquire`]).
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// std::thread::scope(|t| {
    ///     let waiting = t.spawn(|| s.acquire().map(|p| p.forget()));
    ///     s.release().unwrap(); // wakes the waiter
    ///     waiting.join().unwrap()
    /// })?;
    /// assert_eq!(s.available()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn acquire(&self) -> Result<SemaphorePermit> {
        let p = self.rt.block_on(self.inner.acquire())?;
        Ok(self.permit(p))
    }

    /// Blocks until `permits` permits are taken, all at once.
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.set_permits(3)?;
    /// let two = s.acquire_many(2)?;
    /// assert_eq!((two.permits(), s.available()?), (2, 1));
    /// # Ok(()) }) }
    /// ```
    pub fn acquire_many(&self, permits: i64) -> Result<SemaphorePermit> {
        let p = self.rt.block_on(self.inner.acquire_many(permits))?;
        Ok(self.permit(p))
    }

    /// Blocks at most `wait` for one permit; `Ok(None)` if none came.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// assert!(s.try_acquire(Duration::from_millis(20))?.is_none());
    /// # Ok(()) }) }
    /// ```
    pub fn try_acquire(&self, wait: Duration) -> Result<Option<SemaphorePermit>> {
        let p = self.rt.block_on(self.inner.try_acquire(wait))?;
        Ok(p.map(|p| self.permit(p)))
    }

    /// Blocks at most `wait` for `permits` permits, all or none.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire_many`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.set_permits(1)?;
    /// assert!(s.try_acquire_many(2, Duration::ZERO)?.is_none());
    /// assert_eq!(s.available()?, 1); // none taken
    /// # Ok(()) }) }
    /// ```
    pub fn try_acquire_many(
        &self,
        permits: i64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermit>> {
        let p = self
            .rt
            .block_on(self.inner.try_acquire_many(permits, wait))?;
        Ok(p.map(|p| self.permit(p)))
    }

    /// Gives one permit back and wakes the waiters.
    ///
    /// # Errors
    /// As [`crate::Semaphore::release`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.release()?;
    /// assert_eq!(s.available()?, 1);
    /// # Ok(()) }) }
    /// ```
    pub fn release(&self) -> Result<()> {
        self.rt.block_on(self.inner.release())
    }

    /// Gives `permits` back and wakes the waiters.
    ///
    /// # Errors
    /// As [`crate::Semaphore::release_many`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.release_many(3)?;
    /// assert_eq!(s.available()?, 3);
    /// # Ok(()) }) }
    /// ```
    pub fn release_many(&self, permits: i64) -> Result<()> {
        self.rt.block_on(self.inner.release_many(permits))
    }

    /// Gives `permits` back only if the semaphore exists; true if it did.
    ///
    /// # Errors
    /// As [`crate::Semaphore::release_if_exists`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// assert!(!s.release_if_exists(1)?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means nothing was given back: the semaphore does not exist"]
    pub fn release_if_exists(&self, permits: i64) -> Result<bool> {
        self.rt.block_on(self.inner.release_if_exists(permits))
    }

    /// Takes every available permit; how many that was.
    ///
    /// # Errors
    /// As [`crate::Semaphore::drain_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.set_permits(2)?;
    /// assert_eq!(s.drain_permits()?, 2);
    /// # Ok(()) }) }
    /// ```
    pub fn drain_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.drain_permits())
    }

    /// The permits available now.
    ///
    /// # Errors
    /// As [`crate::Semaphore::available`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.semaphore("slots").available()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn available(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available())
    }

    /// Sets the available permits, whatever they were.
    ///
    /// # Errors
    /// As [`crate::Semaphore::set_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.set_permits(4)?;
    /// assert_eq!(s.available()?, 4);
    /// # Ok(()) }) }
    /// ```
    pub fn set_permits(&self, permits: i64) -> Result<()> {
        self.rt.block_on(self.inner.set_permits(permits))
    }

    /// Sets the permits only if the semaphore does not exist yet; true if it did.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_set_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// assert!(s.try_set_permits(2)?);
    /// assert!(!s.try_set_permits(5)?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// As [`try_set_permits`](Self::try_set_permits), with a time to live.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_set_permits_with_ttl`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// assert!(s.try_set_permits_with_ttl(2, Duration::from_secs(3600))?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub fn try_set_permits_with_ttl(&self, permits: i64, ttl: Duration) -> Result<bool> {
        self.rt
            .block_on(self.inner.try_set_permits_with_ttl(permits, ttl))
    }

    /// Adds `delta` permits (negative: removes them).
    ///
    /// # Errors
    /// As [`crate::Semaphore::add_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.add_permits(2)?;
    /// s.add_permits(-3)?;
    /// assert_eq!(s.available()?, -1);
    /// # Ok(()) }) }
    /// ```
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.rt.block_on(self.inner.add_permits(delta))
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Semaphore")
            .field(&self.inner)
            .finish()
    }
}

/// Permits of a blocking [`Semaphore`]: given back when dropped (before `drop`
/// returns), by [`release`](Self::release), or kept taken by [`forget`](Self::forget).
#[must_use = "dropping the permit gives it back at once; forget() keeps it taken"]
pub struct SemaphorePermit {
    inner: Option<crate::SemaphorePermit>,
    rt: Arc<Runtime>,
}

impl SemaphorePermit {
    fn get(&self) -> &crate::SemaphorePermit {
        self.inner.as_ref().expect("present until released")
    }

    /// How many permits this holds.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.set_permits(2)?;
    /// assert_eq!(s.acquire_many(2)?.permits(), 2);
    /// # Ok(()) }) }
    /// ```
    pub fn permits(&self) -> i64 {
        self.get().permits()
    }

    /// Keeps the permits taken (see [`crate::SemaphorePermit::forget`]).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.semaphore("slots");
    /// s.set_permits(1)?;
    /// s.acquire()?.forget();
    /// assert_eq!(s.available()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn forget(mut self) {
        if let Some(p) = self.inner.take() {
            p.forget();
        }
    }

    /// Gives the permits back now.
    ///
    /// # Errors
    /// As [`crate::SemaphorePermit::release`].
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
    /// let s = client.semaphore("slots");
    /// s.set_permits(1)?;
    /// s.acquire()?.release()?;
    /// assert_eq!(s.available()?, 1);
    /// # Ok(()) }) }
    /// ```
    pub fn release(mut self) -> Result<()> {
        let inner = self.inner.take().expect("present until released");
        self.rt.block_on(inner.release())
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        finish(&self.rt, async move {
            let name = inner.name().to_string();
            if let Err(e) = inner.release().await {
                tracing::warn!(semaphore = %name, error = %e,
                    "giving permits back on drop failed; they stay taken");
            }
        });
    }
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_tuple("blocking::SemaphorePermit");
        match &self.inner {
            Some(p) => d.field(p),
            None => d.field(&"released"),
        }
        .finish()
    }
}
