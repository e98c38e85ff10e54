//! [`CountDownLatch`]: Redisson's `RCountDownLatch`.

use std::sync::Arc;
use std::time::Duration;

use crate::api::client::Client;
use crate::error::Result;

/// A distributed count-down latch (Redisson `RCountDownLatch`, same key and channel):
/// a count set once, counted down by anyone; waiters are woken by pub/sub when it
/// reaches zero (the key is then deleted, so the latch can be set again). Counts are
/// `i64`, as in Redis (Redisson's `long`). One master only ([`Error::Unsupported`](crate::Error::Unsupported) under Redlock).
///
/// # Examples
/// See the example on [`wait`](CountDownLatch::wait).
#[derive(Clone)]
pub struct CountDownLatch {
    client: Client,
    name: Arc<str>,
}

impl CountDownLatch {
    pub(crate) fn new(client: Client, name: String) -> Self {
        CountDownLatch {
            client,
            name: name.into(),
        }
    }

    /// The latch's name (its Redis key).
    ///
    /// # Examples
    /// See the example on [`wait`](Self::wait).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count if the latch is not set (its count is 0); true if it set it.
    /// A count of 0 sets nothing.
    ///
    /// # Errors
    /// [`Error::InvalidCount`](crate::Error::InvalidCount) for a negative count,
    /// [`Error::InvalidName`](crate::Error::InvalidName),
    /// [`Error::WrongType`](crate::Error::WrongType), `Unsupported` under Redlock, or
    /// the master's error.
    ///
    /// # Examples
    /// See the example on [`wait`](Self::wait).
    #[must_use = "false means the latch was set already and kept its count"]
    #[doc(alias = "trySetCount")]
    pub async fn try_set_count(&self, count: i64) -> Result<bool> {
        let engine = &self.client.engine;
        engine.latch_check(&self.name)?;
        if count < 0 {
            return Err(crate::Error::InvalidCount(format!(
                "latch count {count}: it cannot be negative"
            )));
        }
        if count == 0 {
            return Ok(false);
        }
        engine.latch_set(&self.name, count).await
    }

    /// Counts down by one; at zero every waiter wakes. Returns the count left.
    ///
    /// # Errors
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Examples
    /// See the example on [`wait`](Self::wait).
    #[doc(alias = "countDown")]
    pub async fn count_down(&self) -> Result<i64> {
        self.client.engine.latch_count_down(&self.name).await
    }

    /// The count now (0 when not set or counted down).
    ///
    /// # Errors
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Examples
    /// See the example on [`wait`](Self::wait).
    #[doc(alias = "getCount")]
    pub async fn count(&self) -> Result<i64> {
        self.client.engine.latch_count(&self.name).await
    }

    /// Waits as long as it takes for the count to reach zero (Redisson `await()`);
    /// returns at once if the latch is not set. Woken by pub/sub: an idle waiter sends
    /// nothing. Wrap it in `tokio::time::timeout` or use
    /// [`wait_timeout`](Self::wait_timeout) to bound it.
    ///
    /// # Errors
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing behind (its subscription goes with it).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let done = client.count_down_latch("batch-done");
    /// assert_eq!(done.name(), "batch-done");
    /// assert!(done.try_set_count(3).await?);
    /// assert!(!done.try_set_count(5).await?); // still counting: unchanged
    /// assert_eq!(done.count().await?, 3);
    /// for _ in 0..3 {
    ///     let d = done.clone();
    ///     tokio::spawn(async move { /* ... a third of the batch ... */ d.count_down().await });
    /// }
    /// done.wait().await?; // every worker counted down
    /// assert_eq!(done.count().await?, 0);
    /// assert_eq!(done.count_down().await?, 0); // stays at zero
    ///
    /// // A wait with a bound: false if the count is not zero by then.
    /// let ready = client.count_down_latch("ready");
    /// ready.try_set_count(1).await?;
    /// assert!(!ready.wait_timeout(Duration::from_millis(50)).await?);
    /// ready.count_down().await?;
    /// assert!(ready.wait_timeout(Duration::from_millis(50)).await?);
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "await")]
    pub async fn wait(&self) -> Result<()> {
        self.client
            .engine
            .latch_wait(&self.name, None)
            .await
            .map(drop)
    }

    /// Waits at most `timeout` for the count to reach zero; true if it did (Redisson
    /// `await(timeout, unit)`). Woken by pub/sub: an idle waiter sends nothing.
    ///
    /// # Errors
    /// As [`try_set_count`](Self::try_set_count).
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing behind (its subscription goes with it).
    ///
    /// # Examples
    /// See the example on [`wait`](Self::wait).
    #[must_use = "false means the wait ran out before the count reached zero"]
    #[doc(alias = "await")]
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.client
            .engine
            .latch_wait(&self.name, Some(timeout))
            .await
    }
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish()
    }
}
