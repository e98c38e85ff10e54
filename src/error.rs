//! The one error type of the crate.

use std::time::Duration;

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
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is unusable (no masters, duplicate masters, zero timeouts...).
    #[error("invalid configuration: {0}")]
    Config(String),

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

    /// The blocking API's runtime could not be started (no thread could be spawned).
    #[error("cannot start the blocking client's runtime: {0}")]
    Runtime(String),

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
            Error::NoQuorum {
                source: Some(e), ..
            } => e.is_timeout(),
            Error::Redis { source, .. } => source.is_timeout(),
            _ => false,
        }
    }

    /// True when a release found the lock no longer held by its holder.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// lock.force_unlock().await?; // or the lease ran out
    /// let err = guard.unlock().await.unwrap_err();
    /// assert!(err.is_not_held());
    /// assert!(!err.is_unavailable()); // retrying cannot help
    /// # Ok(()) }) }
    /// ```
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. })
    }

    /// True for [`Error::NoQuorum`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// // Two addresses where no master runs (ports taken, then freed):
    /// let taken = [(); 2].map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    /// let [down1, down2] = taken.each_ref().map(|l| format!("redis://{}", l.local_addr().unwrap()));
    /// drop(taken);
    /// let config = Config::redlock([url, down1, down2]);
    /// let err = Client::connect(config).await.unwrap_err(); // 1 of 3 answers, 2 are needed
    /// assert!(err.is_no_quorum());
    /// assert!(matches!(err, redlatch::Error::NoQuorum { acquired: 1, needed: 2, .. }));
    /// # Ok(()) }) }
    /// ```
    pub fn is_no_quorum(&self) -> bool {
        matches!(self, Error::NoQuorum { .. })
    }

    /// True for errors that retrying the same call cannot cure: bad input or
    /// configuration, a key that is not a lock or holds unusable data, a missing
    /// permission, a master out of memory. A lock call fails with such an error at
    /// once, also when only one master of a Redlock set reports it (a misconfigured
    /// master should be loud, not silently outvoted).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let mut admin = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    /// redis::cmd("SET").arg("not-a-lock").arg("x").exec(&mut admin).unwrap();
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let err = client.lock("not-a-lock").lock().await.unwrap_err();
    /// assert!(err.is_permanent()); // WrongType: returned at once, not retried
    /// assert!(!err.is_unavailable());
    /// # Ok(()) }) }
    /// ```
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Config(_)
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
            | Error::BadData { .. } => true,
            Error::NoQuorum {
                source: Some(e), ..
            } => e.is_permanent(),
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

/// The error of a master's reply: NOPERM and OOM become their own variants (they are
/// permanent for the call), anything else stays a [`Error::Redis`]. An error a script
/// met, which Redis < 7 wraps, is first given back its own code ([`unwrap_script_error`]).
pub(crate) fn from_master(addr: &str, source: redis::RedisError) -> Error {
    let source = unwrap_script_error(source);
    let detail = || source.detail().unwrap_or_default().to_string();
    match source.code() {
        Some("NOPERM") => Error::PermissionDenied {
            addr: addr.to_string(),
            detail: detail(),
        },
        Some("OOM") => Error::OutOfMemory {
            addr: addr.to_string(),
            detail: detail(),
        },
        Some("CLUSTERDOWN") => Error::ClusterDown {
            addr: addr.to_string(),
            detail: detail(),
        },
        _ => Error::Redis {
            addr: addr.to_string(),
            source,
        },
    }
}

/// The error of a connection to a master as `user` (the URL's, `None`: `default`) on
/// database `db`: what setting it up can meet, named for what it is, beside what
/// [`from_master`] names. A refused password or a missing one
/// ([`Error::Authentication`]), a database the server does not have (a
/// [`Error::Config`] naming the index), a reply that is not RESP ([`Error::NotRedis`]).
pub(crate) fn from_link(
    addr: &str,
    user: Option<&str>,
    db: i64,
    source: redis::RedisError,
) -> Error {
    let auth = |reason: &str| Error::Authentication {
        addr: addr.to_string(),
        user: user.unwrap_or("default").to_string(),
        reason: reason.to_string(),
    };
    match (source.kind(), source.code()) {
        (redis::ErrorKind::AuthenticationFailed, _) | (_, Some("WRONGPASS")) => {
            auth("the password is wrong, or the user does not exist or is disabled (WRONGPASS)")
        }
        (_, Some("NOAUTH")) => auth("the server requires a password and none was given (NOAUTH)"),
        (redis::ErrorKind::Parse, _) => Error::NotRedis {
            addr: addr.to_string(),
        },
        _ if source.to_string().contains("refused to switch database") => Error::Config(format!(
            "master {addr}: database {db} cannot be used: {}",
            source.detail().unwrap_or("SELECT refused")
        )),
        _ => from_master(addr, source),
    }
}

/// Redis < 7 answers a script whose `redis.call` failed with `ERR Error running script
/// (call to f_<sha>): @user_script:<line>: <error>`, the error itself sometimes behind a
/// second `@user_script: <line>: ` and a `-` (`-READONLY ...`, `-OOM ...`, or
/// `WRONGTYPE ...`); Redis 7 answers with the error itself. So that the codes mean the
/// same on both (WRONGTYPE is [`Error::WrongType`], OOM [`Error::OutOfMemory`], READONLY
/// a demoted Sentinel primary), the wrapped error is parsed back out when it starts with
/// a code (upper-case letters). Anything else is returned as is: an ACL refusal inside a
/// script ("The user executing the script can't run this command ...") has no code, and
/// Redis 7's own errors are never wrapped this way.
fn unwrap_script_error(source: redis::RedisError) -> redis::RedisError {
    // A script that raised again (`redis.error_reply`) what its `redis.pcall` got: Redis
    // 6.2 prefixes an ACL refusal there with `@user_script: <line>: `, which then stands
    // where the code should: given the shape Redis 7.0 gives it, `ERR <message>`.
    if let Some(code) = source.code().filter(|c| c.starts_with("@user_script")) {
        let text = format!("{code} {}", source.detail().unwrap_or_default());
        let inner = wrapped_error(&text);
        let first = inner.split(' ').next().unwrap_or_default();
        let coded = first.len() >= 2 && first.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
        let line = if coded {
            format!("-{inner}\r\n")
        } else {
            format!("-ERR {inner}\r\n")
        };
        return match redis::parse_redis_value(line.as_bytes()).map(redis::Value::extract_error) {
            Ok(Err(unwrapped)) => unwrapped,
            _ => source,
        };
    }
    if source.code() != Some("ERR") {
        return source;
    }
    let Some(inner) = source
        .detail()
        .and_then(|d| d.strip_prefix("Error running script"))
        .and_then(|d| d.split_once("): "))
        .map(|(_, inner)| wrapped_error(inner))
    else {
        return source;
    };
    let code = inner.split(' ').next().unwrap_or_default();
    if code.len() < 2 || !code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return source;
    }
    match redis::parse_redis_value(format!("-{inner}\r\n").as_bytes())
        .map(redis::Value::extract_error)
    {
        Ok(Err(unwrapped)) => unwrapped,
        _ => source,
    }
}

/// The error inside `@user_script:<line>: ` prefixes (one or two) and a leading `-`.
fn wrapped_error(mut text: &str) -> &str {
    while let Some(rest) = text.strip_prefix("@user_script:") {
        match rest.split_once(": ") {
            Some((line, tail)) if line.trim().bytes().all(|b| b.is_ascii_digit()) => text = tail,
            _ => break,
        }
    }
    let text = text.strip_prefix('-').unwrap_or(text);
    text.trim_end()
}

/// Whether a script's `ERR` is an ACL refusal of a command it called: Redis 6.2 to 7.0
/// say "The user executing the script can't run this command or subcommand"; Redis >= 7.2
/// and Valkey say "ACL failure in script: User <u> has no permissions to run the '<cmd>'
/// command" (or "... to access ..." a key or channel).
pub(crate) fn is_script_acl_refusal(detail: &str) -> bool {
    detail.contains("can't run this command") || detail.starts_with("ACL failure in script")
}

/// A [`Error::PermissionDenied`] whose server message names no command (a bare
/// `NOPERM`, or Redis's "The user executing the script can't run this command or
/// subcommand" for a call inside a script) names what we sent instead (`what`: the
/// command, or the commands the script calls), so every refusal names its cause; any
/// other error is returned as is.
pub(crate) fn name_refused(e: Error, what: impl FnOnce() -> String) -> Error {
    match e {
        Error::PermissionDenied { addr, detail } if detail.trim().is_empty() => {
            Error::PermissionDenied {
                addr,
                detail: format!("the user may not run {}", what()),
            }
        }
        Error::PermissionDenied { addr, detail } if detail.contains("this command") => {
            Error::PermissionDenied {
                addr,
                detail: format!("{detail}: refused {}", what()),
            }
        }
        // A script that caught the refusal (`redis.pcall`) and raised it again: ERR.
        Error::Redis { addr, source }
            if source.code() == Some("ERR")
                && source.detail().is_some_and(is_script_acl_refusal) =>
        {
            let detail = source.detail().unwrap_or_default();
            Error::PermissionDenied {
                addr,
                detail: format!("{detail}: refused {}", what()),
            }
        }
        other => other,
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// An error as Redis 6.2 sends a script's failed `redis.call` (the replies below were
    /// read from a 6.2.16 server).
    fn from_62(detail: &str) -> Error {
        let line = format!("-ERR Error running script (call to f_9a67): {detail}\r\n");
        let reply = redis::parse_redis_value(line.as_bytes()).unwrap();
        from_master("127.0.0.1:7000", reply.extract_error().unwrap_err())
    }

    #[test]
    fn errors_redis_6_wraps_in_a_script_keep_their_codes() {
        let e = from_62(
            "@user_script:34: WRONGTYPE Operation against a key holding the wrong kind of value",
        );
        assert!(matches!(&e, Error::Redis { source, .. } if source.code() == Some("WRONGTYPE")));
        let e = from_62("@user_script:29: @user_script: 29: -READONLY You can't write against a read only replica.");
        assert!(matches!(&e, Error::Redis { source, .. } if source.code() == Some("READONLY")));
        let e = from_62("@user_script:29: @user_script: 29: -OOM command not allowed when used memory > 'maxmemory'.");
        assert!(
            matches!(&e, Error::OutOfMemory { detail, .. } if detail.starts_with("command not allowed")),
            "{e}"
        );
        // No code inside: left as the server said it.
        let acl = "@user_script:1: @user_script: 1: The user executing the script can't run this command or subcommand";
        let e = from_62(acl);
        assert!(
            matches!(&e, Error::Redis { source, .. } if source.code() == Some("ERR") && source.detail().is_some_and(|d| d.ends_with("subcommand"))),
            "{e}"
        );
        // What renew.lua raises again on 6.2 when `redis.pcall('hexists', ...)` is refused:
        // the prefix where the code should be; read as Redis 7.0 says it.
        let raised = redis::parse_redis_value(
            b"-@user_script: 1: The user executing the script can't run this command or subcommand\r\n",
        )
        .unwrap();
        let e = from_master("a:1", raised.extract_error().unwrap_err());
        assert!(
            matches!(&e, Error::Redis { source, .. } if source.code() == Some("ERR") && source.detail() == Some("The user executing the script can't run this command or subcommand")),
            "{e:?}"
        );
        let plain = redis::parse_redis_value(b"-ERR wrong number of arguments\r\n").unwrap();
        let e = from_master("a:1", plain.extract_error().unwrap_err());
        assert!(matches!(&e, Error::Redis { source, .. } if source.code() == Some("ERR")));
    }

    #[test]
    fn connection_errors_are_named_for_their_cause() {
        let server = |line: &str| {
            let reply = redis::parse_redis_value(line.as_bytes()).unwrap();
            reply.extract_error().unwrap_err()
        };
        let e = from_link(
            "a:1",
            None,
            0,
            server("-NOAUTH Authentication required.\r\n"),
        );
        assert!(
            matches!(&e, Error::Authentication { user, .. } if user == "default"),
            "{e:?}"
        );
        let wrong = server("-WRONGPASS invalid username-password pair or user is disabled.\r\n");
        let e = from_link("a:1", Some("locker"), 0, wrong);
        assert!(
            matches!(&e, Error::Authentication { user, .. } if user == "locker"),
            "{e:?}"
        );
        let failed = redis::RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        assert!(e.is_permanent() && !e.is_unavailable());
        let e = from_link("a:1", Some("u"), 0, failed);
        assert!(matches!(&e, Error::Authentication { .. }), "{e:?}");
        let e = from_link(
            "a:1",
            None,
            0,
            server("-CLUSTERDOWN The cluster is down\r\n"),
        );
        assert!(matches!(&e, Error::ClusterDown { .. }), "{e:?}");
        assert!(e.is_unavailable() && !e.is_permanent());
        assert_eq!(
            e.to_string(),
            "master a:1: the cluster is down (CLUSTERDOWN The cluster is down)"
        );
        let other = from_link("a:1", None, 0, server("-ERR unknown command\r\n"));
        assert!(matches!(&other, Error::Redis { .. }), "{other:?}");
    }

    #[test]
    fn a_bare_noperm_names_what_was_sent() {
        let kind = redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm);
        let bare = redis::RedisError::from((kind, ""));
        let e = from_master("127.0.0.1:7000", bare);
        assert!(matches!(&e, Error::PermissionDenied { detail, .. } if detail.is_empty()));
        let e = name_refused(e, || "'evalsha' (or a command its script calls)".into());
        let text = e.to_string();
        assert!(
            text.contains("permission denied: the user may not run 'evalsha'"),
            "{text}"
        );
        assert!(e.is_permanent());
        // Redis's message for a call inside a script names no command.
        let in_script = Error::PermissionDenied {
            addr: "a:1".into(),
            detail: "The user executing the script can't run this command or subcommand".into(),
        };
        let text = name_refused(in_script, || {
            "'evalsha' or a command its script calls ('hexists')".into()
        })
        .to_string();
        assert!(
            text.contains(
                "subcommand: refused 'evalsha' or a command its script calls ('hexists')"
            ),
            "{text}"
        );
        // A message that names the command is kept.
        let named = Error::PermissionDenied {
            addr: "a:1".into(),
            detail: "this user has no permissions to run the 'hexists' command".into(),
        };
        assert!(name_refused(named, || unreachable!())
            .to_string()
            .contains("'hexists'"));
        // A refusal a script caught (`redis.pcall`) and raised again, as ERR: Redis 7.0's
        // words, and Redis >= 7.2's and Valkey's.
        for detail in [
            "The user executing the script can't run this command or subcommand",
            "ACL failure in script: User locker has no permissions to run the 'hexists' command",
        ] {
            let line = format!("-ERR {detail}\r\n");
            let reply = redis::parse_redis_value(line.as_bytes()).unwrap();
            let raised = from_master("a:1", reply.extract_error().unwrap_err());
            let e = name_refused(raised, || "'evalsha'".into());
            assert!(matches!(&e, Error::PermissionDenied { .. }), "{e:?}");
        }
    }
}
