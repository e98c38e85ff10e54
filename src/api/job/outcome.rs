//! What a [`Job`](super::Job)'s run did.

use std::time::{Duration, SystemTime};

/// What [`Job::run`](super::Job::run) did.
///
/// # Examples
/// See the example on [`Client::job`](crate::Client::job).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum JobOutcome<T> {
    /// The run went and its future finished with `value`.
    Ran(JobRun<T>),
    /// The run went and its future panicked (with this message): the lock was given
    /// back honouring `at_least`, and its tick is not done (the next run is told it
    /// was missed).
    Panicked(JobRun<String>),
    /// Another run holds the job (a redlatch node's or a ShedLock node's), and it did
    /// not end within [`wait`](super::Job::wait).
    Skipped {
        /// Who holds it.
        holder: JobHolder,
        /// When its lease ends unless renewed (`None`: no expiry).
        until: Option<SystemTime>,
    },
    /// The tick is done already (by this or another node): nothing was run.
    AlreadyDone {
        /// The last completed tick (this tick, or a later one).
        tick: SystemTime,
    },
}

impl<T> JobOutcome<T> {
    /// The run's report when it went (ran or panicked).
    pub fn ran(&self) -> bool {
        matches!(self, JobOutcome::Ran(_) | JobOutcome::Panicked(_))
    }

    /// The future's value when it ran to its end.
    pub fn value(self) -> Option<T> {
        match self {
            JobOutcome::Ran(run) => Some(run.value),
            _ => None,
        }
    }

    /// `ran`, `panicked`, `skipped` or `already_done`.
    pub fn label(&self) -> &'static str {
        match self {
            JobOutcome::Ran(_) => "ran",
            JobOutcome::Panicked(_) => "panicked",
            JobOutcome::Skipped { .. } => "skipped",
            JobOutcome::AlreadyDone { .. } => "already_done",
        }
    }
}

/// A run that went: its value (or panic message), how long it took, its tick and the
/// ticks missed before it.
///
/// # Examples
/// See the example on [`Client::job`](crate::Client::job).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct JobRun<T> {
    /// The future's value (a panic's message for [`JobOutcome::Panicked`]).
    pub value: T,
    /// How long the run took (from the grant to the future's end).
    pub took: Duration,
    /// The tick it ran for.
    pub tick: Option<SystemTime>,
    /// Ticks before this one that no run completed.
    pub missed: Missed,
    /// The run outlived `at_most` without [`keep_alive`](super::Job::keep_alive):
    /// another node may have started meanwhile.
    pub overrun: bool,
    /// The lock was not the run's any more when it ended (its lease ran out, keep-alive
    /// failed, or it was deleted: a ShedLock release of an overrun run, a
    /// force-unlock): nothing of another run's was touched.
    pub lost: bool,
    /// The release failed (Redis down or read-only, no majority): the tick is not
    /// recorded as done and the lock ends with its lease.
    pub release_error: Option<crate::Error>,
}

impl JobRun<()> {
    /// The report with the run's value.
    pub(crate) fn with<V>(self, value: V) -> JobRun<V> {
        JobRun {
            value,
            took: self.took,
            tick: self.tick,
            missed: self.missed,
            overrun: self.overrun,
            lost: self.lost,
            release_error: self.release_error,
        }
    }
}

/// Ticks that no run completed before a run: with a period, every tick between the
/// last completed one and this one; without one, a tick begun and never completed
/// (its node died, its run panicked or was cancelled).
///
/// # Examples
/// See the example on [`Client::job`](crate::Client::job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Missed {
    /// How many.
    pub count: u64,
    /// The first [`Missed::MAX_LISTED`] of them, oldest first.
    pub ticks: Vec<SystemTime>,
}

impl Missed {
    /// The most ticks [`ticks`](Missed::ticks) lists.
    pub const MAX_LISTED: usize = 1000;
}

/// Who holds a job: read from its lock's value (ShedLock's format names the host and
/// when the run began) and, for a redlatch run, its record (the app).
///
/// # Examples
/// See the example on [`Client::job`](crate::Client::job).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobHolder {
    /// The lock's value as it is.
    pub value: String,
    /// The holder's host.
    pub host: Option<String>,
    /// The holder's app name (a redlatch run's `Config::app`; `None` for ShedLock).
    pub app: Option<String>,
    /// When its run began (by its clock).
    pub since: Option<SystemTime>,
}

impl JobHolder {
    /// The holder a lock value names.
    pub(crate) fn from_value(value: String, app: Option<String>) -> JobHolder {
        let parsed = crate::engine::facade::parse_job_value(&value);
        JobHolder {
            host: parsed.as_ref().map(|p| p.host.clone()),
            since: parsed.map(|p| p.since),
            value,
            app,
        }
    }
}
