//! [`PermitExpirableSemaphore`] (Redisson `RPermitExpirableSemaphore`) and its
//! [`Permit`] guard.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api::client::Client;
use crate::api::config_check::check_lease;
use crate::engine::facade::{Held, Set};
pub(crate) mod many;

use crate::error::{Error, Result};

/// A semaphore whose permits expire (Redisson `RPermitExpirableSemaphore`, same keys):
/// each acquisition returns a [`Permit`] with its own id, recorded in Redis with the
/// instant it expires. A holder that dies stops renewing, its permit expires, and the
/// next acquisition takes it back: a concurrency limit across machines that survives
/// crashes (`redlatch run --permits N`).
///
/// Without a lease a permit is kept by the client's watchdog (renewed every third of
/// the watchdog timeout in the same batched round as the locks) and its
/// [`lost`](Permit::lost) token fires if it expired anyway; with a lease it simply ends.
/// Waiters wake on the semaphore's channel when a permit comes back, or when the first
/// acquired permit is due to expire. One master only ([`Error::Unsupported`] under
/// Redlock).
///
/// # Examples
/// See the example on [`acquire`](PermitExpirableSemaphore::acquire).
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: Client, name: String) -> Self {
        PermitExpirableSemaphore {
            client,
            name: name.into(),
        }
    }

    /// Checks the name, and that the deployment has one master.
    pub(crate) fn check(&self) -> Result<()> {
        self.client.engine.permits_check(&self.name)
    }

    /// The semaphore's name (the key of its counter).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits as long as it takes for a permit, kept by the watchdog.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`], [`Error::Unsupported`] under
    /// Redlock, or the master's error.
    ///
    /// # Cancel safety
    /// Dropping the future takes no permit: one whose acquisition had reached Redis is
    /// given back in the background.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.permit_expirable_semaphore("builds");
    /// assert_eq!(s.name(), "builds");
    /// s.set_permits(4).await?; // sets the count whatever it was
    /// let p = s.acquire().await?; // kept by the watchdog while `p` lives
    /// assert_eq!(p.id().len(), 32); // 16 bytes, hex
    /// assert_eq!((s.available().await?, s.acquired().await?, s.permits().await?), (3, 1, 4));
    /// let leased = s.acquire_with_lease(Duration::from_secs(10)).await?; // no watchdog
    /// assert!(leased.validity() < Duration::from_secs(10));
    /// let two = s.acquire_many(2).await?; // one permit each, with ids of their own
    /// assert_ne!(two[0].id(), two[1].id());
    /// s.add_permits(1).await?; // one more in all
    /// let more = s.acquire_many_with_lease(1, Duration::from_secs(10)).await?;
    /// assert_eq!((more.len(), s.available().await?), (1, 0));
    /// # Ok(()) }) }
    /// ```
    pub async fn acquire(&self) -> Result<Permit> {
        Ok(self.take(None, None).await?.expect("unbounded wait"))
    }

    /// Waits as long as it takes for a permit that expires after `lease`.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`Error::InvalidLease`].
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub async fn acquire_with_lease(&self, lease: Duration) -> Result<Permit> {
        Ok(self.take(None, Some(lease)).await?.expect("unbounded wait"))
    }

    /// Waits at most `wait` for a permit kept by the watchdog; `Ok(None)` if none came.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.permit_expirable_semaphore("builds");
    /// assert!(s.try_acquire(Duration::ZERO).await?.is_none()); // no permits set up
    /// assert!(s.try_set_permits(2).await?); // sets up the count once...
    /// assert!(!s.try_set_permits(9).await?); // ...and only once
    /// assert!(s.try_acquire_many(3, Duration::from_millis(20)).await?.is_none());
    /// assert_eq!(s.available().await?, 2); // none was taken: all or none
    /// let both = s.try_acquire_many_with_lease(2, Duration::ZERO, Duration::from_secs(5)).await?;
    /// assert_eq!(both.as_ref().map(|p| p.len()), Some(2));
    /// drop(both); // given back in the background
    /// // A permit whose holder dies expires with its lease, and is taken back.
    /// let short = s.try_acquire_with_lease(Duration::from_secs(5), Duration::from_millis(200)).await?;
    /// std::mem::forget(short); // its holder "dies"
    /// let _a = s.try_acquire(Duration::from_secs(5)).await?.expect("given back");
    /// let _b = s.try_acquire(Duration::from_secs(5)).await?.expect("expired, taken back");
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "tryAcquire")]
    pub async fn try_acquire(&self, wait: Duration) -> Result<Option<Permit>> {
        self.take(Some(wait), None).await
    }

    /// Waits at most `wait` for a permit that expires after `lease`.
    ///
    /// # Errors
    /// As [`acquire_with_lease`](Self::acquire_with_lease).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    #[doc(alias = "tryAcquire")]
    pub async fn try_acquire_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Permit>> {
        self.take(Some(wait), Some(lease)).await
    }

    pub(crate) async fn take(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<Permit>> {
        self.check()?;
        if let Some(lease) = lease {
            check_lease("lease", lease)?;
        }
        let engine = &self.client.engine;
        let held = engine.take_permits(&self.name, 1, wait, lease).await?;
        Ok(held.and_then(|held| held.into_iter().next().map(Permit::new)))
    }

    /// Gives back the permit `id` (from [`Permit::id`], maybe of another process);
    /// true if it was held, false if it was released already or had expired.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(3).await?;
    /// let p = s.acquire_with_lease(Duration::from_secs(5)).await?;
    /// // Anyone who knows the id may extend its lease, or read it...
    /// assert!(s.update_lease_time(p.id(), Duration::from_secs(60)).await?);
    /// assert!(s.lease_time(p.id()).await?.unwrap() > Duration::from_secs(5));
    /// // ...or give it back, from anywhere.
    /// let id = p.id().to_string();
    /// assert!(s.release(&id).await?);
    /// assert!(!s.release(&id).await?); // already given back
    /// assert!(s.lease_time(&id).await.unwrap_err().is_not_held());
    /// // Several at once, all or none.
    /// let held = s.acquire_many(2).await?;
    /// let ids: Vec<&str> = held.iter().map(|p| p.id()).collect();
    /// assert!(s.release_many(&ids).await?);
    /// assert_eq!(s.available().await?, 3);
    /// # drop(p);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the permit was not held: released already or expired"]
    pub async fn release(&self, id: &str) -> Result<bool> {
        self.check()?;
        check_id(id)?;
        self.client.engine.return_permit(&self.name, id).await
    }

    /// The permits available now, after taking back the expired ones.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    #[doc(alias = "availablePermits")]
    pub async fn available(&self) -> Result<i64> {
        Ok(self.client.engine.permits_state(&self.name).await?.0)
    }

    /// The permits acquired and not yet expired or released.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    #[doc(alias = "acquiredPermits")]
    pub async fn acquired(&self) -> Result<i64> {
        Ok(self.client.engine.permits_state(&self.name).await?.1)
    }

    /// Sets the permits in all, the acquired ones included (Redisson `setPermits`):
    /// the available count moves by the difference, and may go below 0 while more are
    /// acquired than `permits`. Wakes the waiters.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`Error::InvalidCount`] for a negative count.
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    #[doc(alias = "setPermits")]
    pub async fn set_permits(&self, permits: i64) -> Result<()> {
        self.check()?;
        crate::api::semaphore::non_negative(permits, "setting")?;
        self.client
            .engine
            .permits_set_total(&self.name, permits)
            .await
    }

    /// Sets the permits only if the semaphore does not exist yet; true if it did.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    #[must_use = "false means the semaphore existed and was left as it was"]
    #[doc(alias = "trySetPermits")]
    pub async fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.check()?;
        crate::api::semaphore::non_negative(permits, "setting")?;
        (self.client.engine)
            .permits_set(&self.name, Set::IfAbsent, permits)
            .await
    }

    /// Adds `delta` available permits (negative: removes them) and wakes the waiters.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    #[doc(alias = "addPermits")]
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        let engine = &self.client.engine;
        engine
            .permits_set(&self.name, Set::Add, delta)
            .await
            .map(drop)
    }
}

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.name)
            .finish()
    }
}

/// A permit id as we make and Redisson stores them (16 bytes as 32 hex digits), else
/// [`Error::InvalidName`].
pub(crate) fn check_id(id: &str) -> Result<()> {
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::InvalidName(format!(
            "permit id {id:?} is not 32 hex digits"
        )));
    }
    Ok(())
}

/// One permit of a [`PermitExpirableSemaphore`]. Dropping it gives the permit back in
/// a background task; [`release`](Permit::release) gives it back and reports errors.
///
/// # Examples
/// See the examples on [`PermitExpirableSemaphore::acquire`] and [`Permit::release`].
#[must_use = "dropping the permit gives it back at once"]
pub struct Permit {
    /// The permit, given back by `release` or on drop (engine/holding/held.rs).
    held: Held,
}

impl Permit {
    /// The guard of a permit just taken: registered in the hold table, watched.
    pub(crate) fn new(held: Held) -> Permit {
        Permit { held }
    }

    /// The permit's id: 32 hex digits (Redisson's format).
    ///
    /// # Examples
    /// See the example on [`PermitExpirableSemaphore::acquire`].
    pub fn id(&self) -> &str {
        self.held.holder()
    }

    /// The semaphore's name.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// Cancelled when the watchdog finds the permit expired or gone (or could not renew
    /// it in time), or the client shut down. A permit with a lease is never reported:
    /// it ends [`validity`](Self::validity) after acquisition.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn lost(&self) -> CancellationToken {
        self.held.lost()
    }

    /// How long the permit is still valid: its lease less the drift allowance, counted
    /// from the acquisition or the last renewal that counted (replicated, with replica
    /// sync); the watchdog extends it while the permit lives. Zero once it ran out.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn validity(&self) -> Duration {
        (self.held.valid_until()).saturating_duration_since(std::time::Instant::now())
    }

    /// Why the permit was lost, once [`lost()`](Self::lost) has fired (as
    /// [`LockGuard::lost_reason`](crate::LockGuard::lost_reason)).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn lost_reason(&self) -> Option<crate::LostReason> {
        self.held.lost_reason()
    }

    /// Whether the permit is at risk: `Some(end of validity)` while renewals fail on a
    /// majority (as [`LockGuard::at_risk`](crate::LockGuard::at_risk)).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub fn at_risk(&self) -> tokio::sync::watch::Receiver<Option<std::time::Instant>> {
        self.held.at_risk()
    }

    /// Gives the permit back now and wakes a waiter.
    ///
    /// # Errors
    /// [`Error::NotHeld`] if the permit had expired, was released by id, or was
    /// reported lost; the master's error if it could not be reached (the permit then
    /// expires on its own).
    ///
    /// # Cancel safety
    /// If the future is dropped the release may or may not have happened; the lease
    /// bounds how long the permit stays taken.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.permit_expirable_semaphore("builds");
    /// s.set_permits(1).await?;
    /// let p = s.acquire().await?;
    /// assert_eq!(p.name(), "builds");
    /// assert!(!p.validity().is_zero());
    /// assert_eq!(*p.at_risk().borrow(), None); // renewals succeed
    /// assert!(!p.lost().is_cancelled() && p.lost_reason().is_none()); // held
    /// p.release().await?; // given back now, errors reported
    /// assert_eq!(s.available().await?, 1);
    ///
    /// let p = s.acquire().await?;
    /// let id = p.id().to_string();
    /// assert!(s.release(&id).await?); // released by id, from anywhere
    /// assert!(p.release().await.unwrap_err().is_not_held());
    /// # Ok(()) }) }
    /// ```
    pub async fn release(self) -> Result<()> {
        self.held.release().await
    }
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("name", &self.held.name())
            .field("id", &self.held.holder())
            .field("watchdog", &self.held.watchdog())
            .finish()
    }
}
