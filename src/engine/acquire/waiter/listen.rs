//! The waiter's channels and its sleep: subscribing (invariant 1), the direct channels
//! of a registering waiter (invariant 10), and waiting for a message, a hand-over or
//! the TTL bound (invariants 2, 7).

use std::time::Duration;

use tokio::time::Instant;

use crate::engine::acquire::attempt::jitter;
use crate::engine::acquire::tickets::Ticket;
use crate::engine::acquire::waiter::{later, State, Waiter};
use crate::engine::holding::offers::Offer;
use crate::engine::kinds::Protocol;
use crate::error::{Error, Result};
use crate::keys;
use crate::telemetry;
use crate::transport::pubsub::Subscription;

/// The channels that wake a waiter: the lock's channel (a fair waiter's own), and for
/// a registering waiter (invariant 10) the marker and its client's wake channel.
pub(super) struct Listening {
    /// Kept for its subscriptions (hand-overs arrive through the hub's hook to the
    /// ticket). Declared first, so the marker goes no later than the shared channel
    /// (pass_on.lua invariant 1 then errs towards waking everyone).
    _direct: Option<(Subscription, Subscription)>,
    sub: Subscription,
}

impl Listening {
    /// Invariant 1: a message from now on wakes the wait that follows.
    pub(super) fn mark_seen(&mut self) {
        self.sub.mark_seen();
    }

    /// Invariant 1: confirmed by a majority, every channel: a message cannot be missed.
    pub(super) fn is_confirmed(&self) -> bool {
        let direct =
            (self._direct.as_ref()).is_none_or(|(m, w)| m.is_confirmed() && w.is_confirmed());
        direct && self.sub.is_confirmed()
    }
}

impl Waiter<'_> {
    /// Subscribing → Attempting. Invariant 1: subscribes to the channel that wakes us
    /// and waits until a majority confirmed it (or refused it: ACL, an error) —
    /// bounded by the caller's deadline and by the connect timeout, one bound for all
    /// the channels (invariant 11). In an outage only for a back-off pause: the
    /// attempt that follows is a timed retry, not a wait for a message, and the
    /// masters may be back (and the wait over) long before the pub/sub connection is
    /// (it reconnects with its own back-off); the waiter subscribes again before it
    /// waits for a message. The attempt that follows happens at once.
    pub(super) async fn subscribe(&mut self) -> Result<State> {
        let engine = self.engine;
        let channel = (self.plan.kind).wake_channel(&self.call.name, &self.call.holder);
        let now = Instant::now();
        let mut until = (self.deadline).unwrap_or(now + engine.settings().connect_timeout);
        if self.unavailable_since.is_some() {
            let pause = jitter(engine.settings().retry_jitter).max(Duration::from_millis(10));
            until = until.min(now + pause);
        }
        telemetry::contended(self.plan.kind.label());
        let mut sub = engine.pubsub().subscribe(channel);
        let mut direct = self.direct_subscriptions();
        let until = until.min(now + engine.settings().connect_timeout);
        let left = || until.saturating_duration_since(Instant::now());
        let mut ready = sub.ready(left()).await;
        if let Some((marker, wake)) = direct.as_mut() {
            if ready.is_ok() {
                ready = wake.ready(left()).await;
            }
            if ready.is_ok() {
                ready = marker.ready(left()).await;
            }
        }
        if let Err((addr, detail)) = ready {
            // No majority can ever wake us: say why instead of sleeping out the TTL.
            return Err(Error::PermissionDenied { addr, detail });
        }
        self.listening = Some(Listening {
            _direct: direct,
            sub,
        });
        Ok(State::Attempting { woken: false })
    }

    /// Invariant 10: the marker and our client's wake channel (a registering waiter).
    fn direct_subscriptions(&self) -> Option<(Subscription, Subscription)> {
        self.req.waiting.as_ref()?;
        let pubsub = self.engine.pubsub();
        // Our tickets start with our client id: the wake channel is the client's.
        let client = self.engine.id().to_string();
        let wake = pubsub.subscribe(keys::waiter_channel(&self.call.name, &client));
        let marker = pubsub.subscribe(keys::marker(&self.call.name));
        Some((marker, wake))
    }

    /// Invariant 10: when all three channels are confirmed already (an earlier wait's
    /// linger), subscribes before the first attempt, which then needs no second one.
    pub(super) fn subscribe_if_ready(&mut self) {
        let (name, pubsub) = (&self.call.name, self.engine.pubsub());
        if self.req.waiting.is_none() || self.plan.params.once || !pubsub.has_channels() {
            return;
        }
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
            telemetry::contended(self.plan.kind.label());
            self.listening = Some(Listening {
                _direct: direct,
                sub,
            });
        }
    }

    /// Waiting → Attempting | Granted. Invariant 2: sleeps until a message, a
    /// hand-over or `retry_in` (fair waiters at most a third of the stale timeout, to
    /// refresh their queue deadline). With an offer posted (invariant 7) a local
    /// releaser may hand us the lock meanwhile: that is the grant.
    pub(super) async fn wait(&mut self, retry_in: Duration, local: bool) -> Result<State> {
        let mut max = retry_in.min(self.time_left());
        if self.plan.queues {
            max = max.min(self.engine.settings().fair_stale_timeout / 3);
        }
        let offering = self.plan.can_offer && (self.plan.fair || local);
        if !offering {
            let w = self.wait_message(max).await;
            return Ok(woken(self.plan.kind, w));
        }
        let until = later(max);
        loop {
            let (engine, call) = (self.engine, self.call);
            let ticket = self.req.waiting.as_ref().map(|w| w.ticket.clone());
            let fair = self.plan.fair;
            let rx = self.offer.get_or_insert_with(|| {
                let lease_ms = call.lease.as_millis() as u64;
                let (offer, rx) = Offer::new(call.holder.clone(), lease_ms, ticket);
                engine.offers(fair).post(&call.name, offer);
                rx
            });
            let left = until.saturating_duration_since(Instant::now());
            let sub = self.listening.as_mut().map(|l| &mut l.sub);
            let answer = tokio::select! {
                w = wait_any(sub, self.ticket.as_mut(), left) => return Ok(woken(self.plan.kind, w)),
                r = rx => r.ok(),
            };
            // Read: from here on `accept` settles it, not the drop.
            self.offer = None;
            if let Some(grant) = self.accept(answer).await? {
                return Ok(State::Granted(grant));
            }
            // Declined. A fair releaser handed the lock to the queue head, or woke it:
            // not us, so offer again and go on waiting (invariant 7). A plain releaser
            // declined because another client waits: compete.
            if !self.plan.fair {
                return Ok(State::Attempting { woken: true });
            }
        }
    }

    /// A message on the shared channel or a hand-over to our ticket, at most `max`.
    async fn wait_message(&mut self, max: Duration) -> bool {
        let sub = self.listening.as_mut().map(|l| &mut l.sub);
        wait_any(sub, self.ticket.as_mut(), max).await
    }
}

/// The next attempt, counting a wake-up.
fn woken(kind: &dyn Protocol, woken: bool) -> State {
    if woken {
        telemetry::woken(kind.label());
    }
    State::Attempting { woken }
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
