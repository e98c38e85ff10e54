//! [`Job::run`]: begin (skip, wait, or find the tick done), run the future with the
//! lease kept alive if asked, end (honouring `at_least`, recording the tick) — also
//! when the future panics or the run is cancelled.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use super::outcome::{JobHolder, JobOutcome, JobRun, Missed};
use super::{Job, Tick, MAX_PERIOD};
use crate::api::config_check::check_lease;
use crate::engine::facade::{job_record_key, job_value, Began, Begin, Finish, JobCall};
use crate::engine::Engine;
use crate::error::{Error, Result};

/// How long a record outlives its last run at least (and three periods at least).
const RECORD_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest pause between two tries of a waiting run.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// A run's settings, checked.
pub(super) struct Plan {
    pub(super) call: JobCall,
    pub(super) begin: Begin,
    pub(super) at_least: Duration,
}

pub(super) fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn instant(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

impl Job {
    /// Checks the settings and works out the run's tick and keys.
    pub(super) fn plan(&self) -> Result<Plan> {
        let what = |s: &str| format!("job {:?}: {s}", &*self.name);
        if self.name.is_empty() || self.prefix.is_empty() || self.env.is_empty() {
            return Err(Error::InvalidName(what(
                "the name, prefix and env must not be empty",
            )));
        }
        let Some(at_most) = self.at_most else {
            return Err(Error::InvalidLease(what(
                "at_most is required (lockAtMostFor)",
            )));
        };
        check_lease(&what("at_most"), at_most)?;
        if self.at_least > at_most {
            return Err(Error::InvalidLease(what(&format!(
                "at_least {:?} is longer than at_most {at_most:?}",
                self.at_least
            ))));
        }
        if self.wait > crate::MAX_LEASE {
            return Err(Error::InvalidLease(what(&format!(
                "wait {:?} is longer than 30 days",
                self.wait
            ))));
        }
        let (tick, period) = self.tick_now(&what)?;
        let key = self.key();
        self.client.engine.job_check(&key)?;
        let record_ttl = RECORD_TTL.max(period * 3);
        let (host, _) = self.client.engine.job_identity();
        Ok(Plan {
            call: JobCall {
                record: job_record_key(&key),
                value: job_value(SystemTime::now(), host),
                key,
            },
            begin: Begin {
                lease: at_most,
                tick,
                period_ms: period.as_millis() as u64,
                now_ms: now_ms(),
                record_ttl_ms: record_ttl.as_millis() as u64,
            },
            at_least: self.at_least,
        })
    }

    /// The run's tick (ms since the epoch) and the period.
    fn tick_now(&self, what: &dyn Fn(&str) -> String) -> Result<(Option<i64>, Duration)> {
        match self.tick {
            Tick::None => Ok((None, Duration::ZERO)),
            Tick::Every(p) if p < Duration::from_millis(1) || p > MAX_PERIOD => {
                Err(Error::InvalidLease(what(&format!(
                    "the period {p:?} must be between 1ms and 366 days"
                ))))
            }
            Tick::Every(p) => {
                let p_ms = p.as_millis() as i64;
                Ok((Some(now_ms() / p_ms * p_ms), p))
            }
            Tick::At(at) => match at.duration_since(UNIX_EPOCH) {
                Ok(d) if d.as_millis() < i64::MAX as u128 / 2 => {
                    Ok((Some(d.as_millis() as i64), Duration::ZERO))
                }
                _ => Err(Error::InvalidLease(what(&format!(
                    "the tick {at:?} is out of range"
                )))),
            },
        }
    }

    /// Runs `work` if this node may: no other run holds the job (waiting up to
    /// [`wait`](Job::wait) for one to end) and, with a tick, the tick is not done.
    /// The lock is given back when `work` ends, kept for what is left of `at_least`,
    /// and the tick recorded as done.
    ///
    /// # Errors
    /// [`Error::InvalidLease`] for a missing or out-of-range `at_most`, an `at_least`
    /// longer than it, an absurd wait, period or tick; [`Error::InvalidName`] for an
    /// empty or too long name; [`Error::WrongType`] when the job's key (or its record)
    /// holds another type; the masters' errors (down, read-only, no majority).
    ///
    /// # Cancel safety
    /// Dropping the future while `work` runs gives the lock back in the background
    /// (honouring `at_least`), records the run as cancelled and leaves its tick not
    /// done; before the grant it leaves nothing.
    ///
    /// # Panics
    /// Never for `work`'s panic: it is caught and returned as
    /// [`JobOutcome::Panicked`] once the lock is given back.
    ///
    /// # Examples
    /// See the example on [`Client::job`](crate::Client::job).
    pub async fn run<F: Future>(&self, work: F) -> Result<JobOutcome<F::Output>> {
        self.run_with(|_, _| work).await
    }

    /// [`run`](Job::run) with the future made once the run may go, from its tick and
    /// the ticks missed before it (a job that catches up on them, or passes them on).
    ///
    /// # Errors
    /// As [`run`](Job::run).
    ///
    /// # Cancel safety
    /// As [`run`](Job::run).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let job = client.job("export").at_most(Duration::from_secs(60)).once_per(Duration::from_secs(60));
    /// let out = job
    ///     .run_with(|tick, missed| async move {
    ///         // Export `tick`, and each of `missed.ticks` first.
    ///         (tick.is_some(), missed.count)
    ///     })
    ///     .await?;
    /// assert_eq!(out.value(), Some((true, 0)));
    /// # Ok(()) }) }
    /// ```
    pub async fn run_with<Fut, F>(&self, work: F) -> Result<JobOutcome<Fut::Output>>
    where
        F: FnOnce(Option<SystemTime>, Missed) -> Fut,
        Fut: Future,
    {
        let mut plan = self.plan()?;
        let engine = self.client.engine.clone();
        let label = engine.metrics_label(&self.name).map(str::to_string);
        let label = label.as_deref();
        let (done, abandoned) = match self.begin(&mut plan).await? {
            Began::Granted {
                done, abandoned, ..
            } => (done, abandoned),
            Began::Held {
                value,
                pttl_ms,
                app,
            } => {
                crate::telemetry::job("skipped", label);
                let until = (pttl_ms >= 0)
                    .then(|| SystemTime::now() + Duration::from_millis(pttl_ms as u64));
                let holder = JobHolder::from_value(value, app);
                return Ok(JobOutcome::Skipped { holder, until });
            }
            Began::Done { tick } => {
                crate::telemetry::job("already_done", label);
                return Ok(JobOutcome::AlreadyDone {
                    tick: instant(tick),
                });
            }
        };
        let missed = missed(plan.begin.tick, plan.begin.period_ms, done, abandoned);
        let missed_for_work = missed.clone();
        let mut running = Running::new(engine, plan, missed.count, label);
        let keeper = self.keep_alive.then(|| running.keep_alive());
        let tick = running.plan.begin.tick.map(instant);
        let result = AssertUnwindSafe(async move { work(tick, missed_for_work).await })
            .catch_unwind()
            .await;
        let took = running.started.elapsed();
        let lost_alive = match keeper {
            Some((stop, task)) => {
                stop.cancel();
                task.await.unwrap_or(false)
            }
            None => false,
        };
        let outcome = if result.is_ok() { "ran" } else { "panicked" };
        let finished = running.finish(outcome).await;
        let overrun = !self.keep_alive && took > running.plan.begin.lease;
        crate::telemetry::job(outcome, label);
        crate::telemetry::job_ended(label, took, missed.count, overrun);
        let report = JobRun {
            value: (),
            took,
            tick: running.plan.begin.tick.map(instant),
            missed: missed.clone(),
            overrun,
            lost: lost_alive || matches!(finished, Ok(false)),
            release_error: finished.clone().err(),
        };
        Ok(match result {
            Ok(value) => JobOutcome::Ran(report.with(value)),
            Err(panic) => JobOutcome::Panicked(report.with(panic_message(&*panic))),
        })
    }

    /// Tries to begin, waiting up to `wait` while another run holds the job.
    async fn begin(&self, plan: &mut Plan) -> Result<Began> {
        let engine = &self.client.engine;
        let deadline = Instant::now() + self.wait;
        let mut pause = Duration::from_millis(5);
        loop {
            plan.begin.now_ms = now_ms();
            let began = engine.job_begin(&plan.call, &plan.begin).await?;
            let Began::Held { pttl_ms, .. } = &began else {
                return Ok(began);
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(began);
            }
            // Polled: a release publishes nothing on ShedLock's wire (yet).
            let free_in = Duration::from_millis(u64::try_from(*pttl_ms).unwrap_or(0) + 1);
            tokio::time::sleep(pause.min(left).min(free_in)).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

/// The ticks missed before `tick`: with a period, those between the last completed
/// tick and it; else a tick begun after the last completed one and never completed.
pub(super) fn missed(
    tick: Option<i64>,
    period_ms: u64,
    done: Option<i64>,
    abandoned: Option<i64>,
) -> Missed {
    let period = i64::try_from(period_ms).unwrap_or(i64::MAX);
    if let (Some(tick), Some(done), true) = (tick, done, period > 0) {
        let first = done.saturating_add(period);
        let count = if tick > first {
            (tick - first + period - 1) / period
        } else {
            0
        };
        let listed = count.min(Missed::MAX_LISTED as i64);
        return Missed {
            count: count as u64,
            ticks: (1..=listed).map(|k| instant(done + k * period)).collect(),
        };
    }
    match abandoned {
        Some(t) => Missed {
            count: 1,
            ticks: vec![instant(t)],
        },
        None => Missed::default(),
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".into(),
    }
}

/// A run in progress: ends it as cancelled when dropped before [`finish`](Running::finish).
struct Running {
    engine: Arc<Engine>,
    plan: Plan,
    missed: u64,
    started: Instant,
    start_ms: i64,
    /// The job's `job` metrics label, when allowed.
    label: Option<String>,
    armed: bool,
}

impl Running {
    fn new(engine: Arc<Engine>, plan: Plan, missed: u64, label: Option<&str>) -> Running {
        Running {
            label: label.map(str::to_string),
            engine,
            start_ms: plan.begin.now_ms,
            plan,
            missed,
            started: Instant::now(),
            armed: true,
        }
    }

    /// How the run ends: what is left of `at_least` is kept.
    fn finishing(&self, outcome: &'static str) -> Finish {
        Finish {
            keep: self.plan.at_least.saturating_sub(self.started.elapsed()),
            tick: self.plan.begin.tick,
            outcome,
            start_ms: self.start_ms,
            end_ms: now_ms(),
            missed: self.missed,
            record_ttl_ms: self.plan.begin.record_ttl_ms,
        }
    }

    /// Ends the run: true while it still held the lock.
    async fn finish(&mut self, outcome: &'static str) -> Result<bool> {
        self.armed = false;
        let finish = self.finishing(outcome);
        self.engine.job_finish(&self.plan.call, &finish).await
    }

    /// Renews the lease every third of it until stopped; the task's value: whether
    /// the run lost the lock.
    fn keep_alive(&self) -> (CancellationToken, tokio::task::JoinHandle<bool>) {
        let stop = CancellationToken::new();
        let (engine, call, lease) = (
            self.engine.clone(),
            self.plan.call.clone(),
            self.plan.begin.lease,
        );
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            let mut renewed = Instant::now();
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return false,
                    () = tokio::time::sleep(lease / 3) => {}
                }
                match engine.job_extend(&call, lease).await {
                    Ok(true) => renewed = Instant::now(),
                    Ok(false) => return true,
                    Err(_) if renewed.elapsed() >= lease => return true,
                    Err(e) => {
                        tracing::debug!(job = %call.key, error = %e, "keep-alive failed; retrying")
                    }
                }
            }
        });
        (stop, task)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(job = %self.plan.call.key, "run cancelled outside a runtime; its lock ends with its lease");
            return;
        };
        let (engine, call, finish) = (
            self.engine.clone(),
            self.plan.call.clone(),
            self.finishing("cancelled"),
        );
        tracing::warn!(job = %call.key, "run cancelled: giving the job back");
        let label = self.label.as_deref();
        crate::telemetry::job("cancelled", label);
        crate::telemetry::job_ended(label, self.started.elapsed(), self.missed, false);
        let release = async move {
            if let Err(e) = engine.job_finish(&call, &finish).await {
                tracing::warn!(job = %call.key, error = %e, "giving back a cancelled run failed; its lock ends with its lease");
            }
        };
        self.engine.spawn_cleanup(release, &runtime);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missed_ticks_are_those_between_the_last_done_and_this_one() {
        let m = missed(Some(500), 100, Some(100), None);
        assert_eq!(m.count, 3);
        assert_eq!(m.ticks, [instant(200), instant(300), instant(400)]);
        assert_eq!(missed(Some(200), 100, Some(100), None).count, 0);
        assert_eq!(missed(Some(200), 100, None, None).count, 0);
        let died = missed(Some(900), 0, Some(100), Some(500));
        assert_eq!((died.count, died.ticks), (1, vec![instant(500)]));
        let many = missed(Some(100_000_000), 1, Some(0), None);
        assert_eq!(many.count, 99_999_999);
        assert_eq!(many.ticks.len(), Missed::MAX_LISTED);
    }
}
