//! [`CountDownLatch`]: the blocking count-down latch.

use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use crate::error::Result;

/// A blocking [`crate::CountDownLatch`] (Redisson `RCountDownLatch`): a barrier across
/// threads and machines.
#[derive(Clone)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    rt: Arc<Runtime>,
}

impl CountDownLatch {
    pub(super) fn new(inner: crate::CountDownLatch, rt: Arc<Runtime>) -> Self {
        CountDownLatch { inner, rt }
    }

    /// The latch's name (its Redis key).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.count_down_latch("ready").name(), "ready");
    /// # Ok(()) }) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the count if the latch is not set; true if it set it.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::try_set_count`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let l = client.count_down_latch("ready");
    /// assert!(l.try_set_count(2)?);
    /// assert!(!l.try_set_count(5)?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the latch was set already and kept its count"]
    pub fn try_set_count(&self, count: i64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_count(count))
    }

    /// Counts down by one; the count left.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count_down`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let l = client.count_down_latch("ready");
    /// let _ = l.try_set_count(2)?;
    /// assert_eq!(l.count_down()?, 1);
    /// # Ok(()) }) }
    /// ```
    pub fn count_down(&self) -> Result<i64> {
        self.rt.block_on(self.inner.count_down())
    }

    /// The count now.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::count`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// assert_eq!(client.count_down_latch("ready").count()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn count(&self) -> Result<i64> {
        self.rt.block_on(self.inner.count())
    }

    /// Blocks as long as it takes for the count to reach zero (Redisson `await()`).
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let l = client.count_down_latch("ready");
    /// let _ = l.try_set_count(2)?;
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         s.spawn(|| l.count_down().unwrap());
    ///     }
    ///     l.wait() // both threads counted down
    /// })?;
    /// assert_eq!(l.count()?, 0);
    /// # Ok(()) }) }
    /// ```
    pub fn wait(&self) -> Result<()> {
        self.rt.block_on(self.inner.wait())
    }

    /// Blocks at most `timeout` for the count to reach zero; true if it did.
    ///
    /// # Errors
    /// As [`crate::CountDownLatch::wait_timeout`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run_blocking(|url| {
    /// use std::time::Duration;
    /// use redlatch::blocking::Client;
    /// use redlatch::Config;
    /// let client = Client::connect(Config::single(url))?;
    /// let l = client.count_down_latch("ready");
    /// let _ = l.try_set_count(1)?;
    /// assert!(!l.wait_timeout(Duration::from_millis(50))?);
    /// # Ok(()) }) }
    /// ```
    #[must_use = "false means the wait ran out before the count reached zero"]
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.rt.block_on(self.inner.wait_timeout(timeout))
    }
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("blocking::CountDownLatch")
            .field(&self.inner)
            .finish()
    }
}
