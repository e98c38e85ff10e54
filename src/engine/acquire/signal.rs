//! Waiting for a counter (semaphore permits, a latch reaching zero): the same
//! subscribe-before-retry rule as the lock waiter (waiter/mod.rs invariant 1), without the
//! lock's local bookkeeping; and running a call that takes something so that a
//! cancelled caller cannot lose what it took.
//!
//! Invariants:
//! 1. The channel is subscribed, confirmed by a majority, and the wake counter marked
//!    seen before every attempt after the first, so a message between a refused attempt
//!    and the wait is never missed. The attempt right after the subscription is made
//!    at once, without waiting: a message sent before the confirmation is not heard.
//!    An attempt sent before the confirmation (its wait for it was cut short, in an
//!    outage) is never followed by a wait: the confirmation, then another attempt.
//! 2. An idle waiter sends nothing: it sleeps until a message, the hint of the last
//!    attempt (an expiring permit), the deadline, or the watchdog timeout (a safety net
//!    for a lost message; a reconnect wakes every waiter anyway, pubsub.rs invariant 3).
//! 3. A call run by [`completed`] always runs to its end; if its caller is gone by then,
//!    or goes before it has taken the result (a `select!` that dropped it after the
//!    call ended), what it took is given back by `undo`.
//! 4. An outage (the master unreachable, timing out, CLUSTERDOWN) is tried again after
//!    a short pause until the deadline, and returned if the wait runs out in it; an
//!    unbounded wait tries until it has been in the outage for `unavailable_after`
//!    (the lock waiter's rule, waiter/mod.rs invariant 11). Any other error is returned at
//!    once.
//! 5. A bounded wait returns by its deadline and the lock waiter's floor
//!    ([`first_floor`]: the wait slack, or one request for a single try): an attempt
//!    still unanswered then (a hung master) is abandoned, with the outage's error if the
//!    wait was in one, else a timeout naming the master. A call run by [`completed`]
//!    still runs to its end and gives back what it took (invariant 3).

use std::future::Future;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::acquire::attempt;
use crate::engine::acquire::waiter::{first_floor, timed_out};
use crate::engine::masters::clock::{deadline_after, until};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::telemetry;
use crate::transport::pubsub::Subscription;

/// What one attempt came to.
pub(crate) enum Attempt<T> {
    /// Done: the value to return.
    Done(T),
    /// Not yet: retry on a message, or after this long at most without one.
    Retry(Option<Duration>),
}

/// Attempts until done, waiting for messages on `channel` in between; `Ok(None)` when
/// `wait` ran out first (`None`: as long as it takes). `kind` labels the metrics. An
/// outage is tried again (invariant 4); an attempt unanswered past the deadline is
/// abandoned (invariant 5).
pub(crate) async fn wait_for<T, F, Fut>(
    engine: &Engine,
    channel: String,
    wait: Option<Duration>,
    kind: &'static str,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>>>,
{
    let started = Instant::now();
    let deadline = wait.and_then(deadline_after);
    let abandon = deadline.and_then(|d| d.checked_add(first_floor(engine, wait)));
    let mut outage = Outage::default();
    let mut sub: Option<Subscription> = None;
    loop {
        // Whether the attempt is sent confirmed (invariant 1).
        let confirmed = sub.as_mut().is_some_and(|sub| {
            sub.mark_seen();
            sub.is_confirmed()
        });
        let Some(answer) = until(abandon, attempt()).await else {
            // Invariant 5: the master did not answer within the wait and its floor.
            return Err(outage.last.unwrap_or_else(|| timed_out(engine, started)));
        };
        let hint = match outage.judge(engine, deadline, answer)? {
            Attempt::Done(v) => return Ok(Some(v)),
            Attempt::Retry(hint) => hint,
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return outage.ended();
        }
        if !confirmed {
            // Invariant 1: subscribe, then attempt again at once. A message sent
            // before the confirmation may have been missed (the SUBSCRIBE rode a
            // connection that was up already, so no reconnect wakes us either), also
            // while an attempt sent unconfirmed was in flight.
            if sub.is_none() {
                telemetry::contended(kind);
            }
            let new = sub.get_or_insert_with(|| engine.pubsub().subscribe(channel.clone()));
            let bound = deadline.map_or(engine.settings().connect_timeout, |d| {
                d.saturating_duration_since(now)
            });
            // In an outage the confirmation waits no longer than the next try.
            let bound = hint.map_or(bound, |h| h.min(bound));
            if let Err((addr, detail)) = new
                .ready(bound.min(engine.settings().connect_timeout))
                .await
            {
                return Err(Error::PermissionDenied { addr, detail });
            }
            continue;
        }
        let Some(sub) = sub.as_mut() else {
            continue; // never: confirmed means subscribed
        };
        let mut max = hint.unwrap_or(engine.settings().watchdog_timeout);
        if let Some(d) = deadline.or(outage.end(engine)) {
            max = max.min(d.saturating_duration_since(Instant::now()));
        }
        if sub.wait(max).await {
            telemetry::woken(kind);
        }
    }
}

/// The outage an attempt met (invariant 4): since when, and its last error.
#[derive(Default)]
struct Outage {
    since: Option<Instant>,
    last: Option<Error>,
}

impl Outage {
    /// An attempt's result: an outage becomes a retry after a short pause, unless an
    /// unbounded wait has been in it for the unavailable timeout; other errors end.
    fn judge<T>(
        &mut self,
        engine: &Engine,
        deadline: Option<Instant>,
        result: Result<Attempt<T>>,
    ) -> Result<Attempt<T>> {
        match result {
            Ok(done @ Attempt::Done(_)) => Ok(done),
            Ok(retry) => {
                (self.since, self.last) = (None, None);
                Ok(retry)
            }
            Err(e) if e.is_unavailable() && !e.is_permanent() => {
                let since = *self.since.get_or_insert_with(Instant::now);
                let waited = since.elapsed();
                if deadline.is_none() && waited >= engine.settings().unavailable_after {
                    return Err(e);
                }
                self.last = Some(e);
                let pause = attempt::jitter(engine.settings().retry_jitter);
                Ok(Attempt::Retry(Some(pause.max(Duration::from_millis(10)))))
            }
            Err(e) => Err(e),
        }
    }

    /// When an unbounded wait in this outage gives up.
    fn end(&self, engine: &Engine) -> Option<Instant> {
        self.since
            .and_then(|t| t.checked_add(engine.settings().unavailable_after))
    }

    /// The wait ran out: in an outage its error, else not acquired.
    fn ended<T>(self) -> Result<Option<T>> {
        self.last.map_or(Ok(None), Err)
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
    engine.cleanups().spawn(async move {
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
