//! [`Lock`]: a handle on one named lock (plain, fair or fenced).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Value;
use tracing::Instrument;

use crate::api::client::Client;
use crate::api::config::check_lease;
use crate::api::guard::LockGuard;
use crate::engine::quorum::{answers, fan_out, majority_floor, majority_true};
use crate::engine::waiter::{acquire, Call};
pub use crate::engine::Kind;
use crate::engine::{rw, scripts};
use crate::error::{Error, Result};
use crate::keys;
use crate::telemetry;

/// A reentrant distributed lock on one name, shared by all tasks and processes that
/// use the same name (Redisson clients included).
///
/// A holder is one tokio task of one client: nested `lock()` calls in the same task
/// re-enter (the hold count grows), other tasks wait.
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
}

impl Lock {
    pub(crate) fn new(client: Client, name: impl Into<Arc<str>>, kind: Kind) -> Self {
        Lock {
            client,
            name: name.into(),
            kind,
            intent: false,
        }
    }

    /// The write lock of a read-write lock, preferring writers or not.
    pub(crate) fn writer(client: Client, name: Arc<str>, prefer: bool) -> Self {
        Lock {
            intent: prefer,
            ..Lock::new(client, name, Kind::Write)
        }
    }

    /// The calling task's holder id for this lock (a writer's ends in `:write`).
    fn holder(&self) -> Arc<str> {
        let holder = self.client.engine.current_holder();
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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

    /// `lock`/`try_lock` in their span (telemetry.rs), with the acquisition metrics.
    async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let (kind, masters) = (self.kind.label(), self.client.engine.masters.len());
        macro_rules! span {
            ($name:literal) => {
                tracing::debug_span!(target: "redlatch", $name, lock = %self.name, kind, masters,
                    outcome = Empty, elapsed_ms = Empty)
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
    /// let client = Client::connect(Config::single(url)).await?;
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

    /// True if the calling task holds the lock (on a majority of masters).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked), plus [`Error::WrongType`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url)).await?;
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

    /// The calling task's reentrant hold count (what a majority of masters agree on at
    /// least); 0 if it does not hold the lock.
    ///
    /// # Errors
    /// As [`is_held_by_current_task`](Self::is_held_by_current_task).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url)).await?;
    /// let lock = client.lock("orders:42");
    /// assert_eq!(lock.hold_count().await?, 0);
    /// let outer = lock.lock().await?;
    /// let inner = lock.lock().await?;
    /// assert_eq!(lock.hold_count().await?, 2);
    /// inner.unlock().await?;
    /// assert_eq!(lock.hold_count().await?, 1);
    /// outer.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn hold_count(&self) -> Result<u32> {
        let holder = self.holder();
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
    /// let client = Client::connect(Config::single(url)).await?;
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
    /// let client = Client::connect(Config::single(url)).await?;
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
