//! What a waiter does with a hand-over: one from another client's release (its
//! ticket, invariant 10), or a local releaser's answer to its offer (invariant 7,
//! offers.rs), settled in the background when the waiter leaves first (offers.rs
//! invariant 4); and leaving the fair queue (invariants 4, 5).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::acquire::attempt::{jitter, Grant};
use crate::engine::acquire::waiter::{later, Call, Trace, Waiter};
use crate::engine::holding::offers::Answer;
use crate::engine::holding::release::release_on;
use crate::engine::kinds::{self, fair_offers};
use crate::engine::masters::clock::until;
use crate::engine::masters::quorum::fan_out;
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::telemetry;
use crate::transport::Lane;

impl Waiter<'_> {
    /// Invariant 10: a release handed us the lock. Taken as is while fresh enough
    /// (tickets.rs invariant 3): the grant dates from our first attempt, before any
    /// hand-over to us, so its validity ends no later than the lease on the server.
    /// Otherwise, or when acquisitions must reach replicas first (the release script's
    /// write was not waited for), `claim` is set and the next attempt claims it
    /// (acquire.lua), synced as every acquisition.
    pub(super) fn handed(&mut self) -> Option<Grant> {
        let ticket = self.ticket.as_mut()?;
        if !ticket.take_handed() {
            return None;
        }
        let validity = self.engine.validity_of(self.call.lease);
        // Replicas that must have the grant: only then is a handed lock claimed again
        // (a master without replicas hands over without a round trip).
        let synced = self.engine.masters().first().link().grants_need_replicas();
        let since = (ticket.since()).filter(|s| !synced && s.elapsed() <= validity / 3);
        let Some(since) = since else {
            self.trace = Trace::Claiming;
            return None;
        };
        // The hand-over took the ticket out of the registry.
        self.trace = Trace::Clean;
        self.ticket = None;
        telemetry::woken(self.call.kind.label());
        Some(Grant {
            validity: validity.saturating_sub(since.elapsed()),
            token: None,
            fresh: true,
            started: since,
            everywhere: true,
        })
    }

    /// Invariant 7: before asking Redis ourselves, withdraw our offer; if a releaser
    /// took it, its answer comes within one script call (offers.rs invariant 2) and
    /// may be the lock. If we are dropped meanwhile, the drop settles it; so it does
    /// when `end` comes first (invariant 11: the call then ends with a timeout).
    pub(super) async fn withdraw_offer(&mut self, end: Option<Instant>) -> Result<Option<Grant>> {
        let Some(rx) = self.offer.as_mut() else {
            return Ok(None);
        };
        let offers = self.engine.offers(self.plan.fair);
        if offers.withdraw(&self.call.name, &self.call.holder) {
            self.offer = None;
            return Ok(None);
        }
        let asked = Instant::now();
        let answer = until(end, rx).await.ok_or_else(|| self.late(asked))?.ok();
        self.offer = None;
        self.accept(answer).await
    }

    /// The error of a question about a hand-over asked at `asked` and still unanswered
    /// at the end of the call (invariant 11).
    fn late(&self, asked: Instant) -> Error {
        Error::Timeout {
            addr: self.engine.masters().first().addr().to_string(),
            after: Duration::from_millis(asked.elapsed().as_millis() as u64),
        }
    }

    /// What a releaser's answer to our offer comes to: the grant if it gave us the
    /// lock. An unknown outcome (the script failed, or the releaser was cancelled) is
    /// settled by asking Redis whether we hold the lock ([`holds_it`]), until the end
    /// of the call (invariant 11). If that runs out, or this future is dropped
    /// meanwhile, the question goes on in the background (offers.rs invariant 4) and
    /// the error is returned: an attempt made before knowing could count the handed
    /// hold twice.
    pub(super) async fn accept(&mut self, answer: Option<Answer>) -> Result<Option<Grant>> {
        let (engine, call) = (self.engine, self.call);
        let started = match answer {
            None => return Ok(None),
            Some(Answer::Granted(started)) => started,
            Some(Answer::Unknown(started)) => {
                let unsettled = scopeguard::guard((), |()| {
                    settle_in_background(engine, call, Unsettled::Unknown);
                });
                let asked = Instant::now();
                let end = self.answer_by(asked);
                let until_at = end.unwrap_or_else(|| later(engine.settings().unavailable_after));
                let held = holds_it(engine, &call.name, &call.holder, until_at);
                let held = until(end, held).await.ok_or_else(|| self.late(asked))??;
                scopeguard::ScopeGuard::into_inner(unsettled);
                if !held {
                    return Ok(None);
                }
                started
            }
        };
        // The hand-over script took us off the fair queue, and out of the waiter
        // registry (release.lua's receiver ticket).
        self.trace = Trace::Clean;
        telemetry::woken(call.kind.label());
        Ok(Some(Grant {
            validity: (engine.validity_of(call.lease)).saturating_sub(started.elapsed()),
            token: None,
            fresh: true,
            started,
            everywhere: true,
        }))
    }
}

/// A hand-over whose outcome a waiter that left could not learn.
pub(super) enum Unsettled {
    /// The taken offer's receiver: the releaser's answer is still to come.
    Offer(oneshot::Receiver<Answer>),
    /// The releaser answered "unknown".
    Unknown,
}

/// Settles an abandoned hand-over in the background (offers.rs invariant 4): waits for
/// the releaser's answer, asks Redis if it is unknown, and releases the lock if it was
/// handed over. The holder's next acquisition of the lock waits until this is done.
pub(super) fn settle_in_background(engine: &Arc<Engine>, call: &Call, unsettled: Unsettled) {
    let (kind, fair) = (call.kind, fair_offers(call.kind));
    let settling = engine.offers(fair).settling(&call.name, &call.holder);
    let (engine, name, holder) = (engine.clone(), call.name.clone(), call.holder.clone());
    let lease_ms = call.lease.as_millis() as u64;
    let cleanups = engine.cleanups().clone();
    cleanups.spawn(async move {
        let _settling = settling;
        // Every taken offer is answered within one script call (Taken, offers.rs).
        let answer = match unsettled {
            Unsettled::Offer(rx) => rx.await.ok(),
            Unsettled::Unknown => Some(Answer::Unknown(std::time::Instant::now())),
        };
        let until = later(engine.settings().unavailable_after);
        let held = match answer {
            None => false,
            Some(Answer::Granted(_)) => true,
            Some(Answer::Unknown(_)) => holds_it(&engine, &name, &holder, until)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(lock = %name, error = %e, "could not learn whether a hand-over happened; its lease bounds it");
                    false
                }),
        };
        if held {
            let released = release_on(&engine, &name, &holder, lease_ms, kind, None, true).await;
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
    engine: &Engine,
    name: &Arc<str>,
    holder: &Arc<str>,
    until: Instant,
) -> Result<bool> {
    let master = engine.masters().first();
    let mut hget = redis::cmd("HGET");
    hget.arg(&**name).arg(&**holder);
    loop {
        let held: Result<Option<i64>> = master.cmd(Lane::Lock, master.timeout(), &hget).await;
        match held {
            Ok(count) => return Ok(count.is_some_and(|n| n >= 1)),
            Err(e) if Instant::now() >= until => return Err(e),
            Err(_) => {
                let pause = jitter(engine.settings().retry_jitter).max(Duration::from_millis(10));
                tokio::time::sleep(pause.min(until.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    }
}

/// Removes a fair waiter from the queue, or a writer's intent (`kind` Write), on every
/// master (best effort: on a master that misses it, a fair entry's liveness lapses after
/// the stale timeout and the next fair script evicts it; an intent lapses likewise).
pub(crate) async fn leave_queue(engine: &Engine, name: &str, holder: &str, kind: Kind) {
    let params = crate::engine::acquire::waiter::params(engine, false, true);
    let results = fan_out(engine.masters().all(), |m| async move {
        kinds::leave(m, kind, (name, holder), &params).await
    })
    .await;
    for e in results.into_iter().filter_map(Result::err) {
        tracing::debug!(lock = name, error = %e, "leaving the fair queue failed");
    }
}

/// The pub/sub hub's hook for messages: a hand-over to one of this client's tickets
/// (`"<ticket>|<lock name>"`, the ticket starting with our client id) goes to its wait,
/// or is disowned when the wait is gone (tickets.rs invariant 2). Other messages are
/// ignored.
pub(crate) fn received(engine: &Arc<Engine>, payload: &[u8]) {
    let Some((ticket, name)) = std::str::from_utf8(payload)
        .ok()
        .filter(|p| p.starts_with(engine.holder_prefix()))
        .and_then(|p| p.split_once('|'))
    else {
        return;
    };
    if engine.contenders().tickets().deliver(ticket) {
        return;
    }
    let (name, ticket) = (name.to_string(), ticket.to_string());
    let cleanup = engine.clone();
    engine.cleanups().spawn(async move {
        tracing::debug!(lock = %name, %ticket, "a hand-over for a wait that ended: passed on");
        unwait(&cleanup, &name, &ticket).await;
    });
}

/// `ticket` leaves the waiter registry of `name` (lua/unwait.lua): an unclaimed
/// hand-over to it is disowned, and a free lock is passed on. Best effort: a ticket
/// left behind is removed by the first release that finds nobody listening for it,
/// and a lock handed to it by its lease.
pub(super) async fn unwait(engine: &Engine, name: &str, ticket: &str) {
    if let Err(e) = kinds::plain::unwait(engine.masters().first(), name, ticket).await {
        tracing::debug!(lock = name, error = %e, "leaving the waiter registry failed");
    }
}
