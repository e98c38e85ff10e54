//! [`ReadWriteLock`]: Redisson's `RReadWriteLock`, a pair of [`Lock`]s on one name.

use std::sync::Arc;

use crate::api::client::Client;
use crate::api::lock::{Kind, Lock};

/// A read-write lock: many readers or one writer (Redisson `RReadWriteLock`, same keys,
/// fields and messages, so Java and Rust processes share it).
///
/// [`read`](Self::read) and [`write`](Self::write) are ordinary [`Lock`]s (kinds
/// [`Kind::Read`] and [`Kind::Write`]) with the whole `lock` / `try_lock` /
/// `lock_with_lease` / query API, guards with [`lost`](crate::LockGuard::lost), the
/// watchdog and cancel safety. Both re-enter inside their guard's
/// [scope](crate::LockGuard::scope). Inside a write guard's scope the read lock may be
/// taken too (a downgrade: release the write lock and keep reading); inside a read
/// guard's scope the write lock is refused with [`Error::Upgrade`](crate::Error::Upgrade)
/// instead of waiting for itself forever.
///
/// **Writer preference.** A writer that waits records its intent in Redis
/// (`redlatch_rwlock_writers:{name}`, not a Redisson key); new readers stay out while
/// one is recorded, readers that already hold it finish, and the writer gets in. With
/// Redisson's own semantics (no preference), a steady stream of overlapping readers
/// keeps a writer out indefinitely (docs/deployments.md, "Read-write lock"). The intent lapses
/// `fair_stale_timeout` after the writer stops refreshing it (it refreshes every third
/// of that while it waits), so a dead writer cannot keep readers out for long.
/// [`prefer_writers(false)`](Self::prefer_writers) gives Redisson's behaviour.
/// Redisson's readers do not know the intent and may still overtake a waiting writer.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use std::time::Duration;
/// use redlatch::{Client, Config, Error};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let rw = client.read_write_lock("catalog");
/// assert_eq!((rw.name(), rw.read().name(), rw.write().name()), ("catalog", "catalog", "catalog"));
/// assert!(rw.prefers_writers()); // a waiting writer holds new readers back
/// assert!(!rw.clone().prefer_writers(false).prefers_writers()); // as Redisson does
/// let r1 = rw.read().lock().await?;
/// let other = rw.clone();
/// // Readers share...
/// let shared = tokio::spawn(async move { other.read().try_lock(Duration::ZERO).await.map(|g| g.is_some()) });
/// assert!(shared.await.unwrap()?);
/// // ...a writer waits for them.
/// let other = rw.clone();
/// let excluded = tokio::spawn(async move { other.write().try_lock(Duration::ZERO).await.map(|g| g.is_none()) });
/// assert!(excluded.await.unwrap()?);
/// r1.unlock().await?;
/// // A downgrade: write, then read in the writer's scope, then let the write go.
/// let w = rw.write().lock().await?;
/// assert!(rw.write().is_locked().await?);
/// let r = w.scope(rw.read().lock()).await?;
/// w.unlock().await?;
/// assert!(rw.read().is_locked().await?);
/// // An upgrade is refused instead of waiting for ourselves.
/// let upgrade = r.scope(rw.write().lock()).await;
/// assert!(matches!(upgrade, Err(Error::Upgrade { .. })));
/// r.unlock().await?;
/// # Ok(()) }) }
/// ```
#[derive(Clone)]
pub struct ReadWriteLock {
    client: Client,
    name: Arc<str>,
    prefer_writers: bool,
}

impl ReadWriteLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        ReadWriteLock {
            client,
            name: name.into(),
            prefer_writers: true,
        }
    }

    /// The lock's name (its Redis key).
    ///
    /// # Examples
    /// See the example on [`ReadWriteLock`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether waiting writers keep new readers out (default true); `false` gives
    /// Redisson's semantics, where readers may overtake a waiting writer forever.
    ///
    /// # Examples
    /// See the example on [`ReadWriteLock`].
    pub fn prefer_writers(mut self, prefer: bool) -> Self {
        self.prefer_writers = prefer;
        self
    }

    /// True if waiting writers keep new readers out.
    ///
    /// # Examples
    /// See the example on [`ReadWriteLock`].
    pub fn prefers_writers(&self) -> bool {
        self.prefer_writers
    }

    /// The shared side: any number of tasks may hold it while nobody writes.
    ///
    /// # Examples
    /// See the example on [`ReadWriteLock`].
    #[doc(alias = "readLock")]
    pub fn read(&self) -> Lock {
        Lock::new(self.client.clone(), self.name.clone(), Kind::Read)
    }

    /// The exclusive side: one holder has it, and nobody reads meanwhile (except in
    /// the write guard's [scope](crate::LockGuard::scope): a downgrade).
    ///
    /// # Examples
    /// See the example on [`ReadWriteLock`].
    #[doc(alias = "writeLock")]
    pub fn write(&self) -> Lock {
        Lock::writer(self.client.clone(), self.name.clone(), self.prefer_writers)
    }
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("name", &self.name)
            .field("prefer_writers", &self.prefer_writers)
            .finish()
    }
}
