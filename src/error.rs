//! The one error type of the crate.

use std::time::Duration;

/// Everything that can go wrong in redlatch.
///
/// Contention is not an error: `try_lock` returns `Ok(None)` when the wait runs out.
/// Messages are lowercase and name the stage, the lock and the master involved.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is unusable (no masters, duplicate masters, zero timeouts...).
    #[error("invalid configuration: {0}")]
    Config(String),

    /// A Redis URL could not be parsed or names an unsupported scheme.
    #[error("invalid redis url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
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

    /// Fewer than a majority of masters carried out the operation.
    #[error("no quorum: {acquired} of {needed} needed masters agreed")]
    NoQuorum {
        /// Masters that carried out the operation.
        acquired: usize,
        /// Masters needed (N/2+1).
        needed: usize,
        /// The last error seen from a master, if any.
        #[source]
        source: Option<Box<Error>>,
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

    /// The blocking API's runtime could not be started (no thread could be spawned).
    #[error("cannot start the blocking client's runtime: {0}")]
    Runtime(String),

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
    /// True for [`Error::Timeout`], and for a quorum failure caused by one.
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Timeout { .. } => true,
            Error::NoQuorum {
                source: Some(e), ..
            } => e.is_timeout(),
            Error::Redis { source, .. } => source.is_timeout(),
            _ => false,
        }
    }

    /// True when a release found the lock no longer held by its holder.
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// True for [`Error::NoQuorum`].
    pub fn is_no_quorum(&self) -> bool {
        matches!(self, Error::NoQuorum { .. })
    }

    /// True when a master could not be reached or did not answer: worth retrying later.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Error::Timeout { .. } | Error::NoQuorum { .. } => true,
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

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
