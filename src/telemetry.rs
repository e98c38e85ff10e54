//! Observability shared by all layers (like `error` and `keys`): the end of a span
//! ([`finish`]), and metrics through the [`metrics`](https://docs.rs/metrics) facade when the `metrics`
//! feature is on (nothing at all otherwise). The application installs a recorder
//! (Prometheus, StatsD, ...); without one every call here is a no-op.
//!
//! | name | type | labels | counts |
//! |---|---|---|---|
//! | `redlatch_acquired_total` | counter | `kind` | locks acquired (re-entries included) |
//! | `redlatch_contended_total` | counter | `kind` | acquisitions that found the lock busy and waited |
//! | `redlatch_woken_total` | counter | `kind` | waits ended by an unlock message or a local hand-over |
//! | `redlatch_timed_out_total` | counter | `kind` | `try_lock` calls whose wait ran out |
//! | `redlatch_lost_total` | counter | | holds declared lost (watchdog, force-unlock, shutdown) |
//! | `redlatch_renewals_total` | counter | | holds renewed by a majority in a watchdog round |
//! | `redlatch_errors_total` | counter | `master` | requests a master failed or did not answer |
//! | `redlatch_acquire_wait_seconds` | histogram | `kind` | time from the call to the grant |
//! | `redlatch_hold_seconds` | histogram | | time from acquisition to the last release |
//! | `redlatch_replicas_waited` | histogram | `primary` | replicas a replica-synced acquisition waited for |
//! | `redlatch_not_replicated_total` | counter | `primary` | synced writes (acquisitions, renewals) fewer replicas acknowledged than waited for |
//!
//! `kind` is `plain`, `fair` or `fenced`; `master` is the `host:port` of the master;
//! `primary` the `host:port` of the primary that answered (a cluster node, the
//! current Sentinel primary).
//!
//! Spans (`tracing`, target `redlatch`): `lock`, `try_lock`, `unlock`, `hand_over`,
//! `renewal_round` and `pubsub_reconnect`. Each carries what it is about (`lock`,
//! `kind`, `masters`, or `master`) and, when it ends, `outcome` and `elapsed_ms`; the
//! ending also emits one DEBUG event inside the span with the same fields.

use std::time::{Duration, Instant};

use tracing::Span;

/// Records `outcome` and the time since `started` on `span` (which must declare both
/// fields as `Empty`), and emits the closing DEBUG event inside it.
pub(crate) fn finish(
    span: &Span,
    started: Instant,
    outcome: &str,
    error: Option<&dyn std::fmt::Display>,
) {
    let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
    span.record("outcome", outcome);
    span.record("elapsed_ms", elapsed_ms);
    span.in_scope(|| match error {
        Some(e) => tracing::debug!(outcome, elapsed_ms, error = %e, "done"),
        None => tracing::debug!(outcome, elapsed_ms, "done"),
    });
}

/// An acquisition after `waited`.
pub(crate) fn acquired(kind: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!("redlatch_acquired_total", "kind" => kind).increment(1);
        metrics::histogram!("redlatch_acquire_wait_seconds", "kind" => kind)
            .record(waited.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, waited);
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

/// A hold was declared lost after being held for `held`.
pub(crate) fn lost(held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::counter!("redlatch_lost_total").increment(1);
    released(held);
}

/// The last hold of a holder on a lock ended after `held` (released or lost).
pub(crate) fn released(held: Duration) {
    #[cfg(feature = "metrics")]
    metrics::histogram!("redlatch_hold_seconds").record(held.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = held;
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
        use metrics::{describe_counter, describe_histogram, Unit};
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
        describe_histogram!(
            "redlatch_hold_seconds",
            Unit::Seconds,
            "time from acquisition to the last release"
        );
    }
}
