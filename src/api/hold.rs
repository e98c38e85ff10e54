//! [`Hold`]: the one shape every hold shares (a lock's guard, a permit, a multi-lock's
//! guard, a leadership), and [`Acquire`]: what a hold is taken of, by one call over
//! the four ways to wait (`lock`, `lock_with_lease`, `try_lock`,
//! `try_lock_with_lease`). Each guard keeps its own inherent methods; the trait is for
//! code that handles any of them (`Box<dyn Hold>`), as the CLI and the blocking layer do.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::election::Leadership;
use crate::api::expirable_semaphore::{Permit, PermitExpirableSemaphore};
use crate::api::group::FasterMultiLock;
use crate::api::guard::LockGuard;
use crate::api::lock::Lock;
use crate::api::multi::{MultiGuard, MultiLock};
use crate::api::semaphore::permit::SemaphorePermit;
use crate::error::Result;
use crate::lost::LostReason;

/// A future a [`Hold`] or an [`Acquire`] hands back: boxed, so both traits can be used
/// as trait objects.
pub type HoldFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// What every hold offers, whatever it holds: [`LockGuard`], [`Permit`],
/// [`SemaphorePermit`], [`MultiGuard`] and [`Leadership`] implement it with their own
/// methods of the same names (a permit's [`unlock`](Hold::unlock) is its `release`, a
/// leadership's its `resign`). A hold that has no lease (a [`SemaphorePermit`]) is
/// never lost, never at risk and never asked to release.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use redlatch::{Client, Config, Hold};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let workers = client.permit_expirable_semaphore("workers");
/// workers.try_set_permits(1).await?;
/// let holds: Vec<Box<dyn Hold>> = vec![
///     Box::new(client.lock("orders:42").lock().await?),
///     Box::new(workers.acquire().await?),
/// ];
/// for hold in holds {
///     assert!(!hold.lost().is_cancelled() && hold.lost_reason().is_none());
///     assert_eq!(*hold.at_risk().borrow(), None);
///     assert!(hold.validity() > std::time::Duration::ZERO);
///     hold.unlock().await?;
/// }
/// # Ok(()) }) }
/// ```
pub trait Hold: Send + Sync + std::fmt::Debug {
    /// The id this hold was taken with: a lock's holder id (`"{client_uuid}:{n}"`), a
    /// permit's id; a multi-lock's first lock's holder; empty for a counting
    /// semaphore's permits, which hold no id.
    fn holder(&self) -> &str;

    /// The fencing token, for the holds that have one (a fenced lock, a leadership's
    /// term).
    fn fencing_token(&self) -> Option<u64> {
        None
    }

    /// Cancelled when the hold is known to be lost (see [`LockGuard::lost`]).
    fn lost(&self) -> CancellationToken;

    /// Why it was lost, once [`lost`](Hold::lost) fired (see
    /// [`LockGuard::lost_reason`]).
    fn lost_reason(&self) -> Option<LostReason>;

    /// `Some(end of validity)` while renewals fail on a majority (see
    /// [`LockGuard::at_risk`]).
    fn at_risk(&self) -> watch::Receiver<Option<Instant>>;

    /// How long the hold is still valid (see [`LockGuard::validity`]);
    /// [`Duration::MAX`] for a hold without a lease.
    fn validity(&self) -> Duration;

    /// Cancelled when someone asks the holder to release (see
    /// [`LockGuard::revoke_requested`]); never for a permit.
    fn revoke_requested(&self) -> CancellationToken;

    /// Releases the hold (a lock's `unlock`, a permit's `release`, a leadership's
    /// `resign`).
    ///
    /// # Errors
    /// As the guard's own method (see [`LockGuard::unlock`]).
    fn unlock(self: Box<Self>) -> HoldFuture<'static, ()>;
}

/// What a [`Hold`] is taken of ([`Lock`], [`FasterMultiLock`], [`MultiLock`],
/// [`PermitExpirableSemaphore`]), by one call for the four ways to wait.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use std::time::Duration;
/// use redlatch::{Acquire, Client, Config};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let wanted: Box<dyn Acquire> = Box::new(client.lock("orders:42"));
/// // `None` waits as long as it takes; `None` lease: the watchdog keeps it.
/// let hold = wanted.acquire_hold(None, None).await?.expect("unbounded wait");
/// // Busy: a bounded wait gives `None`.
/// let other = Client::connect(Config::from_env()?).await?;
/// let busy = other.lock("orders:42").try_lock(Duration::ZERO).await?;
/// assert!(busy.is_none());
/// hold.unlock().await?;
/// # Ok(()) }) }
/// ```
pub trait Acquire: Send + Sync {
    /// Takes a hold: waits at most `wait` (`None`: as long as it takes), with a fixed
    /// `lease` or (`None`) the watchdog. `Ok(None)`: still busy when the wait ran out.
    ///
    /// # Errors
    /// As the type's own `lock` / `try_lock` (or `acquire` / `try_acquire`).
    fn acquire_hold(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> HoldFuture<'_, Option<Box<dyn Hold>>>;
}

/// Boxes an acquisition's guard as a `dyn Hold`.
fn boxed<H: Hold + 'static>(taken: Result<Option<H>>) -> Result<Option<Box<dyn Hold>>> {
    Ok(taken?.map(|h| Box::new(h) as Box<dyn Hold>))
}

impl Acquire for Lock {
    fn acquire_hold(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> HoldFuture<'_, Option<Box<dyn Hold>>> {
        Box::pin(async move { boxed(self.acquire(wait, lease).await) })
    }
}

impl Acquire for FasterMultiLock {
    fn acquire_hold(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> HoldFuture<'_, Option<Box<dyn Hold>>> {
        self.as_lock().acquire_hold(wait, lease)
    }
}

impl Acquire for MultiLock {
    fn acquire_hold(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> HoldFuture<'_, Option<Box<dyn Hold>>> {
        Box::pin(async move { boxed(self.acquire(wait, lease).await) })
    }
}

impl Acquire for PermitExpirableSemaphore {
    fn acquire_hold(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> HoldFuture<'_, Option<Box<dyn Hold>>> {
        Box::pin(async move { boxed(self.take(wait, lease).await) })
    }
}

impl Hold for LockGuard {
    fn holder(&self) -> &str {
        LockGuard::holder(self)
    }
    fn fencing_token(&self) -> Option<u64> {
        LockGuard::fencing_token(self)
    }
    fn lost(&self) -> CancellationToken {
        LockGuard::lost(self)
    }
    fn lost_reason(&self) -> Option<LostReason> {
        LockGuard::lost_reason(self)
    }
    fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        LockGuard::at_risk(self)
    }
    fn validity(&self) -> Duration {
        LockGuard::validity(self)
    }
    fn revoke_requested(&self) -> CancellationToken {
        LockGuard::revoke_requested(self)
    }
    fn unlock(self: Box<Self>) -> HoldFuture<'static, ()> {
        Box::pin(LockGuard::unlock(*self))
    }
}

impl Hold for Permit {
    fn holder(&self) -> &str {
        self.id()
    }
    fn lost(&self) -> CancellationToken {
        Permit::lost(self)
    }
    fn lost_reason(&self) -> Option<LostReason> {
        Permit::lost_reason(self)
    }
    fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        Permit::at_risk(self)
    }
    fn validity(&self) -> Duration {
        Permit::validity(self)
    }
    fn revoke_requested(&self) -> CancellationToken {
        CancellationToken::new() // nobody asks for a permit
    }
    fn unlock(self: Box<Self>) -> HoldFuture<'static, ()> {
        Box::pin(self.release())
    }
}

impl Hold for SemaphorePermit {
    fn holder(&self) -> &str {
        "" // a counting semaphore's permits are nobody's
    }
    fn lost(&self) -> CancellationToken {
        CancellationToken::new() // no lease: nothing to lose
    }
    fn lost_reason(&self) -> Option<LostReason> {
        None
    }
    fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        watch::channel(None).1
    }
    fn validity(&self) -> Duration {
        Duration::MAX
    }
    fn revoke_requested(&self) -> CancellationToken {
        CancellationToken::new()
    }
    fn unlock(self: Box<Self>) -> HoldFuture<'static, ()> {
        Box::pin(self.release())
    }
}

impl Hold for MultiGuard {
    fn holder(&self) -> &str {
        self.guards().first().map_or("", LockGuard::holder)
    }
    fn lost(&self) -> CancellationToken {
        MultiGuard::lost(self)
    }
    fn lost_reason(&self) -> Option<LostReason> {
        MultiGuard::lost_reason(self)
    }
    fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        MultiGuard::at_risk(self)
    }
    fn validity(&self) -> Duration {
        MultiGuard::validity(self)
    }
    fn revoke_requested(&self) -> CancellationToken {
        MultiGuard::revoke_requested(self)
    }
    fn unlock(self: Box<Self>) -> HoldFuture<'static, ()> {
        Box::pin(MultiGuard::unlock(*self))
    }
}

impl Hold for Leadership {
    fn holder(&self) -> &str {
        Leadership::holder(self)
    }
    fn fencing_token(&self) -> Option<u64> {
        Some(self.term())
    }
    fn lost(&self) -> CancellationToken {
        Leadership::lost(self)
    }
    fn lost_reason(&self) -> Option<LostReason> {
        Leadership::lost_reason(self)
    }
    fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        Leadership::at_risk(self)
    }
    fn validity(&self) -> Duration {
        self.guard().validity()
    }
    fn revoke_requested(&self) -> CancellationToken {
        self.guard().revoke_requested()
    }
    fn unlock(self: Box<Self>) -> HoldFuture<'static, ()> {
        Box::pin(self.resign())
    }
}
