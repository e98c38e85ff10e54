//! Listing every lock under a pattern, for operators (`redlatch list`, `redlatch top`):
//! the call; what is read, and how, is the engine's (engine/observe/).

use std::time::Duration;

use crate::api::client::Client;
use crate::engine::facade::Listing;
use crate::error::Result;

/// How long [`Client::list`] may take unless told ([`Client::list_within`]).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(5);

impl Client {
    /// Every lock, semaphore, latch and election whose name matches the glob `pattern`
    /// (as Redis `SCAN MATCH`: `*`, `?`, `[a-z]`), on every master and every cluster
    /// primary, read with `SCAN` (never `KEYS`) within [`LIST_TIMEOUT`]: each with its
    /// kind, holders (resolved to their clients' host, pid and app where the client left
    /// a record), lease left and waiters. What could not be read by then (a master
    /// down, the deadline) is named in [`Listing::unread`](crate::Listing::unread), with
    /// what was read.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) for an empty pattern.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config, ListedKind};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.lock("orders:42").lock().await?;
    /// let _permits = client.semaphore("orders:slots").try_set_permits(3).await?;
    /// let listing = client.list("orders:*").await?;
    /// assert!(!listing.incomplete, "{:?}", listing.unread);
    /// let names: Vec<&str> = listing.locks.iter().map(|l| l.name.as_str()).collect();
    /// assert_eq!(names, ["orders:42", "orders:slots"]);
    /// let lock = &listing.locks[0];
    /// assert_eq!(lock.kind, ListedKind::Lock);
    /// assert_eq!(lock.holders[0].holder.id, guard.holder().to_string());
    /// assert!(lock.ttl.is_some());
    /// assert_eq!(lock.waiters, 0);
    /// assert_eq!(listing.locks[1].kind, ListedKind::Counter);
    /// assert_eq!(listing.locks[1].count, Some(3));
    /// // One deadline for the whole call:
    /// let quick = client.list_within("orders:4*", std::time::Duration::from_secs(1)).await?;
    /// assert_eq!(quick.locks.len(), 1);
    /// # Ok(()) }) }
    /// ```
    pub async fn list(&self, pattern: &str) -> Result<Listing> {
        self.list_within(pattern, LIST_TIMEOUT).await
    }

    /// [`list`](Self::list) within `timeout` (one deadline for the whole call).
    ///
    /// # Errors
    /// As [`list`](Self::list).
    ///
    /// # Examples
    /// See the example on [`list`](Self::list).
    pub async fn list_within(&self, pattern: &str, timeout: Duration) -> Result<Listing> {
        self.engine.list(pattern, timeout).await
    }
}
