//! [`Guard`]: one blocking wrapper over every hold of the async API (its shared shape,
//! [`Hold`]), and the names it goes by: [`LockGuard`], [`MultiGuard`],
//! [`Permit`], [`SemaphorePermit`], each with the few methods of its own kind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Runtime;
use crate::error::Result;
use crate::{Hold, LostReason};

/// A hold taken by a blocking call, released when dropped (before `drop` returns;
/// in the background when dropped inside an async runtime) or by
/// [`unlock`](Self::unlock), which reports what happened. `G` is the async guard it
/// wraps ([`as_async`](Self::as_async)); every blocking guard is one of these.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let guard = client.fenced_lock("ledger").lock()?;
/// assert!(guard.holder().starts_with(&client.id().to_string()));
/// assert_eq!(guard.as_async().holder(), guard.holder()); // the async guard inside
/// assert!(guard.fencing_token().is_some());
/// assert!(!guard.is_lost() && guard.lost_reason().is_none());
/// assert_eq!(*guard.at_risk().borrow(), None); // renewals succeed
/// assert!(guard.validity() > std::time::Duration::ZERO);
/// let revoke = guard.revoke_requested();
/// assert!(!revoke.is_cancelled());
/// guard.unlock()?;
/// # Ok(()) }) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases the hold at once"]
pub struct Guard<G: Hold + 'static> {
    /// Present until unlocked or dropped.
    inner: Option<G>,
    rt: Arc<Runtime>,
}

/// One hold of a blocking [`Lock`](super::Lock) or
/// [`FasterMultiLock`](super::FasterMultiLock); see [`Guard`] for its example.
pub type LockGuard = Guard<crate::LockGuard>;
/// Every lock of a blocking [`MultiLock`](super::MultiLock); see [`Guard`].
pub type MultiGuard = Guard<crate::MultiGuard>;
/// A permit of a blocking [`PermitExpirableSemaphore`](super::PermitExpirableSemaphore),
/// given back when dropped; see [`Guard`].
pub type Permit = Guard<crate::Permit>;
/// Permits of a blocking [`Semaphore`](super::Semaphore), given back when dropped
/// unless [`forget`](Guard::forget) keeps them taken; see [`Guard`]. It has no lease:
/// never lost, never at risk.
pub type SemaphorePermit = Guard<crate::SemaphorePermit>;

impl<G: Hold + 'static> Guard<G> {
    pub(super) fn new(inner: G, rt: &Arc<Runtime>) -> Self {
        Guard {
            inner: Some(inner),
            rt: rt.clone(),
        }
    }

    /// The async guard this one wraps (see the [`Guard`] example).
    pub fn as_async(&self) -> &G {
        self.inner
            .as_ref()
            .expect("present until unlocked or dropped")
    }

    /// The holder id; as [`crate::LockGuard::holder`] (example there).
    pub fn holder(&self) -> &str {
        self.as_async().holder()
    }

    /// Whether [`lost`](Self::lost) fired; the [`Guard`] example shows it.
    pub fn is_lost(&self) -> bool {
        self.as_async().lost().is_cancelled()
    }

    /// Cancelled when the hold is known lost; as [`crate::LockGuard::lost`] (example there).
    pub fn lost(&self) -> CancellationToken {
        self.as_async().lost()
    }

    /// Why the hold was lost; as [`crate::LockGuard::lost_reason`] (example there).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.as_async().lost_reason()
    }

    /// `Some(end)` while renewals fail; as [`crate::LockGuard::at_risk`] (example there).
    pub fn at_risk(&self) -> watch::Receiver<Option<Instant>> {
        self.as_async().at_risk()
    }

    /// How long it is still valid; as [`crate::LockGuard::validity`] (example there).
    pub fn validity(&self) -> Duration {
        self.as_async().validity()
    }

    /// Cancelled when someone asks the holder to release; as
    /// [`crate::LockGuard::revoke_requested`] (example there). It listens on the
    /// client's runtime.
    pub fn revoke_requested(&self) -> CancellationToken {
        let _on_our_runtime = self.rt.get().enter();
        self.as_async().revoke_requested()
    }

    /// Releases the hold now; as [`crate::LockGuard::unlock`] (example there).
    pub fn unlock(mut self) -> Result<()> {
        // Refused inside a runtime before the hold is taken out: the guard's drop then
        // releases it in the background.
        self.rt.may_block()?;
        let inner = self
            .inner
            .take()
            .expect("present until unlocked or dropped");
        self.rt.call(Box::new(inner).unlock())
    }
}

impl LockGuard {
    /// The lock's name; as [`crate::LockGuard::name`] (example there).
    pub fn name(&self) -> &str {
        self.as_async().name()
    }

    /// The fencing token of a fenced lock; the [`Guard`] example shows it.
    pub fn fencing_token(&self) -> Option<u64> {
        self.as_async().fencing_token()
    }
}

impl MultiGuard {
    /// The locks' names; as [`crate::MultiGuard::names`] (example there).
    pub fn names(&self) -> Vec<&str> {
        self.as_async().names()
    }
}

impl Permit {
    /// The permit's id; as [`crate::Permit::id`] (example there).
    pub fn id(&self) -> &str {
        self.as_async().id()
    }

    /// The semaphore's name; as [`crate::Permit::name`] (example there).
    pub fn name(&self) -> &str {
        self.as_async().name()
    }

    /// [`unlock`](Guard::unlock) by the name of [`crate::Permit::release`] (example there).
    pub fn release(self) -> Result<()> {
        self.unlock()
    }
}

impl SemaphorePermit {
    /// Its permits; as [`crate::SemaphorePermit::permits`] (example there).
    pub fn permits(&self) -> i64 {
        self.as_async().permits()
    }

    /// Keeps the permits taken; as [`crate::SemaphorePermit::forget`] (example there).
    pub fn forget(mut self) {
        if let Some(p) = self.inner.take() {
            p.forget();
        }
    }

    /// [`unlock`](Guard::unlock) as [`crate::SemaphorePermit::release`] (example there).
    pub fn release(self) -> Result<()> {
        self.unlock()
    }
}

impl<G: Hold + 'static> Drop for Guard<G> {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let what = format!("{inner:?}");
        self.rt.finish(async move {
            match Box::new(inner).unlock().await {
                Ok(()) => {}
                Err(e) if e.is_not_held() => {
                    tracing::debug!(guard = %what, "dropped guard: the hold was already lost");
                }
                Err(e) => tracing::warn!(guard = %what, error = %e,
                    "release on drop failed; the lease (if any) frees it"),
            }
        });
    }
}
