//! The spin lock's wait (Redisson `RedissonSpinLock`) and the simple lock's: no gate, no
//! queue. Each turn is one single try (`try_lock(ZERO)` through the waiter, so a
//! try cancelled mid-flight is undone as any attempt is: attempt.rs), then a sleep
//! from the lock's [`BackOff`] sequence, bounded by the caller's deadline.
//!
//! Invariants:
//! 1. A spin lock's waiter ([`Wait::Spin`]) never subscribes: between its tries it
//!    sends nothing and listens to nothing; it sleeps the next delay of its own sequence
//!    (a fresh one per call, as Redisson creates a policy per acquisition).
//!    A simple lock's waiter ([`Wait::SpinWoken`]) instead subscribes to its kind's wake
//!    channel after its first refused try, waits until a majority confirmed it (within
//!    the connect timeout and its deadline), and tries again at once: a release after
//!    that try publishes to a subscribed channel and cannot be missed. Each sleep then
//!    ends early on a message (a redlatch release, ours or another client's) or a
//!    reconnect of the pub/sub connection. A subscription refused (an ACL without the
//!    channel) or unconfirmed leaves it polling, as the spin lock does: the back-off
//!    still finds the lock free.
//! 2. With a deadline the last try is made at the deadline at the latest: a sleep is
//!    cut to the time left, and an attempt follows it.
//! 3. Cancel safety: dropping the future at any await leaves nothing behind: it is
//!    either sleeping (nothing on the server) or inside a single try, whose own
//!    cancel safety applies (waiter/mod.rs invariant 4, attempt.rs undo).
//! 4. An outage (no majority answered) is tried again until the deadline (and returned
//!    if the last try met it), or for an unbounded wait until `unavailable_after` (its
//!    last try made then, not a back-off delay later), then returned, as the waiter
//!    does; any other error is returned at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::acquire::attempt::Grant;
use crate::engine::acquire::waiter::{self, deadline_after};
use crate::engine::kinds::backoff::BackOff;
use crate::engine::kinds::call::Call;
use crate::engine::kinds::Wait;
use crate::engine::masters::clock;
use crate::engine::Engine;
use crate::error::Result;
use crate::transport::pubsub::Subscription;

/// Acquires `call` by trying and sleeping; `Ok(None)` when the wait ran out.
pub(crate) async fn acquire(
    engine: &Arc<Engine>,
    call: &Call,
    backoff: BackOff,
) -> Result<Option<Grant>> {
    let deadline = call.wait.and_then(deadline_after);
    let mut delays = backoff.delays();
    let mut unavailable_since: Option<Instant> = None;
    let woken = call.kind.protocol().policy().wait == Wait::SpinWoken;
    let mut listening: Option<Subscription> = None;
    loop {
        if let Some(sub) = listening.as_mut() {
            sub.mark_seen();
        }
        let once = Call {
            name: call.name.clone(),
            holder: call.holder.clone(),
            kind: call.kind,
            lease: call.lease,
            watchdog: call.watchdog,
            wait: Some(Duration::ZERO),
            intent: false,
        };
        let now = Instant::now();
        let out_of_time = deadline.is_some_and(|d| now >= d);
        // The try's outage: what a wait that runs out in it returns (invariant 4).
        let mut outage = None;
        // A try in flight at the deadline of a wait that was given is abandoned
        // `first_floor` after it (a hung master; waiter/mod.rs invariant 11): it is
        // undone in the background, as a dropped call's.
        let by = (deadline.filter(|_| call.wait != Some(Duration::ZERO)))
            .map(|d| d.max(now + waiter::first_floor(engine, call.wait)));
        let tried = match clock::until(by, waiter::acquire(engine, &once)).await {
            Some(tried) => tried,
            None => Err(waiter::timed_out(engine, now)),
        };
        match tried {
            Ok(Some(grant)) => return Ok(Some(grant)),
            Ok(None) => unavailable_since = None,
            // Invariant 4.
            Err(e) if e.is_unavailable() && !e.is_permanent() => {
                let since = *unavailable_since.get_or_insert(now);
                let given_up = match deadline {
                    Some(_) => out_of_time,
                    None => since.elapsed() >= engine.settings().unavailable_after,
                };
                if given_up {
                    return Err(e);
                }
                outage = Some(e);
            }
            Err(e) => return Err(e),
        }
        if out_of_time || deadline.is_some_and(|d| Instant::now() >= d) {
            return outage.map_or(Ok(None), Err);
        }
        // Invariant 1: subscribed, then a try at once.
        if woken && listening.is_none() && outage.is_none() {
            listening = Some(listen(engine, call, deadline).await);
            continue;
        }
        // Invariants 1, 2.
        let pause = delays.next().unwrap_or(backoff.max_delay());
        // A back-off the user set may be `Duration::MAX`: saturated, never an overflow.
        let wake = clock::later(pause);
        // In an outage an unbounded wait tries once more at its unavailable timeout,
        // not after it (waiter/mod.rs invariant 11).
        let outage_end =
            unavailable_since.and_then(|t| t.checked_add(engine.settings().unavailable_after));
        let wake = deadline.or(outage_end).map_or(wake, |d| wake.min(d));
        match listening.as_mut() {
            // Invariant 1: a message (or a reconnect) ends the sleep.
            Some(sub) => {
                let _ = sub
                    .wait(wake.saturating_duration_since(Instant::now()))
                    .await;
            }
            None => tokio::time::sleep_until(wake).await,
        }
    }
}

/// Subscribes to `call`'s wake channel and waits for a majority to confirm it, at most
/// the connect timeout and until `deadline` (invariant 1). A refusal is logged once;
/// the wait goes on polling.
async fn listen(engine: &Arc<Engine>, call: &Call, deadline: Option<Instant>) -> Subscription {
    let mut sub = engine.pubsub().subscribe(call.kind.channel(&call.name));
    let until = Instant::now() + engine.settings().connect_timeout;
    let until = deadline.map_or(until, |d| d.min(until));
    if let Err((addr, detail)) = sub
        .ready(until.saturating_duration_since(Instant::now()))
        .await
    {
        tracing::debug!(target: "redlatch", lock = %call.name, master = %addr, %detail,
            "the wake channel is refused: waiting by polling alone");
    }
    sub
}
