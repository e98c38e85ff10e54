//! [`PermitExpirableSemaphore`]: the blocking semaphore of expiring permits.

use std::sync::Arc;
use std::time::Duration;

use super::{Guard, Permit, Runtime};
use crate::error::Result;

/// A blocking [`crate::PermitExpirableSemaphore`] (Redisson
/// `RPermitExpirableSemaphore`): the same calls, each blocking the calling thread (the
/// examples are at the async methods); the client's runtime renews watchdog-kept
/// permits in the background.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let sem = client.permit_expirable_semaphore("workers");
/// assert!(sem.try_set_permits(2)?);
/// let permit = sem.acquire()?; // kept by the watchdog
/// let leased = sem.acquire_with_lease(std::time::Duration::from_secs(5))?;
/// assert!(sem.lease_time(leased.id())?.is_some());
/// assert!(sem.try_acquire(std::time::Duration::ZERO)?.is_none()); // both taken
/// assert!(!permit.is_lost() && permit.lost_reason().is_none());
/// permit.release()?;
/// drop(leased); // given back before `drop` returns
/// assert_eq!(sem.available()?, 2);
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    inner: crate::PermitExpirableSemaphore,
    rt: Arc<Runtime>,
}

impl PermitExpirableSemaphore {
    pub(super) fn new(inner: crate::PermitExpirableSemaphore, rt: Arc<Runtime>) -> Self {
        PermitExpirableSemaphore { inner, rt }
    }

    /// Several permits, each its own blocking guard.
    fn all(&self, permits: Vec<crate::Permit>) -> Vec<Permit> {
        permits
            .into_iter()
            .map(|p| Guard::new(p, &self.rt))
            .collect()
    }

    /// The semaphore's name; as [`crate::PermitExpirableSemaphore::name`] (example there).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Blocking [`crate::PermitExpirableSemaphore::acquire`] (its example and errors are there).
    pub fn acquire(&self) -> Result<Permit> {
        self.rt.hold(self.inner.acquire())
    }

    /// Blocking [`crate::PermitExpirableSemaphore::acquire_with_lease`] (its example and errors are there).
    pub fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        self.rt.hold(self.inner.acquire_with_lease(lease))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::try_acquire`] (its example and errors are there).
    pub fn try_acquire(&self, wait: Duration) -> Result<Option<Permit>> {
        self.rt.try_hold(self.inner.try_acquire(wait))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::try_acquire_with_lease`] (its example and errors are there).
    pub fn try_acquire_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Permit>> {
        self.rt
            .try_hold(self.inner.try_acquire_with_lease(wait, lease))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::acquire_many`] (its example and errors are there).
    pub fn acquire_many(&self, permits: i64) -> Result<Vec<Permit>> {
        Ok(self.all(self.rt.call(self.inner.acquire_many(permits))?))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::acquire_many_with_lease`] (its example and errors are there).
    pub fn acquire_many_with_lease(&self, permits: i64, lease: Duration) -> Result<Vec<Permit>> {
        let taken = self.inner.acquire_many_with_lease(permits, lease);
        Ok(self.all(self.rt.call(taken)?))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::try_acquire_many`] (its example and errors are there).
    pub fn try_acquire_many(&self, permits: i64, wait: Duration) -> Result<Option<Vec<Permit>>> {
        let taken = self.rt.call(self.inner.try_acquire_many(permits, wait))?;
        Ok(taken.map(|p| self.all(p)))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::try_acquire_many_with_lease`] (its example and errors are there).
    pub fn try_acquire_many_with_lease(
        &self,
        permits: i64,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Vec<Permit>>> {
        let f = self.inner.try_acquire_many_with_lease(permits, wait, lease);
        Ok(self.rt.call(f)?.map(|p| self.all(p)))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::release`] (its example and errors are there).
    #[must_use = "false means the permit was not held: released already or expired"]
    pub fn release(&self, id: &str) -> Result<bool> {
        self.rt.call(self.inner.release(id))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::release_many`] (its example and errors are there).
    #[must_use = "false means nothing was given back: some permit was not held"]
    pub fn release_many<S: AsRef<str>>(&self, ids: &[S]) -> Result<bool> {
        self.rt.call(self.inner.release_many(ids))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::update_lease_time`] (its example and errors are there).
    #[must_use = "false means the permit was not held, so nothing was changed"]
    pub fn update_lease_time(&self, id: &str, lease: Duration) -> Result<bool> {
        self.rt.call(self.inner.update_lease_time(id, lease))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::lease_time`] (its example and errors are there).
    pub fn lease_time(&self, id: &str) -> Result<Option<Duration>> {
        self.rt.call(self.inner.lease_time(id))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::available`] (its example and errors are there).
    pub fn available(&self) -> Result<i64> {
        self.rt.call(self.inner.available())
    }

    /// Blocking [`crate::PermitExpirableSemaphore::acquired`] (its example and errors are there).
    pub fn acquired(&self) -> Result<i64> {
        self.rt.call(self.inner.acquired())
    }

    /// Blocking [`crate::PermitExpirableSemaphore::permits`] (its example and errors are there).
    pub fn permits(&self) -> Result<i64> {
        self.rt.call(self.inner.permits())
    }

    /// Blocking [`crate::PermitExpirableSemaphore::set_permits`] (its example and errors are there).
    pub fn set_permits(&self, permits: i64) -> Result<()> {
        self.rt.call(self.inner.set_permits(permits))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::try_set_permits`] (its example and errors are there).
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.rt.call(self.inner.try_set_permits(permits))
    }

    /// Blocking [`crate::PermitExpirableSemaphore::add_permits`] (its example and errors are there).
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.rt.call(self.inner.add_permits(delta))
    }
}
