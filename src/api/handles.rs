//! The handles a [`Client`] opens: one per lock kind (Redisson's `getLock`,
//! `getFairLock`, … of `RedissonClient`). Nothing is sent to Redis until a handle is
//! used. Kept apart from client.rs so that the kind files depend on the client and
//! not the other way round.

use crate::api::client::Client;
use crate::api::expirable_semaphore::PermitExpirableSemaphore;
use crate::api::group::FasterMultiLock;
use crate::api::latch::CountDownLatch;
use crate::api::lock::{BackOff, Kind, Lock, Owner};
use crate::api::multi::MultiLock;
use crate::api::rwlock::ReadWriteLock;
use crate::api::semaphore::Semaphore;

impl Client {
    /// A new explicit lock owner ([`Owner`]): the holder of every call made through
    /// [`Lock::owned_by`] with it.
    ///
    /// # Examples
    /// See the example on [`Owner`].
    pub fn owner(&self) -> Owner {
        Owner::new()
    }

    /// A reentrant, non-fair lock (Redisson `RLock`). Nothing is sent to Redis yet; the
    /// name is checked by each operation. Each acquisition is its own holder; nested
    /// calls re-enter inside the guard's [scope](crate::LockGuard::scope).
    ///
    /// # Examples
    /// See the examples on [`Lock::lock`] and, for nested calls, [`LockGuard::scope`](crate::LockGuard::scope).
    #[doc(alias = "getLock")]
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Plain)
    }

    /// A reentrant FIFO lock (Redisson `RFairLock`): waiters queue in Redis and a release
    /// wakes only the next one.
    ///
    /// # Examples
    /// See the example on [`Lock::try_lock`].
    #[doc(alias = "getFairLock")]
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Fair)
    }

    /// Many `values` locked under the one key `group`, all or none (Redisson's
    /// `getMultiLock(group, values)`, `RedissonFasterMultiLock`). Nothing is sent yet.
    /// A value is named in Redis by the digest of its bytes, as Redisson names the
    /// value its codec encoded: for a Java client to lock the same string, it must use
    /// `StringCodec` (which encodes a string as its UTF-8 bytes).
    ///
    /// # Errors
    /// [`Error::InvalidCount`](crate::Error::InvalidCount) for no values, a repeated
    /// value or more than [`MAX_GROUP_VALUES`](crate::MAX_GROUP_VALUES);
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a bad group name.
    ///
    /// # Examples
    /// See the example on [`FasterMultiLock::lock`].
    #[doc(alias("getMultiLock", "RedissonFasterMultiLock"))]
    pub fn faster_multi_lock<V: AsRef<[u8]>>(
        &self,
        group: impl Into<String>,
        values: impl IntoIterator<Item = V>,
    ) -> crate::Result<FasterMultiLock> {
        FasterMultiLock::new(self.clone(), group.into(), values)
    }

    /// A reentrant lock whose guards carry a fencing token (Redisson `RFencedLock`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.fenced_lock("ledger");
    /// let first = lock.lock().await?;
    /// let t1 = first.fencing_token().expect("a fenced lock's guard has a token");
    /// first.unlock().await?;
    /// let second = lock.lock().await?;
    /// assert!(second.fencing_token().unwrap() > t1); // storage rejects writes tagged t1 now
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "getFencedLock")]
    pub fn fenced_lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Fenced)
    }

    /// A **non-reentrant**, non-fair lock (Redisson `getNonReentrantLock`,
    /// `RedissonNonReentrantLock`): the plain lock's layout on the wire, so it excludes
    /// Redisson's and redlatch's locks of the same name, but a holder that already holds
    /// it is refused with [`Error::Reentry`](crate::Error::Reentry) instead of
    /// re-entering: in the scope of its guard, through the same
    /// [`Owner`], or on the same thread (blocking API); by `lock()` and
    /// `try_lock()` alike, at once, as Redisson throws `IllegalMonitorStateException`.
    /// Any other caller waits for it (or `try_lock` answers `None`): two futures of one
    /// task are two holders, so one of them waits.
    ///
    /// It suits code whose concurrency lives inside one task, where an accidental
    /// nested acquisition should fail loudly rather than silently re-enter. Under
    /// Redlock it works as the plain lock does (majority of independent masters).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, Error, Kind};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.non_reentrant_lock("import:daily");
    /// assert_eq!(lock.kind(), Kind::NonReentrant);
    /// let guard = lock.lock().await?;
    /// // Another call is another holder: busy.
    /// assert!(lock.try_lock(Duration::ZERO).await?.is_none());
    /// // The holder itself (in the guard's scope) is refused, not re-entered.
    /// let again = guard.scope(lock.try_lock(Duration::ZERO)).await;
    /// assert!(matches!(again, Err(Error::Reentry { .. })));
    /// assert_eq!(lock.hold_count().await?, 1);
    /// guard.unlock().await?;
    /// assert!(!lock.is_locked().await?);
    ///
    /// // The fair kind queues its waiters; the holder is refused all the same.
    /// let fair = client.non_reentrant_fair_lock("queue:refunds");
    /// assert_eq!(fair.kind(), Kind::NonReentrantFair);
    /// let owner = client.owner();
    /// let held = fair.owned_by(owner).lock().await?;
    /// assert!(matches!(fair.owned_by(owner).lock().await, Err(Error::Reentry { .. })));
    /// held.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "getNonReentrantLock")]
    pub fn non_reentrant_lock(&self, name: impl Into<String>) -> Lock {
        self.lock(name).non_reentrant()
    }

    /// A **non-reentrant** FIFO lock (Redisson `getNonReentrantFairLock`,
    /// `RedissonNonReentrantFairLock`): the fair lock's queue and layout; a second
    /// acquisition by the holder fails with [`Error::Reentry`](crate::Error::Reentry),
    /// as for [`non_reentrant_lock`](Client::non_reentrant_lock).
    ///
    /// # Examples
    /// See the example on [`non_reentrant_lock`](Client::non_reentrant_lock).
    #[doc(alias = "getNonReentrantFairLock")]
    pub fn non_reentrant_fair_lock(&self, name: impl Into<String>) -> Lock {
        self.fair_lock(name).non_reentrant()
    }

    /// A **spin lock** (Redisson `getSpinLock(name)`, `RedissonSpinLock`): reentrant,
    /// non-fair, the plain lock's layout, but neither its waiters nor its releases use
    /// pub/sub. A waiter tries, sleeps the next delay of its [`BackOff`] (Redisson's
    /// default: exponential from 1 ms, ×2, at most 128 ms, with jitter) and tries
    /// again. For deployments where pub/sub traffic is the problem (large clusters with
    /// many locks); the price is latency up to one back-off after a release, and retry
    /// traffic while a waiter spins. Lease, watchdog and [`lost`](crate::LockGuard::lost)
    /// are the plain lock's; under Redlock each try is a Redlock attempt.
    ///
    /// A release publishes nothing, so a *plain* lock's waiter on the same name learns
    /// of it only at its TTL bound: do not mix kinds on one name.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{BackOff, Client, Config, Kind};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.spin_lock("reports");
    /// assert_eq!(lock.kind(), Kind::Spin);
    /// let guard = lock.lock().await?;
    /// // A second caller spins until the wait runs out, subscribing to nothing.
    /// assert!(lock.try_lock(Duration::from_millis(30)).await?.is_none());
    /// assert_eq!(client.subscriptions(), 0);
    /// guard.unlock().await?;
    ///
    /// // Waits spaced by a back-off of your own: a constant 5 ms here.
    /// let steady = client.spin_lock_with("reports", BackOff::constant(Duration::from_millis(5))?);
    /// let guard = steady.lock().await?;
    /// assert!(steady.try_lock(Duration::from_millis(12)).await?.is_none()); // ~3 tries
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "getSpinLock")]
    pub fn spin_lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Spin)
    }

    /// A spin lock whose waits are spaced by `backoff` (Redisson
    /// `getSpinLock(name, backOff)`): see [`spin_lock`](Client::spin_lock).
    ///
    /// # Examples
    /// See the example on [`spin_lock`](Client::spin_lock).
    #[doc(alias = "getSpinLock")]
    pub fn spin_lock_with(&self, name: impl Into<String>, backoff: BackOff) -> Lock {
        self.spin_lock(name).backing_off(backoff)
    }

    /// The simple lock: the single-key lock of Redis's "Distributed Locks with Redis"
    /// page and of the Redlock reference clients — Go's redsync, node-redlock, redis-py's
    /// `Lock`, rslock. The key `name` is a string holding the holder's token, taken with
    /// `SET name token NX PX lease`, released by compare-and-delete and extended by
    /// compare-and-pexpire, so services using those clients and this lock exclude each
    /// other on the same names (not Redisson's locks: those are hashes, and each side
    /// reports the other's key as [`Error::WrongType`](crate::Error::WrongType)).
    ///
    /// What differs from [`lock`](Client::lock):
    /// - **Not reentrant.** The value is one holder's token: a second acquisition by
    ///   the holder fails with [`Error::Reentry`](crate::Error::Reentry) (the
    ///   reference clients would wait for themselves until the lease ran out).
    /// - **Waiters poll, and a redlatch release wakes them.** The reference clients
    ///   publish nothing, so waiters retry after the spin lock's exponential back-off
    ///   ([`BackOff`]; set it through [`simple_lock_with`](Client::simple_lock_with),
    ///   near the peers' own retry delay) and see a foreign release up to one back-off
    ///   later. A redlatch release (or force-unlock) also publishes on a channel
    ///   beside the key that only redlatch listens on, when a waiter listens, so
    ///   redlatch waiters take a lock another redlatch holder gave back at once
    ///   (docs/wire.md).
    ///
    /// The rest is every lock's: the watchdog renews a hold kept without a lease, an
    /// explicit lease is the `PX`, under Redlock each attempt is a Redlock attempt over
    /// the masters, and `force_unlock`, `is_locked`, `remaining_ttl` and `status` read
    /// the string key.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{BackOff, Client, Config, Error, Kind};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.simple_lock("billing:nightly");
    /// assert_eq!(lock.kind(), Kind::Simple);
    /// let guard = lock.lock().await?;
    /// // A redsync or redis-py client sees a string key holding our token: taken.
    /// // Its holder may not take it again:
    /// let again = guard.scope(lock.try_lock(Duration::ZERO)).await;
    /// assert!(matches!(again, Err(Error::Reentry { .. })));
    /// guard.unlock().await?;
    ///
    /// // Polled every 5 ms while another holder has it.
    /// let polled = client.simple_lock_with("billing:nightly", BackOff::constant(Duration::from_millis(5))?);
    /// let guard = polled.lock().await?;
    /// assert!(polled.try_lock(Duration::from_millis(12)).await?.is_none());
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    #[doc(alias("redsync", "redlock", "SET NX PX", "setnx"))]
    pub fn simple_lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Simple)
    }

    /// A simple lock whose waits are spaced by `backoff`: see
    /// [`simple_lock`](Client::simple_lock).
    ///
    /// # Examples
    /// See the example on [`simple_lock`](Client::simple_lock).
    #[doc(alias("redsync", "redlock"))]
    pub fn simple_lock_with(&self, name: impl Into<String>, backoff: BackOff) -> Lock {
        self.simple_lock(name).backing_off(backoff)
    }

    /// A read-write lock (Redisson `RReadWriteLock`): [`read`](ReadWriteLock::read)
    /// and [`write`](ReadWriteLock::write) give its two [`Lock`]s.
    ///
    /// # Examples
    /// See the example on [`ReadWriteLock`].
    #[doc(alias = "getReadWriteLock")]
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), name.into())
    }

    /// Several plain locks taken together, all or none (Redisson `RedissonMultiLock`);
    /// [`MultiLock::new`] takes locks of any kind.
    ///
    /// # Examples
    /// See the example on [`MultiLock::lock`].
    #[doc(alias = "RedissonMultiLock")]
    pub fn multi_lock<I, S>(&self, names: I) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiLock::new(names.into_iter().map(|name| self.lock(name)))
    }

    /// A semaphore (Redisson `RSemaphore`): a counter of permits at `name`.
    ///
    /// # Examples
    /// See the example on [`Semaphore::acquire`].
    #[doc(alias = "getSemaphore")]
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::new(self.clone(), name.into())
    }

    /// A semaphore whose permits expire when their holder stops renewing them (Redisson
    /// `RPermitExpirableSemaphore`).
    ///
    /// # Examples
    /// See the example on [`PermitExpirableSemaphore::acquire`].
    #[doc(alias = "getPermitExpirableSemaphore")]
    pub fn permit_expirable_semaphore(&self, name: impl Into<String>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.clone(), name.into())
    }

    /// A count-down latch (Redisson `RCountDownLatch`).
    ///
    /// # Examples
    /// See the example on [`CountDownLatch::wait`].
    #[doc(alias = "getCountDownLatch")]
    pub fn count_down_latch(&self, name: impl Into<String>) -> CountDownLatch {
        CountDownLatch::new(self.clone(), name.into())
    }

    /// A leader election on `name` ([`Election`](crate::Election): campaign, leader, observe; docs/election.md).
    ///
    /// # Examples
    /// See the example on [`Election::campaign`](crate::Election::campaign).
    pub fn election(&self, name: impl Into<String>) -> crate::Election {
        crate::Election::new(self.clone(), name.into())
    }
}
