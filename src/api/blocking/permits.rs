//! [`PermitExpirableSemaphore`] and [`Permit`]: the blocking semaphore of expiring
//! permits.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{finish, Runtime};
use crate::error::Result;

/// A blocking [`crate::PermitExpirableSemaphore`] (Redisson
/// `RPermitExpirableSemaphore`): the same calls, each blocking the calling thread; the
/// client's runtime renews watchdog-kept permits in the background.
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    inner: crate::PermitExpirableSemaphore,
    rt: Arc<Runtime>,
}

impl PermitExpirableSemaphore {
    pub(super) fn new(inner: crate::PermitExpirableSemaphore, rt: Arc<Runtime>) -> Self {
        PermitExpirableSemaphore { inner, rt }
    }

    fn wrap(&self, inner: crate::Permit) -> Permit {
        Permit {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    fn wrap_all(&self, permits: Vec<crate::Permit>) -> Vec<Permit> {
        permits.into_iter().map(|p| self.wrap(p)).collect()
    }

    /// The semaphore's name.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.permit_expirable_semaphore("builds").name(), "builds");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Blocks until a permit is taken, kept by the watchdog.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// let p = s.acquire()?;
    /// assert_eq!(p.id().len(), 32);
    /// # Ok(()) }) }
    /// ```
    pub fn acquire(&self) -> Result<Permit> {
        let p = self.rt.block_on(self.inner.acquire())?;
        Ok(self.wrap(p))
    }

    /// Blocks until a permit that expires after `lease` is taken.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// let p = s.acquire_with_lease(Duration::from_secs(5))?;
    /// assert!(p.validity() < Duration::from_secs(5));
    /// # Ok(()) }) }
    /// ```
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        let p = self.rt.block_on(self.inner.acquire_with_lease(lease))?;
        Ok(self.wrap(p))
    }

    /// Blocks at most `wait` for a permit kept by the watchdog.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// assert!(s.try_acquire(Duration::from_millis(20))?.is_none());
    /// # Ok(()) }) }
    /// ```
    pub fn try_acquire(&self, wait: Duration) -> Result<Option<Permit>> {
        let p = self.rt.block_on(self.inner.try_acquire(wait))?;
        Ok(p.map(|p| self.wrap(p)))
    }

    /// Blocks at most `wait` for a permit that expires after `lease`.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert!(s.try_acquire_with_lease(Duration::ZERO, Duration::from_secs(5))?.is_some());
    /// # Ok(()) }) }
    /// ```
    pub fn try_acquire_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Permit>> {
        let p = (self.rt).block_on(self.inner.try_acquire_with_lease(wait, lease))?;
        Ok(p.map(|p| self.wrap(p)))
    }

    /// Blocks until `permits` permits are taken, all at once, kept by the watchdog.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire_many`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(3)?;
    /// assert_eq!(s.acquire_many(2)?.len(), 2);
    /// # Ok(()) }) }
    /// ```
    pub fn acquire_many(&self, permits: i64) -> Result<Vec<Permit>> {
        let p = self.rt.block_on(self.inner.acquire_many(permits))?;
        Ok(self.wrap_all(p))
    }

    /// Blocks until `permits` permits that expire after `lease` are taken.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquire_many_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(2)?;
    /// assert_eq!(s.acquire_many_with_lease(2, Duration::from_secs(5))?.len(), 2);
    /// # Ok(()) }) }
    /// ```
    pub fn acquire_many_with_lease(&self, permits: i64, lease: Duration) -> Result<Vec<Permit>> {
        let p = (self.rt).block_on(self.inner.acquire_many_with_lease(permits, lease))?;
        Ok(self.wrap_all(p))
    }

    /// Blocks at most `wait` for `permits` permits kept by the watchdog, all or none.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire_many`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert!(s.try_acquire_many(2, Duration::ZERO)?.is_none());
    /// # Ok(()) }) }
    /// ```
    pub fn try_acquire_many(&self, permits: i64, wait: Duration) -> Result<Option<Vec<Permit>>> {
        let p = (self.rt).block_on(self.inner.try_acquire_many(permits, wait))?;
        Ok(p.map(|p| self.wrap_all(p)))
    }

    /// Blocks at most `wait` for `permits` permits that expire after `lease`.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_acquire_many_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(2)?;
    /// let p = s.try_acquire_many_with_lease(2, Duration::ZERO, Duration::from_secs(5))?;
    /// assert_eq!(p.map(|p| p.len()), Some(2));
    /// # Ok(()) }) }
    /// ```
    pub fn try_acquire_many_with_lease(
        &self,
        permits: i64,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Vec<Permit>>> {
        let f = self.inner.try_acquire_many_with_lease(permits, wait, lease);
        Ok(self.rt.block_on(f)?.map(|p| self.wrap_all(p)))
    }

    /// Gives back the permit `id`; true if it was held.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::release`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// let p = s.acquire()?;
    /// assert!(s.release(p.id())?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the permit was not held: released already or expired"]
    pub fn release(&self, id: &str) -> Result<bool> {
        self.rt.block_on(self.inner.release(id))
    }

    /// Gives back every permit of `ids` or none; true if all were held.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::release_many`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(2)?;
    /// let held = s.acquire_many(2)?;
    /// let ids: Vec<&str> = held.iter().map(|p| p.id()).collect();
    /// assert!(s.release_many(&ids)?);
    /// assert!(!s.release_many(&ids)?); // given back already
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means nothing was given back: some permit was not held"]
    pub fn release_many<S: AsRef<str>>(&self, ids: &[S]) -> Result<bool> {
        self.rt.block_on(self.inner.release_many(ids))
    }

    /// Makes the permit `id` expire `lease` from now; true if it was held.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::update_lease_time`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// let p = s.acquire_with_lease(Duration::from_secs(5))?;
    /// assert!(s.update_lease_time(p.id(), Duration::from_secs(60))?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the permit was not held, so nothing was changed"]
    pub fn update_lease_time(&self, id: &str, lease: Duration) -> Result<bool> {
        self.rt.block_on(self.inner.update_lease_time(id, lease))
    }

    /// How long the permit `id` stays taken; `None`: it never expires on its own.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::lease_time`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// let p = s.acquire_with_lease(Duration::from_secs(5))?;
    /// assert!(s.lease_time(p.id())?.unwrap() <= Duration::from_secs(5));
    /// # Ok(()) }) }
    /// ```
    pub fn lease_time(&self, id: &str) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.lease_time(id))
    }

    /// The permits available now, after taking back the expired ones.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::available`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.permit_expirable_semaphore("builds").available()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn available(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available())
    }

    /// The permits acquired and not expired or released.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::acquired`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.permit_expirable_semaphore("builds").acquired()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn acquired(&self) -> Result<i64> {
        self.rt.block_on(self.inner.acquired())
    }

    /// All the permits, available and acquired.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(2)?;
    /// let _p = s.acquire()?;
    /// assert_eq!(s.permits()?, 2);
    /// # Ok(()) }) }
    /// ```
    pub fn permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.permits())
    }

    /// Sets the permits in all, the acquired ones included.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::set_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(3)?;
    /// assert_eq!(s.available()?, 3);
    /// # Ok(()) }) }
    /// ```
    pub fn set_permits(&self, permits: i64) -> Result<()> {
        self.rt.block_on(self.inner.set_permits(permits))
    }

    /// Sets the permits only if the semaphore does not exist yet; true if it did.
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// assert!(s.try_set_permits(2)?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// Adds `delta` available permits (negative: removes them).
    ///
    /// # Errors
    /// As [`crate::PermitExpirableSemaphore::add_permits`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.add_permits(2)?;
    /// assert_eq!(s.available()?, 2);
    /// # Ok(()) }) }
    /// ```
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.rt.block_on(self.inner.add_permits(delta))
    }
}

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::PermitExpirableSemaphore")
            .field(&self.inner)
            .finish()
    }
}

/// One permit of a blocking [`PermitExpirableSemaphore`], given back when dropped
/// (before `drop` returns) or by [`release`](Self::release).
#[must_use = "dropping the permit gives it back at once"]
pub struct Permit {
    inner: Option<crate::Permit>,
    rt: Arc<Runtime>,
}

impl Permit {
    fn get(&self) -> &crate::Permit {
        self.inner.as_ref().expect("present until released")
    }

    /// The permit's id: 32 hex digits.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert!(s.acquire()?.id().bytes().all(|b| b.is_ascii_hexdigit()));
    /// # Ok(()) }) }
    /// ```
    pub fn id(&self) -> &str {
        self.get().id()
    }

    /// The semaphore's name.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert_eq!(s.acquire()?.name(), "builds");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// True once the watchdog found the permit expired or gone.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert!(!s.acquire()?.is_lost());
    /// # Ok(()) }) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.get().lost().is_cancelled()
    }

    /// Cancelled when the permit is known to be lost.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert!(!s.acquire()?.lost().is_cancelled());
    /// # Ok(()) }) }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.get().lost()
    }

    /// How long the permit is still valid (see [`crate::Permit::validity`]).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1)?;
    /// assert!(s.acquire_with_lease(Duration::from_secs(2))?.validity() < Duration::from_secs(2));
    /// # Ok(()) }) }
    /// ```
    pub fn validity(&self) -> Duration {
        self.get().validity()
    }

    /// Gives the permit back now.
    ///
    /// # Errors
    /// As [`crate::Permit::release`].
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
    /// let s = client.permit_expirable_semaphore("builds");
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

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        finish(&self.rt, async move {
            let name = inner.name().to_string();
            match inner.release().await {
                Ok(()) => {}
                Err(e) if e.is_not_held() => {}
                Err(e) => tracing::warn!(semaphore = %name, error = %e,
                    "giving a permit back on drop failed; it expires on its own"),
            }
        });
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_tuple("blocking::Permit");
        match &self.inner {
            Some(p) => d.field(p),
            None => d.field(&"released"),
        }
        .finish()
    }
}
