//! Why a hold was lost ([`LostReason`]), shared by the engine that finds it out and the
//! guards that report it (like `error` and `keys`).

use crate::error::Error;

/// Why a hold was declared lost: what [`LockGuard::lost_reason`](crate::LockGuard::lost_reason)
/// returns once [`lost()`](crate::LockGuard::lost) has fired.
///
/// # Examples
/// A guard's reason in use: see the example on [`LockGuard::lost`](crate::LockGuard::lost).
/// ```
/// use redlatch::LostReason;
/// fn log(reason: &LostReason) -> String {
///     if reason.is_permission_denied() {
///         format!("fix the ACL: {reason}") // retrying cannot help
///     } else {
///         format!("lost: {reason}")
///     }
/// }
/// assert_eq!(log(&LostReason::ForceUnlocked), "lost: force-unlocked by this client");
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
    ///
    /// # Examples
    /// See the example on [`LostReason`].
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, LostReason::PermissionDenied(_))
    }
}
