//! [`Client`]: the blocking client and its getters.

use std::sync::Arc;
use std::time::Duration;

use super::{
    CountDownLatch, FasterMultiLock, Lock, MultiLock, PermitExpirableSemaphore, ReadWriteLock,
    Runtime, Semaphore,
};
use crate::api::config::Config;
use crate::error::Result;

/// A blocking [`crate::Client`]: one or more masters, a watchdog and a pub/sub
/// connection, shared by every lock made from it. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(super) inner: crate::Client,
    pub(super) rt: Arc<Runtime>,
}

impl Client {
    /// Starts the client's runtime and connects (see [`crate::Client::connect`]).
    ///
    /// # Errors
    /// As [`crate::Client::connect`], plus [`Error::Runtime`](crate::Error::Runtime) if the runtime's thread
    /// cannot be started.
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
    /// assert_eq!(client.masters().len(), 1);
    /// # Ok(()) }) }
    /// ```
    pub fn connect(config: Config) -> Result<Client> {
        let rt = Runtime::start()?;
        let inner = rt.block_on(crate::Client::connect(config))?;
        Ok(Client { inner, rt })
    }

    /// A reentrant, non-fair lock (Redisson `RLock`).
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
    /// let nested = lock.lock()?; // the same thread re-enters
    /// assert_eq!(lock.hold_count()?, 2);
    /// nested.unlock()?;
    /// guard.unlock()?;
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.lock(name))
    }

    /// A reentrant FIFO lock (Redisson `RFairLock`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.fair_lock("queue:payments");
    /// assert_eq!(lock.kind(), redlatch::Kind::Fair);
    /// let guard = lock.try_lock(Duration::from_millis(100))?.expect("free");
    /// assert!(lock.is_held_by_current_thread()?);
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.fair_lock(name))
    }

    /// A reentrant lock whose guards carry a fencing token (Redisson `RFencedLock`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.fenced_lock("ledger");
    /// let t1 = lock.lock()?.fencing_token().expect("a fenced lock's guard has a token");
    /// let t2 = lock.lock()?.fencing_token().unwrap();
    /// assert!(t2 > t1); // storage rejects writes tagged t1 now
    /// # Ok(()) }) }
    /// ```
    pub fn fenced_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.fenced_lock(name))
    }

    /// A non-reentrant lock (Redisson `getNonReentrantLock`), held per thread: the
    /// thread that holds it is refused with [`Error::Reentry`](crate::Error::Reentry)
    /// when it asks again, by `lock()` and `try_lock()` alike, as Redisson throws
    /// `IllegalMonitorStateException`; other threads wait. See
    /// [`crate::Client::non_reentrant_lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::{Config, Error};
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.non_reentrant_lock("import:daily");
    /// let guard = lock.lock()?;
    /// assert!(matches!(lock.try_lock(Duration::ZERO), Err(Error::Reentry { .. })));
    /// let other = std::thread::scope(|s| s.spawn(|| lock.try_lock(Duration::ZERO)).join());
    /// assert!(other.unwrap()?.is_none()); // another thread: busy, not an error
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.non_reentrant_lock(name))
    }

    /// A non-reentrant FIFO lock (Redisson `getNonReentrantFairLock`), held per thread.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::{Config, Error};
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.non_reentrant_fair_lock("queue:refunds");
    /// let guard = lock.lock()?;
    /// assert!(matches!(lock.lock(), Err(Error::Reentry { .. })));
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.non_reentrant_fair_lock(name))
    }

    /// A spin lock (Redisson `getSpinLock`), held per thread and reentrant per thread:
    /// waiters retry after a back-off instead of subscribing. See
    /// [`crate::Client::spin_lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.spin_lock("reports");
    /// let outer = lock.lock()?;
    /// let inner = lock.lock()?; // the same thread re-enters, as with Redisson
    /// assert_eq!(lock.hold_count()?, 2);
    /// inner.unlock()?;
    /// outer.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn spin_lock(&self, name: impl Into<String>) -> Lock {
        self.wrap(self.inner.spin_lock(name))
    }

    /// A spin lock whose waits are spaced by `backoff` (Redisson
    /// `getSpinLock(name, backOff)`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::{BackOff, Config};
    /// let client = Client::connect(Config::single(url))?;
    /// let lock = client.spin_lock_with("reports", BackOff::constant(Duration::from_millis(2))?);
    /// let guard = lock.lock()?;
    /// assert!(lock.is_locked()?);
    /// guard.unlock()?;
    /// assert!(!lock.is_locked()?);
    /// # Ok(()) }) }
    /// ```
    pub fn spin_lock_with(&self, name: impl Into<String>, backoff: crate::BackOff) -> Lock {
        self.wrap(self.inner.spin_lock_with(name, backoff))
    }

    fn wrap(&self, inner: crate::Lock) -> Lock {
        Lock {
            inner: inner.per_thread(),
            rt: self.rt.clone(),
        }
    }

    /// A read-write lock (Redisson `RReadWriteLock`); its read and write locks are
    /// held per thread.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let rw = client.read_write_lock("catalog");
    /// let read = rw.read().lock()?;
    /// let again = rw.read().lock()?; // readers share
    /// assert_eq!(rw.read().hold_count()?, 2); // this thread, twice
    /// drop((read, again));
    /// rw.write().lock()?.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.inner.read_write_lock(name), self.rt.clone())
    }

    /// Many `values` under the one key `group`, all or none, held per thread
    /// (Redisson's `getMultiLock(group, values)`; see
    /// [`crate::Client::faster_multi_lock`]).
    ///
    /// # Errors
    /// As [`crate::Client::faster_multi_lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let seats = client.faster_multi_lock("flight:LH400", ["12A", "12B"])?;
    /// let guard = seats.lock()?;
    /// assert!(client.faster_multi_lock("flight:LH400", ["12B"])?.is_locked()?);
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn faster_multi_lock<V: AsRef<[u8]>>(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> crate::Result<FasterMultiLock> {
        let inner = self.inner.faster_multi_lock(group, values)?;
        Ok(FasterMultiLock::new(inner, self.rt.clone()))
    }

    /// Plain locks of `names` taken as one, all or none (Redisson `RedissonMultiLock`),
    /// held per thread. See [`MultiLock::new`] for other kinds.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let transfer = client.multi_lock(["account:1", "account:2"]);
    /// let guard = transfer.lock()?;
    /// assert!(client.lock("account:2").is_locked()?);
    /// guard.unlock()?;
    /// # Ok(()) }) }
    /// ```
    pub fn multi_lock<I, S>(&self, names: I) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiLock::new(names.into_iter().map(|n| self.lock(n)))
    }

    /// A semaphore (Redisson `RSemaphore`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let slots = client.semaphore("gpu-slots");
    /// let _ = slots.try_set_permits(2)?;
    /// let permit = slots.acquire()?;
    /// assert_eq!(slots.available()?, 1);
    /// drop(permit); // given back before drop returns
    /// assert_eq!(slots.available()?, 2);
    /// # Ok(()) }) }
    /// ```
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.inner.semaphore(name), self.rt.clone())
    }

    /// A semaphore whose permits expire when their holder stops renewing them
    /// (Redisson `RPermitExpirableSemaphore`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let builds = client.permit_expirable_semaphore("builds");
    /// builds.set_permits(1)?;
    /// let permit = builds.acquire()?; // kept by the watchdog
    /// assert_eq!(builds.available()?, 0);
    /// permit.release()?;
    /// # Ok(()) }) }
    /// ```
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.inner.permit_expirable_semaphore(name), self.rt.clone())
    }

    /// A count-down latch (Redisson `RCountDownLatch`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let ready = client.count_down_latch("workers-ready");
    /// let _ = ready.try_set_count(1)?;
    /// assert_eq!(ready.count_down()?, 0);
    /// ready.wait()?; // open
    /// # Ok(()) }) }
    /// ```
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.inner.count_down_latch(name), self.rt.clone())
    }

    /// The async client underneath, to share its connections with async code.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let _guard = client.lock("orders:42").lock()?;
    /// // Async code of the same program shares the connections and the watchdog:
    /// let async_client = client.as_async().clone();
    /// let rt = tokio::runtime::Runtime::new().unwrap();
    /// let locked = rt.block_on(async move { async_client.lock("orders:42").is_locked().await })?;
    /// assert!(locked);
    /// assert_eq!(client.as_async().id(), client.id());
    /// # Ok(()) }) }
    /// ```
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// This client's UUID: the first half of every holder id it uses.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let guard = client.lock("billing-run").lock()?;
    /// assert!(guard.holder().starts_with(&format!("{}:", client.id())));
    /// # Ok(()) }) }
    /// ```
    pub fn id(&self) -> uuid::Uuid {
        self.inner.id()
    }

    /// The configuration the client was built with.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url.clone()).pool_size(4))?;
    /// assert_eq!(client.config().urls(), [url]);
    /// assert_eq!(client.config().connections_per_master(), 4);
    /// # Ok(()) }) }
    /// ```
    pub fn config(&self) -> &Config {
        self.inner.config()
    }

    /// Addresses (`host:port`) of the masters, in configuration order.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url.clone()))?;
    /// assert_eq!(client.masters(), [url.trim_start_matches("redis://")]);
    /// # Ok(()) }) }
    /// ```
    pub fn masters(&self) -> Vec<String> {
        self.inner.masters()
    }

    /// Locks this client currently holds (distinct name and holder pairs).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.held_locks(), 0);
    /// let a = client.lock("billing:1").lock()?;
    /// let _b = client.lock("billing:2").lock()?;
    /// assert_eq!(client.held_locks(), 2);
    /// drop(a); // released before drop returns
    /// assert_eq!(client.held_locks(), 1);
    /// # Ok(()) }) }
    /// ```
    pub fn held_locks(&self) -> usize {
        self.inner.held_locks()
    }

    /// Waits (at most `timeout`) for background releases, then stops the watchdog and
    /// the pub/sub connections (see [`crate::Client::close`]).
    ///
    /// # Panics
    /// Inside an async runtime.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url.clone()))?;
    /// let guard = client.lock("nightly-job").lock()?;
    /// // ... the job ...
    /// drop(guard); // released before drop returns
    /// client.close(Duration::from_secs(5)); // stops the watchdog and pub/sub of every clone
    ///
    /// let other = Client::connect(Config::single(url))?;
    /// assert!(!other.lock("nightly-job").is_locked()?);
    /// # Ok(()) }) }
    /// ```
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
