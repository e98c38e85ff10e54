//! The one error type of the crate, its predicates, and the per-master errors a quorum
//! failure carries. How a server's error replies become these variants is the
//! transport's business (`transport/server_errors.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The underlying error of an [`Error::Config`] or [`Error::Runtime`] (an I/O error, a
/// TLS library's, the Redis client's), shared so that [`Error`] stays `Clone`. It
/// dereferences to the error itself, which is what [`source`](std::error::Error::source)
/// gives (so `downcast_ref::<std::io::Error>()` works on it).
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl Cause {
    /// `error`, shared.
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Cause {
        Cause(Arc::new(error))
    }
}

impl std::ops::Deref for Cause {
    type Target = dyn std::error::Error + Send + Sync + 'static;
    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

/// Everything that can go wrong in redlatch.
///
/// Contention is not an error: `try_lock` returns `Ok(None)` when the wait runs out.
/// Messages are lowercase and name the stage, the lock and the master involved.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use redlatch::{Client, Config, Error};
/// let client = Client::connect(Config::single(url.clone())).await?;
/// // Some other program stored a string under the name:
/// let mut admin = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
/// redis::cmd("SET").arg("orders:42").arg("shipped").exec(&mut admin).unwrap();
/// match client.lock("orders:42").lock().await {
///     Err(Error::WrongType { name, .. }) => assert_eq!(name, "orders:42"),
///     other => panic!("expected WrongType, got {other:?}"),
/// }
/// let err = client.lock("orders:42").lock().await.unwrap_err();
/// assert!(err.is_permanent()); // returned at once, not retried
/// assert!(!err.is_unavailable()); // and retrying later cannot help
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is unusable (no masters, duplicate masters, zero timeouts, a
    /// TLS file that cannot be read...).
    #[error("invalid configuration: {reason}")]
    Config {
        /// What is wrong, naming the setting (and the cause's text, if any).
        reason: String,
        /// The error underneath (reading a file, parsing a certificate...), if any.
        #[source]
        source: Option<Cause>,
    },

    /// A Redis URL could not be parsed or names an unsupported scheme.
    #[error("invalid redis url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given, its password (if any) shown as `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A lock name is empty or longer than [`MAX_NAME_LEN`](crate::MAX_NAME_LEN).
    #[error("invalid lock name: {0}")]
    InvalidName(String),

    /// A lease or wait time is zero, sub-millisecond or absurdly long.
    #[error("invalid lease: {0}")]
    InvalidLease(String),

    /// A count given to a semaphore or latch is out of range (a negative number of
    /// permits, which Redisson refuses too), or a list of permit ids is empty or
    /// repeats an id.
    #[error("invalid count: {0}")]
    InvalidCount(String),

    /// A master answered with an error or the connection to it failed.
    #[error("master {addr}: {source}")]
    Redis {
        /// `host:port` of the master.
        addr: String,
        /// The underlying client error.
        #[source]
        source: redis::RedisError,
    },

    /// A master did not answer within the configured timeout.
    #[error("master {addr}: timed out after {after:?}")]
    Timeout {
        /// `host:port` of the master.
        addr: String,
        /// The timeout that ran out.
        after: Duration,
    },

    /// Fewer than a majority of masters carried out the operation. The message names
    /// every master that failed and its error; masters that answered without an error
    /// (busy: another holder has the lock there) are counted, not listed.
    #[error("no quorum: {acquired} of {needed} needed masters agreed{}", fmt_failed(.errors))]
    NoQuorum {
        /// Masters that carried out the operation.
        acquired: usize,
        /// Masters needed (N/2+1).
        needed: usize,
        /// Every master's error, in the masters' order (empty when none failed: they
        /// were busy, or still to answer when the outcome was settled). It is the
        /// variant's [`source`](std::error::Error::source); its own source is the first
        /// master's error.
        #[source]
        errors: MasterErrors,
    },

    /// Release of a lock the holder no longer holds (its lease expired, it was
    /// force-unlocked, or the watchdog already reported it lost).
    #[error("lock {name:?} is not held by {holder}: lease expired or force-unlocked")]
    NotHeld {
        /// The lock name.
        name: String,
        /// The holder id the release was made with.
        holder: String,
    },

    /// A master refused a command for lack of permission (ACL `NOPERM`): the user
    /// lacks a command, key or channel the lock needs. Not retried: fix the ACL (the
    /// docs/errors.md lists the minimal one).
    #[error(
        "master {addr}: permission denied: {detail} (docs/errors.md lists the ACL redlatch needs)"
    )]
    PermissionDenied {
        /// `host:port` of the master.
        addr: String,
        /// The server's message (the command, key or channel refused).
        detail: String,
    },

    /// A master refused our credentials: it requires a password and none was given
    /// (`NOAUTH`), or the password is wrong, or the ACL user does not exist or is
    /// disabled (`WRONGPASS`). Not retried: fix the URL's user and password. The
    /// message names the user and the master, never the password.
    #[error("master {addr}: authentication failed for user {user:?}: {reason}")]
    Authentication {
        /// `host:port` of the master.
        addr: String,
        /// The ACL user the connection authenticates as (`default` when the URL names
        /// none).
        user: String,
        /// What the server said, in short.
        reason: String,
    },

    /// The server at a master's address does not speak RESP, the Redis protocol (a
    /// wrong port: an HTTP server, a database of another kind). Not retried: fix the
    /// address.
    #[error(
        "master {addr}: the server does not speak RESP, the Redis protocol (is it the Redis port?)"
    )]
    NotRedis {
        /// `host:port` of the master.
        addr: String,
    },

    /// A Redis Cluster node answered `CLUSTERDOWN`: the cluster does not serve the
    /// lock's hash slot (a primary and its replicas are down, or the cluster lost its
    /// majority). Retried as an outage, within the caller's bound (the wait of
    /// `try_lock`, `unavailable_timeout` for `lock()`); this is the error when the
    /// bound runs out while the cluster is down.
    #[error("master {addr}: the cluster is down (CLUSTERDOWN {detail})")]
    ClusterDown {
        /// `host:port` of the node that answered.
        addr: String,
        /// The server's message.
        detail: String,
    },

    /// A master is out of memory (`OOM`, maxmemory reached with a no-eviction policy):
    /// the lock was not written there. Not retried by this call.
    #[error("master {addr}: out of memory, the lock was not written: {detail}")]
    OutOfMemory {
        /// `host:port` of the master.
        addr: String,
        /// The server's message.
        detail: String,
    },

    /// A key of the lock holds data a lock script cannot use (a fencing counter that
    /// is not a number, a hold count that is not an integer): it was written by
    /// something else. Not retried: repair or delete the key.
    #[error("lock {name:?} on master {addr}: unusable data: {detail}")]
    BadData {
        /// The lock name.
        name: String,
        /// `host:port` of the master.
        addr: String,
        /// The script's error.
        detail: String,
    },

    /// The runtime under a call failed: the blocking API's could not be started (no
    /// thread could be spawned), the client shut down during a call, or a blocking
    /// call was made inside an async runtime (the message names the remedy: the async
    /// API, or `tokio::task::spawn_blocking`).
    #[error("{reason}")]
    Runtime {
        /// What failed.
        reason: String,
        /// The error underneath (the operating system's), if any.
        #[source]
        source: Option<Cause>,
    },

    /// The primary granted the lock but fewer replicas than
    /// [`Config::sync_replicas`](crate::Config::sync_replicas) asks for acknowledged it
    /// in time (a replica is down, paused or lagging): a failover now could lose the
    /// lock, so the acquisition was undone. Retry later or lower the requirement.
    #[error(
        "master {addr}: only {acked} of {wanted} replicas acknowledged the lock within \
         {timeout:?}; the acquisition was undone"
    )]
    NotReplicated {
        /// `host:port` of the primary.
        addr: String,
        /// Acknowledgements received (with `SyncReplicas::Aof`, the primary's own fsync
        /// counts as one).
        acked: usize,
        /// Acknowledgements required.
        wanted: usize,
        /// How long the primary waited for them.
        timeout: Duration,
    },

    /// Deadlock detection ([`Config::deadlock_detection`](crate::Config::deadlock_detection))
    /// found the calling task on a cycle of tasks each waiting for a lock the next one
    /// holds, and chose this call, the youngest waiter of the cycle, to give up; the
    /// others go on. Release what the task holds (drop its guards) and try again later.
    #[error("deadlock: waiting for lock {name:?} closes a cycle: {cycle}; this call, the youngest waiter, gave up")]
    Deadlock {
        /// The lock this call waited for.
        name: String,
        /// The cycle: each task (holder id, app, host, pid), the lock it waits for and
        /// who holds that.
        cycle: String,
    },

    /// The write lock of a read-write lock was asked for in the scope of a read guard
    /// of it ([`LockGuard::scope`](crate::LockGuard::scope)). That upgrade would wait
    /// for its own read lock forever (two upgrading readers would deadlock each other),
    /// so it is refused: release the read lock first, or take the write lock first and
    /// then read in its scope (a downgrade is allowed).
    #[error("read-write lock {name:?}: the caller holds the read lock; release it before taking the write lock (upgrades would deadlock)")]
    Upgrade {
        /// The read-write lock's name.
        name: String,
    },

    /// A non-reentrant lock ([`Client::non_reentrant_lock`](crate::Client::non_reentrant_lock),
    /// [`Client::non_reentrant_fair_lock`](crate::Client::non_reentrant_fair_lock)) was
    /// asked for again by the holder that holds it: in the scope of its guard, through
    /// the same [`Owner`](crate::Owner), or on the same thread (blocking API). Redisson
    /// answers `NON_REENTRANT_REACQUIRE` and throws `IllegalMonitorStateException`, for
    /// `lock()` and `tryLock()` alike; so does redlatch, at once, without waiting.
    /// Another holder (another call, task, thread or process) waits for it instead.
    #[error(
        "lock {name:?} is non-reentrant and the caller already holds it (NON_REENTRANT_REACQUIRE)"
    )]
    Reentry {
        /// The lock's name.
        name: String,
    },

    /// The operation cannot be carried out soundly in this deployment (for example a
    /// semaphore over several independent Redlock masters).
    #[error("{what} is not supported: {reason}")]
    Unsupported {
        /// What was asked for.
        what: String,
        /// Why it is refused.
        reason: String,
    },

    /// A fence refused a write: the resource has seen a newer fencing token than the
    /// one presented (the holder's lock was taken by someone else since), or the same
    /// token from another holder (a token handed out twice). The store rolled the write
    /// back (PostgreSQL: the transaction is aborted).
    #[error("resource {resource:?}: fencing token {presented} of lock {lock:?} was superseded (the newest seen is {newest}): the write was refused")]
    Fenced {
        /// The resource written to.
        resource: String,
        /// The lock whose token was presented.
        lock: String,
        /// The token presented.
        presented: u64,
        /// The newest token the resource has seen.
        newest: u64,
    },

    /// A fence refused a token of another lock: the resource is fenced by the tokens of
    /// `fenced_by`, which cannot be compared with another lock's.
    #[error("resource {resource:?} is fenced by lock {fenced_by:?}: a token of lock {lock:?} was refused")]
    FenceMismatch {
        /// The resource written to.
        resource: String,
        /// The lock whose token was presented.
        lock: String,
        /// The lock whose tokens fence the resource.
        fenced_by: String,
    },

    /// The store of a fence failed its check otherwise (nothing was recorded, and the
    /// caller's transaction is aborted): `problem` says how.
    #[error("fencing store {store}: {problem}: {detail}")]
    FenceStore {
        /// The store (`"postgres"`, `"s3"`).
        store: &'static str,
        /// What went wrong.
        problem: StoreProblem,
        /// The store's own words.
        detail: String,
        /// The driver's error.
        #[source]
        source: Option<Cause>,
    },

    /// The key at the lock's name holds a value of another type: it is not a lock.
    #[error("key {name:?} on master {addr} holds a value of another type, not a lock")]
    WrongType {
        /// The lock name.
        name: String,
        /// `host:port` of the master.
        addr: String,
    },
}

impl Error {
    /// True for [`Error::Timeout`], and for a quorum failure in which a master timed out
    /// (a longer timeout might have made the majority).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// // A "master" that accepts connections but never answers:
    /// let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let config = Config::single(format!("redis://{}", hung.local_addr().unwrap()))
    ///     .connect_timeout(Duration::from_millis(100));
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(err.is_timeout());
    /// assert!(err.is_unavailable());
    /// # }
    /// ```
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Timeout { .. } => true,
            Error::NoQuorum { errors, .. } => errors.iter().any(|m| m.error.is_timeout()),
            Error::Redis { source, .. } => source.is_timeout(),
            Error::FenceStore { problem, .. } => *problem == StoreProblem::TimedOut,
            _ => false,
        }
    }

    /// True when a release found the lock no longer held by its holder.
    ///
    /// # Examples
    /// See the example on [`LockGuard::unlock`](crate::LockGuard::unlock).
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// True for [`Error::Fenced`]: a newer holder's token reached the resource first.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Error;
    /// // What a fence returns when a newer holder wrote first (fence::postgres, fence::s3).
    /// let refused = Error::Fenced {
    ///     resource: "accounts/42".into(),
    ///     lock: "billing".into(),
    ///     presented: 7,
    ///     newest: 8,
    /// };
    /// assert!(refused.is_fenced() && refused.is_permanent()); // retrying cannot cure it
    /// assert!(!Error::InvalidName(String::new()).is_fenced());
    /// ```
    pub fn is_fenced(&self) -> bool {
        matches!(self, Error::Fenced { .. })
    }

    /// True for [`Error::NoQuorum`].
    ///
    /// # Examples
    /// See the example on [`MasterError::new`].
    pub fn is_no_quorum(&self) -> bool {
        matches!(self, Error::NoQuorum { .. })
    }

    /// True for errors that retrying the same call cannot cure: bad input or
    /// configuration, a key that is not a lock or holds unusable data, a missing
    /// permission, a master out of memory. A lock call fails with such an error at
    /// once, also when only one master of a Redlock set reports it (a misconfigured
    /// master should be loud, not silently outvoted). A quorum failure is permanent
    /// when every master that failed did so with a permanent error.
    ///
    /// # Examples
    /// See the example on [`Error`].
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Config { .. }
            | Error::InvalidUrl { .. }
            | Error::InvalidName(_)
            | Error::InvalidLease(_)
            | Error::InvalidCount(_)
            | Error::WrongType { .. }
            | Error::PermissionDenied { .. }
            | Error::Authentication { .. }
            | Error::NotRedis { .. }
            | Error::OutOfMemory { .. }
            | Error::Upgrade { .. }
            | Error::Reentry { .. }
            | Error::Unsupported { .. }
            | Error::Fenced { .. }
            | Error::FenceMismatch { .. }
            | Error::BadData { .. } => true,
            Error::FenceStore { problem, .. } => matches!(
                problem,
                StoreProblem::NotMigrated | StoreProblem::NoBucket | StoreProblem::Unauthorized
            ),
            // Retrying cannot cure it when no master that failed would do better.
            Error::NoQuorum { errors, .. } => {
                !errors.is_empty() && errors.iter().all(|m| m.error.is_permanent())
            }
            _ => false,
        }
    }

    /// True when a master could not be reached or did not answer: worth retrying later.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config};
    /// // The address of a master that is not running:
    /// let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    /// let err = Client::connect(Config::single(format!("redis://{down}"))).await.unwrap_err();
    /// assert!(err.is_unavailable()); // worth retrying later
    /// assert!(!err.is_timeout()); // refused at once
    ///
    /// let err = Client::connect(Config::single("http://example.com")).await.unwrap_err();
    /// assert!(!err.is_unavailable()); // a bad configuration stays bad
    /// # }
    /// ```
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Timeout { .. } | Error::NoQuorum { .. } | Error::ClusterDown { .. } => true,
            Error::FenceStore { problem, .. } => {
                matches!(
                    problem,
                    StoreProblem::Unavailable | StoreProblem::ReadOnly | StoreProblem::TimedOut
                )
            }
            Error::Redis { source, .. } => {
                source.is_io_error()
                    || source.is_connection_dropped()
                    || source.is_connection_refusal()
                    || source.is_timeout()
            }
            _ => false,
        }
    }
}

impl Error {
    /// An [`Error::Config`] without an underlying error.
    pub(crate) fn config(reason: impl Into<String>) -> Error {
        Error::Config {
            reason: reason.into(),
            source: None,
        }
    }

    /// An [`Error::Config`] caused by `source`; `reason` names what failed, and the
    /// message adds the source's own.
    pub(crate) fn config_from(
        reason: impl fmt::Display,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Config {
            reason: format!("{reason}: {source}"),
            source: Some(Cause::new(source)),
        }
    }
}

/// How the store of a fence failed ([`Error::FenceStore`]).
///
/// # Examples
/// ```
/// use redlatch::{Error, StoreProblem};
/// // Whether to retry a fenced write: a read-only store or a conflict may pass.
/// fn worth_retrying(e: &Error) -> bool {
///     matches!(
///         e,
///         Error::FenceStore { problem: StoreProblem::ReadOnly | StoreProblem::Conflict, .. }
///     )
/// }
/// let e = Error::FenceStore {
///     store: "postgres",
///     problem: StoreProblem::Conflict,
///     detail: "could not serialize access".into(),
///     source: None,
/// };
/// assert!(worth_retrying(&e));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreProblem {
    /// The fence's table or function is missing: run the migration
    /// (`redlatch::fence::postgres::migrate`). Permanent.
    NotMigrated,
    /// The transaction or the server is read-only (a standby, `default_transaction_read_only`):
    /// retry on the primary.
    ReadOnly,
    /// A serialization failure or a deadlock: retry the whole transaction.
    Conflict,
    /// The connection to the store is lost or the server is shutting down.
    Unavailable,
    /// Anything else the store refused (a permission, a statement timeout...).
    Refused,
    /// The object store has no such bucket (`NoSuchBucket`). Permanent.
    NoBucket,
    /// The object store refused the credentials (an unknown access key, a signature made
    /// with another secret) or their access (`AccessDenied`). Permanent.
    Unauthorized,
    /// The store did not answer within the fence's time bound.
    TimedOut,
}

impl fmt::Display for StoreProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreProblem::NotMigrated => "no fence table or function (run the migration)",
            StoreProblem::ReadOnly => "read-only",
            StoreProblem::Conflict => "conflict with a concurrent transaction (retry it)",
            StoreProblem::Unavailable => "unavailable",
            StoreProblem::Refused => "refused",
            StoreProblem::NoBucket => "no such bucket",
            StoreProblem::Unauthorized => "credentials refused or access denied",
            StoreProblem::TimedOut => "no answer in time",
        })
    }
}

/// One master's error in an [`Error::NoQuorum`].
///
/// # Examples
/// See the example on [`MasterError::new`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MasterError {
    /// `host:port` of the master.
    pub addr: String,
    /// What the master answered, or why it could not.
    pub error: Error,
}

impl MasterError {
    /// `error`, met on the master at `addr` (to build an [`Error::NoQuorum`] in a test
    /// of code that handles one).
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::{Error, MasterError};
    /// let timeout = Error::Timeout { addr: "10.0.0.2:6379".into(), after: Duration::from_secs(1) };
    /// let config = Error::Config { reason: "no such database".into(), source: None };
    /// let err = Error::NoQuorum {
    ///     acquired: 1,
    ///     needed: 2,
    ///     errors: vec![
    ///         MasterError::new("10.0.0.2:6379", timeout),
    ///         MasterError::new("10.0.0.3:6379", config),
    ///     ]
    ///     .into(),
    /// };
    /// assert_eq!(
    ///     err.to_string(),
    ///     "no quorum: 1 of 2 needed masters agreed; master 10.0.0.2:6379: timed out after 1s; \
    ///      master 10.0.0.3:6379: invalid configuration: no such database"
    /// );
    /// assert!(err.is_no_quorum() && err.is_timeout() && !err.is_permanent());
    /// let Error::NoQuorum { errors, .. } = &err else { unreachable!() };
    /// assert_eq!(errors.len(), 2); // every master's error: a slice of MasterErrors
    /// assert_eq!(errors[0].addr, "10.0.0.2:6379");
    /// ```
    pub fn new(addr: impl Into<String>, error: Error) -> MasterError {
        MasterError {
            addr: addr.into(),
            error,
        }
    }
}

/// `master <addr>: <error>`, or only the error when it names the master already.
impl fmt::Display for MasterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.error.to_string();
        if text.contains(&self.addr) {
            f.write_str(&text)
        } else {
            write!(f, "master {}: {text}", self.addr)
        }
    }
}

impl std::error::Error for MasterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Every master's error in an [`Error::NoQuorum`], in the masters' order: a slice of
/// [`MasterError`]s (`errors.iter()`, `errors.len()`, `errors[0]`). As an error, it
/// shows them all (`; ` between) and its source is the first master's.
///
/// # Examples
/// See the example on [`MasterError::new`].
#[derive(Clone, Debug, Default)]
pub struct MasterErrors(Vec<MasterError>);

impl From<Vec<MasterError>> for MasterErrors {
    fn from(errors: Vec<MasterError>) -> Self {
        MasterErrors(errors)
    }
}

impl std::ops::Deref for MasterErrors {
    type Target = [MasterError];
    fn deref(&self) -> &[MasterError] {
        &self.0
    }
}

impl<'a> IntoIterator for &'a MasterErrors {
    type Item = &'a MasterError;
    type IntoIter = std::slice::Iter<'a, MasterError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl IntoIterator for MasterErrors {
    type Item = MasterError;
    type IntoIter = std::vec::IntoIter<MasterError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl fmt::Display for MasterErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{m}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MasterErrors {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.first().map(|m| &m.error as _)
    }
}

/// The masters' errors after a quorum failure's summary: `; master a:1: ...`.
fn fmt_failed(errors: &MasterErrors) -> String {
    if errors.is_empty() {
        String::new()
    } else {
        format!("; {errors}")
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// A quorum failure of three masters out of five: one timed out, one refused the
    /// connection (a client error that names no master), one answered WRONGTYPE.
    fn three_failed() -> Error {
        let refused =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let errors = vec![
            MasterError::new(
                "a:2",
                Error::Timeout {
                    addr: "a:2".into(),
                    after: Duration::from_millis(250),
                },
            ),
            MasterError::new(
                "a:3",
                Error::Redis {
                    addr: "a:3".into(),
                    source: refused,
                },
            ),
            MasterError::new(
                "a:5",
                Error::WrongType {
                    name: "orders:42".into(),
                    addr: "a:5".into(),
                },
            ),
        ];
        Error::NoQuorum {
            acquired: 2,
            needed: 3,
            errors: errors.into(),
        }
    }

    #[test]
    fn a_quorum_failure_shows_every_masters_error() {
        let e = three_failed();
        let text = e.to_string();
        assert!(
            text.starts_with("no quorum: 2 of 3 needed masters agreed; master a:2: timed out"),
            "{text}"
        );
        for cause in ["master a:3: ", "refused", "key \"orders:42\" on master a:5"] {
            assert!(text.contains(cause), "{cause}: {text}");
        }
        // Each master is named once, even when its error names it too.
        assert_eq!(text.matches("a:2").count(), 1, "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[test]
    fn a_quorum_failures_source_is_the_list_then_the_first_master() {
        let e = three_failed();
        let list = e.source().expect("the masters' errors");
        let masters = list.downcast_ref::<MasterErrors>().expect("MasterErrors");
        assert_eq!(masters.len(), 3);
        assert!(e.to_string().ends_with(&list.to_string()));
        let first = list.source().expect("the first master's error");
        assert!(
            matches!(first.downcast_ref::<Error>(), Some(Error::Timeout { addr, .. }) if addr == "a:2"),
            "{first:?}"
        );
        // The second master's chain goes on to the client's own error.
        assert!(masters[1].source().and_then(|s| s.source()).is_some());
    }

    #[test]
    fn a_quorum_failures_predicates_weigh_every_master() {
        let e = three_failed();
        // One master timed out; one would answer after a restart: not permanent.
        assert!(e.is_timeout() && !e.is_permanent() && e.is_unavailable());
        let refused = |addr: &str| {
            MasterError::new(
                addr,
                Error::PermissionDenied {
                    addr: addr.into(),
                    detail: "no".into(),
                },
            )
        };
        let all_refused = Error::NoQuorum {
            acquired: 1,
            needed: 2,
            errors: vec![refused("a:2"), refused("a:3")].into(),
        };
        assert!(all_refused.is_permanent() && !all_refused.is_timeout());
        let none = Error::NoQuorum {
            acquired: 1,
            needed: 2,
            errors: MasterErrors::default(),
        };
        assert!(!none.is_permanent() && !none.is_timeout() && none.is_unavailable());
        assert_eq!(none.to_string(), "no quorum: 1 of 2 needed masters agreed");
        assert!(none.source().and_then(|s| s.source()).is_none());
    }

    #[test]
    fn config_and_runtime_errors_keep_their_source() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Error::config_from("cannot read TLS CA file /x.pem", io);
        assert_eq!(
            e.to_string(),
            "invalid configuration: cannot read TLS CA file /x.pem: no such file"
        );
        let source = e.source().expect("the io error");
        assert_eq!(
            source.downcast_ref::<std::io::Error>().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
        assert!(Error::config("no redis master given").source().is_none());
        let e = Error::Runtime {
            reason: "cannot start the blocking client's runtime: out of threads".into(),
            source: Some(Cause::new(std::io::Error::other("out of threads"))),
        };
        let source = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert!(source.is_some() && !e.is_permanent());
    }
}
