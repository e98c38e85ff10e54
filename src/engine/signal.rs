//! Waiting for a counter (semaphore permits, a latch reaching zero): the same
//! subscribe-before-retry rule as the lock waiter (waiter.rs invariant 1), without the
//! lock's local bookkeeping; and running a call that takes something so that a
//! cancelled caller cannot lose what it took.
//!
//! Invariants:
//! 1. The channel is subscribed, confirmed by a majority, and the wake counter marked
//!    seen before every attempt after the first, so a message between a refused attempt
//!    and the wait is never missed.
//! 2. An idle waiter sends nothing: it sleeps until a message, the hint of the last
//!    attempt (an expiring permit), the deadline, or the watchdog timeout (a safety net
//!    for a lost message; a reconnect wakes every waiter anyway, pubsub.rs invariant 3).
//! 3. A call run by [`completed`] always runs to its end; if its caller is gone by then,
//!    or goes before it has taken the result (a `select!` that dropped it after the
//!    call ended), what it took is given back by `undo`.

use std::future::Future;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Engine;
use crate::error::{Error, Result};
use crate::telemetry;

/// What one attempt came to.
pub(crate) enum Attempt<T> {
    /// Done: the value to return.
    Done(T),
    /// Not yet: retry on a message, or after this long at most without one.
    Retry(Option<Duration>),
}

/// Attempts until done, waiting for messages on `channel` in between; `Ok(None)` when
/// `deadline` passed first (`None`: no deadline). `kind` labels the metrics.
pub(crate) async fn wait_for<T, F, Fut>(
    engine: &Engine,
    channel: String,
    deadline: Option<Instant>,
    kind: &'static str,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    if let Attempt::Done(v) = attempt().await? {
        return Ok(Some(v));
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Ok(None);
    }
    telemetry::contended(kind);
    let mut sub = engine.pubsub.subscribe(channel);
    let bound = deadline.map_or(engine.settings.connect_timeout, |d| {
        d.saturating_duration_since(Instant::now())
    });
    if let Err((addr, detail)) = sub.ready(bound.min(engine.settings.connect_timeout)).await {
        return Err(Error::PermissionDenied { addr, detail });
    }
    loop {
        sub.mark_seen();
        let hint = match attempt().await? {
            Attempt::Done(v) => return Ok(Some(v)),
            Attempt::Retry(hint) => hint,
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        let mut max = hint.unwrap_or(engine.settings.watchdog_timeout);
        if let Some(d) = deadline {
            max = max.min(d.saturating_duration_since(now));
        }
        if sub.wait(max).await {
            telemetry::woken(kind);
        }
    }
}

/// Runs `call` to its end in the background (invariant 3) and returns its result; if
/// this future is dropped before it has taken the result (before the call ends, or
/// after it ended but before this future was polled again), `undo` gets what the call
/// returned.
pub(crate) async fn completed<T, C, U, UF>(engine: &Engine, call: C, undo: U) -> Result<T>
where
    T: Clone + Send + 'static,
    C: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(T) -> UF + Send + 'static,
    UF: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    engine.cleanups.spawn(async move {
        let result = call.await;
        let taken = result.as_ref().ok().cloned();
        // The caller confirms in the same poll that takes the result: a result sent
        // but never taken (the caller dropped in between) is given back too.
        let (ack, acked) = oneshot::channel::<()>();
        if tx.send((result, ack)).is_ok() && acked.await.is_ok() {
            return;
        }
        if let Some(taken) = taken {
            undo(taken).await;
        }
    });
    match rx.await {
        Ok((result, ack)) => {
            let _ = ack.send(());
            result
        }
        Err(e) => Err(Error::Runtime {
            reason: "the client shut down during the call".into(),
            source: Some(crate::error::Cause::new(e)),
        }),
    }
}
