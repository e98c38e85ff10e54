//! [`LockGuard`]: proof of one hold; releases it on `unlock` or drop.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::Instrument;

use crate::engine::facade::{Held, Scope};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;
use crate::lost::LostReason;
use crate::telemetry;

/// One hold on a lock. Dropping it releases the hold in a background task;
/// [`unlock`](LockGuard::unlock) releases it and reports what happened.
///
/// A guard may move to another task: it releases with the holder id it was acquired
/// with. While it lives and no explicit lease was given, the watchdog keeps the lease.
///
/// # Examples
/// See the examples on [`LockGuard::unlock`], [`LockGuard::lost`] and [`LockGuard::scope`].
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    /// The hold, released by `unlock` or on drop (engine/holding/held.rs).
    held: Held,
}

impl LockGuard {
    pub(crate) fn new(held: Held) -> Self {
        LockGuard { held }
    }

    /// The lock's name.
    ///
    /// # Examples
    /// See the example on [`unlock`](Self::unlock).
    pub fn name(&self) -> &str {
        self.held.name()
    }

    /// The holder id (`"{client_uuid}:{n}"`) this hold was taken with.
    ///
    /// # Examples
    /// See the example on [`unlock`](Self::unlock).
    pub fn holder(&self) -> &str {
        self.held.holder()
    }

    /// Runs `fut` so that acquisitions of this lock made inside it re-enter this
    /// guard's hold (the hold count grows) instead of waiting for it: the way to nest
    /// `lock()` calls. Outside a scope every acquisition is its own holder, so two
    /// futures of one task (`join!`, `select!`, `for_each_concurrent`) exclude each
    /// other. A task spawned inside the scope is outside it (task-locals are not
    /// inherited); futures run concurrently inside the scope all re-enter, since they
    /// act for the guard. For a read-write lock, a writer's scope lets reads in (the
    /// downgrade) and a reader's scope refuses the write lock ([`Error::Upgrade`]).
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
    /// // Outside the scope, another call is another holder: it waits.
    /// assert!(lock.try_lock(Duration::ZERO).await?.is_none());
    /// let count = guard
    ///     .scope(async {
    ///         let nested = lock.lock().await?; // re-enters
    ///         let count = lock.hold_count().await?;
    ///         nested.unlock().await?;
    ///         redlatch::Result::Ok(count)
    ///     })
    ///     .await?;
    /// assert_eq!(count, 2);
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn scope<F: std::future::Future>(&self, fut: F) -> F::Output {
        Scope::enter([self.held.scope_entry()], fut).await
    }

    /// The hold, for a [`MultiGuard`](crate::MultiGuard)'s scope.
    pub(crate) fn held(&self) -> &Held {
        &self.held
    }

    /// The hold itself, for a call that gives it back in the engine (an election's
    /// step-down).
    pub(crate) fn into_held(self) -> Held {
        self.held
    }

    /// The fencing token of a fenced lock (strictly greater than every token handed out
    /// before for this name); `None` for other locks. Pass it to the storage you write
    /// to, and let it reject writes with an older token.
    ///
    /// # Examples
    /// See the example on [`Client::fenced_lock`](crate::Client::fenced_lock).
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.token()
    }

    /// Cancelled when the lock is known to be lost: the watchdog found it gone or could
    /// not renew it on a majority within its validity, it was force-unlocked (by this
    /// client, or by another redlatch client, which tells this one at once), or the
    /// client shut down. Select on `lost().cancelled()` to abort work.
    ///
    /// With an explicit lease (no watchdog) nothing renews the lock: a force-unlock by
    /// a redlatch client is still told, but an expiry is not; the lease simply ends
    /// [`validity`](Self::validity) after acquisition. Bound such work with
    /// `tokio::time::timeout(guard.validity(), ...)`.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, LostReason};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// let lost = guard.lost();
    /// let work = tokio::spawn(async move {
    ///     tokio::select! {
    ///         _ = lost.cancelled() => "stopped: lock lost",
    ///         _ = tokio::time::sleep(Duration::from_secs(60)) => "finished",
    ///     }
    /// });
    /// let mut risk = guard.at_risk();
    /// assert_eq!(*risk.borrow(), None); // renewals succeed (Some(end) once they fail)
    /// lock.force_unlock().await?; // an operator breaks the lock
    /// assert_eq!(work.await.unwrap(), "stopped: lock lost");
    /// assert!(matches!(guard.lost_reason(), Some(LostReason::ForceUnlocked)));
    /// assert!(guard.unlock().await.unwrap_err().is_not_held());
    /// # Ok(()) }) }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.held.lost()
    }

    /// How long the lock is still valid: lease − drift counted from the acquisition's
    /// start (Redlock step 4: lease − elapsed − drift right after `lock()` returns) or,
    /// with the watchdog, from the start of the last renewal that counted: renewed by a
    /// majority and, with replica sync (the default), acknowledged by the eligible
    /// replicas, so it never outlasts the lock on a replica a failover could promote.
    /// Zero once it ran out. See [`valid_until`](Self::valid_until) for the instant.
    ///
    /// # Examples
    /// See the example on [`unlock`](Self::unlock).
    pub fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Releases this hold now.
    ///
    /// # Errors
    /// [`Error::NotHeld`] if the lease expired, the lock was force-unlocked or the
    /// watchdog reported it lost (whatever a late renewal kept of it on the masters has
    /// then been deleted, as far as they answer); [`Error::NoQuorum`] / a master's error if a majority
    /// of masters could not be reached (the lease then runs out on its own).
    ///
    /// # Cancel safety
    /// If the future is dropped the release may or may not have happened; the lease
    /// bounds how long the lock can stay held.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::{Duration, Instant};
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock_with_lease(Duration::from_secs(2)).await?;
    /// assert_eq!(guard.name(), "orders:42");
    /// assert!(guard.holder().starts_with(&format!("{}:", client.id()))); // "{client_uuid}:{n}"
    /// // lease − elapsed − drift (2 s × 0.01 + 2 ms): at most 1978 ms.
    /// assert!(guard.validity() <= Duration::from_millis(1978));
    /// assert!(guard.valid_until() <= Instant::now() + Duration::from_secs(2));
    /// let result = tokio::time::timeout(guard.validity(), async { /* bounded work */ 42 }).await;
    /// assert_eq!(result.ok(), Some(42));
    /// guard.unlock().await?; // released; errors are reported, unlike a drop
    /// assert!(!lock.is_locked().await?);
    ///
    /// let guard = lock.lock().await?;
    /// lock.force_unlock().await?;
    /// let err = guard.unlock().await.unwrap_err();
    /// assert!(err.is_not_held());
    /// # Ok(()) }) }
    /// ```
    #[doc(alias("unlockAsync", "IllegalMonitorStateException"))]
    pub async fn unlock(self) -> Result<()> {
        let held = self.held;
        let span = tracing::info_span!(target: "redlatch", "unlock", lock = %held.name(),
            holder = %held.holder(), masters = held.masters(),
            "db.system.name" = "redis", "error.type" = Empty, outcome = Empty,
            elapsed_ms = Empty);
        let started = Instant::now();
        // Pinned in place and awaited by reference, not boxed (an allocation a pair)
        // nor moved into each branch (two copies in this future's state); instrumented
        // only when someone listens (the wrapper costs W1).
        let released = std::pin::pin!(held.release());
        let result = if span.is_disabled() {
            released.await
        } else {
            released.instrument(span.clone()).await
        };
        match &result {
            Ok(()) => telemetry::finish(&span, started, "released", None),
            Err(e) if e.is_not_held() => telemetry::finish(&span, started, "not_held", None),
            Err(e) => telemetry::finish(&span, started, "error", Some(e)),
        }
        result
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.held.name())
            .field("holder", &self.held.holder())
            .field("watchdog", &self.held.watchdog())
            .field("token", &self.held.token())
            .field("validity", &self.held.granted_validity())
            .finish()
    }
}

// ---- Renewal state (issue 21 items 3, 5, 6): when the validity ends, whether it is
// ---- at risk, and why a hold was lost. Kept apart from the methods above.
impl LockGuard {
    /// The instant the lock's validity ends unless renewed: what
    /// [`validity`](Self::validity) counts down to. With the watchdog it moves forward
    /// with every renewal that counts (see `validity`).
    ///
    /// # Examples
    /// See the example on [`unlock`](Self::unlock).
    pub fn valid_until(&self) -> Instant {
        self.held.valid_until()
    }

    /// Why the lock was lost, once [`lost()`](Self::lost) has fired; `None` while it is
    /// held. Set before `lost()` fires, so code woken by it can read it at once.
    ///
    /// # Examples
    /// See the example on [`lost`](Self::lost).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.held.lost_reason()
    }

    /// Whether the lock is at risk of being lost, as a
    /// [`watch::Receiver`](tokio::sync::watch::Receiver): `Some(end)` while the
    /// watchdog's renewals have failed on a majority of masters (errors, timeouts,
    /// refusals, renewals the replicas did not acknowledge), `end` being the instant the
    /// lock's validity runs out unless a renewal succeeds first; `None` while renewals
    /// succeed. A later renewal that counts sets it back to `None`, so it can rise and
    /// clear several times: it is a state to watch, not a one-shot event. Stop work
    /// that must not outlive the lock before `end`; [`lost()`](Self::lost) fires at
    /// `end` if no renewal came. Without the watchdog (an explicit lease) nothing
    /// renews and it stays `None`.
    ///
    /// # Examples
    /// See the example on [`lost`](Self::lost).
    pub fn at_risk(&self) -> tokio::sync::watch::Receiver<Option<Instant>> {
        self.held.at_risk()
    }
}
