//! The wait for a lock: [`Waiter`], a small state machine. Each turn it **attempts**
//! (or takes the local-hold shortcut), and on a refusal **subscribes** (once), then
//! **waits** for the unlock message, a local hand-over or the TTL bound, or **backs
//! off** after a split vote or an outage, and goes round again; it ends granted, out
//! of time, or with an error.
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
//! 9. Readers of a read-write lock pass no gate and post no offers (readers share; a
//!    gate would serialise them). A writer that prefers writers "queues" like a fair
//!    waiter: its intent (rw.rs) is refreshed every stale_timeout/3 while it waits and
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

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::attempt::{attempt, jitter, Grant, Outcome, Request};
use super::offers::{Answer, Offer};
use super::quorum::fan_out;
use super::release::release_on;
use super::scripts::{self, AcquireMode};
use super::tickets::{unwait, Ticket};
use super::{Engine, Kind};
use crate::error::{Error, Result};
use crate::keys;
use crate::telemetry;
use crate::transport::pubsub::Subscription;
use crate::transport::Lane;

/// Parameters of one `lock`/`try_lock` call (call.rs).
pub(crate) use super::call::Call;

/// `now + d`, or `None` (no deadline) when that is beyond what an `Instant` can hold.
pub(crate) fn deadline_after(d: Duration) -> Option<Instant> {
    Instant::now().checked_add(d)
}

/// `now + d`, saturated thirty years ahead: a bound that never panics, for timings
/// the user may set to `Duration::MAX` (the unavailable timeout).
pub(crate) fn later(d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
    Instant::now() + d.min(FAR)
}

/// Acquires or gives up; `Ok(None)` when the wait ran out under contention.
pub(crate) async fn acquire(engine: &Arc<Engine>, call: &Call) -> Result<Option<Grant>> {
    // A wait too long to represent is no wait limit at all.
    let deadline = call.wait.and_then(deadline_after);
    let reentrant = engine.holds.get(&call.name, &call.holder).is_some();
    let once = call.wait == Some(Duration::ZERO);
    let mode = match call.kind {
        Kind::Plain => AcquireMode::Plain,
        Kind::Fenced => AcquireMode::Fenced {
            redlock: engine.masters.len() > 1,
        },
        Kind::Fair => AcquireMode::Fair {
            join: !once,
            stale_ms: engine.settings.fair_stale_timeout.as_millis() as u64,
            wait_ms: engine.settings.fair_wait_time.as_millis() as u64,
        },
        Kind::Read => AcquireMode::Read,
        Kind::Write => AcquireMode::Write {
            intent_ms: if call.intent && !once {
                engine.settings.fair_stale_timeout.as_millis() as u64
            } else {
                0
            },
        },
    };
    let queues = !once && (call.kind == Kind::Fair || (call.kind == Kind::Write && call.intent));
    // Local waiters line up in the gate (see gate.rs). A fair lock on one master needs
    // no gate (its Redis queue orders every waiter); under Redlock it has one, so only
    // one waiter per client queues on the masters at a time: many waiters of one
    // client queued in different orders on different masters would split the votes
    // round after round (invariant 8).
    // Readers share: no gate (invariant 9).
    let gated = match call.kind {
        Kind::Fair => engine.masters.len() > 1,
        Kind::Read => false,
        _ => true,
    };
    // An abandoned hand-over to this holder is settled first (offers.rs invariant 4).
    let settled = engine
        .offers(call.kind == Kind::Fair)
        .settled(&call.name, &call.holder);
    if until(deadline, settled).await.is_none() {
        return Ok(None);
    }
    let _pass = if reentrant || once || !gated {
        None
    } else {
        match until(deadline, engine.gates.enter(&call.name)).await {
            Some(pass) => Some(pass),
            None => return Ok(None),
        }
    };
    // Invariant 10: only a gated plain waiter on a single master registers.
    let ticket = (call.kind == Kind::Plain && engine.masters.len() == 1 && _pass.is_some())
        .then(|| engine.tickets.issue(&call.holder, call.lease));
    let waiting = ticket.as_ref().map(|t| t.id().clone());
    let waiter = Waiter {
        engine,
        call,
        req: Request {
            name: call.name.clone(),
            holder: call.holder.clone(),
            lease: call.lease,
            mode,
            reentrant: reentrant.into(),
            waiting,
        },
        deadline,
        once,
        fair: call.kind == Kind::Fair,
        queues,
        can_offer: matches!(call.kind, Kind::Plain | Kind::Fair) && engine.masters.len() == 1,
        direct: None,
        sub: None,
        ticket,
        registered: false,
        claim: false,
        unavailable_since: None,
        woken: false,
        queued: false,
        offer: None,
    };
    telemetry::waiting(1);
    let _counted = scopeguard::guard((), |()| telemetry::waiting(-1));
    // Boxed: keeps the future type shallow enough for callers' own async fns (rustc's
    // layout queries overflow on deeply nested futures).
    Box::pin(waiter.run()).await
}

/// Runs `f` until `deadline` (forever if `None`); `None` if the deadline came first.
async fn until<F: std::future::Future>(deadline: Option<Instant>, f: F) -> Option<F::Output> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, f).await.ok(),
        None => Some(f.await),
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

/// One `lock`/`try_lock` call waiting for its lock.
///
/// Cancel safety (invariant 4): dropping the waiter at any await leaves nothing behind.
/// Its [`Drop`] withdraws a posted offer (or settles a taken one in the background,
/// offers.rs invariant 4) and leaves the fair queue in the background if it may have
/// joined it; the subscription and the gate pass are dropped with it.
struct Waiter<'a> {
    engine: &'a Arc<Engine>,
    call: &'a Call,
    req: Request,
    deadline: Option<Instant>,
    /// `try_lock(ZERO)`: one attempt, never queued.
    once: bool,
    fair: bool,
    /// Attempts queue us (a fair waiter, or a writer's intent): refresh while waiting,
    /// leave when done (invariants 4, 5, 9).
    queues: bool,
    /// Invariant 7: a local releaser may hand us the lock (single master, not fenced).
    can_offer: bool,
    /// Invariant 10: the marker and our client's wake channel (hand-overs arrive there,
    /// through the hub's hook to `ticket`), beside `sub`. Declared first, so the marker
    /// goes no later than the shared channel (pass_on.lua invariant 1 then errs
    /// towards waking everyone).
    direct: Option<(Subscription, Subscription)>,
    sub: Option<Subscription>,
    /// Invariant 10: our ticket, while we may be handed the lock.
    ticket: Option<Ticket<'a>>,
    /// Invariant 10: an attempt may have registered us in the waiter registry.
    registered: bool,
    /// Invariant 10: a hand-over arrived too late to be taken as is: the next attempt
    /// asks Redis (and claims it), whatever the local-hold shortcut says.
    claim: bool,
    unavailable_since: Option<Instant>,
    /// The last wait ended with a message (not the TTL bound).
    woken: bool,
    /// A fair attempt may have queued us on some master (invariants 4 and 5).
    queued: bool,
    /// The receiver of our posted offer, while one is posted or taken and unanswered.
    offer: Option<oneshot::Receiver<Answer>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let (engine, call) = (self.engine, self.call);
        // The offer: withdrawn; or a releaser took it and has not answered (or we did
        // not read the answer): settled in the background (offers.rs invariant 4).
        if !engine.offers(self.fair).withdraw(&call.name, &call.holder) {
            if let Some(rx) = self.offer.take() {
                settle_in_background(engine, call, Unsettled::Offer(rx));
            }
        }
        // Invariant 10: leave the waiter registry, passing a hand-over on.
        if let Some(id) = self.req.waiting.clone().filter(|_| self.registered) {
            let (engine, name) = (engine.clone(), call.name.clone());
            let cleanups = engine.cleanups.clone();
            cleanups.spawn(async move { unwait(&engine, &name, &id).await });
        }
        // Invariant 4: a fair waiter leaves the queue however the wait ends.
        if self.queued {
            let (engine, name, holder) = (engine.clone(), call.name.clone(), call.holder.clone());
            let cleanups = engine.cleanups.clone();
            let kind = call.kind;
            cleanups.spawn(async move { leave_queue(&engine, &name, &holder, kind).await });
        }
    }
}

impl Waiter<'_> {
    /// The state machine: attempt → (subscribe | back off | wait) → attempt …
    async fn run(mut self) -> Result<Option<Grant>> {
        self.subscribe_if_ready();
        loop {
            // Invariant 1: a message from now on wakes the wait that may follow.
            if let Some(s) = self.sub.as_mut() {
                s.mark_seen();
            }
            if let Some(grant) = self.handed() {
                return Ok(Some(grant));
            }
            // Re-entry is decided per attempt: an earlier call of this task may have
            // taken the lock while this one waited in the gate.
            let reentrant = (self.engine.holds)
                .get(&self.call.name, &self.call.holder)
                .is_some();
            (self.req.reentrant).store(reentrant, std::sync::atomic::Ordering::Relaxed);
            // A cancelled fair attempt may already have queued us (invariant 4).
            self.queued = self.queues;
            let local = self.local_hold(reentrant).filter(|_| !self.claim);
            if local.is_some() && self.sub.is_none() {
                self.subscribe().await?;
                continue;
            }
            if local.is_none() {
                if let Some(grant) = self.withdraw_offer().await? {
                    return Ok(Some(grant));
                }
            }
            let outcome = match local {
                Some(left) => Outcome::Busy {
                    retry_in: left,
                    split: false,
                },
                None => {
                    // Invariant 10: the script may register us (or remove us, granted).
                    if let Some(ticket) = self.ticket.as_mut() {
                        ticket.attempting();
                        self.registered = true;
                        self.claim = false;
                    }
                    attempt(self.engine, &self.req).await?
                }
            };
            let refused = match self.judge(outcome)? {
                Ok(grant) => return Ok(Some(grant)),
                Err(refused) => refused,
            };
            let now = Instant::now();
            if self.once || self.deadline.is_some_and(|d| now >= d) {
                return self.give_up(refused.error).await;
            }
            if self.sub.is_none() {
                self.subscribe().await?;
                continue;
            }
            if let Some(pause) = refused.backoff {
                self.back_off(pause).await;
                continue;
            }
            if let Some(grant) = self.wait(refused.retry_in, local.is_some()).await? {
                return Ok(Some(grant));
            }
        }
    }

    /// Invariant 6, the local-hold shortcut: while another task of this client holds a
    /// non-fair lock, its release wakes us directly and an attempt would only be
    /// refused. Returns how long that hold's lease has left. A waiter woken by a
    /// message (a force-unlock by another client, say) asks Redis instead.
    fn local_hold(&mut self, reentrant: bool) -> Option<Duration> {
        let woken = std::mem::take(&mut self.woken);
        if self.fair || self.call.kind.is_rw() || reentrant || woken {
            return None;
        }
        (self.engine.holds)
            .held_locally_for(&self.call.name, &self.call.holder)
            .filter(|left| !left.is_zero())
    }

    /// Judges an attempt: the grant, or how to go on. An outage that outlasts the
    /// unavailable timeout of an unbounded `lock()` is returned as the error.
    fn judge(&mut self, outcome: Outcome) -> Result<Result<Grant, Refused>> {
        let settings = &self.engine.settings;
        Ok(match outcome {
            Outcome::Granted(g) => {
                // Invariant 10: the acquire script removed us from the registry.
                self.registered = false;
                // Invariant 5: a master that refused us may still queue us; the drop
                // leaves those queues in the background.
                self.queued = self.queues && !g.everywhere;
                Ok(g)
            }
            Outcome::Busy { retry_in, split } => {
                self.unavailable_since = None;
                Err(Refused {
                    retry_in,
                    backoff: split.then(|| jitter(settings.retry_jitter)),
                    error: None,
                })
            }
            Outcome::Unavailable(e) => {
                let since = *self.unavailable_since.get_or_insert_with(Instant::now);
                if self.deadline.is_none() && since.elapsed() >= settings.unavailable_after {
                    return Err(e);
                }
                let pause = jitter(settings.retry_jitter).max(Duration::from_millis(10));
                Err(Refused {
                    retry_in: pause,
                    backoff: Some(pause),
                    error: Some(e),
                })
            }
        })
    }

    /// Out of time (or a single try): leave the fair queue now, return the outage's
    /// error if there was one, else "not acquired".
    async fn give_up(&mut self, error: Option<Error>) -> Result<Option<Grant>> {
        // A hand-over that came in meanwhile is ours (leaving would only pass it on).
        if let Some(grant) = self.handed() {
            return Ok(Some(grant));
        }
        if std::mem::take(&mut self.queued) {
            leave_queue(
                self.engine,
                &self.call.name,
                &self.call.holder,
                self.call.kind,
            )
            .await;
        }
        if let Some(id) = self.req.waiting.clone().filter(|_| self.registered) {
            self.registered = false;
            unwait(self.engine, &self.call.name, &id).await;
        }
        error.map_or(Ok(None), Err)
    }

    /// Invariant 1: subscribes to the channel that wakes us and waits until a majority
    /// confirmed it (or refused it: ACL, an error) — bounded by the caller's deadline, while no majority answers by
    /// the unavailable timeout (a majority cannot confirm then anyway), and by the
    /// connect timeout. The attempt that follows happens at once.
    async fn subscribe(&mut self) -> Result<()> {
        let engine = self.engine;
        let channel = if self.fair {
            keys::waiter_channel(&self.call.name, &self.call.holder)
        } else {
            self.call.kind.channel(&self.call.name)
        };
        let now = Instant::now();
        let until = (self.deadline)
            .or_else(|| {
                self.unavailable_since
                    .and_then(|t| t.checked_add(engine.settings.unavailable_after))
            })
            .unwrap_or(now + engine.settings.connect_timeout);
        telemetry::contended(self.call.kind.label());
        let mut sub = engine.pubsub.subscribe(channel);
        let mut direct = self.direct_subscriptions();
        let bound = until.saturating_duration_since(now);
        let within = bound.min(engine.settings.connect_timeout);
        let mut ready = sub.ready(within).await;
        if let Some((marker, wake)) = direct.as_mut() {
            if ready.is_ok() {
                ready = wake.ready(within).await;
            }
            if ready.is_ok() {
                ready = marker.ready(within).await;
            }
        }
        if let Err((addr, detail)) = ready {
            // No majority can ever wake us: say why instead of sleeping out the TTL.
            return Err(Error::PermissionDenied { addr, detail });
        }
        self.direct = direct;
        self.sub = Some(sub);
        Ok(())
    }

    /// Invariant 10: a release handed us the lock. Taken as is while fresh enough
    /// (tickets.rs invariant 3): the grant dates from our first attempt, before any
    /// hand-over to us, so its validity ends no later than the lease on the server.
    /// Otherwise, or when acquisitions must reach replicas first (the release script's
    /// write was not waited for), `claim` is set and the next attempt claims it
    /// (acquire.lua), synced as every acquisition.
    fn handed(&mut self) -> Option<Grant> {
        let ticket = self.ticket.as_mut()?;
        if !ticket.take_handed() {
            return None;
        }
        let validity = self.engine.validity_of(self.call.lease);
        // Replicas that must have the grant: only then is a handed lock claimed again
        // (a master without replicas hands over without a round trip).
        let synced = self.engine.masters[0].link().grants_need_replicas();
        let since = (ticket.since()).filter(|s| !synced && s.elapsed() <= validity / 3);
        let Some(since) = since else {
            self.claim = true;
            return None;
        };
        // The hand-over took the ticket out of the registry.
        self.registered = false;
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

    /// Invariant 10: the marker and our client's wake channel (a registering waiter).
    fn direct_subscriptions(&self) -> Option<(Subscription, Subscription)> {
        self.req.waiting.as_ref()?;
        let pubsub = &self.engine.pubsub;
        // Our tickets start with our client id: the wake channel is the client's.
        let client = self.engine.id.to_string();
        let wake = pubsub.subscribe(keys::waiter_channel(&self.call.name, &client));
        let marker = pubsub.subscribe(keys::marker(&self.call.name));
        Some((marker, wake))
    }

    /// Invariant 10: when all three channels are confirmed already (an earlier wait's
    /// linger), subscribes before the first attempt, which then needs no second one.
    fn subscribe_if_ready(&mut self) {
        if self.req.waiting.is_none() || self.once {
            return;
        }
        let (name, pubsub) = (&self.call.name, &self.engine.pubsub);
        let shared = keys::channel(name);
        if !pubsub.is_ready(&shared) || !pubsub.is_ready(&keys::marker(name)) {
            return;
        }
        let sub = pubsub.subscribe(shared);
        let direct = self.direct_subscriptions();
        let confirmed = direct
            .as_ref()
            .is_some_and(|(m, w)| m.is_confirmed() && w.is_confirmed());
        // Unsubscribed meanwhile: the ordinary way (subscribe, then attempt again).
        if confirmed && sub.is_confirmed() {
            telemetry::contended(self.call.kind.label());
            self.direct = direct;
            self.sub = Some(sub);
        }
    }

    /// Invariant 3: a split vote or an outage backs off for real; our own clean-up
    /// release published "0", which must not cut the pause short.
    async fn back_off(&mut self, pause: Duration) {
        tokio::time::sleep(pause.min(self.time_left())).await;
    }

    /// Time until the caller's deadline (`Duration::MAX` without one).
    fn time_left(&self) -> Duration {
        self.deadline.map_or(Duration::MAX, |d| {
            d.saturating_duration_since(Instant::now())
        })
    }

    /// Invariant 2: sleeps until a message, a hand-over or `retry_in` (fair waiters at
    /// most a third of the stale timeout, to refresh their queue deadline). With an
    /// offer posted (invariant 7) a local releaser may hand us the lock meanwhile: that
    /// is the grant returned.
    async fn wait(&mut self, retry_in: Duration, local: bool) -> Result<Option<Grant>> {
        let mut max = retry_in.min(self.time_left());
        if self.queues {
            max = max.min(self.engine.settings.fair_stale_timeout / 3);
        }
        let offering = self.can_offer && (self.fair || local);
        if !offering {
            self.woken = self.wait_message(max).await;
            self.count_wake();
            return Ok(None);
        }
        let until = later(max);
        loop {
            let (engine, call) = (self.engine, self.call);
            let ticket = self.req.waiting.clone();
            let rx = self.offer.get_or_insert_with(|| {
                let lease_ms = call.lease.as_millis() as u64;
                let (offer, rx) = Offer::new(call.holder.clone(), lease_ms, ticket);
                engine
                    .offers(call.kind == Kind::Fair)
                    .post(&call.name, offer);
                rx
            });
            let left = until.saturating_duration_since(Instant::now());
            let (sub, ticket) = (self.sub.as_mut(), self.ticket.as_mut());
            let answer = tokio::select! {
                w = wait_any(sub, ticket, left) => {
                    self.woken = w;
                    self.count_wake();
                    return Ok(None);
                }
                r = rx => r.ok(),
            };
            // Read: from here on `accept` settles it, not the drop.
            self.offer = None;
            if let Some(grant) = self.accept(answer).await? {
                return Ok(Some(grant));
            }
            // Declined. A fair releaser handed the lock to the queue head, or woke it:
            // not us, so offer again and go on waiting (invariant 7). A plain releaser
            // declined because another client waits: compete.
            if !self.fair {
                self.woken = true;
                return Ok(None);
            }
        }
    }

    /// A message on the shared channel or a hand-over to our ticket, at most `max`.
    async fn wait_message(&mut self, max: Duration) -> bool {
        wait_any(self.sub.as_mut(), self.ticket.as_mut(), max).await
    }

    fn count_wake(&self) {
        if self.woken {
            telemetry::woken(self.call.kind.label());
        }
    }

    /// Invariant 7: before asking Redis ourselves, withdraw our offer; if a releaser
    /// took it, its answer comes within one script call (offers.rs invariant 2) and
    /// may be the lock. If we are dropped meanwhile, the drop settles it.
    async fn withdraw_offer(&mut self) -> Result<Option<Grant>> {
        let Some(rx) = self.offer.as_mut() else {
            return Ok(None);
        };
        let offers = self.engine.offers(self.fair);
        if offers.withdraw(&self.call.name, &self.call.holder) {
            self.offer = None;
            return Ok(None);
        }
        let answer = rx.await.ok();
        self.offer = None;
        self.accept(answer).await
    }

    /// What a releaser's answer to our offer comes to: the grant if it gave us the
    /// lock. An unknown outcome (the script failed, or the releaser was cancelled) is
    /// settled by asking Redis whether we hold the lock ([`holds_it`]), until the
    /// deadline or the unavailable timeout. If that runs out, or this future is dropped
    /// meanwhile, the question goes on in the background (offers.rs invariant 4) and
    /// the error is returned: an attempt made before knowing could count the handed
    /// hold twice.
    async fn accept(&mut self, answer: Option<Answer>) -> Result<Option<Grant>> {
        let (engine, call) = (self.engine, self.call);
        let started = match answer {
            None => return Ok(None),
            Some(Answer::Granted(started)) => started,
            Some(Answer::Unknown(started)) => {
                let unsettled = scopeguard::guard((), |()| {
                    settle_in_background(engine, call, Unsettled::Unknown);
                });
                let until =
                    (self.deadline).unwrap_or_else(|| later(engine.settings.unavailable_after));
                let held = holds_it(engine, &call.name, &call.holder, until).await?;
                scopeguard::ScopeGuard::into_inner(unsettled);
                if !held {
                    return Ok(None);
                }
                started
            }
        };
        // The hand-over script took us off the fair queue, and out of the waiter
        // registry (release.lua's receiver ticket).
        self.queued = false;
        self.registered = false;
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

/// Waits for a message on `sub` or, when there, a hand-over to `ticket`.
async fn wait_any(
    sub: Option<&mut Subscription>,
    ticket: Option<&mut Ticket<'_>>,
    max: Duration,
) -> bool {
    let sub = sub.expect("subscribed before waiting");
    match ticket {
        None => sub.wait(max).await,
        Some(ticket) => tokio::select! {
            w = sub.wait(max) => w,
            () = ticket.wait() => true,
        },
    }
}

/// A hand-over whose outcome a waiter that left could not learn.
enum Unsettled {
    /// The taken offer's receiver: the releaser's answer is still to come.
    Offer(oneshot::Receiver<Answer>),
    /// The releaser answered "unknown".
    Unknown,
}

/// Settles an abandoned hand-over in the background (offers.rs invariant 4): waits for
/// the releaser's answer, asks Redis if it is unknown, and releases the lock if it was
/// handed over. The holder's next acquisition of the lock waits until this is done.
fn settle_in_background(engine: &Arc<Engine>, call: &Call, unsettled: Unsettled) {
    let (kind, fair) = (call.kind, call.kind == Kind::Fair);
    let settling = engine.offers(fair).settling(&call.name, &call.holder);
    let (engine, name, holder) = (engine.clone(), call.name.clone(), call.holder.clone());
    let lease_ms = call.lease.as_millis() as u64;
    let cleanups = engine.cleanups.clone();
    cleanups.spawn(async move {
        let _settling = settling;
        // Every taken offer is answered within one script call (Taken, offers.rs).
        let answer = match unsettled {
            Unsettled::Offer(rx) => rx.await.ok(),
            Unsettled::Unknown => Some(Answer::Unknown(std::time::Instant::now())),
        };
        let until = later(engine.settings.unavailable_after);
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
    let master = &engine.masters[0];
    let mut hget = redis::cmd("HGET");
    hget.arg(&**name).arg(&**holder);
    loop {
        let held: Result<Option<i64>> = master.cmd(Lane::Lock, master.timeout(), &hget).await;
        match held {
            Ok(count) => return Ok(count.is_some_and(|n| n >= 1)),
            Err(e) if Instant::now() >= until => return Err(e),
            Err(_) => {
                let pause = jitter(engine.settings.retry_jitter).max(Duration::from_millis(10));
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
    let wait_ms = engine.settings.fair_wait_time.as_millis() as u64;
    let results = fan_out(&engine.masters, |m| async move {
        if kind == Kind::Write {
            super::rw::leave(m, name, holder).await
        } else {
            scripts::fair_cancel(m, name, holder, wait_ms).await
        }
    })
    .await;
    for e in results.into_iter().filter_map(Result::err) {
        tracing::debug!(lock = name, error = %e, "leaving the fair queue failed");
    }
}
