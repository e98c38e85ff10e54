//! What operators read of a job ([`Job::state`], [`Client::jobs`]): who runs it now,
//! the last run, the last completed tick, missed ticks.

use std::time::{Duration, SystemTime};

use super::outcome::JobHolder;
use super::run::{instant, now_ms};
use super::Job;
use crate::api::client::Client;
use crate::engine::facade::{job_record_key, JobState as Raw};
use crate::error::{Error, Result};

/// A job as its lock and record show it (`redlatch jobs`).
///
/// # Examples
/// See the example on [`Client::job`](crate::Client::job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobState {
    /// The job's name (the key after `<prefix>:<env>:`).
    pub name: String,
    /// The lock key.
    pub key: String,
    /// Who runs it now (a redlatch or ShedLock run), if anyone.
    pub running: Option<JobHolder>,
    /// When the running one's lease ends unless renewed.
    pub running_until: Option<SystemTime>,
    /// The last completed tick.
    pub done: Option<SystemTime>,
    /// The period of its ticks, if it has one.
    pub period: Option<Duration>,
    /// The last run that ended (redlatch's runs only: ShedLock keeps no record).
    pub last: Option<LastRun>,
    /// Runs recorded.
    pub runs: u64,
    /// Ticks whose whole period has passed since the last completed tick without a
    /// completed run (with a period).
    pub overdue: u64,
}

/// The last run of a job that ended.
///
/// # Examples
/// See the example on [`Client::job`](crate::Client::job).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LastRun {
    /// Its tick.
    pub tick: Option<SystemTime>,
    /// When it began and ended (by its node's clock).
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Its host and app.
    pub host: String,
    /// Its app name.
    pub app: String,
    /// `ran`, `panicked`, `cancelled` or `failed`.
    pub outcome: String,
    /// Ticks it was told were missed before it.
    pub missed: u64,
}

impl LastRun {
    /// How long it took.
    pub fn took(&self) -> Duration {
        self.end.duration_since(self.start).unwrap_or_default()
    }
}

fn state(key: &str, raw: Raw) -> JobState {
    let text = |f: &str| raw.record.get(f).cloned().unwrap_or_default();
    let num = |f: &str| raw.num(f).filter(|n| *n > 0 || f == "done");
    let running_app = (raw.value.is_some() && raw.record.get("value") == raw.value.as_ref())
        .then(|| text("app"))
        .filter(|a| !a.is_empty());
    let last = raw.record.get("last_outcome").map(|outcome| LastRun {
        tick: num("last_tick").map(instant),
        start: instant(num("last_start").unwrap_or(0)),
        end: instant(num("last_end").unwrap_or(0)),
        host: text("last_host"),
        app: text("last_app"),
        outcome: outcome.clone(),
        missed: num("last_missed").unwrap_or(0) as u64,
    });
    let period = num("period").map(|p| Duration::from_millis(p as u64));
    let done = raw.num("done");
    let overdue = match (period, done) {
        (Some(p), Some(done)) => {
            let p = p.as_millis() as i64;
            ((now_ms() / p * p - done) / p - 1).max(0) as u64
        }
        _ => 0,
    };
    JobState {
        name: key.splitn(3, ':').nth(2).unwrap_or(key).to_string(),
        key: key.to_string(),
        running_until: (raw.pttl_ms.unwrap_or(-1) >= 0)
            .then(|| SystemTime::now() + Duration::from_millis(raw.pttl_ms.unwrap_or(0) as u64)),
        running: (raw.value.clone()).map(|v| JobHolder::from_value(v, running_app)),
        done: done.map(instant),
        period,
        last,
        runs: num("runs").unwrap_or(0) as u64,
        overdue,
    }
}

impl Job {
    /// The job's state: who runs it now, its last run, its last completed tick.
    ///
    /// # Errors
    /// [`Error::WrongType`] when its key or record holds another type; the masters'
    /// errors.
    ///
    /// # Examples
    /// See the example on [`Client::job`](crate::Client::job).
    pub async fn state(&self) -> Result<JobState> {
        let key = self.key();
        self.client.engine.job_check(&key)?;
        let raw = self
            .client
            .engine
            .job_state(&key, &job_record_key(&key))
            .await?;
        Ok(state(&key, raw))
    }
}

impl Client {
    /// Every job whose lock key matches the glob `pattern` (`job-lock:default:*`):
    /// those redlatch has a record of, and those running now (ShedLock's included),
    /// read within `timeout`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] for an empty pattern; [`Error::Timeout`] when not every
    /// master could be read in time; a job's own read errors.
    ///
    /// # Examples
    /// See the example on [`Client::job`](crate::Client::job).
    pub async fn jobs(&self, pattern: &str, timeout: Duration) -> Result<Vec<JobState>> {
        if pattern.is_empty() {
            return Err(Error::InvalidName("the pattern is empty".into()));
        }
        let (keys, unread) = self.engine.job_scan(pattern, pattern, timeout).await;
        if let Some(u) = unread.first() {
            return Err(Error::Timeout {
                addr: format!("{}: {}", u.master, u.error),
                after: timeout,
            });
        }
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let raw = self.engine.job_state(&key, &job_record_key(&key)).await?;
            out.push(state(&key, raw));
        }
        Ok(out)
    }
}
