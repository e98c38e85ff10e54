//! [`Job`]: the blocking scheduled job.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::Runtime;
use crate::api::job::{JobOutcome, JobState};
use crate::error::Result;

/// A blocking [`crate::Job`]: the builder methods are its namesakes; [`run`](Job::run)
/// runs a closure on the calling thread while the client's runtime keeps the lease
/// alive (with [`keep_alive`](Job::keep_alive)).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run_blocking(|url| {
/// use std::time::Duration;
/// use redlatch::{blocking::Client, JobOutcome};
/// let client = Client::connect(redlatch::Config::single(url))?;
/// let job = client.job("export:hourly").at_most(Duration::from_secs(60)).once_per(Duration::from_secs(3600));
/// assert_eq!(job.run(|| 7)?.value(), Some(7));
/// assert!(matches!(job.run(|| 8)?, JobOutcome::AlreadyDone { .. }));
/// # Ok(()) }) }
/// ```
#[derive(Clone, Debug)]
pub struct Job {
    inner: crate::Job,
    rt: Arc<Runtime>,
}

impl Job {
    pub(super) fn new(inner: crate::Job, rt: Arc<Runtime>) -> Self {
        Job { inner, rt }
    }

    fn map(self, f: impl FnOnce(crate::Job) -> crate::Job) -> Job {
        Job {
            inner: f(self.inner),
            rt: self.rt,
        }
    }

    /// As [`crate::Job::at_most`].
    pub fn at_most(self, lease: Duration) -> Job {
        self.map(|j| j.at_most(lease))
    }

    /// As [`crate::Job::at_least`].
    pub fn at_least(self, keep: Duration) -> Job {
        self.map(|j| j.at_least(keep))
    }

    /// As [`crate::Job::keep_alive`].
    pub fn keep_alive(self, on: bool) -> Job {
        self.map(|j| j.keep_alive(on))
    }

    /// As [`crate::Job::wait`].
    pub fn wait(self, wait: Duration) -> Job {
        self.map(|j| j.wait(wait))
    }

    /// As [`crate::Job::once_per`].
    pub fn once_per(self, period: Duration) -> Job {
        self.map(|j| j.once_per(period))
    }

    /// As [`crate::Job::tick`].
    pub fn tick(self, at: SystemTime) -> Job {
        self.map(|j| j.tick(at))
    }

    /// As [`crate::Job::prefix`].
    pub fn prefix(self, prefix: impl Into<String>) -> Job {
        self.map(|j| j.prefix(prefix))
    }

    /// As [`crate::Job::env`].
    pub fn env(self, env: impl Into<String>) -> Job {
        self.map(|j| j.env(env))
    }

    /// The lock key; as [`crate::Job::key`].
    pub fn key(&self) -> String {
        self.inner.key()
    }

    /// Runs `work` on this thread if this node may; as [`crate::Job::run`] (errors
    /// and panics there; the example on [`Job`]).
    pub fn run<T>(&self, work: impl FnOnce() -> T) -> Result<JobOutcome<T>> {
        self.rt.call(self.inner.run(async move { work() }))
    }

    /// As [`crate::Job::state`].
    pub fn state(&self) -> Result<JobState> {
        self.rt.call(self.inner.state())
    }
}
