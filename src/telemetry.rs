//! Observability shared by all layers (like `error` and `keys`): the end of a span
//! ([`finish`]), and metrics through the [`metrics`](https://docs.rs/metrics) facade when the `metrics`
//! feature is on (nothing at all otherwise). The application installs a recorder
//! (Prometheus, StatsD, ...); without one every call here is a no-op.
//!
//! | name | type | labels | counts |
//! |---|---|---|---|
//! | `redlatch_acquired_total` | counter | `kind` (, `lock`) | locks acquired (re-entries included) |
//! | `redlatch_contended_total` | counter | `kind` | acquisitions that found the lock busy and waited |
//! | `redlatch_woken_total` | counter | `kind` | waits ended by an unlock message or a local hand-over |
//! | `redlatch_timed_out_total` | counter | `kind` | `try_lock` calls whose wait ran out |
//! | `redlatch_lost_total` | counter | | holds declared lost (watchdog, force-unlock, shutdown) |
//! | `redlatch_renewals_total` | counter | | holds renewed by a majority in a watchdog round |
//! | `redlatch_errors_total` | counter | `master` | requests a master failed or did not answer |
//! | `redlatch_acquire_wait_seconds` | histogram | `kind` (, `lock`) | time from the call to the grant |
//! | `redlatch_hold_seconds` | histogram | (`lock`) | time from acquisition to the last release |
//! | `redlatch_replicas_waited` | histogram | `primary` | replicas a replica-synced acquisition waited for |
//! | `redlatch_not_replicated_total` | counter | `primary` | synced writes (acquisitions, renewals) fewer replicas acknowledged than waited for |
//! | `redlatch_held_locks` | gauge | | holds in the client's table (distinct lock and holder; permits included) |
//! | `redlatch_waiters` | gauge | | `lock()` / `try_lock()` calls in progress (attempting or waiting) |
//! | `redlatch_subscriptions` | gauge | `master` | channels the pub/sub connection to the master is subscribed to |
//! | `redlatch_job_runs_total` | counter | `outcome` (, `job`) | scheduled jobs' runs by what happened: `ran`, `panicked`, `cancelled`, `skipped`, `already_done` |
//! | `redlatch_job_missed_total` | counter | (`job`) | ticks a run was told were missed before it |
//! | `redlatch_job_overruns_total` | counter | (`job`) | runs that outlived `at_most` without keep-alive |
//! | `redlatch_job_run_seconds` | histogram | (`job`) | how long the runs that went took |
//!
//! `kind` is `plain`, `fair`, `fenced`, `read` or `write`; `master` is the `host:port` of the master;
//! `primary` the `host:port` of the primary that answered (a cluster node, the
//! current Sentinel primary). `lock` is the lock's name, only for the names
//! `Config::metrics_names` allows ([`LockNames`]); other names carry no `lock` label.
//!
//! Spans (`tracing`, target `redlatch`): `lock`, `try_lock` and `unlock` at INFO (what an
//! operator follows), `hand_over`, `renewal_round` and `pubsub_reconnect` at DEBUG. Each
//! carries what it is about (`lock`, `kind` = `plain`, `fair`, `fenced`, `read` or
//! `write`, `masters`, or `master`), OpenTelemetry's database-client fields
//! (`db.system.name` = `redis`, `server.address` when there is one server, `error.type`
//! = the error's variant when it failed) and, when it ends, `outcome` and `elapsed_ms`;
//! the ending also emits one DEBUG event inside the span with the same fields. Events:
//! WARN `lock lost` (with `reason`, before `lost()` fires) and `lock at risk` (with
//! `validity_left_ms`), INFO when a risk ends or a client closes with live guards.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Span;

/// The lock names whose wait, hold and acquisition metrics carry a `lock` label
/// (`Config::metrics_names`): exact names, and prefixes written with a trailing `*`
/// (`orders:*`; `*` alone allows every name). Empty by default: then nothing is
/// labelled and asking costs one pointer test.
#[derive(Clone, Debug, Default)]
pub(crate) struct LockNames(Option<Arc<Patterns>>);

#[derive(Debug)]
struct Patterns {
    exact: HashSet<Box<str>>,
    prefixes: Vec<Box<str>>,
}

impl LockNames {
    /// Names from `patterns` (a trailing `*` makes a prefix); none: nothing labelled.
    pub(crate) fn new<S: AsRef<str>>(patterns: &[S]) -> LockNames {
        if patterns.is_empty() {
            return LockNames(None);
        }
        let mut p = Patterns {
            exact: HashSet::new(),
            prefixes: Vec::new(),
        };
        for pattern in patterns.iter().map(AsRef::as_ref) {
            match pattern.strip_suffix('*') {
                Some(prefix) => p.prefixes.push(prefix.into()),
                None => {
                    p.exact.insert(pattern.into());
                }
            }
        }
        LockNames(Some(Arc::new(p)))
    }

    /// `name` as a label value when it is allowed; `None` (unlabelled) otherwise.
    pub(crate) fn label<'a>(&self, name: &'a str) -> Option<&'a str> {
        let p = self.0.as_deref()?;
        let allowed = p.exact.contains(name) || p.prefixes.iter().any(|x| name.starts_with(&**x));
        allowed.then_some(name)
    }
}

/// Records `outcome` and the time since `started` on `span` (which must declare both
/// fields as `Empty`), and emits the closing DEBUG event inside it.
pub(crate) fn finish(
    span: &Span,
    started: Instant,
    outcome: &str,
    error: Option<&crate::error::Error>,
) {
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    span.record("outcome", outcome);
    span.record("elapsed_ms", elapsed_ms);
    span.in_scope(|| match error {
        Some(e) => {
            // OpenTelemetry's `error.type`: a low-cardinality class, the variant's name.
            let text = format!("{e:?}");
            let class = text.split(['{', '(', ' ']).next().unwrap_or("Error");
            span.record("error.type", class);
            tracing::debug!(outcome, elapsed_ms, error = %e, "done")
        }
        None => tracing::debug!(outcome, elapsed_ms, "done"),
    });
}

/// An acquisition after `waited`; `lock`: its name when [`LockNames`] allows it.
pub(crate) fn acquired(kind: &'static str, lock: Option<&str>, waited: Duration) {
    #[cfg(feature = "metrics")]
    match lock {
        None => {
            metrics::counter!("redlatch_acquired_total", "kind" => kind).increment(1);
            metrics::histogram!("redlatch_acquire_wait_seconds", "kind" => kind)
                .record(waited.as_secs_f64());
        }
        Some(lock) => {
            let labels = [("kind", kind.to_string()), ("lock", lock.to_string())];
            metrics::counter!("redlatch_acquired_total", &labels).increment(1);
            metrics::histogram!("redlatch_acquire_wait_seconds", &labels)
                .record(waited.as_secs_f64());
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, lock, waited);
}

/// A scheduled job's run decided or ended: `outcome` is `ran`, `panicked`,
/// `cancelled`, `skipped` or `already_done`; `job`: its name when [`LockNames`] allows.
pub(crate) fn job(outcome: &'static str, job: Option<&str>) {
    #[cfg(feature = "metrics")]
    match job {
        None => metrics::counter!("redlatch_job_runs_total", "outcome" => outcome).increment(1),
        Some(job) => {
            let labels = [("outcome", outcome.to_string()), ("job", job.to_string())];
            metrics::counter!("redlatch_job_runs_total", &labels).increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (outcome, job);
}

/// A scheduled job's run that went ended after `took`, told of `missed` ticks,
/// `overrun` when it outlived `at_most` without keep-alive.
pub(crate) fn job_ended(job: Option<&str>, took: Duration, missed: u64, overrun: bool) {
    #[cfg(feature = "metrics")]
    {
        let labels: Vec<(&'static str, String)> =
            job.map(|j| ("job", j.to_string())).into_iter().collect();
        metrics::histogram!("redlatch_job_run_seconds", &labels).record(took.as_secs_f64());
        metrics::counter!("redlatch_job_missed_total", &labels).increment(missed);
        metrics::counter!("redlatch_job_overruns_total", &labels).increment(u64::from(overrun));
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (job, took, missed, overrun);
}

/// An acquisition found the lock busy and is about to wait.
pub(crate) fn contended(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_contended_total", "kind" => kind).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// A wait ended by a message or a hand-over (not the TTL bound).
pub(crate) fn woken(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_woken_total", "kind" => kind).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// A `try_lock` gave up.
pub(crate) fn timed_out(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_timed_out_total", "kind" => kind).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// A hold was declared lost after being held for `held` (`lock` as in [`released`]).
pub(crate) fn lost(lock: Option<&str>, held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_lost_total").increment(1);
    released(lock, held);
}

/// Holds in the client's table went up or down by `delta` (gauge `redlatch_held_locks`).
pub(crate) fn held(delta: i64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("redlatch_held_locks").increment(delta as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = delta;
}

/// Acquisitions in progress (attempting or waiting) went up or down by `delta` (gauge
/// `redlatch_waiters`).
pub(crate) fn waiting(delta: i64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("redlatch_waiters").increment(delta as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = delta;
}

/// The pub/sub connection to `master` is subscribed to `n` channels (gauge
/// `redlatch_subscriptions`).
pub(crate) fn subscriptions(master: &str, n: usize) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("redlatch_subscriptions", "master" => master.to_string()).set(n as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = (master, n);
}

/// The last hold of a holder on a lock ended after `held` (released or lost); `lock`:
/// its name when [`LockNames`] allows it.
pub(crate) fn released(lock: Option<&str>, held: Duration) {
    #[cfg(feature = "metrics")]
    match lock {
        None => metrics::histogram!("redlatch_hold_seconds").record(held.as_secs_f64()),
        Some(lock) => metrics::histogram!("redlatch_hold_seconds", "lock" => lock.to_string())
            .record(held.as_secs_f64()),
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (lock, held);
}

/// `n` holds renewed by a majority.
pub(crate) fn renewed(n: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_renewals_total").increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = n;
}

/// A replica-synced write on `primary` waited for `wanted` replicas (`acquisition`:
/// it was a lock acquisition, not a renewal) and got `acked`.
pub(crate) fn replicas_waited(primary: &str, wanted: usize, acked: usize, acquisition: bool) {
    #[cfg(feature = "metrics")]
    {
        if acquisition {
            metrics::histogram!("redlatch_replicas_waited", "primary" => primary.to_string())
                .record(wanted as f64);
        }
        if acked < wanted {
            metrics::counter!("redlatch_not_replicated_total", "primary" => primary.to_string())
                .increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (primary, wanted, acked, acquisition);
}

/// A request to `master` failed or timed out.
pub(crate) fn error(master: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_errors_total", "master" => master.to_string()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = master;
}

/// Registers the descriptions shown by exporters (once per process is enough; more
/// is harmless).
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_counter!("redlatch_acquired_total", "locks acquired");
        describe_counter!(
            "redlatch_contended_total",
            "acquisitions that found the lock busy and waited"
        );
        describe_counter!(
            "redlatch_woken_total",
            "waits ended by an unlock message or a local hand-over"
        );
        describe_counter!("redlatch_timed_out_total", "try_lock calls that gave up");
        describe_counter!("redlatch_lost_total", "holds declared lost");
        describe_counter!(
            "redlatch_renewals_total",
            "holds renewed by a majority of masters"
        );
        describe_counter!(
            "redlatch_errors_total",
            "requests a master failed or did not answer"
        );
        describe_histogram!(
            "redlatch_acquire_wait_seconds",
            Unit::Seconds,
            "time from lock() to the grant"
        );
        describe_histogram!(
            "redlatch_replicas_waited",
            "replicas a replica-synced acquisition waited for, per primary"
        );
        describe_counter!(
            "redlatch_not_replicated_total",
            "synced writes fewer replicas acknowledged than waited for, per primary"
        );
        describe_gauge!("redlatch_held_locks", "holds in the client's table");
        describe_gauge!(
            "redlatch_waiters",
            "lock() and try_lock() calls in progress"
        );
        describe_gauge!(
            "redlatch_subscriptions",
            "channels subscribed on the pub/sub connection, per master"
        );
        describe_counter!("redlatch_job_runs_total", "scheduled jobs' runs by outcome");
        describe_counter!(
            "redlatch_job_missed_total",
            "ticks runs were told were missed"
        );
        describe_counter!(
            "redlatch_job_overruns_total",
            "runs that outlived at_most without keep-alive"
        );
        describe_histogram!(
            "redlatch_job_run_seconds",
            Unit::Seconds,
            "how long scheduled jobs' runs took"
        );
        describe_histogram!(
            "redlatch_hold_seconds",
            Unit::Seconds,
            "time from acquisition to the last release"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::LockNames;

    #[test]
    fn names_are_exact_or_prefixes_and_none_labels_nothing() {
        let names = LockNames::new(&["billing:nightly", "orders:*"]);
        assert_eq!(names.label("billing:nightly"), Some("billing:nightly"));
        assert_eq!(
            names.label("billing:nightly:2"),
            None,
            "exact, not a prefix"
        );
        assert_eq!(names.label("orders:42"), Some("orders:42"));
        assert_eq!(names.label("orders:"), Some("orders:"));
        assert_eq!(names.label("order"), None);
        let every = LockNames::new(&["*"]);
        assert_eq!(every.label("anything"), Some("anything"));
        let none = LockNames::new::<&str>(&[]);
        assert_eq!(none.label("billing:nightly"), None);
        assert_eq!(LockNames::default().label("x"), None);
    }
}
