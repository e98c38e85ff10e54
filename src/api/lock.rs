//! [`Lock`]: a handle on one named lock (plain, fair or fenced).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;
use tracing::Instrument;

use crate::api::client::Client;
use crate::api::config_check::check_lease;
use crate::api::guard::LockGuard;
use crate::engine::quorum::{answers, fan_out, majority_floor, majority_true};
use crate::engine::waiter::{acquire, Call};
pub use crate::engine::Kind;
use crate::engine::{holder, rw, scripts};
use crate::error::{Error, Result};
use crate::keys;
use crate::telemetry;

/// A reentrant distributed lock on one name, shared by all tasks and processes that
/// use the same name (Redisson clients included).
///
/// Every `lock()` / `try_lock()` call is its own holder: two calls exclude each other
/// even when they are futures of one task (`join!`, `select!`,
/// `for_each_concurrent`). A call re-enters (the hold count grows) only inside the
/// [scope](LockGuard::scope) of a guard of the same lock, or in [`with`](Lock::with);
/// the [blocking](crate::blocking) API re-enters per thread, as Redisson does.
///
/// # When not to rely on it alone
/// A lease cannot stop a holder that is paused (GC, a stalled VM, a long swap) from
/// writing after its lease ran out and someone else took the lock. If that matters,
/// use [`Client::fenced_lock`] and make the storage reject writes carrying an older
/// [fencing token](LockGuard::fencing_token). A single master with an asynchronous
/// replica is not safe across failover; use Redlock over independent masters.
#[derive(Clone)]
pub struct Lock {
    client: Client,
    name: Arc<str>,
    kind: Kind,
    /// A writer of a read-write lock keeps new readers out while it waits.
    intent: bool,
    /// Who the holder of an acquisition is (holder.rs invariants 1-4).
    owner: Holding,
}

/// Who holds what a [`Lock`] acquires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holding {
    /// Each call is its own holder, re-entering only in a guard's scope.
    PerCall,
    /// The calling OS thread (the blocking API).
    PerThread,
    /// One explicit owner for every call ([`Owner`]).
    Owner(u64),
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
        Owner(holder::fresh_number())
    }

    /// The `n` of the holder ids `"{client_uuid}:{n}"` this owner acquires with.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let (a, b) = (client.owner(), client.owner());
    /// assert_ne!(a.number(), b.number());
    /// # Ok(()) }) }
    /// ```
    pub fn number(self) -> u64 {
        self.0
    }
}

impl Lock {
    pub(crate) fn new(client: Client, name: impl Into<Arc<str>>, kind: Kind) -> Self {
        Lock {
            client,
            name: name.into(),
            kind,
            intent: false,
            owner: Holding::PerCall,
        }
    }

    /// The same lock held per OS thread (the blocking API).
    pub(crate) fn per_thread(self) -> Self {
        Lock {
            owner: Holding::PerThread,
            ..self
        }
    }

    /// The same lock, acquired by `owner` whatever task or thread calls: every call
    /// through the returned handle is that one holder and re-enters the others. See
    /// [`Owner`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let (a, b) = (client.owner(), client.owner());
    /// let held = lock.owned_by(a).lock().await?;
    /// assert!(lock.owned_by(b).try_lock(Duration::ZERO).await?.is_none());
    /// let nested = lock.owned_by(a).try_lock(Duration::ZERO).await?.expect("re-entered");
    /// nested.unlock().await?;
    /// held.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub fn owned_by(&self, owner: Owner) -> Lock {
        Lock {
            owner: Holding::Owner(owner.0),
            ..self.clone()
        }
    }

    /// The write lock of a read-write lock, preferring writers or not.
    pub(crate) fn writer(client: Client, name: Arc<str>, prefer: bool) -> Self {
        Lock {
            intent: prefer,
            ..Lock::new(client, name, Kind::Write)
        }
    }

    /// The holder id a new acquisition takes (a writer's ends in `:write`): the
    /// thread's (blocking API), the enclosing guard scope's, or a fresh one.
    fn holder(&self) -> Arc<str> {
        let engine = &self.client.engine;
        let holder = match self.owner {
            Holding::PerThread => engine.thread_holder(),
            Holding::Owner(n) => engine.owner_holder(n),
            Holding::PerCall => engine.holder_for(&self.name),
        };
        self.side(holder)
    }

    /// The holder id whose hold "the caller" means, if any: the thread's (blocking
    /// API), the enclosing guard scope's, else the hold this task (or, outside any
    /// task, this thread) took first (holder.rs invariant 5).
    fn callers_holder(&self) -> Option<Arc<str>> {
        let engine = &self.client.engine;
        if self.owner != Holding::PerCall {
            return Some(self.holder());
        }
        if let Some(scoped) = holder::scoped(&engine.holder_prefix, &self.name) {
            return Some(self.side(scoped));
        }
        let hold = (engine.holds).taken_in(&self.name, self.kind, holder::context())?;
        Some(hold.holder.clone())
    }

    fn side(&self, holder: Arc<str>) -> Arc<str> {
        match self.kind {
            Kind::Write => rw::writer(&holder),
            _ => holder,
        }
    }

    /// The lock's name (its Redis key).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// assert_eq!(lock.name(), "orders:42");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client this lock belongs to.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config, Lock};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// fn related(lock: &Lock) -> Lock {
    ///     lock.client().lock(format!("{}:audit", lock.name())) // another lock, same connections
    /// }
    /// let audit = related(&client.lock("orders:42"));
    /// assert_eq!(audit.name(), "orders:42:audit");
    /// assert_eq!(audit.client().id(), client.id());
    /// # Ok(()) }) }
    /// ```
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Plain, fair, fenced, or a side of a read-write lock.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config, Kind};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// assert_eq!(client.lock("a").kind(), Kind::Plain);
    /// assert_eq!(client.fair_lock("b").kind(), Kind::Fair);
    /// assert_eq!(client.fenced_lock("c").kind(), Kind::Fenced);
    /// # Ok(()) }) }
    /// ```
    pub fn kind(&self) -> Kind {
        self.kind
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
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// assert!(lock.is_held_by_current_task().await?);
    /// // ... critical section ...
    /// guard.unlock().await?;
    /// assert!(!lock.is_locked().await?);
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock_with_lease(Duration::from_secs(10)).await?;
    /// let ttl = lock.remaining_ttl().await?.expect("a lease");
    /// assert!(ttl <= Duration::from_secs(10)); // nothing renews it
    /// assert!(guard.validity() < Duration::from_secs(10));
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
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
    /// let lock = client.lock("orders:42");
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
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock
    ///     .try_lock_with_lease(Duration::from_millis(100), Duration::from_secs(5))
    ///     .await?
    ///     .expect("the lock is free");
    /// assert!(lock.remaining_ttl().await?.unwrap() <= Duration::from_secs(5));
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
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
    async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let (kind, masters) = (self.kind.label(), self.client.engine.masters.len());
        // OpenTelemetry's database-client names beside ours (telemetry.rs); the server
        // only when there is one.
        let server = (masters == 1).then(|| self.client.engine.masters[0].addr());
        macro_rules! span {
            ($name:literal) => {
                tracing::info_span!(target: "redlatch", $name, lock = %self.name, kind, masters,
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
        let result = self
            .acquire_in_span(wait, lease)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(Some(_)) => {
                telemetry::acquired(kind, started.elapsed());
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
        let engine = &self.client.engine;
        let watchdog = lease.is_none();
        let lease = lease.unwrap_or(engine.settings.watchdog_timeout);
        let lease_ms = check_lease("lease", lease)?;
        let call = Call {
            name: self.name.clone(),
            holder: self.holder(),
            kind: self.kind,
            lease,
            wait,
            intent: self.intent,
        };
        if self.kind == Kind::Write {
            self.refuse_upgrade(&call.holder)?;
        }
        self.hint_self_wait(&call.holder);
        let Some(grant) = acquire(engine, &call).await? else {
            return Ok(None);
        };
        let hold = engine.holds.acquired(
            &call.name,
            &call.holder,
            self.kind,
            grant.fresh,
            watchdog,
            grant.started,
            call.lease,
        );
        engine.watch_new(&hold);
        Ok(Some(LockGuard::new(
            engine.clone(),
            hold,
            lease_ms,
            watchdog,
            grant.token,
            grant.validity,
        )))
    }

    /// A call of a task that already holds this lock outside the guard's scope is
    /// another holder and waits for that guard: right for sibling futures (`join!`),
    /// a self-wait for a nested call. Said at DEBUG, with the way out.
    fn hint_self_wait(&self, holder: &str) {
        let engine = &self.client.engine;
        if self.owner != Holding::PerCall || engine.holds.get(&self.name, holder).is_some() {
            return;
        }
        if (engine.holds)
            .taken_in(&self.name, self.kind, holder::context())
            .is_some()
        {
            tracing::debug!(target: "redlatch", lock = %self.name,
                "this task already holds the lock; this call is another holder and waits \
                 for it (to re-enter, nest the call in guard.scope())");
        }
    }

    /// A task holding the read lock (and not the write lock) may not wait for the
    /// write lock: it would wait for itself.
    fn refuse_upgrade(&self, writer: &str) -> Result<()> {
        let holds = &self.client.engine.holds;
        let reader = writer.strip_suffix(":write").unwrap_or(writer);
        let reads = holds
            .get(&self.name, reader)
            .is_some_and(|h| h.kind == Kind::Read);
        if reads && holds.get(&self.name, writer).is_none() {
            return Err(Error::Upgrade {
                name: self.name.to_string(),
            });
        }
        Ok(())
    }

    /// True if anyone holds the lock (on a majority of masters). For the read lock of
    /// a read-write lock: anyone reads; for its write lock: anyone writes.
    ///
    /// # Errors
    /// [`Error::NoQuorum`] or the master's error when a majority does not answer.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// assert!(!lock.is_locked().await?);
    /// let guard = lock.lock().await?;
    /// assert!(lock.is_locked().await?);
    /// guard.unlock().await?;
    /// assert!(!lock.is_locked().await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        if self.kind.is_rw() {
            let v = self.query(redis::cmd("HGETALL").arg(&*self.name)).await?;
            let held: Vec<bool> = (v.iter().map(rw::parse_state))
                .map(|(mode, holders)| match (self.kind, mode.as_deref()) {
                    (Kind::Write, Some("write")) => true,
                    // A writer's own read holds (a downgrade) are read holds too.
                    (Kind::Read, Some("read")) => true,
                    (Kind::Read, Some("write")) => holders > 1,
                    _ => false,
                })
                .collect();
            return Ok(majority_true(&held, self.quorum()));
        }
        let v = self.query(redis::cmd("EXISTS").arg(&*self.name)).await?;
        Ok(majority_true(
            &v.iter().map(|x| as_int(x) == 1).collect::<Vec<_>>(),
            self.quorum(),
        ))
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let _guard = lock.lock().await?;
    /// assert!(lock.is_held_by_current_task().await?);
    /// let other = lock.clone();
    /// let held_there = tokio::spawn(async move { other.is_held_by_current_task().await });
    /// assert!(!held_there.await.unwrap()?); // locked, but not by that task
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// assert_eq!(lock.hold_count().await?, 0);
    /// let outer = lock.lock().await?;
    /// outer
    ///     .scope(async {
    ///         let inner = lock.lock().await?; // nested in the guard's scope: re-enters
    ///         assert_eq!(lock.hold_count().await?, 2);
    ///         inner.unlock().await
    ///     })
    ///     .await?;
    /// assert_eq!(lock.hold_count().await?, 1);
    /// outer.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn hold_count(&self) -> Result<u32> {
        self.check_name()?;
        // Nobody here holds it: still asked (of a holder id no call ever takes), so a
        // key that is not a lock is reported as such.
        let holder = (self.callers_holder())
            .unwrap_or_else(|| format!("{}0", self.client.engine.holder_prefix).into());
        let v = self
            .query(redis::cmd("HGET").arg(&*self.name).arg(&*holder))
            .await?;
        let counts = v.iter().map(|x| as_int(x).max(0) as u32).collect();
        Ok(majority_floor(counts, self.quorum()))
    }

    /// How long the lock stays held if nobody renews it (what a majority agrees on at
    /// least); `None` if it is not locked or has no expiry.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// assert_eq!(lock.remaining_ttl().await?, None); // free
    /// let guard = lock.lock_with_lease(Duration::from_secs(5)).await?;
    /// let ttl = lock.remaining_ttl().await?.expect("held");
    /// assert!(ttl > Duration::ZERO && ttl <= Duration::from_secs(5));
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let v = self.query(redis::cmd("PTTL").arg(&*self.name)).await?;
        let ttl = majority_floor(v.iter().map(as_int).collect(), self.quorum());
        Ok((ttl > 0).then(|| Duration::from_millis(ttl as u64)))
    }

    /// Deletes the lock whoever holds it and wakes its waiters (the head waiter for a
    /// fair lock). Returns true if a lock was deleted. This client's guards of the lock
    /// report it [lost](LockGuard::lost); other clients notice at their next renewal.
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key is not a lock; [`Error::NoQuorum`] or the
    /// master's error when a majority does not answer.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// assert!(lock.force_unlock().await?); // deleted, whoever held it
    /// assert!(!lock.is_locked().await?);
    /// assert!(guard.lost().is_cancelled()); // this client's guard knows
    /// assert!(!lock.force_unlock().await?); // nothing left to delete
    /// # Ok(()) }) }
    /// ```
    pub async fn force_unlock(&self) -> Result<bool> {
        self.check_name()?;
        let engine = &self.client.engine;
        let (fair, kind) = (self.kind == Kind::Fair, self.kind);
        let results = fan_out(&engine.masters, |m| async move {
            match kind {
                Kind::Read | Kind::Write => {
                    rw::force_release(m, &self.name, kind == Kind::Write).await
                }
                _ => scripts::force_release(m, &self.name, fair).await,
            }
        })
        .await;
        if let Some(Error::WrongType { .. }) = results.iter().find_map(|r| r.as_ref().err()) {
            return Err(results.into_iter().find_map(Result::err).expect("an error"));
        }
        let deleted = answers(results, engine.quorum)?.contains(&true);
        // A read-write lock in the other mode was left alone: its holds are not lost.
        if deleted || !kind.is_rw() {
            engine.holds.lose_name(&self.name);
        }
        engine.pubsub.notify_local(&self.kind.channel(&self.name));
        Ok(deleted)
    }

    fn quorum(&self) -> usize {
        self.client.engine.quorum
    }

    /// Checks the name for this kind of lock and this deployment.
    pub(crate) fn check_name(&self) -> Result<()> {
        match self.kind {
            Kind::Fair => keys::validate_fair(&self.name)?,
            _ => keys::validate(&self.name)?,
        }
        if self.client.engine.settings.cluster {
            keys::validate_cluster(&self.name)?;
        }
        Ok(())
    }

    /// Runs a read on every master; the answers of at least a majority.
    async fn query(&self, cmd: &mut redis::Cmd) -> Result<Vec<Value>> {
        self.check_name()?;
        let cmd = &*cmd;
        let results = fan_out(&self.client.engine.masters, |m| async move {
            m.query::<Value>(cmd)
                .await
                .map_err(|e| scripts::typed(&self.name, e))
        })
        .await;
        answers(results, self.quorum())
    }
}

fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish()
    }
}
