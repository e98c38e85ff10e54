//! [`CountDownLatch`]: the blocking count-down latch.

use std::sync::Arc;
use std::time::Duration;

use super::Runtime;
use crate::error::Result;

/// A blocking [`crate::CountDownLatch`] (Redisson `RCountDownLatch`): a barrier across
/// threads and machines. Each method is its async namesake run on the client's runtime
/// (the examples are there).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use redlatch::blocking::Client;
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let latch = client.count_down_latch("batch");
/// assert!(latch.try_set_count(2)?);
/// assert!(!latch.wait_timeout(std::time::Duration::from_millis(20))?); // still 2
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| latch.count_down());
///     }
/// });
/// latch.wait()?; // opened by the two workers
/// assert_eq!(latch.count()?, 0);
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    rt: Arc<Runtime>,
}

impl CountDownLatch {
    pub(super) fn new(inner: crate::CountDownLatch, rt: Arc<Runtime>) -> Self {
        CountDownLatch { inner, rt }
    }

    /// The latch's name; as [`crate::CountDownLatch::name`] (example there).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Blocking [`crate::CountDownLatch::try_set_count`] (its example and errors are there).
    #[must_use = "false means the latch was set already and kept its count"]
    pub fn try_set_count(&self, count: i64) -> Result<bool> {
        self.rt.call(self.inner.try_set_count(count))
    }

    /// Blocking [`crate::CountDownLatch::count_down`] (its example and errors are there).
    pub fn count_down(&self) -> Result<i64> {
        self.rt.call(self.inner.count_down())
    }

    /// Blocking [`crate::CountDownLatch::count`] (its example and errors are there).
    pub fn count(&self) -> Result<i64> {
        self.rt.call(self.inner.count())
    }

    /// Blocking [`crate::CountDownLatch::wait`] (its example and errors are there).
    pub fn wait(&self) -> Result<()> {
        self.rt.call(self.inner.wait())
    }

    /// Blocking [`crate::CountDownLatch::wait_timeout`] (its example and errors are there).
    #[must_use = "false means the wait ran out before the count reached zero"]
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        self.rt.call(self.inner.wait_timeout(timeout))
    }
}
