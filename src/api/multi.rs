//! [`MultiLock`]: several locks taken as one (Redisson `RedissonMultiLock`), and its
//! [`MultiGuard`].
//!
//! Invariants:
//! 1. All or none, and no deadlock: the engine's wait (engine/acquire/all_or_none.rs,
//!    its invariants 1-3) takes the parts, each with its [`Lock`]'s own call.
//! 2. The guard's [`lost`](MultiGuard::lost) token is cancelled as soon as any part's
//!    token is; the task watching them stops with the guard.

use std::time::{Duration, Instant};

use futures_util::future::{join_all, select_all};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::guard::LockGuard;
use crate::api::lock::Lock;
use crate::engine::facade::{all_or_none, Scope};
use crate::error::{Error, Result};
use crate::lost::LostReason;

/// Several locks held together: all of them or none (Redisson `RedissonMultiLock`).
/// Each part may be any [`Lock`] (plain, fair, fenced, a read or write lock), over the
/// client's masters: in Redlock mode every part is itself a Redlock lock. (Redisson's
/// `RedissonRedLock`, one lock over several independent masters, is
/// [`Config::redlock`](crate::Config::redlock).)
///
/// Two callers locking overlapping sets in different orders cannot deadlock: a caller
/// never waits while holding a part (see the invariants in the source).
///
/// # Examples
/// See the example on [`lock`](MultiLock::lock).
#[derive(Clone, Debug)]
pub struct MultiLock {
    locks: Vec<Lock>,
}

impl MultiLock {
    /// Several locks of one or more kinds, taken together; duplicates (same name and
    /// kind) are taken once.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Self {
        let mut locks: Vec<Lock> = locks.into_iter().collect();
        // A fixed order for every caller: fewer collisions between overlapping sets.
        locks.sort_by(|a, b| (a.name(), a.kind().label()).cmp(&(b.name(), b.kind().label())));
        locks.dedup_by(|a, b| a.name() == b.name() && a.kind() == b.kind());
        MultiLock { locks }
    }

    /// The parts, in the order they are taken (by name).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn locks(&self) -> &[Lock] {
        &self.locks
    }

    /// Waits as long as it takes, then holds every part under the watchdog.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty set, or any part's error (every part taken
    /// so far is released first).
    ///
    /// # Cancel safety
    /// Dropping the future releases the parts it took (in the background) and leaves
    /// no subscription.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, MultiLock};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let transfer = client.multi_lock(["account:2", "account:1", "account:2"]);
    /// let names: Vec<&str> = transfer.locks().iter().map(|l| l.name()).collect();
    /// assert_eq!(names, ["account:1", "account:2"]); // in one order, once each
    /// let guard = transfer.lock().await?;
    /// assert!(client.lock("account:1").is_locked().await?);
    /// assert_eq!(guard.names(), ["account:1", "account:2"]);
    /// assert_eq!(guard.guards().len(), 2);
    /// guard.unlock().await?;
    /// assert!(!client.lock("account:2").is_locked().await?);
    ///
    /// // Locks of any kind, under a lease of their own.
    /// let mixed = MultiLock::new([client.fenced_lock("ledger"), client.read_write_lock("catalog").read()]);
    /// let guard = mixed.lock_with_lease(Duration::from_secs(5)).await?;
    /// assert!(guard.guards().iter().any(|g| g.fencing_token().is_some()));
    /// assert!(guard.validity() < Duration::from_secs(5));
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn lock(&self) -> Result<MultiGuard> {
        let g = self.acquire(None, None).await?;
        Ok(g.expect("unbounded wait"))
    }

    /// Waits as long as it takes, then holds every part for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock`](Self::lock), plus [`Error::InvalidLease`].
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        let g = self.acquire(None, Some(lease)).await?;
        Ok(g.expect("unbounded wait"))
    }

    /// Waits at most `wait` for all parts (`Duration::ZERO`: one try of each);
    /// `Ok(None)` if some part stayed busy, and then none is held.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::{Duration, Instant};
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let b = client.lock("b").lock().await?;
    /// let m = client.multi_lock(["a", "b"]);
    /// let other = m.clone();
    /// let got = tokio::spawn(async move { other.try_lock(Duration::from_millis(100)).await.map(|g| g.is_some()) });
    /// assert!(!got.await.unwrap()?);
    /// assert!(!client.lock("a").is_locked().await?); // none or all
    /// b.unlock().await?;
    /// // With a lease of its own (no watchdog): one attempt, hold for 5 s.
    /// let g = m.try_lock_with_lease(Duration::ZERO, Duration::from_secs(5)).await?;
    /// assert!(g.is_some());
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "tryLock")]
    pub async fn try_lock(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.acquire(Some(wait), None).await
    }

    /// Waits at most `wait`, then holds every part for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// See the example on [`try_lock`](Self::try_lock).
    #[doc(alias = "tryLock")]
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        self.acquire(Some(wait), Some(lease)).await
    }

    /// All or none, never waiting while holding a part (the engine's `all_or_none`).
    pub(crate) async fn acquire(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        let Some(first) = self.locks.first() else {
            return Err(Error::InvalidName(
                "a multi-lock needs at least one name".into(),
            ));
        };
        let engine = &first.client().engine;
        let take = |i: usize, wait| self.locks[i].acquire(wait, lease);
        let taken = all_or_none(self.locks.len(), wait, take, release_all, || {
            engine.backoff()
        });
        Ok(taken.await?.map(|mut guards| {
            guards.sort_by(|a, b| a.name().cmp(b.name()));
            MultiGuard::new(guards)
        }))
    }
}

/// Releases every guard (at once); errors are logged, the leases bound the rest.
async fn release_all(guards: Vec<LockGuard>) -> Vec<Result<()>> {
    join_all(guards.into_iter().map(LockGuard::unlock)).await
}

/// Proof that every part of a [`MultiLock`] is held. Dropping it releases them all in
/// the background; [`unlock`](Self::unlock) releases them and reports errors.
///
/// # Examples
/// See the examples on [`MultiLock::lock`] and [`MultiGuard::unlock`].
#[must_use = "dropping the guard releases the locks at once"]
pub struct MultiGuard {
    guards: Vec<LockGuard>,
    lost: CancellationToken,
    /// The earliest end of validity among the parts at risk (`follow` keeps it).
    risk: watch::Receiver<Option<Instant>>,
    /// Cancelled when the guard goes: ends the tasks of `revoke_requested`.
    ended: CancellationToken,
    watcher: Option<tokio::task::JoinHandle<()>>,
}

impl MultiGuard {
    fn new(guards: Vec<LockGuard>) -> Self {
        let lost = CancellationToken::new();
        let (risk_tx, risk) = watch::channel(None);
        let tokens: Vec<CancellationToken> = guards.iter().map(LockGuard::lost).collect();
        let mut risks: Vec<_> = guards.iter().map(LockGuard::at_risk).collect();
        let any = lost.clone();
        // Invariant 2: one task follows every part's token and risk.
        let watcher = tokio::spawn(async move {
            let any_lost = || select_all(tokens.iter().map(|t| Box::pin(t.cancelled())));
            loop {
                let earliest = risks.iter().filter_map(|r| *r.borrow()).min();
                risk_tx.send_if_modified(|r| std::mem::replace(r, earliest) != earliest);
                let changed = select_all(risks.iter_mut().map(|r| Box::pin(r.changed())));
                tokio::select! {
                    _ = any_lost() => break,
                    (changed, ..) = changed => if changed.is_err() {
                        // A part's risk went with its hold: only the tokens are left.
                        any_lost().await;
                        break;
                    }
                }
            }
            any.cancel();
        });
        MultiGuard {
            guards,
            lost,
            risk,
            ended: CancellationToken::new(),
            watcher: Some(watcher),
        }
    }

    /// Runs `fut` in the scope of every part's guard ([`LockGuard::scope`]):
    /// acquisitions of the parts inside it re-enter instead of waiting.
    ///
    /// # Examples
    /// See the example on [`unlock`](Self::unlock).
    pub async fn scope<F: std::future::Future>(&self, fut: F) -> F::Output {
        let entries = self.guards.iter().map(|g| g.held().scope_entry());
        Scope::enter(entries, fut).await
    }

    /// The parts' names, in order.
    ///
    /// # Examples
    /// See the example on [`MultiLock::lock`].
    pub fn names(&self) -> Vec<&str> {
        self.guards.iter().map(LockGuard::name).collect()
    }

    /// The parts' guards (for their fencing tokens, validities, holders).
    ///
    /// # Examples
    /// See the example on [`MultiLock::lock`].
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// Cancelled as soon as any part is known lost (see [`LockGuard::lost`]).
    ///
    /// # Examples
    /// See the example on [`unlock`](Self::unlock).
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// The shortest validity among the parts.
    ///
    /// # Examples
    /// See the example on [`MultiLock::lock`].
    pub fn validity(&self) -> Duration {
        (self.guards.iter().map(LockGuard::validity).min()).unwrap_or_default()
    }

    /// Why the first part that was lost was lost, once [`lost`](Self::lost) fired:
    /// as [`LockGuard::lost_reason`], shown in the example on [`LockGuard::lost`].
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.guards.iter().find_map(LockGuard::lost_reason)
    }

    /// `Some(end)` while any part is at risk, `end` the earliest of their ends; as
    /// [`LockGuard::at_risk`], shown in the example on [`LockGuard::lost`].
    pub fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        self.risk.clone()
    }

    /// Cancelled when someone asks the holder of any part to release it; as
    /// [`LockGuard::revoke_requested`], shown in the example on
    /// [`Lock::request_release`](crate::Lock::request_release). Outside a tokio runtime
    /// the token never fires.
    pub fn revoke_requested(&self) -> CancellationToken {
        let asked = CancellationToken::new();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return asked;
        };
        let parts: Vec<_> = self
            .guards
            .iter()
            .map(LockGuard::revoke_requested)
            .collect();
        let (any, ended) = (asked.clone(), self.ended.clone());
        runtime.spawn(async move {
            tokio::select! {
                _ = select_all(parts.iter().map(|t| Box::pin(t.cancelled()))) => any.cancel(),
                _ = ended.cancelled() => {}
            }
        });
        asked
    }

    /// Releases every part now.
    ///
    /// # Errors
    /// The first part's error (every part is released regardless).
    ///
    /// # Cancel safety
    /// As [`LockGuard::unlock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let g = client.multi_lock(["a", "b"]).lock().await?;
    /// // In the guard's scope, its locks re-enter (here through `with`).
    /// let a = client.lock("a");
    /// let count = g.scope(async { a.with(|| a.hold_count()).await }).await??;
    /// assert_eq!(count, 2); // the multi-lock's hold and `with`'s, one holder
    /// // Losing one lock loses the whole: `lost()` fires.
    /// client.lock("a").force_unlock().await?;
    /// let lost = tokio::time::timeout(Duration::from_secs(5), g.lost().cancelled()).await;
    /// assert!(lost.is_ok());
    /// assert!(g.unlock().await.unwrap_err().is_not_held()); // "b" was still released
    /// assert!(!client.lock("b").is_locked().await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn unlock(mut self) -> Result<()> {
        let guards = std::mem::take(&mut self.guards);
        release_all(guards).await.into_iter().collect()
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        self.ended.cancel();
        if let Some(w) = self.watcher.take() {
            w.abort();
        }
    }
}

impl std::fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiGuard")
            .field("names", &self.names())
            .finish()
    }
}
