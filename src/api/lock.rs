//! [`Lock`]: a handle on one named lock (plain, fair, fenced, non-reentrant, spin, or a
//! side of a read-write lock).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::api::client::Client;
use crate::api::config_check::check_lease;
use crate::api::guard::LockGuard;
use crate::engine::facade::{fresh_number, Holding, LockSpec};
pub use crate::engine::{BackOff, Delays, Kind};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::telemetry;

/// A reentrant distributed lock on one name, shared by all tasks and processes that
/// use the same name (Redisson clients included).
///
/// Every `lock()` / `try_lock()` call is its own holder: two calls exclude each other
/// even when they are futures of one task (`join!`, `select!`,
/// `for_each_concurrent`). A call re-enters (the hold count grows) only inside the
/// [scope](LockGuard::scope) of a guard of the same lock, or in [`with`](Lock::with);
/// the [blocking](crate::blocking) API re-enters per thread, as Redisson does. The
/// non-reentrant kinds ([`Client::non_reentrant_lock`],
/// [`Client::non_reentrant_fair_lock`]) refuse that second acquisition with
/// [`Error::Reentry`] instead; a [spin lock](Client::spin_lock) waits without pub/sub.
///
/// # Releasing
/// A `Lock` has no `unlock`: each acquisition returns a [`LockGuard`], and the guard
/// releases that hold ([`LockGuard::unlock`], which reports errors, or dropping it,
/// which releases in the background). Redisson's `lock.lock(); ... lock.unlock();` is
/// `let guard = lock.lock().await?; ... guard.unlock().await?;`. To delete a lock
/// whoever holds it (Redisson's `forceUnlock`): [`force_unlock`](Lock::force_unlock).
///
/// # Results that say something
/// A `bool` or `Option` these calls return says what happened (`try_lock`'s `None`:
/// not acquired; `force_unlock`'s `false`: nothing to delete). Rust does not warn when
/// the awaited value of an `async fn` is dropped (`#[must_use]` does not reach it), so
/// check it, or discard it visibly: `let _ = lock.force_unlock().await?;`.
///
/// # When not to rely on it alone
/// A lease cannot stop a holder that is paused (GC, a stalled VM, a long swap) from
/// writing after its lease ran out and someone else took the lock. If that matters,
/// use [`Client::fenced_lock`] and make the storage reject writes carrying an older
/// [fencing token](LockGuard::fencing_token). A single master with an asynchronous
/// replica is not safe across failover; use Redlock over independent masters.
///
/// # Examples
/// See the examples on [`Lock::lock`], [`Lock::try_lock`] and [`Lock::with`]; each kind's
/// own on the [`Client`] method that makes it ([`Client::fenced_lock`],
/// [`Client::non_reentrant_lock`], [`Client::spin_lock`]).
#[derive(Clone)]
pub struct Lock {
    client: Client,
    /// The name, the kind, who holds what it acquires (holding/holder_id.rs invariants 1-4) and
    /// a writer's intent: what every call on it tells the engine.
    spec: LockSpec,
}

/// An explicit lock owner: every call made through
/// [`Lock::owned_by`] with it is one holder (`"{client_uuid}:{n}"` on the wire), so
/// those calls re-enter each other wherever they run: in any task, future or thread.
/// Redisson's counterpart is the `threadId` argument of `lockAsync(threadId)`, for code
/// whose unit of ownership is neither a thread nor a scope (a session, a job, an actor).
///
/// Ownership is the caller's to keep sequential: two concurrent futures with one owner
/// both enter, as two calls of one Redisson thread id do.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use redlatch::{Client, Config};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let job = client.owner();
/// let lock = client.lock("orders:42").owned_by(job);
/// let first = lock.lock().await?;
/// // Another task, same owner: it re-enters.
/// let again = tokio::spawn({
///     let lock = lock.clone();
///     async move { lock.lock().await }
/// });
/// let second = again.await.unwrap()?;
/// assert_eq!(second.holder(), first.holder());
/// assert_eq!(first.holder(), format!("{}:{}", client.id(), job.number()));
/// assert_eq!(lock.hold_count().await?, 2);
/// second.unlock().await?;
/// first.unlock().await?;
/// # Ok(()) }) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner(u64);

impl Owner {
    /// A new owner, distinct from every other holder of this process.
    pub(crate) fn new() -> Self {
        Owner(fresh_number())
    }

    /// The `n` of the holder ids `"{client_uuid}:{n}"` this owner acquires with.
    ///
    /// # Examples
    /// See the example on [`Owner`].
    pub fn number(self) -> u64 {
        self.0
    }
}

impl Lock {
    pub(crate) fn new(client: Client, name: impl Into<Arc<str>>, kind: Kind) -> Self {
        Lock {
            client,
            spec: LockSpec::new(name.into(), kind),
        }
    }

    /// The same lock, a spin lock's waits spaced by `backoff` (other kinds ignore it).
    pub(crate) fn backing_off(mut self, backoff: BackOff) -> Self {
        self.spec.backoff = backoff;
        self
    }

    /// The same lock held per OS thread (the blocking API).
    pub(crate) fn per_thread(self) -> Self {
        self.held_as(Holding::PerThread)
    }

    fn held_as(&self, holding: Holding) -> Lock {
        let mut lock = self.clone();
        lock.spec.holding = holding;
        lock
    }

    /// The same lock, acquired by `owner` whatever task or thread calls: every call
    /// through the returned handle is that one holder and re-enters the others. See
    /// [`Owner`].
    ///
    /// # Examples
    /// See the example on [`Owner`].
    pub fn owned_by(&self, owner: Owner) -> Lock {
        self.held_as(Holding::Owner(owner.0))
    }

    /// The non-reentrant variant of this lock (plain and fair locks have one).
    pub(crate) fn non_reentrant(mut self) -> Self {
        self.spec.kind = self.spec.kind.non_reentrant();
        self
    }

    /// The write lock of a read-write lock, preferring writers or not.
    pub(crate) fn writer(client: Client, name: Arc<str>, prefer: bool) -> Self {
        let mut lock = Lock::new(client, name, Kind::Write);
        lock.spec.intent = prefer;
        lock
    }

    /// The lock's name (its Redis key).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The client this lock belongs to.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Plain, fair, fenced, or a side of a read-write lock.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn kind(&self) -> Kind {
        self.spec.kind
    }

    /// Waits as long as it takes, then holds the lock under the watchdog.
    ///
    /// # Errors
    /// [`Error::InvalidName`], [`Error::WrongType`] (the key is not a lock), or the
    /// error of the masters when no majority answered for `unavailable_timeout`.
    ///
    /// # Cancel safety
    /// Dropping the future leaves no lock held, no subscription and (after a background
    /// clean-up) no fair-queue entry.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, Kind};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// assert_eq!((lock.name(), lock.kind()), ("orders:42", Kind::Plain));
    /// assert_eq!(lock.client().id(), client.id());
    /// let guard = lock.lock().await?;
    /// assert!(lock.is_locked().await?);
    /// assert!(lock.is_held_by_current_task().await?);
    /// let other = lock.clone(); // another task: locked, but not by it
    /// assert!(!tokio::spawn(async move { other.is_held_by_current_task().await }).await.unwrap()?);
    /// // ... critical section ...
    /// guard.unlock().await?;
    /// assert!(!lock.is_locked().await?);
    /// assert_eq!(lock.hold_count().await?, 0);
    ///
    /// // A lease of its own: nothing renews it.
    /// assert_eq!(lock.remaining_ttl().await?, None); // free
    /// let guard = lock.lock_with_lease(Duration::from_secs(5)).await?;
    /// let ttl = lock.remaining_ttl().await?.expect("held");
    /// assert!(ttl > Duration::ZERO && ttl <= Duration::from_secs(5));
    ///
    /// // Deleting it whoever holds it: this client's guard learns it is lost.
    /// assert!(lock.force_unlock().await?);
    /// assert!(guard.lost().is_cancelled());
    /// assert!(!lock.force_unlock().await?); // nothing left to delete
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "lockAsync")]
    pub async fn lock(&self) -> Result<LockGuard> {
        self.acquire(None, None)
            .await
            .map(|g| g.expect("unbounded wait"))
    }

    /// Waits as long as it takes, then holds the lock for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock`](Self::lock), plus [`Error::InvalidLease`] for a zero, sub-millisecond
    /// or longer-than-30-days lease.
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "lockAsync")]
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.acquire(None, Some(lease))
            .await
            .map(|g| g.expect("unbounded wait"))
    }

    /// Waits at most `wait` (`Duration::ZERO`: one attempt); `Ok(None)` if the lock
    /// stayed busy. The lease is the watchdog's.
    ///
    /// # Errors
    /// As [`lock`](Self::lock); if no majority answered when the wait ran out, that
    /// error is returned instead of `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.fair_lock("orders:42"); // waiters queue, first come first served
    /// let guard = lock.lock().await?;
    /// // Another task gives up after 50 ms while the lock is held...
    /// let other = lock.clone();
    /// let busy = tokio::spawn(async move { other.try_lock(Duration::from_millis(50)).await.map(|g| g.is_none()) });
    /// assert!(busy.await.unwrap()?);
    /// guard.unlock().await?;
    /// // ...and gets it at once when it is free.
    /// let other = lock.clone();
    /// let free = tokio::spawn(async move { other.try_lock(Duration::ZERO).await.map(|g| g.is_some()) });
    /// assert!(free.await.unwrap()?);
    /// // With a lease of its own (no watchdog): wait at most 5 s, hold for 5 s.
    /// let guard = lock
    ///     .try_lock_with_lease(Duration::from_secs(5), Duration::from_secs(5))
    ///     .await?
    ///     .expect("the lock is free");
    /// assert!(lock.remaining_ttl().await?.unwrap() <= Duration::from_secs(5));
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    #[doc(alias("tryLock", "tryLockAsync"))]
    pub async fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire(Some(wait), None).await
    }

    /// Waits at most `wait`, then holds the lock for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`try_lock`](Self::try_lock) and [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// See the example on [`try_lock`](Self::try_lock).
    #[doc(alias("tryLock", "tryLockAsync"))]
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.acquire(Some(wait), Some(lease)).await
    }

    /// Waits for the lock (as [`lock`](Self::lock)), runs `f` in the guard's
    /// [scope](LockGuard::scope), so the calls `f` makes re-enter this lock, then
    /// unlocks it.
    ///
    /// # Errors
    /// As [`lock`](Self::lock), and the error of the release
    /// ([`LockGuard::unlock`]); `f`'s output is dropped then. To keep both, use
    /// `lock()`, `scope` and `unlock` yourself.
    ///
    /// # Cancel safety
    /// Dropping the future while it waits is as [`lock`](Self::lock); while `f` runs,
    /// it drops the guard, which releases the hold in the background.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config, Lock};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// async fn charge(lock: &Lock) -> redlatch::Result<u32> {
    ///     let guard = lock.lock().await?; // re-enters when called inside `with`
    ///     let count = lock.hold_count().await?;
    ///     guard.unlock().await?;
    ///     Ok(count)
    /// }
    /// let lock = client.lock("orders:42");
    /// let nested = lock.with(|| charge(&lock)).await??;
    /// assert_eq!(nested, 2);
    /// assert!(!lock.is_locked().await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn with<F, Fut>(&self, f: F) -> Result<Fut::Output>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future,
    {
        let guard = self.lock().await?;
        let out = guard.scope(f()).await;
        guard.unlock().await?;
        Ok(out)
    }

    /// `lock`/`try_lock` in their span (telemetry.rs), with the acquisition metrics.
    pub(crate) async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let engine = &self.client.engine;
        let (kind, masters) = (self.spec.kind.label(), engine.addrs().len());
        // OpenTelemetry's database-client names beside ours (telemetry.rs); the server
        // only when there is one.
        let server = engine.server();
        macro_rules! span {
            ($name:literal) => {
                tracing::info_span!(target: "redlatch", $name, lock = %self.spec.name, kind, masters,
                    "db.system.name" = "redis", "server.address" = server,
                    "error.type" = Empty, outcome = Empty, elapsed_ms = Empty)
            };
        }
        use tracing::field::Empty;
        let span = if wait.is_some() {
            span!("try_lock")
        } else {
            span!("lock")
        };
        let started = Instant::now();
        // Instrumented only when someone listens (the wrapper's poll and the move of
        // the whole acquisition into it cost W1 ~0.8k instructions a call).
        let result = if span.is_disabled() {
            self.acquire_in_span(wait, lease).await
        } else {
            (self.acquire_in_span(wait, lease))
                .instrument(span.clone())
                .await
        };
        match &result {
            Ok(Some(_)) => {
                let lock = engine.metrics_label(&self.spec.name);
                telemetry::acquired(kind, lock, started.elapsed());
                telemetry::finish(&span, started, "acquired", None);
            }
            Ok(None) => {
                telemetry::timed_out(kind);
                telemetry::finish(&span, started, "timed_out", None);
            }
            Err(e) => telemetry::finish(&span, started, "error", Some(e)),
        }
        result
    }

    async fn acquire_in_span(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.check_name()?;
        if let Some(lease) = lease {
            check_lease("lease", lease)?;
        }
        let held = self.client.engine.lock(&self.spec, wait, lease).await?;
        Ok(held.map(LockGuard::new))
    }

    /// True if anyone holds the lock (on a majority of masters). For the read lock of
    /// a read-write lock: anyone reads; for its write lock: anyone writes.
    ///
    /// # Errors
    /// [`Error::NoQuorum`] or the master's error when a majority does not answer.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "isLocked")]
    pub async fn is_locked(&self) -> Result<bool> {
        self.client.engine.is_locked(&self.spec).await
    }

    /// True if the caller holds the lock (on a majority of masters): inside a guard's
    /// [scope](LockGuard::scope), that guard's holder; otherwise a hold that a call of
    /// the calling task took (outside any task, as in the body of `#[tokio::main]`:
    /// of the calling thread).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked), plus [`Error::WrongType`].
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias("isHeldByCurrentThread", "isHeldByThread"))]
    pub async fn is_held_by_current_task(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// The caller's reentrant hold count (what a majority of masters agree on at
    /// least); 0 if it does not hold the lock. "The caller" is as in
    /// [`is_held_by_current_task`](Self::is_held_by_current_task).
    ///
    /// # Errors
    /// As [`is_held_by_current_task`](Self::is_held_by_current_task).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "getHoldCount")]
    pub async fn hold_count(&self) -> Result<u32> {
        self.client.engine.hold_count(&self.spec).await
    }

    /// How long the lock stays held if nobody renews it (what a majority agrees on at
    /// least); `None` if it is not locked or has no expiry. A lease in its last
    /// millisecond (Redis's PTTL 0) is still held: `Some(Duration::ZERO)`.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "remainTimeToLive")]
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        self.client.engine.remaining_ttl(&self.spec).await
    }

    /// Deletes the lock whoever holds it and wakes its waiters (the head waiter for a
    /// fair lock). Returns true if a lock was deleted. This client's guards of the lock
    /// report it [lost](LockGuard::lost) (not one a waiter of it is granted once it is
    /// free); other clients notice at their next renewal.
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key is not a lock; [`Error::NoQuorum`] or the
    /// master's error when a majority does not answer.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "forceUnlock")]
    pub async fn force_unlock(&self) -> Result<bool> {
        self.client.engine.force_unlock(&self.spec).await
    }

    /// What every call on this handle tells the engine (the faster multi-lock's
    /// queries use it).
    pub(crate) fn spec(&self) -> &LockSpec {
        &self.spec
    }

    /// Checks the name for this kind of lock and this deployment.
    pub(crate) fn check_name(&self) -> Result<()> {
        (self.client.engine).check_name(&self.spec.name, self.spec.kind)
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.spec.name)
            .field("kind", &self.spec.kind)
            .finish()
    }
}
