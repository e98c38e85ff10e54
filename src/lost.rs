//! Why a hold was lost ([`LostReason`]), shared by the engine that finds it out and the
//! guards that report it (like `error` and `keys`).

use crate::error::Error;

/// Why a hold was declared lost: what [`LockGuard::lost_reason`](crate::LockGuard::lost_reason)
/// returns once [`lost()`](crate::LockGuard::lost) has fired.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use redlatch::{Client, Config, LostReason};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let lock = client.lock("orders:42");
/// let guard = lock.lock().await?;
/// assert!(guard.lost_reason().is_none()); // held
/// lock.force_unlock().await?;
/// guard.lost().cancelled().await;
/// assert!(matches!(guard.lost_reason(), Some(LostReason::ForceUnlocked)));
/// assert_eq!(guard.lost_reason().unwrap().to_string(), "force-unlocked by this client");
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LostReason {
    /// A renewal found it gone on so many masters that no majority holds it: its lease
    /// ran out there, or something deleted it (another client's force-unlock, an
    /// operator, eviction).
    #[error("expired or deleted on the masters")]
    ExpiredOrDeleted,
    /// No majority renewed it within its validity: masters unreachable, paused or too
    /// slow, or (with replica sync) their replicas did not acknowledge the renewals.
    #[error("not renewed by a majority within its validity (masters unreachable or slow, or replicas not acknowledging)")]
    NotRenewed,
    /// This client force-unlocked it ([`Lock::force_unlock`](crate::Lock::force_unlock)).
    #[error("force-unlocked by this client")]
    ForceUnlocked,
    /// The masters refused the renewals for lack of permission (ACL `NOPERM`) until its
    /// validity ran out; the error names the refused command.
    #[error("renewals refused: {0}")]
    PermissionDenied(Error),
    /// It was gone on a master that is now another server than the one that granted
    /// it: a failover promoted a replica that never had it (see `Config::sync_replicas`).
    #[error("gone after a failover: the promoted replica did not have it")]
    MasterDataLost,
    /// The client shut down ([`Client::close`](crate::Client::close) or the last handle
    /// dropped): nobody renews it any more.
    #[error("the client was closed")]
    ClientClosed,
}

impl LostReason {
    /// True for [`LostReason::PermissionDenied`]: fix the ACL, retrying cannot help.
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, LostReason::PermissionDenied(_))
    }
}
