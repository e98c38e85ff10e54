//! [`Lock`] and [`LockGuard`]: one named lock held per thread, and one hold of it.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{finish, Runtime};
use crate::api::status::MasterStatus;
use crate::engine::Kind;
use crate::error::Result;

/// A blocking [`crate::Lock`]: one named lock, held per thread.
#[derive(Clone)]
pub struct Lock {
    pub(super) inner: crate::Lock,
    pub(super) rt: Arc<Runtime>,
}

impl Lock {
    /// The lock's name (its Redis key).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// assert_eq!(lock.name(), "billing-run");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Plain, fair or fenced.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::Kind;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.lock("a").kind(), Kind::Plain);
    /// assert_eq!(client.fair_lock("b").kind(), Kind::Fair);
    /// assert_eq!(client.fenced_lock("c").kind(), Kind::Fenced);
    /// # Ok(()) }) }
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// assert!(lock.is_held_by_current_thread()?);
    /// // ... critical section ...
    /// guard.unlock()?;
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn lock(&self) -> Result<LockGuard> {
        let guard = self.rt.block_on(self.inner.lock())?;
        Ok(self.guard(guard))
    }

    /// Blocks until the lock is held for `lease`, without the watchdog.
    ///
    /// # Errors
    /// As [`crate::Lock::lock_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock_with_lease(Duration::from_secs(10))?;
    /// assert!(lock.remaining_ttl()?.unwrap() <= Duration::from_secs(10)); // nothing renews it
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        let guard = self.rt.block_on(self.inner.lock_with_lease(lease))?;
        Ok(self.guard(guard))
    }

    /// Blocks at most `wait`; `Ok(None)` if the lock stayed busy.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// std::thread::scope(|s| {
    ///     // Another thread gives up after 50 ms while the lock is held.
    ///     let busy = s.spawn(|| lock.try_lock(Duration::from_millis(50))).join().unwrap();
    ///     assert!(busy.unwrap().is_none());
    /// });
    /// drop(guard);
    /// let other = std::thread::spawn(move || lock.try_lock(Duration::ZERO).map(|g| g.is_some()));
    /// assert!(other.join().unwrap()?); // free now: taken at once
    /// # Ok(()) }) }
    /// ```
    pub fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        let guard = self.rt.block_on(self.inner.try_lock(wait))?;
        Ok(guard.map(|g| self.guard(g)))
    }

    /// Blocks at most `wait`, then holds the lock for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_with_lease`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock
    ///     .try_lock_with_lease(Duration::from_millis(100), Duration::from_secs(5))?
    ///     .expect("the lock is free");
    /// assert!(lock.remaining_ttl()?.unwrap() <= Duration::from_secs(5));
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// assert!(!lock.is_locked()?);
    /// let guard = lock.lock()?;
    /// assert!(lock.is_locked()?);
    /// drop(guard);
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// True if the calling thread holds the lock.
    ///
    /// # Errors
    /// As [`crate::Lock::is_held_by_current_task`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let _guard = lock.lock()?;
    /// assert!(lock.is_held_by_current_thread()?);
    /// let elsewhere = std::thread::scope(|s| s.spawn(|| lock.is_held_by_current_thread()).join().unwrap());
    /// assert!(!elsewhere?); // locked, but not by that thread
    /// # Ok(()) }) }
    /// ```
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_held_by_current_task())
    }

    /// The calling thread's reentrant hold count; 0 if it does not hold the lock.
    ///
    /// # Errors
    /// As [`crate::Lock::hold_count`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// assert_eq!(lock.hold_count()?, 0);
    /// let outer = lock.lock()?;
    /// let inner = lock.lock()?;
    /// assert_eq!(lock.hold_count()?, 2);
    /// drop(inner);
    /// assert_eq!(lock.hold_count()?, 1);
    /// drop(outer);
    /// # Ok(()) }) }
    /// ```
    pub fn hold_count(&self) -> Result<u32> {
        self.rt.block_on(self.inner.hold_count())
    }

    /// How long the lock stays held if nobody renews it; `None` if it is free.
    ///
    /// # Errors
    /// As [`crate::Lock::remaining_ttl`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// assert_eq!(lock.remaining_ttl()?, None); // free
    /// let _guard = lock.lock_with_lease(Duration::from_secs(5))?;
    /// let ttl = lock.remaining_ttl()?.expect("held");
    /// assert!(ttl > Duration::ZERO && ttl <= Duration::from_secs(5));
    /// # Ok(()) }) }
    /// ```
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining_ttl())
    }

    /// Deletes the lock whoever holds it and wakes its waiters.
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// assert!(lock.force_unlock()?); // deleted, whoever held it
    /// assert!(!lock.is_locked()?);
    /// assert!(guard.is_lost()); // this client's guard knows
    /// assert!(!lock.force_unlock()?); // nothing left to delete
    /// # Ok(()) }) }
    /// ```
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_unlock())
    }

    /// The lock's state on every master.
    ///
    /// # Errors
    /// As [`crate::Lock::status`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// let status = lock.status()?;
    /// assert_eq!(status.len(), 1); // one entry per master
    /// assert_eq!(status[0].key_type, "hash");
    /// assert_eq!(status[0].holders, [(guard.holder().to_string(), 1)]);
    /// drop(guard);
    /// assert_eq!(lock.status()?[0].key_type, "none");
    /// # Ok(()) }) }
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.lock("billing-run").lock()?;
    /// assert_eq!(guard.name(), "billing-run");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.get().name()
    }

    /// The holder id (`"{client_uuid}:{thread}"`) this hold was taken with.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// assert!(guard.holder().starts_with(&format!("{}:", client.id())));
    /// assert_eq!(lock.status()?[0].holders[0].0, guard.holder()); // the field in Redis
    /// // Another thread holds with another id.
    /// let other = std::thread::scope(|s| {
    ///     s.spawn(|| client.lock("billing-other").lock().map(|g| g.holder().to_string())).join().unwrap()
    /// })?;
    /// assert_ne!(other, guard.holder());
    /// # Ok(()) }) }
    /// ```
    pub fn holder(&self) -> &str {
        self.get().holder()
    }

    /// The fencing token of a fenced lock; `None` for other locks.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let first = client.fenced_lock("ledger").lock()?;
    /// let t1 = first.fencing_token().expect("fenced");
    /// drop(first);
    /// let second = client.fenced_lock("ledger").lock()?;
    /// assert!(second.fencing_token().unwrap() > t1);
    /// assert_eq!(client.lock("billing-run").lock()?.fencing_token(), None);
    /// # Ok(()) }) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.get().fencing_token()
    }

    /// True once the lock is known to be lost (see [`crate::LockGuard::lost`]).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// for _batch in 0..3 {
    ///     assert!(!guard.is_lost()); // check between batches of work
    ///     // ... one batch ...
    /// }
    /// lock.force_unlock()?; // an operator breaks the lock
    /// assert!(guard.is_lost());
    /// # Ok(()) }) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.get().lost().is_cancelled()
    }

    /// Cancelled when the lock is known to be lost; wait on it from async code, or
    /// check [`is_lost`](Self::is_lost).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// let lost = guard.lost(); // a CancellationToken: clone it into async code
    /// assert!(!lost.is_cancelled());
    /// lock.force_unlock()?;
    /// assert!(lost.is_cancelled());
    /// # Ok(()) }) }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.get().lost()
    }

    /// How long the lock was valid for when acquired (see [`crate::LockGuard::validity`]).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.lock("billing-run").lock_with_lease(Duration::from_secs(2))?;
    /// // lease − elapsed − drift (2 s × 0.01 + 2 ms): at most 1978 ms.
    /// assert!(guard.validity() <= Duration::from_millis(1978));
    /// # Ok(()) }) }
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.lock("billing-run");
    /// let guard = lock.lock()?;
    /// guard.unlock()?; // released; errors are reported, unlike a drop
    /// assert!(!lock.is_locked()?);
    ///
    /// let guard = lock.lock()?;
    /// lock.force_unlock()?;
    /// assert!(guard.unlock().unwrap_err().is_not_held());
    /// # Ok(()) }) }
    /// ```
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
        finish(&self.rt, async move {
            match inner.unlock().await {
                Ok(()) => {}
                Err(e) if e.is_not_held() => {
                    tracing::debug!(lock, "dropped guard: the lock was already lost");
                }
                Err(e) => tracing::warn!(lock, error = %e, "release on drop failed"),
            }
        });
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
