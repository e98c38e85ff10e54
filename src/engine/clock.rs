//! Deadlines from durations the user may set to anything, up to `Duration::MAX`:
//! computed without ever overflowing an `Instant` (which panics).

use std::time::Duration;

use tokio::time::Instant;

/// `now + d`, or `None` (no deadline) when that is beyond what an `Instant` can hold.
pub(crate) fn deadline_after(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// `now + d`, saturated thirty years ahead: a bound that never panics, for timings
/// the user may set to `Duration::MAX` (the unavailable timeout, a back-off).
pub(crate) fn later(d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
    Instant::now() + d.min(FAR)
}
