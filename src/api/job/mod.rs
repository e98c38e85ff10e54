//! Scheduled jobs ([`Job`]): a run on one node of a fleet per tick, on ShedLock's
//! Redis wire (docs/jobs.md).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::api::client::Client;

mod outcome;
mod run;
mod state;

pub use outcome::{JobHolder, JobOutcome, JobRun, Missed};
pub use state::{JobState, LastRun};

/// The longest period [`Job::once_per`] accepts (366 days).
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 24 * 3600);

/// A scheduled job: a named piece of work that runs on at most one node of a fleet at
/// a time, and, with a tick ([`once_per`](Job::once_per), [`tick`](Job::tick)), at
/// most once per tick. Made by [`Client::job`]; configured by its builder methods;
/// each [`run`](Job::run) says what happened in a [`JobOutcome`].
///
/// Its lock is ShedLock's (`@SchedulerLock`'s Redis provider): the string key
/// `job-lock:default:<name>` ([`prefix`](Job::prefix) and [`env`](Job::env) change
/// the first two parts) holding `ADDED:<instant>@<host>:<uuid>`, set with `SET NX PX
/// at_most` and released when the run ends, or kept for what is left of `at_least`.
/// A Java service scheduling the same name with ShedLock and this job never run at
/// once. Beside the lock, in the same hash slot, redlatch keeps a record (a hash
/// `redlatch_job:{<key>}`): the last completed tick, the run in progress and the last
/// run, which makes "once per tick" hold whatever the nodes' clocks say as long as
/// they differ by less than the period, and lets the next run learn of ticks that were
/// missed.
///
/// Under Redlock a run takes a majority of the masters (ShedLock takes one server);
/// on Redis Cluster and Sentinel it runs as on one server.
///
/// When **not** to use it: for work that must run exactly once even across a crash
/// mid-run (a run that dies leaves its tick missed, reported to the next run, which
/// decides), and for work whose side effects need fencing (a paused run can outlive
/// its lease; use a [fenced lock](Client::fenced_lock) and pass its token on).
///
/// # Examples
/// See the example on [`Client::job`].
#[derive(Clone, Debug)]
pub struct Job {
    pub(crate) client: Client,
    pub(crate) name: Arc<str>,
    pub(crate) prefix: Arc<str>,
    pub(crate) env: Arc<str>,
    pub(crate) at_most: Option<Duration>,
    pub(crate) at_least: Duration,
    pub(crate) keep_alive: bool,
    pub(crate) wait: Duration,
    pub(crate) tick: Tick,
}

/// Which tick a run is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// No tick: only one run at a time.
    None,
    /// The current multiple of a period since the Unix epoch.
    Every(Duration),
    /// An instant the caller names (a cron schedule's).
    At(SystemTime),
}

impl Client {
    /// A scheduled job named `name` (ShedLock's `@SchedulerLock(name = …)`): see
    /// [`Job`]. Set [`at_most`](Job::at_most) before running it.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, JobOutcome};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let job = client
    ///     .job("billing:nightly")
    ///     .at_most(Duration::from_secs(600)) // lockAtMostFor
    ///     .at_least(Duration::from_secs(1))  // lockAtLeastFor
    ///     .once_per(Duration::from_secs(3600));
    /// match job.run(async { 42 }).await? {
    ///     JobOutcome::Ran(run) => {
    ///         assert_eq!(run.value, 42);
    ///         assert_eq!(run.missed.count, 0);
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// // Another node firing the same hour is told it is done.
    /// let again = job.run(async { 43 }).await?;
    /// assert!(matches!(again, JobOutcome::AlreadyDone { .. }));
    /// // What `redlatch jobs` shows:
    /// let state = job.state().await?;
    /// assert_eq!(state.last.unwrap().outcome, "ran");
    /// # Ok(()) }) }
    /// ```
    #[doc(alias("SchedulerLock", "ShedLock", "cron", "scheduled"))]
    pub fn job(&self, name: impl Into<String>) -> Job {
        Job {
            client: self.clone(),
            name: name.into().into(),
            prefix: crate::engine::facade::JOB_PREFIX.into(),
            env: crate::engine::facade::JOB_ENV.into(),
            at_most: None,
            at_least: Duration::ZERO,
            keep_alive: false,
            wait: Duration::ZERO,
            tick: Tick::None,
        }
    }
}

impl Job {
    /// The lease of a run (ShedLock's `lockAtMostFor`; required): how long the lock
    /// is kept if its node dies, and, without [`keep_alive`](Job::keep_alive), the
    /// longest a run may last before another node may start (a longer run is reported
    /// as [`overrun`](JobRun::overrun)).
    pub fn at_most(mut self, lease: Duration) -> Job {
        self.at_most = Some(lease);
        self
    }

    /// How long the lock is kept after a run began, however quickly it ended
    /// (ShedLock's `lockAtLeastFor`; default zero; at most [`at_most`](Job::at_most)):
    /// it keeps nodes whose clocks lag from starting the same run again.
    pub fn at_least(mut self, keep: Duration) -> Job {
        self.at_least = keep;
        self
    }

    /// Renews the lease every third of `at_most` while a run lasts (ShedLock's
    /// `KeepAliveLockProvider`; default off), so a run may outlive `at_most`.
    pub fn keep_alive(mut self, on: bool) -> Job {
        self.keep_alive = on;
        self
    }

    /// Waits up to `wait` for a run in progress to end instead of skipping (default
    /// zero: skip at once). With a tick, a run that completes the tick meanwhile makes
    /// this one [`AlreadyDone`](JobOutcome::AlreadyDone).
    pub fn wait(mut self, wait: Duration) -> Job {
        self.wait = wait;
        self
    }

    /// Runs at most once per `period`: a run is for the tick `now` rounded down to a
    /// multiple of `period` since the Unix epoch (by this node's clock), and a tick
    /// recorded as done is not run again (docs/jobs.md says what is promised).
    pub fn once_per(mut self, period: Duration) -> Job {
        self.tick = Tick::Every(period);
        self
    }

    /// Runs at most once for the tick `at` (a cron schedule's instant; ticks of one job
    /// must increase). Replaces [`once_per`](Job::once_per).
    pub fn tick(mut self, at: SystemTime) -> Job {
        self.tick = Tick::At(at);
        self
    }

    /// The first part of the lock key (ShedLock's `keyPrefix`; default `job-lock`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Job {
        self.prefix = prefix.into().into();
        self
    }

    /// The second part of the lock key (ShedLock's `environment`; default `default`).
    pub fn env(mut self, env: impl Into<String>) -> Job {
        self.env = env.into().into();
        self
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock key: `<prefix>:<env>:<name>`.
    pub fn key(&self) -> String {
        crate::engine::facade::job_key(&self.prefix, &self.env, &self.name)
    }
}
