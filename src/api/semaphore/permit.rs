//! [`SemaphorePermit`]: the permits a [`Semaphore`] acquisition took, given back when
//! dropped (as tokio's `SemaphorePermit`).

use super::Semaphore;
use crate::error::Result;

/// Permits taken from a [`Semaphore`] by [`acquire`](Semaphore::acquire) and its
/// relatives. Dropping it gives them back in a background task (which
/// [`Client::close`](crate::Client::close) waits for); [`release`](Self::release) gives
/// them back now and reports errors; [`forget`](Self::forget) keeps them taken, for a
/// release elsewhere ([`Semaphore::release_many`], maybe by another process), as with
/// Redisson, where any caller may release.
///
/// # Examples
/// See the example on [`release`](SemaphorePermit::release).
#[must_use = "dropping the permit gives it back at once; forget() keeps it taken"]
pub struct SemaphorePermit {
    semaphore: Semaphore,
    permits: i64,
    runtime: tokio::runtime::Handle,
    armed: bool,
}

impl SemaphorePermit {
    pub(crate) fn new(semaphore: Semaphore, permits: i64) -> Self {
        SemaphorePermit {
            semaphore,
            permits,
            runtime: tokio::runtime::Handle::current(),
            armed: permits > 0,
        }
    }

    /// How many permits this holds.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn permits(&self) -> i64 {
        self.permits
    }

    /// The semaphore's name.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn name(&self) -> &str {
        self.semaphore.name()
    }

    /// Keeps the permits taken: nothing gives them back when this is dropped. Give
    /// them back with [`Semaphore::release_many`] (from anywhere), as Redisson does.
    ///
    /// # Examples
    /// See the example on [`Semaphore::acquire`](crate::Semaphore::acquire).
    pub fn forget(mut self) {
        self.armed = false;
    }

    /// Gives the permits back now and wakes the waiters.
    ///
    /// # Errors
    /// The master's error (the permits then stay taken: nothing records them, so retry
    /// with [`Semaphore::release_many`]).
    ///
    /// # Cancel safety
    /// If the future is dropped the permits may or may not have been given back.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.semaphore("uploads");
    /// s.set_permits(2).await?;
    /// {
    ///     let _permit = s.acquire().await?;
    ///     assert_eq!(s.available().await?, 1);
    /// } // dropped: given back in the background
    /// let permit = s.acquire_many(2).await?; // so two are there again
    /// assert_eq!((permit.name(), permit.permits()), ("uploads", 2));
    /// permit.release().await?; // given back now, errors reported
    /// assert_eq!(s.available().await?, 2);
    /// # Ok(()) }) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.armed = false;
        self.semaphore.release_many(self.permits).await
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (semaphore, permits) = (self.semaphore.clone(), self.permits);
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        let give = async move {
            if let Err(e) = semaphore.release_many(permits).await {
                tracing::warn!(semaphore = %semaphore.name(), permits, error = %e,
                    "giving permits back on drop failed; they stay taken");
            }
        };
        let engine = self.semaphore.client.engine.clone();
        engine.spawn_cleanup(give, &runtime);
    }
}

impl std::fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("name", &self.semaphore.name())
            .field("permits", &self.permits)
            .field("armed", &self.armed)
            .finish()
    }
}
