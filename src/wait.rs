//! The acquisition loop: attempt, subscribe, wait for the unlock message (or the TTL
//! bound), re-try (SPEC §6).
//!
//! Invariants:
//! 1. The subscription exists, confirmed by a majority of masters, before the attempt
//!    that follows a failed one; the wake counter is marked seen before every attempt.
//! 2. An idle waiter sends nothing to Redis: it sleeps until a message or the TTL the
//!    script returned (fair waiters also refresh their queue deadline every
//!    stale_timeout/3).
//! 3. A woken waiter re-tries at once; jitter is only for split votes and outages.
//! 4. Dropping the future leaves nothing behind: the gate pass and the subscription are
//!    dropped, and a fair waiter's queue entry is removed by a background task.
//! 5. A fair waiter granted by a majority but not by every master also leaves the
//!    queues of the others (it joined them while trying), in the background as it
//!    returns; otherwise its entry would block those queues until its deadline.
//! 6. A subscribed waiter of a non-fair lock that another task of the same client
//!    holds does not ask Redis: that task's release wakes it directly (a force-unlock
//!    arrives as a message), and its lease bounds the wait.
//! 7. On a single master, such a waiter of a plain lock, and every queued waiter of a
//!    fair lock, posts an offer (offers.rs): a local releaser may hand it the lock in
//!    its release script (a fair one only if it is the queue head). Before asking Redis
//!    itself the waiter withdraws the offer, or, if a releaser has taken it, waits for
//!    that answer first, so it never races its own hand-over. A fair waiter whose offer
//!    was declined offers again and goes on waiting: the head was someone else.
//! 8. Fair waiters of one client under Redlock pass the gate one at a time: FIFO among
//!    them is the gate's, FIFO across clients the masters' queues'.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::attempt::release_on;
use crate::attempt::{attempt, jitter, Grant, Outcome, Request};
use crate::client::Inner;
use crate::error::Result;
use crate::lock::Kind;
use crate::names;
use crate::offers::{Answer, Offer};
use crate::pubsub::Subscription;
use crate::quorum::fan_out;
use crate::scripts::{self, AcquireMode};
use tokio::sync::oneshot;

/// Parameters of one `lock`/`try_lock` call.
pub(crate) struct Call {
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    pub(crate) kind: Kind,
    pub(crate) lease: Duration,
    /// None: wait as long as it takes.
    pub(crate) wait: Option<Duration>,
}

/// Acquires or gives up; `Ok(None)` when the wait ran out under contention.
pub(crate) async fn acquire(inner: &Arc<Inner>, call: &Call) -> Result<Option<Grant>> {
    let deadline = call.wait.map(|w| Instant::now() + w);
    let reentrant = inner.holds.get(&call.name, &call.holder).is_some();
    let once = call.wait == Some(Duration::ZERO);
    let mode = match call.kind {
        Kind::Plain => AcquireMode::Plain,
        Kind::Fenced => AcquireMode::Fenced,
        Kind::Fair => AcquireMode::Fair {
            join: !once,
            stale_ms: inner.config.fair_stale_timeout.as_millis() as u64,
        },
    };
    let req = Request {
        name: call.name.clone(),
        holder: call.holder.clone(),
        lease: call.lease,
        mode,
        reentrant: reentrant.into(),
    };
    // Local waiters line up in the gate (see gate.rs). A fair lock on one master needs
    // no gate (its Redis queue orders every waiter); under Redlock it has one, so only
    // one waiter per client queues on the masters at a time: many waiters of one
    // client queued in different orders on different masters would split the votes
    // round after round (invariant 8).
    let gated = call.kind != Kind::Fair || inner.masters.len() > 1;
    // An abandoned hand-over to this holder is settled first (offers.rs invariant 4).
    let settled = inner
        .offers(call.kind == Kind::Fair)
        .settled(&call.name, &call.holder);
    match deadline {
        Some(d) => {
            if tokio::time::timeout_at(d, settled).await.is_err() {
                return Ok(None);
            }
        }
        None => settled.await,
    }
    let _pass = if reentrant || once || !gated {
        None
    } else {
        let enter = inner.gates.enter(&call.name);
        match deadline {
            Some(d) => match tokio::time::timeout_at(d, enter).await {
                Ok(p) => Some(p),
                Err(_) => return Ok(None),
            },
            None => Some(enter.await),
        }
    };
    // Invariant 4: a fair waiter leaves the queue however this future ends.
    let queued = scopeguard::guard(false, |queued| {
        if queued {
            let (inner, name, holder) = (inner.clone(), call.name.clone(), call.holder.clone());
            let cleanups = inner.cleanups.clone();
            cleanups.spawn(async move { leave_queue(&inner, &name, &holder).await });
        }
    });
    // Boxed: keeps the future type shallow enough for callers' own async fns (rustc's
    // layout queries overflow on deeply nested futures).
    Box::pin(wait_loop(inner, call, &req, deadline, once, queued)).await
}

async fn wait_loop(
    inner: &Arc<Inner>,
    call: &Call,
    req: &Request,
    deadline: Option<Instant>,
    once: bool,
    mut queued: scopeguard::ScopeGuard<bool, impl FnOnce(bool)>,
) -> Result<Option<Grant>> {
    let fair = call.kind == Kind::Fair;
    let mut sub: Option<Subscription> = None;
    let mut unavailable_since: Option<Instant> = None;
    let mut woken = false;
    // Invariant 7: an offer to be handed the lock by a local releaser.
    let can_offer = call.kind != Kind::Fenced && inner.masters.len() == 1;
    let offers = inner.offers(fair);
    // The receiver of our posted offer. However this future ends, the offer is
    // withdrawn; if a releaser took it and its grant arrived as we were dropped, the
    // lock it handed us is released (offers.rs invariant 2).
    let mut handover = scopeguard::guard(None::<oneshot::Receiver<Answer>>, |rx| {
        if offers.withdraw(&call.name, &call.holder) {
            return;
        }
        // A releaser took the offer and has not answered (or we did not read it):
        // settle it in the background (offers.rs invariant 4).
        if let Some(rx) = rx {
            settle_in_background(inner, call, fair, Unsettled::Offer(rx));
        }
    });
    loop {
        if let Some(s) = sub.as_mut() {
            s.mark_seen();
        }
        // Re-entry is decided per attempt: an earlier call of this task may have taken
        // the lock while this one waited in the gate.
        let reentrant = inner.holds.get(&call.name, &call.holder).is_some();
        req.reentrant
            .store(reentrant, std::sync::atomic::Ordering::Relaxed);
        // A cancelled fair attempt may already have queued us (invariant 4).
        *queued = fair && !once;
        // Invariant 6: while a task of this client holds a non-fair lock, its release
        // wakes us directly; an attempt now would only be refused.
        // A waiter woken by a message (a force-unlock by another client, say) asks Redis.
        let local = (!fair && !reentrant && !std::mem::take(&mut woken))
            .then(|| inner.holds.held_locally_for(&call.name, &call.holder))
            .flatten()
            .filter(|left| !left.is_zero());
        if local.is_some() && sub.is_none() {
            let until = deadline.unwrap_or_else(|| Instant::now() + inner.config.connect_timeout);
            sub = Some(subscribe(inner, call, until).await);
            continue;
        }
        if local.is_none() && handover.is_some() {
            if !offers.withdraw(&call.name, &call.holder) {
                // A releaser took our offer: its answer comes within one script call
                // (offers.rs invariant 2); if we are dropped meanwhile, the drop guard
                // settles it.
                let rx = handover.as_mut().expect("checked above");
                let answer = rx.await.ok();
                *handover = None;
                if let Some(started) = accept(inner, call, answer, deadline).await? {
                    *queued = false;
                    return Ok(Some(handed_over(inner, call, started)));
                }
            }
            *handover = None;
        }
        let outcome = match local {
            Some(left) => Outcome::Busy {
                retry_in: left,
                split: false,
            },
            None => attempt(inner, req).await?,
        };
        let (retry_in, backoff, error) = match outcome {
            Outcome::Granted(g) => {
                // Invariant 5: a master that refused us may still queue us; the guard
                // leaves those queues in the background as this function returns.
                *queued = fair && !once && !g.everywhere;
                return Ok(Some(g));
            }
            Outcome::Busy { retry_in, split } => {
                unavailable_since = None;
                (
                    retry_in,
                    split.then(|| jitter(inner.config.retry_jitter)),
                    None,
                )
            }
            Outcome::Unavailable(e) => {
                let since = *unavailable_since.get_or_insert_with(Instant::now);
                if deadline.is_none() && since.elapsed() >= inner.config.unavailable_after() {
                    return Err(e);
                }
                let pause = jitter(inner.config.retry_jitter).max(Duration::from_millis(10));
                (pause, Some(pause), Some(e))
            }
        };
        let now = Instant::now();
        if once || deadline.is_some_and(|d| now >= d) {
            if std::mem::take(&mut *queued) {
                leave_queue(inner, &call.name, &call.holder).await;
            }
            return error.map_or(Ok(None), Err);
        }
        let waiter = match sub.as_mut() {
            Some(s) => s,
            None => {
                // Invariant 1: subscribe, then re-try at once. Bounded by the caller's
                // deadline and, while no majority answers, by the unavailable timeout
                // (a majority cannot confirm then anyway).
                let until = deadline
                    .or_else(|| unavailable_since.map(|t| t + inner.config.unavailable_after()))
                    .unwrap_or(now + inner.config.connect_timeout);
                sub = Some(subscribe(inner, call, until).await);
                continue;
            }
        };
        let until_deadline = deadline.map_or(Duration::MAX, |d| d - now);
        if let Some(pause) = backoff {
            // Invariant 3: a split vote or an outage backs off for real; our own
            // clean-up release published "0", which must not cut the pause short.
            tokio::time::sleep(pause.min(until_deadline)).await;
            continue;
        }
        let mut max = retry_in.min(until_deadline);
        if fair {
            max = max.min(inner.config.fair_stale_timeout / 3);
        }
        let offering = can_offer && (fair || local.is_some());
        if !offering {
            woken = waiter.wait(max).await;
            continue;
        }
        let until = Instant::now() + max;
        loop {
            let rx = handover.get_or_insert_with(|| {
                let (offer, rx) = Offer::new(call.holder.clone(), call.lease.as_millis() as u64);
                offers.post(&call.name, offer);
                rx
            });
            let left = until.saturating_duration_since(Instant::now());
            let answer = tokio::select! {
                w = waiter.wait(left) => {
                    woken = w;
                    break;
                }
                r = rx => r.ok(),
            };
            // Read: from here on `accept` settles it, not the drop guard.
            *handover = None;
            let handed = accept(inner, call, answer, deadline).await?;
            if let Some(started) = handed {
                // The hand-over script took us off the queue.
                *queued = false;
                return Ok(Some(handed_over(inner, call, started)));
            }
            // Declined. A fair releaser handed the lock to the queue head, or woke it:
            // not us, so offer again and go on waiting (invariant 7). A plain releaser
            // declined because another client waits: compete.
            if !fair {
                woken = true;
                break;
            }
        }
    }
}

/// What a releaser's answer to our offer comes to: the instant the hand-over script was
/// sent if it gave us the lock. An unknown outcome (the script failed, or the releaser
/// was cancelled) is settled by asking Redis whether we hold the lock ([`holds_it`]),
/// until `deadline` or the unavailable timeout. If that runs out, or this future is
/// dropped meanwhile, the question goes on in the background (offers.rs invariant 4)
/// and the error is returned: an attempt made before knowing could count the handed
/// hold twice.
async fn accept(
    inner: &Arc<Inner>,
    call: &Call,
    answer: Option<Answer>,
    deadline: Option<Instant>,
) -> Result<Option<std::time::Instant>> {
    let started = match answer {
        None => return Ok(None),
        Some(Answer::Granted(started)) => return Ok(Some(started)),
        Some(Answer::Unknown(started)) => started,
    };
    let fair = call.kind == Kind::Fair;
    let unsettled = scopeguard::guard((), |()| {
        settle_in_background(inner, call, fair, Unsettled::Unknown);
    });
    let until = deadline.unwrap_or_else(|| Instant::now() + inner.config.unavailable_after());
    let held = holds_it(inner, &call.name, &call.holder, until).await?;
    scopeguard::ScopeGuard::into_inner(unsettled);
    Ok(held.then_some(started))
}

/// A hand-over whose outcome a waiter that left could not learn.
pub(crate) enum Unsettled {
    /// The taken offer's receiver: the releaser's answer is still to come.
    Offer(oneshot::Receiver<Answer>),
    /// The releaser answered "unknown".
    Unknown,
}

/// Settles an abandoned hand-over in the background (offers.rs invariant 4): waits for
/// the releaser's answer, asks Redis if it is unknown, and releases the lock if it was
/// handed over. The holder's next acquisition of the lock waits until this is done.
fn settle_in_background(inner: &Arc<Inner>, call: &Call, fair: bool, unsettled: Unsettled) {
    let settling = inner.offers(fair).settling(&call.name, &call.holder);
    let (inner2, name, holder) = (inner.clone(), call.name.clone(), call.holder.clone());
    let lease_ms = call.lease.as_millis() as u64;
    inner.cleanups.spawn(async move {
        let _settling = settling;
        let inner = inner2;
        // Every taken offer is answered within one script call (Taken, offers.rs).
        let answer = match unsettled {
            Unsettled::Offer(rx) => rx.await.ok(),
            Unsettled::Unknown => Some(Answer::Unknown(std::time::Instant::now())),
        };
        let until = Instant::now() + inner.config.unavailable_after();
        let held = match answer {
            None => false,
            Some(Answer::Granted(_)) => true,
            Some(Answer::Unknown(_)) => holds_it(&inner, &name, &holder, until)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(lock = %name, error = %e, "could not learn whether a hand-over happened; its lease bounds it");
                    false
                }),
        };
        if held {
            let released = release_on(&inner, &name, &holder, lease_ms, fair, None, true).await;
            if let Err(e) = released {
                tracing::warn!(lock = %name, error = %e, "releasing an unwanted hand-over failed");
            }
        }
    });
}

/// Whether `holder` holds `name` on the single master, asked on the lock connection so
/// the answer comes after every lock script sent before (a hand-over included). Asked
/// again while Redis does not answer, until `until`.
async fn holds_it(
    inner: &Inner,
    name: &Arc<str>,
    holder: &Arc<str>,
    until: Instant,
) -> Result<bool> {
    loop {
        let (n, h) = (name.clone(), holder.clone());
        let held: Result<Option<i64>> = inner.masters[0]
            .run(|mut c| async move {
                redis::cmd("HGET")
                    .arg(&*n)
                    .arg(&*h)
                    .query_async(&mut c)
                    .await
            })
            .await;
        match held {
            Ok(count) => return Ok(count.is_some_and(|n| n >= 1)),
            Err(e) if Instant::now() >= until => return Err(e),
            Err(_) => {
                let pause = jitter(inner.config.retry_jitter).max(Duration::from_millis(10));
                tokio::time::sleep(pause.min(until.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    }
}

/// The grant of a lock handed over by a local releaser at `started`.
fn handed_over(inner: &Inner, call: &Call, started: std::time::Instant) -> Grant {
    Grant {
        validity: inner
            .validity_of(call.lease)
            .saturating_sub(started.elapsed()),
        token: None,
        fresh: true,
        started,
        everywhere: true,
    }
}

/// Subscribes to the channel that wakes this call's waiter and waits until a majority
/// confirmed it, at most until `until` and at most the connect timeout.
async fn subscribe(inner: &Inner, call: &Call, until: Instant) -> Subscription {
    let channel = if call.kind == Kind::Fair {
        names::waiter_channel(&call.name, &call.holder)
    } else {
        names::channel(&call.name)
    };
    let mut s = inner.pubsub.subscribe(channel);
    let bound = until.saturating_duration_since(Instant::now());
    s.ready(bound.min(inner.config.connect_timeout)).await;
    s
}

/// Removes a fair waiter from the queue on every master (best effort: a master that
/// misses it evicts the entry after the stale timeout).
pub(crate) async fn leave_queue(inner: &Inner, name: &str, holder: &str) {
    let results = fan_out(&inner.masters, |m| scripts::fair_cancel(m, name, holder)).await;
    for e in results.into_iter().filter_map(Result::err) {
        tracing::debug!(lock = name, error = %e, "leaving the fair queue failed");
    }
}
