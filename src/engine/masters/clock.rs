//! Deadlines from durations the user may set to anything, up to `Duration::MAX`:
//! computed without ever overflowing an `Instant` (which panics); and a call run
//! until its caller's deadline and abandoned there ([`until`], [`cut`]: waiter/mod.rs
//! invariant 11).

use std::future::Future;
use std::time::Duration;

use futures_util::future::{Either, FutureExt};
use tokio::time::Instant;

use crate::error::{Error, Result};

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

/// Runs `f` until `end` (to its end when `None`); `None` if `end` came first and `f`
/// was dropped: a caller's deadline is end to end, and a call in flight at it is
/// abandoned there (each call that can be dropped says how it cleans up).
///
/// Not an `async fn`: the returned future holds `f` once (an `async fn` would hold its
/// argument and the timeout wrapping it, and every caller moves the whole at its
/// `.await`), and creates no timer without a deadline.
pub(crate) fn until<F: Future>(
    end: Option<Instant>,
    f: F,
) -> impl Future<Output = Option<F::Output>> {
    match end {
        Some(end) => Either::Left(tokio::time::timeout_at(end, f).map(Result::ok)),
        None => Either::Right(f.map(Some)),
    }
}

/// [`until`] for a request to the master at `addr`: abandoned at `end`, it fails with
/// a timeout naming that master and how long the request had been waiting.
pub(crate) fn cut<'a, T, F>(
    end: Option<Instant>,
    addr: &'a str,
    request: F,
) -> impl Future<Output = Result<T>> + 'a
where
    F: Future<Output = Result<T>> + 'a,
{
    match end {
        Some(end) => {
            let started = Instant::now();
            let timed = tokio::time::timeout_at(end, request);
            Either::Left(timed.map(move |r| {
                r.unwrap_or_else(|_| {
                    Err(Error::Timeout {
                        addr: addr.to_string(),
                        after: Duration::from_millis(started.elapsed().as_millis() as u64),
                    })
                })
            }))
        }
        None => Either::Right(request),
    }
}
