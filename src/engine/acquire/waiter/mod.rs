//! The wait for a lock: [`Waiter`], a state machine whose states are [`State`]. Each
//! turn it **attempts** (or takes the local-hold shortcut), and on a refusal
//! **subscribes** (once), then **waits** for the unlock message, a local hand-over or
//! the TTL bound, or **backs off** after a split vote or an outage, and goes round
//! again; it ends granted, out of time (**gives up**), or with an error. What its
//! attempts may have left on the server is its [`Trace`]; the channels that wake it
//! are in listen.rs, what it does with a hand-over in handed.rs.
//!
//! ```text
//!             ┌──────────── woken / TTL bound ─────────────┐
//!             ▼                                            │
//!  ──► Attempting ──refused, not listening──► Subscribing ─┤ (attempt at once)
//!        │  │  └──refused, split/outage──► BackingOff ─────┤
//!        │  └─────refused, listening─────► Waiting ────────┘
//!        │                                    └─ offer answered ─► Granted
//!        ├── granted / handed ──► Granted
//!        └── out of time / once ──► GivingUp
//! ```
//!
//! Invariants:
//! 1. The subscription exists, confirmed by a majority of masters, before the attempt
//!    that precedes a wait for a message; the wake counter is marked seen before every
//!    attempt. (In an outage the waiter retries on a timer without waiting for the
//!    confirmation; an attempt sent unconfirmed is followed by the confirmation and
//!    another attempt, never by a wait, even if the confirmation came while it was in
//!    flight: a release between the attempt and the confirmation went unheard, and on
//!    a live connection no reconnect wakes the waiter, transport/pubsub.rs invariant 3.)
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
//! 9. Readers of a read-write lock pass no gate and post no offers (readers share; a
//!    gate would serialise them). A writer that prefers writers "queues" like a fair
//!    waiter: its intent (kinds/rw_layout.rs) is refreshed every stale_timeout/3 while it waits and
//!    removed however the wait ends (invariants 2, 4, 5 apply to it as to the queue).
//! 10. Hand-over across clients (lua/pass_on.lua, tickets.rs): a gated waiter of a
//!     plain lock on a single master registers in the lock's waiter registry with every
//!     refused attempt, under a ticket of its own, and listens on the shared channel,
//!     its client's wake channel and the marker. A release gives the lock to the
//!     longest-registered live waiter and tells its client; the waiter takes it without
//!     a round trip (tickets.rs invariant 3), or claims it with its next attempt. Its
//!     first attempt is made subscribed when those channels are confirmed already
//!     (lingering from an earlier wait), so a busy lock costs one refused attempt, not
//!     two. However the wait ends without a grant that took the ticket out (cancelled,
//!     out of time, an error), it leaves with lua/unwait.lua, which releases a lock
//!     handed to it meanwhile and passes a free lock on (in the background when
//!     dropped).
//! 11. The caller's deadline is end to end ([`Waiter::answer_by`]): a request in
//!     flight is abandoned at it, and so is the undo of a refused attempt, the wait for
//!     a subscription's confirmation, a local releaser's answer and leaving the queue
//!     or the registry, each then finished in the background as if the call had been
//!     dropped. Two exceptions keep a healthy master's answer: a call may take
//!     [`first_floor`] for its first attempt, however short its wait, and so may the
//!     last attempt, made at the deadline, while the masters answer: one request's
//!     bound ([`Master::bound`](crate::engine::masters::master::Master::bound)) for a
//!     single try, [`WAIT_SLACK`] at most for a wait that was given. An unbounded
//!     `lock()` in an outage is bounded the same way by the unavailable timeout,
//!     counted from the first attempt that met the outage. So a call returns within
//!     its wait (or the unavailable timeout) plus that floor, whatever the masters do. A call that ends
//!     in an outage returns the outage's cause, not the timeout of the request its end
//!     cut ([`Waiter::cause_kept`]).

mod handed;
mod listen;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::engine::acquire::attempt::{attempt, jitter, Grant, Outcome, Request};
use crate::engine::acquire::tickets::Ticket;
use crate::engine::holding::offers::Answer;
use crate::engine::kinds::{Ask, Book, Protocol};
use crate::engine::masters::clock::until;
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::{Engine, WAIT_SLACK};
use crate::error::{Error, Result};
use crate::telemetry;
use handed::{settle_in_background, unwait, Unsettled};
use listen::Listening;

pub(crate) use handed::{leave_queue, received};

/// Parameters of one `lock`/`try_lock` call (kinds/call.rs).
pub(crate) use crate::engine::kinds::call::Call;

pub(crate) use crate::engine::masters::clock::{deadline_after, later};

/// What the call's kind (its protocol, kinds/) and the deployment make of the wait,
/// fixed for the call.
#[derive(Clone, Copy)]
struct Plan {
    kind: &'static dyn Protocol,
    ask: Ask,
    /// Its waiters post fair offers (one per task; the queue head is handed the lock).
    fair: bool,
    /// Attempts queue us (a fair waiter, or a writer's intent): refresh while waiting,
    /// leave when done (invariants 4, 5, 9).
    queues: bool,
    /// Invariant 7: a local releaser may hand us the lock (single master).
    can_offer: bool,
    /// Invariants 8, 9: the waiter passes the local gate (unless re-entrant or once).
    gated: bool,
}

impl Plan {
    fn of(engine: &Engine, call: &Call) -> Plan {
        let kind = call.kind.protocol();
        let policy = kind.policy();
        let ask = ask(engine, call.wait == Some(Duration::ZERO), call.intent);
        Plan {
            kind,
            ask,
            fair: policy.offers == Some(Book::Fair),
            queues: policy.queues(&ask),
            can_offer: policy.offers.is_some() && !ask.redlock,
            gated: policy.gated(ask.redlock),
        }
    }
}

/// What an acquisition of this engine asks for (kinds::Ask).
pub(crate) fn ask(engine: &Engine, once: bool, intent: bool) -> Ask {
    Ask {
        once,
        intent,
        redlock: engine.masters.len() > 1,
        stale_ms: engine.settings.fair_stale_timeout.as_millis() as u64,
        wait_ms: engine.settings.fair_wait_time.as_millis() as u64,
    }
}

/// Acquires or gives up; `Ok(None)` when the wait ran out under contention.
pub(crate) async fn acquire(engine: &Arc<Engine>, call: &Call) -> Result<Option<Grant>> {
    // A wait too long to represent is no wait limit at all.
    let deadline = call.wait.and_then(deadline_after);
    let reentrant = engine.holds.get(&call.name, &call.holder).is_some();
    let plan = Plan::of(engine, call);
    // An abandoned hand-over to this holder, or the undo of its attempt that ran out
    // of time, is settled first (offers.rs invariant 4), within the call's first
    // request's bound at least (invariant 11): not done by then, the masters are not
    // answering, and that is the error.
    let started = Instant::now();
    let settled = engine.offers(plan.fair).settled(&call.name, &call.holder);
    let floor = first_floor(engine, call.wait);
    let by = match deadline {
        Some(d) => started.checked_add(floor).map(|f| d.max(f)),
        None => started.checked_add(engine.settings.unavailable_after.max(floor)),
    };
    if until(by, settled).await.is_none() {
        return Err(timed_out(engine, started));
    }
    // Local waiters line up in the gate (see gate.rs).
    let _pass = if reentrant || plan.ask.once || !plan.gated {
        None
    } else {
        match until(deadline, engine.gates.enter(&call.name)).await {
            Some(pass) => Some(pass),
            None => return Ok(None),
        }
    };
    // Invariant 10: only a gated waiter of a registering kind on one master registers.
    let ticket = (plan.kind.policy().registers && !plan.ask.redlock && _pass.is_some())
        .then(|| engine.tickets.issue(&call.holder, call.lease));
    let req = Request {
        name: call.name.clone(),
        holder: call.holder.clone(),
        lease: call.lease,
        kind: call.kind,
        ask: plan.ask,
        reentrant: reentrant.into(),
        waiting: ticket.as_ref().map(|t| Waiting {
            ticket: t.id().clone(),
            first: true,
        }),
    };
    let waiter = Waiter {
        engine,
        call,
        req,
        deadline,
        plan,
        listening: None,
        ticket,
        trace: Trace::Clean,
        unavailable_since: None,
        outage: None,
        offer: None,
    };
    telemetry::waiting(1);
    let _counted = scopeguard::guard((), |()| telemetry::waiting(-1));
    // Boxed: keeps the future type shallow enough for callers' own async fns (rustc's
    // layout queries overflow on deeply nested futures). Boxed in a statement of its
    // own: a temporary of the awaiting statement would keep a copy of the unboxed
    // future in this one's state, and every caller would move it.
    let run = Box::pin(waiter.run());
    run.await
}

/// How long past its deadline (or, for an unbounded wait, its unavailable timeout) a
/// call's request may still be answered (invariant 11): one request's bound for a
/// single try (`try_lock(0)`) and an unbounded `lock()`, so that a healthy master's
/// answer is kept however late; for a wait that was given, [`WAIT_SLACK`] at most, so
/// that `try_lock(w)` returns by `w` and that slack when a master hangs.
pub(crate) fn first_floor(engine: &Engine, wait: Option<Duration>) -> Duration {
    let bound = engine.request_bound();
    match wait {
        Some(w) if !w.is_zero() => bound.min(WAIT_SLACK),
        _ => bound,
    }
}

/// The error of a call whose request (or its holder's earlier hand-over or undo) was
/// still unanswered at the end of its bound: every master's timeout since `started`.
pub(crate) fn timed_out(engine: &Engine, started: Instant) -> Error {
    let timeout = |m: &crate::engine::masters::master::Master| Error::Timeout {
        addr: m.addr().to_string(),
        after: Duration::from_millis(started.elapsed().as_millis() as u64),
    };
    match &engine.masters[..] {
        [one] => timeout(one),
        many => {
            let addrs: Vec<&str> = many.iter().map(|m| m.addr()).collect();
            let results = many.iter().map(|m| Some(Err::<(), _>(timeout(m))));
            crate::engine::masters::quorum::no_quorum(0, engine.quorum, &addrs, results)
        }
    }
}

/// Where the wait is. Each turn of [`Waiter::run`] performs one state's transition,
/// which names the next state.
enum State {
    /// Ask Redis (or, invariant 6, take the local-hold shortcut) — [`Waiter::attempt`].
    /// `woken`: the last wait ended with a message, not the TTL bound.
    Attempting { woken: bool },
    /// Refused and not listening yet: subscribe, confirmed by a majority, then attempt
    /// at once (invariant 1) — [`Waiter::subscribe`].
    Subscribing,
    /// A split vote or an outage: pause, then attempt (invariant 3) —
    /// [`Waiter::back_off`].
    BackingOff(Duration),
    /// Refused and listening: sleep until a message, a hand-over or `retry_in`
    /// (invariant 2); `local`: another task of this client holds the lock
    /// (invariants 6, 7) — [`Waiter::wait`].
    Waiting { retry_in: Duration, local: bool },
    /// Out of time, or a single try: leave what we joined, and return the outage's
    /// error if any — [`Waiter::give_up`].
    GivingUp(Option<Error>),
    /// The end: granted (or a hand-over taken).
    Granted(Grant),
}

/// What our attempts may have left on the server, for the end of the wait (or the
/// drop) to remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trace {
    /// Nothing: no attempt yet, or a grant or hand-over took it away.
    Clean,
    /// Invariant 10: in the waiter registry under our ticket.
    Registered,
    /// Invariant 10: registered, and a hand-over arrived too late to be taken as is:
    /// the next attempt asks Redis (and claims it), whatever the local-hold shortcut
    /// says.
    Claiming,
    /// Invariants 4, 5, 9: in a fair queue (or a writer's intent) on some master.
    Queued,
}

/// One `lock`/`try_lock` call waiting for its lock.
///
/// Cancel safety (invariant 4): dropping the waiter at any await leaves nothing behind.
/// Its [`Drop`] withdraws a posted offer (or settles a taken one in the background,
/// offers.rs invariant 4), leaves the waiter registry or the fair queue in the
/// background per its [`Trace`]; the subscriptions and the gate pass are dropped with
/// it.
struct Waiter<'a> {
    engine: &'a Arc<Engine>,
    call: &'a Call,
    req: Request,
    deadline: Option<Instant>,
    plan: Plan,
    /// The channels that wake us, once subscribed (invariants 1, 10).
    listening: Option<Listening>,
    /// Invariant 10: our ticket, while we may be handed the lock.
    ticket: Option<Ticket<'a>>,
    trace: Trace,
    /// When the first attempt that met the current outage began (invariant 11).
    unavailable_since: Option<Instant>,
    /// The current outage's last error: what the call returns if it ends in it.
    outage: Option<Error>,
    /// The receiver of our posted offer, while one is posted or taken and unanswered.
    offer: Option<oneshot::Receiver<Answer>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let (engine, call) = (self.engine, self.call);
        // The offer: withdrawn; or a releaser took it and has not answered (or we did
        // not read the answer): settled in the background (offers.rs invariant 4).
        if !engine
            .offers(self.plan.fair)
            .withdraw(&call.name, &call.holder)
            && let Some(rx) = self.offer.take()
        {
            settle_in_background(engine, call, Unsettled::Offer(rx));
        }
        let cleanups = engine.cleanups.clone();
        let (engine, name) = (engine.clone(), call.name.clone());
        match self.trace {
            Trace::Clean => {}
            // Invariant 10: leave the waiter registry, passing a hand-over on.
            Trace::Registered | Trace::Claiming => {
                if let Some(id) = self.req.waiting.as_ref().map(|w| w.ticket.clone()) {
                    cleanups.spawn(async move { unwait(&engine, &name, &id).await });
                }
            }
            // Invariant 4: a fair waiter leaves the queue however the wait ends.
            Trace::Queued => {
                let (holder, kind) = (call.holder.clone(), call.kind);
                cleanups.spawn(async move { leave_queue(&engine, &name, &holder, kind).await });
            }
        }
    }
}

impl Waiter<'_> {
    /// The state machine: attempt → (subscribe | back off | wait) → attempt …
    ///
    /// The states after a refusal run boxed: an uncontended call only attempts, and
    /// its future (moved at each caller's `.await`) stays the size of an attempt.
    async fn run(mut self) -> Result<Option<Grant>> {
        self.subscribe_if_ready();
        let mut state = State::Attempting { woken: false };
        loop {
            state = match state {
                State::Attempting { woken } => self.attempt(woken).await?,
                State::Subscribing => {
                    let subscribed = Box::pin(self.subscribe());
                    subscribed.await?
                }
                State::BackingOff(pause) => {
                    let paused = Box::pin(self.back_off(pause));
                    paused.await
                }
                State::Waiting { retry_in, local } => {
                    let waited = Box::pin(self.wait(retry_in, local));
                    waited.await?
                }
                State::GivingUp(error) => {
                    let given_up = Box::pin(self.give_up(error));
                    return given_up.await;
                }
                State::Granted(grant) => return Ok(Some(grant)),
            };
        }
    }

    /// Attempting → Granted | Subscribing | BackingOff | Waiting | GivingUp.
    /// Invariant 1: a message from now on wakes the wait that may follow. Re-entry is
    /// decided per attempt: an earlier call of this task may have taken the lock while
    /// this one waited in the gate.
    async fn attempt(&mut self, woken: bool) -> Result<State> {
        // Confirmed before the attempt is sent, or its refusal is no reason to sleep: a
        // confirmation that lands while it is in flight may follow a release nobody
        // heard (invariant 1).
        let confirmed = self.listening.as_mut().is_some_and(|l| {
            l.mark_seen();
            l.is_confirmed()
        });
        if let Some(grant) = self.handed() {
            return Ok(State::Granted(grant));
        }
        let reentrant = (self.engine.holds)
            .get(&self.call.name, &self.call.holder)
            .is_some();
        (self.req.reentrant).store(reentrant, std::sync::atomic::Ordering::Relaxed);
        let local = self.local_hold(reentrant, woken);
        if local.is_some() && self.listening.is_none() {
            return Ok(State::Subscribing);
        }
        let started = Instant::now();
        let end = self.answer_by(started);
        if end.is_some_and(|end| started >= end) {
            // Invariant 11: in an outage, with no time left.
            return Ok(State::GivingUp(self.outage.take()));
        }
        let outcome = match local {
            Some(left) => Outcome::Busy {
                retry_in: left,
                split: false,
            },
            None => {
                if self.offer.is_some() {
                    // Invariant 7 (only a waiter that posted an offer): boxed, see run.
                    let withdrawn = Box::pin(self.withdraw_offer(end));
                    if let Some(grant) = withdrawn.await? {
                        return Ok(State::Granted(grant));
                    }
                }
                self.attempting();
                let outcome = attempt(self.engine, &self.req, end).await?;
                self.cause_kept(outcome, end)
            }
        };
        let refused = match self.judge(outcome, started)? {
            Ok(grant) => return Ok(State::Granted(grant)),
            Err(refused) => refused,
        };
        let now = Instant::now();
        let over = |at: Option<Instant>| at.is_some_and(|at| now >= at);
        Ok(if self.plan.ask.once || over(self.deadline) || over(end) {
            State::GivingUp(refused.error)
        } else if self.listening.is_none() {
            State::Subscribing
        } else if let Some(pause) = refused.backoff {
            State::BackingOff(pause)
        } else if !confirmed {
            // Subscribed in an outage, unconfirmed when the attempt went: confirmed,
            // then attempted again, before any wait.
            State::Subscribing
        } else {
            State::Waiting {
                retry_in: refused.retry_in,
                local: local.is_some(),
            }
        })
    }

    /// Invariant 11: an attempt in an outage cut at its end (the caller's deadline)
    /// had no answer, so it says nothing new: the outage's error so far (a cluster that
    /// is down, an ACL refusal) stays the cause the call returns, not a timeout of the
    /// cut. A master that stops answering mid-outage still times out by its own bound
    /// before the end, and that timeout is kept.
    fn cause_kept(&self, outcome: Outcome, end: Option<Instant>) -> Outcome {
        let cut = end.is_some_and(|end| Instant::now() >= end);
        match (outcome, &self.outage) {
            (Outcome::Unavailable(Error::Timeout { .. }), Some(cause)) if cut => {
                Outcome::Unavailable(cause.clone())
            }
            (outcome, _) => outcome,
        }
    }

    /// What an attempt about to be sent may leave on the server: a cancelled fair
    /// attempt may already have queued us (invariant 4); the script may register our
    /// ticket (or remove it, granted; invariant 10).
    fn attempting(&mut self) {
        if self.plan.queues {
            self.trace = Trace::Queued;
        }
        if let Some(ticket) = self.ticket.as_mut() {
            if let Some(w) = self.req.waiting.as_mut() {
                w.first = ticket.since().is_none();
            }
            ticket.attempting();
            self.trace = Trace::Registered;
        }
    }

    /// Invariant 6, the local-hold shortcut: while another task of this client holds a
    /// non-fair lock, its release wakes us directly and an attempt would only be
    /// refused. Returns how long that hold's lease has left. A waiter woken by a
    /// message (a force-unlock by another client, say), or with a hand-over to claim,
    /// asks Redis instead.
    fn local_hold(&self, reentrant: bool, woken: bool) -> Option<Duration> {
        let claiming = self.trace == Trace::Claiming;
        if !self.plan.kind.policy().local_shortcut || reentrant || woken || claiming {
            return None;
        }
        (self.engine.holds)
            .held_locally_for(&self.call.name, &self.call.holder)
            .filter(|left| !left.is_zero())
    }

    /// Judges an attempt begun at `started`: the grant, or how to go on. An outage that
    /// outlasts the unavailable timeout of an unbounded `lock()` is returned as the
    /// error.
    fn judge(&mut self, outcome: Outcome, started: Instant) -> Result<Result<Grant, Refused>> {
        let settings = &self.engine.settings;
        Ok(match outcome {
            Outcome::Granted(g) => {
                // Invariant 10: the acquire script removed us from the registry.
                // Invariant 5: a master that refused us may still queue us; the drop
                // leaves those queues in the background.
                let queued = self.plan.queues && !g.everywhere;
                self.trace = if queued { Trace::Queued } else { Trace::Clean };
                Ok(g)
            }
            Outcome::Busy { retry_in, split } => {
                (self.unavailable_since, self.outage) = (None, None);
                Err(Refused {
                    retry_in,
                    backoff: split.then(|| jitter(settings.retry_jitter)),
                    error: None,
                })
            }
            Outcome::Unavailable(e) => {
                let since = *self.unavailable_since.get_or_insert(started);
                if self.deadline.is_none() && since.elapsed() >= settings.unavailable_after {
                    return Err(e);
                }
                self.outage = Some(e.clone());
                let pause = jitter(settings.retry_jitter).max(Duration::from_millis(10));
                Err(Refused {
                    retry_in: pause,
                    backoff: Some(pause),
                    error: Some(e),
                })
            }
        })
    }

    /// GivingUp → the end: leave the fair queue or the waiter registry now, return the
    /// outage's error if there was one, else "not acquired". A hand-over that came in
    /// meanwhile is ours (leaving would only pass it on).
    async fn give_up(&mut self, error: Option<Error>) -> Result<Option<Grant>> {
        if let Some(grant) = self.handed() {
            return Ok(Some(grant));
        }
        let (engine, call) = (self.engine, self.call);
        // Invariant 11: what is not left by then is left in the background (the drop).
        let end = self.answer_by(Instant::now());
        let left = match self.trace {
            Trace::Clean => Some(()),
            Trace::Queued => {
                until(
                    end,
                    leave_queue(engine, &call.name, &call.holder, call.kind),
                )
                .await
            }
            Trace::Registered | Trace::Claiming => {
                match self.req.waiting.as_ref().map(|w| w.ticket.clone()) {
                    Some(id) => until(end, unwait(engine, &call.name, &id)).await,
                    None => Some(()),
                }
            }
        };
        if left.is_some() {
            self.trace = Trace::Clean;
        }
        error.map_or(Ok(None), Err)
    }

    /// BackingOff → Attempting. Invariant 3: a split vote or an outage backs off for
    /// real; our own clean-up release published "0", which must not cut the pause
    /// short.
    async fn back_off(&mut self, pause: Duration) -> State {
        let now = Instant::now();
        let end = (self.answer_by(now)).map_or(pause, |end| end.saturating_duration_since(now));
        tokio::time::sleep(pause.min(self.time_left()).min(end)).await;
        State::Attempting { woken: false }
    }

    /// Invariant 11: when an attempt begun at `started` is abandoned. With a deadline:
    /// at it, but not before one request's bound after the outage began or, while the
    /// masters answer, after `started` (the last attempt, at the deadline, is still
    /// answered). Without one: the unavailable timeout (at least that bound) after the
    /// outage began, or after `started` (which would begin it).
    fn answer_by(&self, started: Instant) -> Option<Instant> {
        let engine = self.engine;
        let floor = first_floor(engine, self.call.wait);
        let since = self.unavailable_since.unwrap_or(started);
        match self.deadline {
            Some(d) => since.checked_add(floor).map(|f| d.max(f)),
            None => since.checked_add(engine.settings.unavailable_after.max(floor)),
        }
    }

    /// Time until the caller's deadline (`Duration::MAX` without one).
    fn time_left(&self) -> Duration {
        self.deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        })
    }
}

/// What one attempt (or the local-hold shortcut) came to, for the next step.
struct Refused {
    /// How long to wait for a message at most (the TTL bound).
    retry_in: Duration,
    /// Back off this long instead of waiting (a split vote or an outage).
    backoff: Option<Duration>,
    /// The outage's error, returned if the wait runs out.
    error: Option<Error>,
}
