//! [`Semaphore`]: Redisson's `RSemaphore`, a cluster-wide counter of permits.

use std::sync::Arc;
use std::time::Duration;

use crate::api::client::Client;
use crate::engine::master::Master;
use crate::engine::permits::{self, Set};
use crate::engine::signal::{completed, wait_for, Attempt};
use crate::engine::waiter::deadline_after;
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::keys;

/// A distributed semaphore (Redisson `RSemaphore`, same key and channel): a counter of
/// available permits at the name. `acquire` takes permits when enough are there and
/// otherwise waits for a `release` (woken by pub/sub, never polling); nothing records
/// who took them, so a holder that dies keeps its permits forever. For a concurrency
/// limit across machines whose permits come back when a holder dies, use
/// [`Client::permit_expirable_semaphore`].
///
/// One master only: over several Redlock masters the operations fail with
/// [`Error::Unsupported`] (a counter has no majority protocol; docs/deployments.md).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use std::time::Duration;
/// use redlatch::{Client, Config};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let slots = client.semaphore("gpu-slots");
/// assert!(slots.try_set_permits(2).await?);
/// slots.acquire(2).await?;
/// assert!(!slots.try_acquire(1, Duration::from_millis(50)).await?);
/// slots.release(1).await?;
/// assert!(slots.try_acquire(1, Duration::ZERO).await?);
/// # Ok(()) }) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    name: Arc<str>,
}

impl Semaphore {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Semaphore {
            client,
            name: name.into(),
        }
    }

    fn master(&self) -> Result<Arc<Master>> {
        self.client.engine.single_master(&self.name, "semaphore")
    }

    /// The semaphore's name (its Redis key).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// assert_eq!(client.semaphore("slots").name(), "slots");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits as long as it takes for `permits` permits and takes them (0: at once).
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
    /// let waiting = { let s = s.clone(); tokio::spawn(async move { s.acquire(1).await }) };
    /// s.add_permits(1).await?; // wakes the waiter
    /// waiting.await.unwrap()?;
    /// assert_eq!(s.available().await?, 0);
    /// # Ok(()) }) }
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<()> {
        self.take(permits, None).await.map(drop)
    }

    /// Waits at most `wait` (`Duration::ZERO`: one try); true if the permits were taken.
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
    /// s.set_permits(3).await?;
    /// assert!(s.try_acquire(3, Duration::ZERO).await?);
    /// assert!(!s.try_acquire(1, Duration::from_millis(20)).await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn try_acquire(&self, permits: u32, wait: Duration) -> Result<bool> {
        Ok(self.take(permits, Some(wait)).await?.is_some())
    }

    async fn take(&self, permits: u32, wait: Option<Duration>) -> Result<Option<()>> {
        let master = self.master()?;
        if permits == 0 {
            return Ok(Some(()));
        }
        let deadline = wait.and_then(deadline_after);
        let engine = &self.client.engine;
        wait_for(
            engine,
            keys::sem_channel(&self.name),
            deadline,
            "semaphore",
            || {
                let (m, name) = (master.clone(), self.name.clone());
                async move {
                    let undo_m = m.clone();
                    let undo_name = name.clone();
                    let taken = completed(
                        engine,
                        async move { permits::acquire(&m, &name, permits).await },
                        move |taken| async move {
                            if taken {
                                let _ = permits::release(&undo_m, &undo_name, permits).await;
                            }
                        },
                    )
                    .await?;
                    Ok(if taken {
                        Attempt::Done(())
                    } else {
                        Attempt::Retry(None)
                    })
                }
            },
        )
        .await
    }

    /// Gives `permits` back (any caller may: nothing records who took them) and wakes
    /// the waiters.
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
    /// s.release(2).await?; // also creates the semaphore
    /// assert_eq!(s.available().await?, 2);
    /// # Ok(()) }) }
    /// ```
    pub async fn release(&self, permits: u32) -> Result<()> {
        let master = self.master()?;
        if permits > 0 {
            permits::release(&master, &self.name, permits).await?;
        }
        Ok(())
    }

    /// The permits available now (0 when the semaphore does not exist).
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
    /// assert_eq!(s.available().await?, 0);
    /// s.set_permits(5).await?;
    /// assert_eq!(s.available().await?, 5);
    /// # Ok(()) }) }
    /// ```
    pub async fn available(&self) -> Result<i64> {
        permits::available(&*self.master()?, &self.name).await
    }

    /// Sets the available permits to `permits`, whatever they were, and wakes the
    /// waiters.
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
    /// s.set_permits(4).await?;
    /// s.set_permits(1).await?;
    /// assert_eq!(s.available().await?, 1);
    /// # Ok(()) }) }
    /// ```
    pub async fn set_permits(&self, permits: u32) -> Result<()> {
        let master = self.master()?;
        permits::set(&master, &self.name, Set::Always, permits.into())
            .await
            .map(drop)
    }

    /// Sets the permits only if the semaphore does not exist yet; true if it set them.
    /// The usual way to set one up from several processes.
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
    /// assert!(s.try_set_permits(3).await?);
    /// assert!(!s.try_set_permits(10).await?); // already set up
    /// assert_eq!(s.available().await?, 3);
    /// # Ok(()) }) }
    /// ```
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        let master = self.master()?;
        permits::set(&master, &self.name, Set::IfAbsent, permits.into()).await
    }

    /// Adds `delta` permits (negative: removes them; the count may go below 0, and
    /// then acquisitions wait until releases bring it back up). Wakes the waiters.
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
    /// s.add_permits(3).await?;
    /// s.add_permits(-1).await?;
    /// assert_eq!(s.available().await?, 2);
    /// # Ok(()) }) }
    /// ```
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        let master = self.master()?;
        permits::set(&master, &self.name, Set::Add, delta)
            .await
            .map(drop)
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish()
    }
}
