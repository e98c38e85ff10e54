//! [`Semaphore`]: Redisson's `RSemaphore`, a cluster-wide counter of permits.

pub(crate) mod permit;

use std::sync::Arc;
use std::time::Duration;

use crate::api::client::Client;
use crate::engine::facade::Set;
use crate::error::{Error, Result};
use permit::SemaphorePermit;

/// A distributed semaphore (Redisson `RSemaphore`, same key and channel): a counter of
/// available permits at the name. `acquire` takes permits when enough are there and
/// otherwise waits for a `release` (woken by pub/sub, never polling), and hands back a
/// [`SemaphorePermit`] that gives them back when dropped. Nothing in Redis records who
/// took them, so a holder that dies keeps its permits forever. For a concurrency limit
/// across machines whose permits come back when a holder dies, use
/// [`Client::permit_expirable_semaphore`].
///
/// Every count is an `i64`, as Redis keeps it: `available()` may be negative after
/// `add_permits(-n)`. A negative count where Redisson refuses one fails with
/// [`Error::InvalidCount`].
///
/// One master only: over several Redlock masters the operations fail with
/// [`Error::Unsupported`] (a counter has no majority protocol; docs/deployments.md).
///
/// # Examples
/// See the example on [`acquire`](Semaphore::acquire).
#[derive(Clone)]
pub struct Semaphore {
    pub(crate) client: Client,
    name: Arc<str>,
}

/// `n` if it is not negative, else [`Error::InvalidCount`] naming `what`.
pub(crate) fn non_negative(n: i64, what: &str) -> Result<i64> {
    if n < 0 {
        return Err(Error::InvalidCount(format!(
            "{what} {n}: a count of permits cannot be negative"
        )));
    }
    Ok(n)
}

/// A time to live in whole milliseconds, at least one.
fn ttl_millis(ttl: Duration) -> Result<u64> {
    match u64::try_from(ttl.as_millis()) {
        Ok(ms) if (1..=i64::MAX as u64).contains(&ms) => Ok(ms),
        _ => Err(Error::InvalidLease(format!(
            "time to live {ttl:?}: it must be at least 1ms and fit Redis' milliseconds"
        ))),
    }
}

impl Semaphore {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Semaphore {
            client,
            name: name.into(),
        }
    }

    /// The semaphore's name (its Redis key).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits as long as it takes for one permit and takes it (Redisson `acquire()`).
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (the key is not a counter),
    /// [`Error::BadData`], [`Error::Unsupported`] under Redlock, or the master's error.
    ///
    /// # Cancel safety
    /// Dropping the future takes no permit: one whose acquisition had reached Redis is
    /// given back in the background.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.semaphore("slots");
    /// assert_eq!(s.name(), "slots");
    /// assert_eq!(s.available().await?, 0); // never set up
    /// let waiting = { let s = s.clone(); tokio::spawn(async move { s.acquire().await }) };
    /// s.add_permits(1).await?; // wakes the waiter
    /// let permit = waiting.await.unwrap()?;
    /// assert_eq!(s.available().await?, 0);
    /// permit.forget(); // keep it taken: nothing gives it back
    /// assert_eq!(s.available().await?, 0);
    ///
    /// s.add_permits(5).await?; // (a negative delta takes permits away)
    /// let three = s.acquire_many(3).await?;
    /// assert_eq!((three.permits(), s.available().await?), (3, 2));
    /// assert!(s.acquire_many(-1).await.is_err()); // Error::InvalidCount
    /// # Ok(()) }) }
    /// ```
    pub async fn acquire(&self) -> Result<SemaphorePermit> {
        self.acquire_many(1).await
    }

    /// Waits as long as it takes for `permits` permits and takes them all at once
    /// (Redisson `acquire(permits)`; 0: at once).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`Error::InvalidCount`] for a negative count.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub async fn acquire_many(&self, permits: i64) -> Result<SemaphorePermit> {
        let taken = self.take(permits, None).await?;
        Ok(taken.expect("an unbounded wait ends with the permits"))
    }

    /// Waits at most `wait` for one permit (`Duration::ZERO`: one try, Redisson's
    /// `tryAcquire()`); `Ok(None)` if none came.
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
    /// let s = client.semaphore("slots");
    /// assert!(s.try_acquire(Duration::ZERO).await?.is_none()); // never set up
    /// assert!(s.try_set_permits(2).await?); // sets up the count once...
    /// assert!(!s.try_set_permits(10).await?); // ...and only once
    /// let both = s.try_acquire_many(2, Duration::ZERO).await?.expect("2 available");
    /// assert!(s.try_acquire(Duration::from_millis(50)).await?.is_none());
    /// drop(both); // given back in the background
    /// let one = s.try_acquire(Duration::from_secs(5)).await?.expect("given back");
    /// one.release().await?;
    /// s.set_permits(1).await?; // sets the count whatever it was
    /// assert_eq!(s.available().await?, 1);
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "tryAcquire")]
    pub async fn try_acquire(&self, wait: Duration) -> Result<Option<SemaphorePermit>> {
        self.take(1, Some(wait)).await
    }

    /// Waits at most `wait` for `permits` permits, all or none; `Ok(None)` if they did
    /// not come.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    #[doc(alias = "tryAcquire")]
    pub async fn try_acquire_many(
        &self,
        permits: i64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermit>> {
        self.take(permits, Some(wait)).await
    }

    async fn take(&self, permits: i64, wait: Option<Duration>) -> Result<Option<SemaphorePermit>> {
        let engine = &self.client.engine;
        engine.semaphore_check(&self.name)?;
        non_negative(permits, "acquiring")?;
        let taken = permits == 0 || engine.semaphore_acquire(&self.name, permits, wait).await?;
        Ok(taken.then(|| SemaphorePermit::new(self.clone(), permits)))
    }

    /// Gives one permit back (any caller may: nothing records who took them) and wakes
    /// the waiters; creates the semaphore if it does not exist (Redisson `release()`).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let s = client.semaphore("slots");
    /// assert!(!s.release_if_exists(1).await?); // not set up: left alone
    /// s.release().await?; // also creates the semaphore
    /// assert_eq!(s.available().await?, 1);
    /// s.acquire_many(1).await?.forget(); // taken here...
    /// s.release_many(2).await?; // ...given back elsewhere, by count (and one more)
    /// assert!(s.release_if_exists(1).await?);
    /// assert_eq!(s.drain_permits().await?, 3); // the caller owns all three now
    /// assert_eq!(s.available().await?, 0);
    ///
    /// // Set up for a while only: gone with its time to live, unless used.
    /// let nightly = client.semaphore("nightly-slots");
    /// assert!(nightly.try_set_permits_with_ttl(2, std::time::Duration::from_secs(60)).await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn release(&self) -> Result<()> {
        self.release_many(1).await
    }

    /// Gives `permits` back and wakes the waiters (Redisson `release(permits)`; 0:
    /// nothing is sent).
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    #[doc(alias = "release")]
    pub async fn release_many(&self, permits: i64) -> Result<()> {
        let engine = &self.client.engine;
        engine.semaphore_check(&self.name)?;
        non_negative(permits, "releasing")?;
        if permits > 0 {
            engine.semaphore_release(&self.name, permits, false).await?;
        }
        Ok(())
    }

    /// Gives `permits` back only if the semaphore exists (Redisson 4.0
    /// `releaseIfExists`): true if they were given back, false if there was no
    /// semaphore (nothing is created) or `permits` is 0.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    #[must_use = "false means nothing was given back: the semaphore does not exist"]
    pub async fn release_if_exists(&self, permits: i64) -> Result<bool> {
        let engine = &self.client.engine;
        engine.semaphore_check(&self.name)?;
        non_negative(permits, "releasing")?;
        if permits == 0 {
            return Ok(false);
        }
        engine.semaphore_release(&self.name, permits, true).await
    }

    /// Takes every available permit at once and returns how many that was (0 when the
    /// semaphore does not exist; negative if the count was) (Redisson `drainPermits`).
    /// The count is 0 afterwards; nobody is woken.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    #[doc(alias = "drainPermits")]
    pub async fn drain_permits(&self) -> Result<i64> {
        self.client.engine.semaphore_drain(&self.name).await
    }

    /// The permits available now (0 when the semaphore does not exist).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    #[doc(alias = "availablePermits")]
    pub async fn available(&self) -> Result<i64> {
        self.client.engine.semaphore_available(&self.name).await
    }

    /// Sets the available permits to `permits`, whatever they were, and wakes the
    /// waiters (Redisson 3's `setPermits`, gone from `RSemaphore` in 4; a plain SET,
    /// which drops a time to live).
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    #[doc(alias = "setPermits")]
    pub async fn set_permits(&self, permits: i64) -> Result<()> {
        self.set(Set::Always, permits, None).await.map(drop)
    }

    /// Sets the permits only if the semaphore does not exist yet; true if it set them.
    /// The usual way to set one up from several processes.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    #[must_use = "false means the semaphore existed and was left as it was"]
    #[doc(alias = "trySetPermits")]
    pub async fn try_set_permits(&self, permits: i64) -> Result<bool> {
        self.set(Set::IfAbsent, permits, None).await
    }

    /// As [`try_set_permits`](Self::try_set_permits), and the semaphore is deleted
    /// `ttl` after it was set up (Redisson `trySetPermits(permits, timeToLive)`), unless
    /// [`set_permits`](Self::set_permits) or [`add_permits`](Self::add_permits) rewrite
    /// it first (they drop the time to live, as in Redisson).
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many), plus [`Error::InvalidLease`] for a
    /// `ttl` under a millisecond (Redis counts it in whole milliseconds).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    #[must_use = "false means the semaphore existed and was left as it was"]
    pub async fn try_set_permits_with_ttl(&self, permits: i64, ttl: Duration) -> Result<bool> {
        self.set(Set::IfAbsent, permits, Some(ttl)).await
    }

    /// Adds `delta` permits (negative: removes them; the count may go below 0, and
    /// then acquisitions wait until releases bring it back up). Wakes the waiters.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    #[doc(alias = "addPermits")]
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        let engine = &self.client.engine;
        (engine
            .semaphore_set(&self.name, Set::Add, delta, None)
            .await)
            .map(drop)
    }

    /// Sets (or sets if absent) `permits` after checking them, with a time to live.
    async fn set(&self, how: Set, permits: i64, ttl: Option<Duration>) -> Result<bool> {
        let engine = &self.client.engine;
        engine.semaphore_check(&self.name)?;
        non_negative(permits, "setting")?;
        let ttl_ms = ttl.map(ttl_millis).transpose()?;
        engine.semaphore_set(&self.name, how, permits, ttl_ms).await
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish()
    }
}
