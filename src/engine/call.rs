//! [`Call`]: the description of one acquisition, as the façade hands it to the waiter
//! and the hold table (instead of loose name, holder, kind and lease arguments).

use std::sync::Arc;
use std::time::Duration;

use super::Kind;

/// Parameters of one `lock`/`try_lock` call.
pub(crate) struct Call {
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    pub(crate) kind: Kind,
    /// The lease asked for, or the watchdog timeout when `watchdog`.
    pub(crate) lease: Duration,
    /// No explicit lease: the watchdog keeps the hold.
    pub(crate) watchdog: bool,
    /// None: wait as long as it takes.
    pub(crate) wait: Option<Duration>,
    /// A writer of a read-write lock records its intent while it waits, keeping new
    /// readers out (writer preference).
    pub(crate) intent: bool,
}
