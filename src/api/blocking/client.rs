//! [`Client`]: the blocking client and its getters.

use std::sync::Arc;
use std::time::Duration;

use super::{
    CountDownLatch, FasterMultiLock, Job, Lock, MultiLock, PermitExpirableSemaphore, ReadWriteLock,
    Runtime, Semaphore,
};
use crate::api::config::Config;
use crate::error::Result;

/// A blocking [`crate::Client`]: one or more masters, a watchdog and a pub/sub
/// connection, shared by every lock made from it. Cheap to clone. It owns a small
/// tokio runtime (one worker thread, `redlatch-blocking`) that runs the watchdog and
/// the pub/sub connection; each call blocks the calling thread until it is done. Each
/// method is its async namesake (the examples are there).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// assert_eq!(client.masters().len(), 1);
/// let guard = client.lock("billing-run").lock()?;
/// assert!(guard.holder().starts_with(&client.id().to_string()));
/// assert_eq!(client.held_locks(), 1);
/// assert_eq!(client.as_async().id(), client.id()); // the async client underneath
/// drop(guard);
/// client.close(std::time::Duration::from_secs(1));
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    pub(super) inner: crate::Client,
    pub(super) rt: Arc<Runtime>,
}

/// The per-thread twins of the async client's lock getters: each is its namesake's
/// [`crate::Lock`], held per thread.
macro_rules! per_thread {
    ($($(#[$attr:meta])* $getter:ident($($arg:ident: $ty:ty)?);)*) => {$(
        $(#[$attr])*
        pub fn $getter(&self, name: impl Into<String> $(, $arg: $ty)?) -> Lock {
            self.wrap(self.inner.$getter(name $(, $arg)?))
        }
    )*};
}

impl Client {
    /// Starts the client's runtime and connects (see [`crate::Client::connect`] and its
    /// example).
    ///
    /// # Errors
    /// As [`crate::Client::connect`], plus [`Error::Runtime`](crate::Error::Runtime) if
    /// the runtime's thread cannot be started.
    ///
    /// Inside an async runtime it fails at once with [`Error::Runtime`](crate::Error::Runtime)
    /// (see [the module docs](crate::blocking#inside-an-async-runtime)).
    pub fn connect(config: Config) -> Result<Client> {
        let rt = Runtime::start()?;
        let inner = rt.call(crate::Client::connect(config))?;
        Ok(Client { inner, rt })
    }

    per_thread! {
        /// A reentrant, non-fair lock (Redisson `RLock`), held per thread; as [`crate::Client::lock`] (example there).
        lock();
        /// A reentrant FIFO lock (Redisson `RFairLock`), held per thread; as [`crate::Client::fair_lock`] (example there).
        fair_lock();
        /// A fenced lock (Redisson `RFencedLock`), held per thread; as [`crate::Client::fenced_lock`] (example there).
        fenced_lock();
        /// A non-reentrant lock, held per thread; as [`crate::Client::non_reentrant_lock`] (example there).
        non_reentrant_lock();
        /// A non-reentrant FIFO lock, held per thread; as [`crate::Client::non_reentrant_fair_lock`] (example there).
        non_reentrant_fair_lock();
        /// A spin lock (Redisson `getSpinLock`), held per thread; as [`crate::Client::spin_lock`] (example there).
        spin_lock();
        /// A spin lock waiting by `backoff`, held per thread; as [`crate::Client::spin_lock_with`] (example there).
        spin_lock_with(backoff: crate::BackOff);
        /// A simple lock (the Redlock reference clients' `SET NX PX` lock), held per thread; as [`crate::Client::simple_lock`] (example there).
        #[doc(alias("redsync", "redlock"))]
        simple_lock();
        /// A simple lock waiting by `backoff`, held per thread; as [`crate::Client::simple_lock_with`] (example there).
        simple_lock_with(backoff: crate::BackOff);
    }

    fn wrap(&self, inner: crate::Lock) -> Lock {
        Lock {
            inner: inner.per_thread(),
            rt: self.rt.clone(),
        }
    }

    /// A read-write lock; as [`crate::Client::read_write_lock`] (example there).
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.inner.read_write_lock(name), self.rt.clone())
    }

    /// Many `values` under the key `group`, held per thread; as [`crate::Client::faster_multi_lock`] (example and errors there).
    pub fn faster_multi_lock<V: AsRef<[u8]>>(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> crate::Result<FasterMultiLock> {
        let inner = self.inner.faster_multi_lock(group, values)?;
        Ok(FasterMultiLock::new(inner, self.rt.clone()))
    }

    /// Plain locks of `names` taken as one, all or none; as [`crate::Client::multi_lock`] (example there).
    pub fn multi_lock<I, S>(&self, names: I) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiLock::new(names.into_iter().map(|n| self.lock(n)))
    }

    /// A semaphore (Redisson `RSemaphore`); as [`crate::Client::semaphore`] (example there).
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.inner.semaphore(name), self.rt.clone())
    }

    /// A semaphore of expiring permits; as [`crate::Client::permit_expirable_semaphore`] (example there).
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.inner.permit_expirable_semaphore(name), self.rt.clone())
    }

    /// A count-down latch; as [`crate::Client::count_down_latch`] (example there).
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.inner.count_down_latch(name), self.rt.clone())
    }

    /// A scheduled job; as [`crate::Client::job`] (example on [`Job`]).
    pub fn job(&self, name: impl Into<String>) -> Job {
        Job::new(self.inner.job(name), self.rt.clone())
    }

    /// The async client underneath (see the [`Client`] example).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// This client's UUID; as [`crate::Client::id`] (example there).
    pub fn id(&self) -> uuid::Uuid {
        self.inner.id()
    }

    /// Its configuration; as [`crate::Client::config`] (example there).
    pub fn config(&self) -> &Config {
        self.inner.config()
    }

    /// Addresses (`host:port`) of the masters; as [`crate::Client::masters`] (example there).
    pub fn masters(&self) -> Vec<String> {
        self.inner.masters()
    }

    /// Locks this client currently holds; as [`crate::Client::held_locks`] (example there).
    pub fn held_locks(&self) -> usize {
        self.inner.held_locks()
    }

    /// Waits (at most `timeout`) for background releases, then stops the watchdog and
    /// the connections; as [`crate::Client::close`] (example there).
    ///
    /// Inside an async runtime (where blocking would panic) it returns at once and
    /// closes in the background, on the client's own runtime.
    pub fn close(self, timeout: Duration) {
        let Client { inner, rt } = self;
        if rt.may_block().is_ok() {
            rt.get().block_on(inner.close(timeout));
        } else {
            let keep = rt.clone();
            rt.get().spawn(async move {
                inner.close(timeout).await;
                drop(keep);
            });
        }
    }
}
