//! Synchronous locks for code that does not run on an async runtime, as
//! `reqwest::blocking` is for HTTP: the same locks, on the same wire, with guards that
//! release when dropped.
//!
//! A [`Client`] owns a small tokio runtime (one worker thread, named
//! `redlatch-blocking`) that runs the watchdog and the pub/sub connection in the
//! background; each call blocks the calling thread until it is done. The holder is the
//! calling **thread**, as in Redisson's `RLock`: nested `lock()` calls on one thread
//! re-enter, other threads wait.
//!
//! ```no_run
//! use redlatch::blocking::Client;
//! use redlatch::Config;
//!
//! # fn main() -> redlatch::Result<()> {
//! let client = Client::connect(Config::single("redis://127.0.0.1:6379"))?;
//! let lock = client.lock("billing-run");
//! let guard = lock.lock()?;
//! // ... critical section; the watchdog keeps the lease meanwhile ...
//! drop(guard); // released here, before `drop` returns
//! # Ok(()) }
//! ```
//!
//! # Panics
//! Every blocking call panics when made from inside an async runtime (it would block
//! one of the runtime's threads); use the async API there. Dropping a guard inside a
//! runtime does not panic: the release then happens in the background, as with the
//! async [`LockGuard`](crate::LockGuard).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api::config::Config;
use crate::api::status::MasterStatus;
use crate::engine::Kind;
use crate::error::{Error, Result};

/// The runtime shared by a blocking client, its locks and guards. Shut down in the
/// background when the last of them goes, so that dropping one inside an async
/// context does not panic.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn start() -> Result<Arc<Runtime>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redlatch-blocking")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime(e.to_string()))?;
        Ok(Arc::new(Runtime(Some(rt))))
    }

    fn get(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("runtime lives until dropped")
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.get().block_on(f)
    }

    fn spawn<F: std::future::Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.get().spawn(f);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A blocking [`crate::Client`]: one or more masters, a watchdog and a pub/sub
/// connection, shared by every lock made from it. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<Runtime>,
}

impl Client {
    /// Starts the client's runtime and connects (see [`crate::Client::connect`]).
    ///
    /// # Errors
    /// As [`crate::Client::connect`], plus [`Error::Runtime`] if the runtime's thread
    /// cannot be started.
    ///
    /// # Panics
    /// Inside an async runtime.
    pub fn connect(config: Config) -> Result<Client> {
        let rt = Runtime::start()?;
        let inner = rt.block_on(crate::Client::connect(config))?;
        Ok(Client { inner, rt })
    }

    /// A reentrant, non-fair lock (Redisson `RLock`).
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.lock(name))
    }

    /// A reentrant FIFO lock (Redisson `RFairLock`).
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.fair_lock(name))
    }

    /// A reentrant lock whose guards carry a fencing token (Redisson `RFencedLock`).
    pub fn fenced_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.fenced_lock(name))
    }

    fn wrap(&self, inner: crate::Lock) -> Lock {
        Lock {
            inner,
            rt: self.rt.clone(),
        }
    }

    /// The async client underneath, to share its connections with async code.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// This client's UUID: the first half of every holder id it uses.
    pub fn id(&self) -> uuid::Uuid {
        self.inner.id()
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        self.inner.config()
    }

    /// Addresses (`host:port`) of the masters, in configuration order.
    pub fn masters(&self) -> Vec<String> {
        self.inner.masters()
    }

    /// Locks this client currently holds (distinct name and holder pairs).
    pub fn held_locks(&self) -> usize {
        self.inner.held_locks()
    }

    /// Waits (at most `timeout`) for background releases, then stops the watchdog and
    /// the pub/sub connections (see [`crate::Client::close`]).
    ///
    /// # Panics
    /// Inside an async runtime.
    pub fn close(self, timeout: Duration) {
        self.rt.block_on(self.inner.close(timeout));
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Client")
            .field(&self.inner)
            .finish()
    }
}

/// A blocking [`crate::Lock`]: one named lock, held per thread.
#[derive(Clone)]
pub struct Lock {
    inner: crate::Lock,
    rt: Arc<Runtime>,
}

impl Lock {
    /// The lock's name (its Redis key).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Plain, fair or fenced.
    pub fn kind(&self) -> Kind {
        self.inner.kind()
    }

    fn guard(&self, inner: crate::LockGuard) -> LockGuard {
        LockGuard {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    /// Blocks until the lock is held, under the watchdog (see [`crate::Lock::lock`]).
    ///
    /// # Errors
    /// As [`crate::Lock::lock`].
    pub fn lock(&self) -> Result<LockGuard> {
        let guard = self.rt.block_on(self.inner.lock())?;
        Ok(self.guard(guard))
    }

    /// Blocks until the lock is held for `lease`, without the watchdog.
    ///
    /// # Errors
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let guard = self.rt.block_on(self.inner.lock_with_lease(lease))?;
        Ok(self.guard(guard))
    }

    /// Blocks at most `wait`; `Ok(None)` if the lock stayed busy.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        let guard = self.rt.block_on(self.inner.try_lock(wait))?;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Blocks at most `wait`, then holds the lock for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_with_lease`].
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        let guard = (self.rt).block_on(self.inner.try_lock_with_lease(wait, lease))?;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// True if anyone holds the lock.
    ///
    /// # Errors
    /// As [`crate::Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// True if the calling thread holds the lock.
    ///
    /// # Errors
    /// As [`crate::Lock::is_held_by_current_task`].
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_held_by_current_task())
    }

    /// The calling thread's reentrant hold count; 0 if it does not hold the lock.
    ///
    /// # Errors
    /// As [`crate::Lock::hold_count`].
    pub fn hold_count(&self) -> Result<u32> {
        self.rt.block_on(self.inner.hold_count())
    }

    /// How long the lock stays held if nobody renews it; `None` if it is free.
    ///
    /// # Errors
    /// As [`crate::Lock::remaining_ttl`].
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining_ttl())
    }

    /// Deletes the lock whoever holds it and wakes its waiters.
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_unlock())
    }

    /// The lock's state on every master.
    ///
    /// # Errors
    /// As [`crate::Lock::status`].
    pub fn status(&self) -> Result<Vec<MasterStatus>> {
        self.rt.block_on(self.inner.status())
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::Lock").field(&self.inner).finish()
    }
}

/// One hold, released when dropped (before `drop` returns) or by
/// [`unlock`](Self::unlock), which reports what happened.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    inner: Option<crate::LockGuard>,
    rt: Arc<Runtime>,
}

impl LockGuard {
    fn get(&self) -> &crate::LockGuard {
        self.inner
            .as_ref()
            .expect("present until unlocked or dropped")
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// The holder id (`"{client_uuid}:{thread}"`) this hold was taken with.
    pub fn holder(&self) -> &str {
        self.get().holder()
    }

    /// The fencing token of a fenced lock; `None` for other locks.
    pub fn fencing_token(&self) -> Option<u64> {
        self.get().fencing_token()
    }

    /// True once the lock is known to be lost (see [`crate::LockGuard::lost`]).
    pub fn is_lost(&self) -> bool {
        self.get().lost().is_cancelled()
    }

    /// Cancelled when the lock is known to be lost; wait on it from async code, or
    /// check [`is_lost`](Self::is_lost).
    pub fn lost(&self) -> CancellationToken {
        self.get().lost()
    }

    /// How long the lock was valid for when acquired (see [`crate::LockGuard::validity`]).
    pub fn validity(&self) -> Duration {
        self.get().validity()
    }

    /// Releases this hold now.
    ///
    /// # Errors
    /// As [`crate::LockGuard::unlock`].
    ///
    /// # Panics
    /// Inside an async runtime.
    pub fn unlock(mut self) -> Result<()> {
        let inner = self
            .inner
            .take()
            .expect("present until unlocked or dropped");
        self.rt.block_on(inner.unlock())
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let lock = inner.name().to_string();
        let release = async move {
            match inner.unlock().await {
                Ok(()) => {}
                Err(e) if e.is_not_held() => {
                    tracing::debug!(lock, "dropped guard: the lock was already lost");
                }
                Err(e) => tracing::warn!(lock, error = %e, "release on drop failed"),
            }
        };
        // Inside a runtime, blocking would panic: release in the background on our own
        // runtime instead (the caller's may end before the release ran).
        if tokio::runtime::Handle::try_current().is_ok() {
            self.rt.spawn(release);
        } else {
            self.rt.block_on(release);
        }
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_tuple("blocking::LockGuard");
        match &self.inner {
            Some(g) => d.field(g),
            None => d.field(&"released"),
        }
        .finish()
    }
}
