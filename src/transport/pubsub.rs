//! The pub/sub hub: one subscriber connection per deployment ([`Transport`]), shared by
//! every waiter of the client; channels are reference-counted.
//!
//! Invariants:
//! 1. The desired set is the map's keys: a channel is in it exactly while at least one
//!    [`Subscription`] for it lives. Each master's actor reconciles its connection with
//!    that set (SUBSCRIBE what is missing, UNSUBSCRIBE what nobody wants any more).
//! 2. A message on a channel, from any master, is shown to the client's hook (its
//!    payload: a hand-over names its receiver there) and bumps the channel's wake
//!    counter; a waiter records the counter before it re-tries, so a message that
//!    arrives between the failed attempt and the wait is never lost (tokio `Notify`'s
//!    enable-first rule).
//! 3. When a connection drops, its actor reconnects, resubscribes everything and bumps
//!    every channel: messages may have been missed, so every waiter re-tries. Such a
//!    wake-up is counted apart from a message's ([`Subscription::heard`]): a watch that
//!    acts on a message alone (engine/coordination/revoke.rs) tells the two apart.
//! 4. Dropping a subscription only edits the map and pokes the actors (no await), so a
//!    cancelled waiter unsubscribes promptly and `Drop` never blocks.
//! 5. A channel whose last subscription went lingers for [`LINGER`] before it is
//!    unsubscribed: the next waiter of a busy lock (the usual case: one local waiter
//!    takes over from the last) finds it confirmed, with no SUBSCRIBE round trip.
//! 6. A master that refuses SUBSCRIBE (ACL NOPERM) is marked denied until a subscribe
//!    succeeds there; when so many are denied that no majority can confirm, waiting
//!    for confirmation ends with that refusal instead of silently falling back to the
//!    TTL bound.
//! 7. A client's notice channel (keys/books.rs) is subscribed by a SUBSCRIBE of its
//!    own: an ACL that refuses it (no `&<prefix>_client__channel*`) refuses only it,
//!    never the waiters' channels. It is then left out on that connection, with one
//!    WARN naming the channel and the fix; the client's holders learn of a force-unlock
//!    at their next renewal instead.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::Instrument;

use super::notices::{within, DENIED};
use super::subscriber::Message;
use super::{Subscriber, Transport};
use crate::telemetry;

/// How long an unused channel stays subscribed (invariant 5).
const LINGER: Duration = Duration::from_millis(100);

/// A channel's wake-ups so far: every one, and those a message (or our own release)
/// caused (invariants 2 and 3).
#[derive(Clone, Copy, Debug, Default)]
struct Wakes {
    all: u64,
    messages: u64,
}

impl Wakes {
    /// A message, from Redis or our own release.
    fn message(&mut self) {
        self.all += 1;
        self.messages += 1;
    }

    /// Not a message: a reconnect or resubscription, when messages may have been missed.
    fn maybe_missed(&mut self) {
        self.all += 1;
    }
}

struct Channel {
    refs: usize,
    /// Set when `refs` dropped to 0 (invariant 5).
    idle_since: Option<tokio::time::Instant>,
    wake: watch::Sender<Wakes>,
    /// Bit i set: master i has confirmed the subscription on its current connection.
    confirmed: watch::Sender<u64>,
}

/// What a master's actor has to look at.
#[derive(Default)]
struct Port {
    poke: Notify,
    pending: parking_lot::Mutex<Vec<String>>,
}

/// What the client does with every message's payload (invariant 2).
pub(crate) type OnPayload = Box<dyn Fn(&[u8]) + Send + Sync>;

struct Shared {
    channels: parking_lot::Mutex<HashMap<String, Channel>>,
    on_payload: OnPayload,
    ports: Vec<Port>,
    /// Bit i set: master i refuses our subscriptions (invariant 6).
    denied: watch::Sender<u64>,
    /// The last refusal: the master's address and message.
    refusal: parking_lot::Mutex<Option<(String, String)>>,
}

/// The client's pub/sub hub.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    quorum: usize,
}

/// A waiter's interest in one channel.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    name: String,
    wake: watch::Receiver<Wakes>,
    confirmed: watch::Receiver<u64>,
    denied: watch::Receiver<u64>,
    quorum: u32,
}

impl PubSub {
    /// Starts one actor per master; they stop when `shutdown` is cancelled. Every
    /// message's payload is shown to `on_payload` (on the actor's task: keep it short).
    pub(crate) fn start(
        links: Vec<Arc<dyn Transport>>,
        quorum: usize,
        timeout: Duration,
        shutdown: &CancellationToken,
        on_payload: OnPayload,
    ) -> Self {
        let shared = Arc::new(Shared {
            channels: Default::default(),
            on_payload,
            ports: links.iter().map(|_| Port::default()).collect(),
            denied: watch::channel(0).0,
            refusal: parking_lot::Mutex::new(None),
        });
        for (idx, link) in links.into_iter().enumerate() {
            let actor = Actor {
                shared: shared.clone(),
                idx,
                link,
                timeout,
                actual: HashSet::new(),
                refused: HashSet::new(),
                conn: None,
                lingering: Vec::new(),
                reconnect: None,
            };
            tokio::spawn(actor.run(shutdown.clone()));
        }
        PubSub { shared, quorum }
    }

    /// Registers interest in `channel`; see [`Subscription::ready`].
    pub(crate) fn subscribe(&self, channel: String) -> Subscription {
        let mut map = self.shared.channels.lock();
        let new = !map.contains_key(&channel);
        let entry = map.entry(channel.clone()).or_insert_with(|| Channel {
            refs: 0,
            idle_since: None,
            wake: watch::channel(Wakes::default()).0,
            confirmed: watch::channel(0).0,
        });
        entry.refs += 1;
        entry.idle_since = None;
        let sub = Subscription {
            shared: self.shared.clone(),
            wake: entry.wake.subscribe(),
            confirmed: entry.confirmed.subscribe(),
            denied: self.shared.denied.subscribe(),
            name: channel,
            quorum: self.quorum as u32,
        };
        drop(map);
        if new {
            self.shared.poke_all(&sub.name);
        }
        sub
    }

    /// Wakes local waiters of `channel` at once (our own release: no need to wait for
    /// the message to come back from Redis).
    pub(crate) fn notify_local(&self, channel: &str) {
        if let Some(c) = self.shared.channels.lock().get(channel) {
            c.wake.send_modify(Wakes::message);
        }
    }

    /// Whether any channel is subscribed, wanted or lingering: when none is, a caller
    /// skips building a channel's name to look it up (every uncontended acquire and
    /// release asks).
    pub(crate) fn has_channels(&self) -> bool {
        !self.shared.channels.lock().is_empty()
    }

    /// Whether `channel` is subscribed and confirmed by a majority right now (wanted or
    /// lingering, invariant 5): a subscription to it would be ready without a round trip.
    pub(crate) fn is_ready(&self, channel: &str) -> bool {
        self.shared
            .channels
            .lock()
            .get(channel)
            .is_some_and(|c| c.confirmed.borrow().count_ones() >= self.quorum as u32)
    }

    /// Channels currently wanted by waiters of this client (the client's own notice
    /// channel, subscribed for its life, is not a waiter's).
    pub(crate) fn channel_count(&self) -> usize {
        self.shared
            .channels
            .lock()
            .iter()
            .filter(|(name, c)| c.refs > 0 && !crate::keys::books::is_notice_channel(name))
            .count()
    }
}

impl Shared {
    fn poke_all(&self, channel: &str) {
        for port in &self.ports {
            port.pending.lock().push(channel.to_string());
            port.poke.notify_one();
        }
    }

    fn wake(&self, channel: &str) {
        if let Some(c) = self.channels.lock().get(channel) {
            c.wake.send_modify(Wakes::message);
        }
    }
}

impl Subscription {
    /// Waits until a majority of masters confirmed the subscription, at most `within`
    /// (a master that is down must not stall the waiter: it falls back to the TTL).
    /// `Err((master, message))` when so many masters refuse the subscription (ACL)
    /// that no majority can confirm it (invariant 6).
    pub(crate) async fn ready(&mut self, within: Duration) -> Result<(), (String, String)> {
        let quorum = self.quorum;
        let masters = self.shared.ports.len() as u32;
        let impossible = move |bits: &u64| masters - bits.count_ones() < quorum;
        let confirmed = self.confirmed.wait_for(|bits| bits.count_ones() >= quorum);
        let refused = self.denied.wait_for(impossible);
        let refused = tokio::select! {
            _ = confirmed => false,
            r = refused => r.is_ok(),
            _ = tokio::time::sleep(within) => false,
        };
        match refused
            .then(|| self.shared.refusal.lock().clone())
            .flatten()
        {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// Whether a majority has confirmed the subscription already.
    pub(crate) fn is_confirmed(&self) -> bool {
        self.confirmed.borrow().count_ones() >= self.quorum
    }

    /// Marks every wake-up so far as seen; call before each attempt.
    pub(crate) fn mark_seen(&mut self) {
        self.wake.borrow_and_update();
    }

    /// How many messages (not reconnects) have woken this channel so far (invariant 3):
    /// compare two readings to learn whether a wake-up was a message.
    pub(crate) fn heard(&self) -> u64 {
        self.wake.borrow().messages
    }

    /// Waits for a wake-up not yet seen, at most `max`. True if woken (by a message or
    /// a reconnect), false when `max` ran out.
    pub(crate) async fn wait(&mut self, max: Duration) -> bool {
        matches!(
            tokio::time::timeout(max, self.wake.changed()).await,
            Ok(Ok(()))
        )
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self.shared.channels.lock();
        let last = match map.get_mut(&self.name) {
            Some(c) => {
                c.refs -= 1;
                if c.refs == 0 {
                    c.idle_since = Some(tokio::time::Instant::now());
                }
                c.refs == 0
            }
            None => false,
        };
        drop(map);
        if last {
            // Invariant 5: the actors schedule the unsubscribe after LINGER.
            self.shared.poke_all(&self.name);
        }
    }
}

/// One master's subscriber connection.
struct Actor {
    shared: Arc<Shared>,
    idx: usize,
    link: Arc<dyn Transport>,
    timeout: Duration,
    actual: HashSet<String>,
    /// Notice channels this connection refused (invariant 7).
    refused: HashSet<String>,
    conn: Option<Box<dyn Subscriber>>,
    /// Idle channels and when they may go (invariant 5).
    lingering: Vec<(tokio::time::Instant, String)>,
    /// Since a live connection was lost: its `pubsub_reconnect` span, when it was lost
    /// and the failed attempts since.
    reconnect: Option<(tracing::Span, std::time::Instant, u32)>,
}

impl Actor {
    async fn run(mut self, shutdown: CancellationToken) {
        let mut backoff = Duration::from_millis(50);
        let mut retry_at: Option<tokio::time::Instant> = None;
        loop {
            let shared = self.shared.clone();
            let port = &shared.ports[self.idx];
            let connected = self.conn.is_some();
            let next_linger = self.lingering.iter().map(|(t, _)| *t).min();
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                msg = next_message(&mut self.conn), if connected => {
                    match msg {
                        Some(Message { channel, payload }) => {
                            (self.shared.on_payload)(&payload);
                            self.shared.wake(&channel);
                            continue;
                        }
                        None => self.disconnected("connection closed"),
                    }
                }
                _ = port.poke.notified() => {}
                _ = sleep_until(retry_at), if retry_at.is_some() => {}
                _ = sleep_until(next_linger), if next_linger.is_some() => {
                    self.expire_lingering();
                    continue;
                }
            }
            retry_at = None;
            let span = self.reconnect.as_ref().map(|r| r.0.clone());
            let reconciled = match &span {
                Some(span) => self.reconcile().instrument(span.clone()).await,
                None => self.reconcile().await,
            };
            let bit = 1u64 << self.idx;
            match &reconciled {
                Err(e) if e.starts_with(DENIED) => {
                    let why = e[DENIED.len()..].to_string();
                    *self.shared.refusal.lock() = Some((self.link.addr().to_string(), why));
                    self.shared.denied.send_if_modified(|b| {
                        let old = *b;
                        *b |= bit;
                        old != *b
                    });
                }
                Ok(()) if self.conn.is_some() => {
                    self.shared.denied.send_if_modified(|b| {
                        let old = *b;
                        *b &= !bit;
                        old != *b
                    });
                }
                _ => {}
            }
            match reconciled {
                Ok(()) => {
                    backoff = Duration::from_millis(50);
                    if self.conn.is_some()
                        && let Some((span, since, attempts)) = self.reconnect.take()
                    {
                        span.record("attempts", attempts + 1);
                        telemetry::finish(&span, since, "reconnected", None);
                    }
                }
                Err(e) => {
                    let addr = self.link.addr();
                    tracing::debug!(parent: span.as_ref().and_then(tracing::Span::id), master = addr, error = %e, "pub/sub reconcile failed");
                    if let Some((_, _, attempts)) = self.reconnect.as_mut() {
                        *attempts += 1;
                    }
                    self.disconnected(&e);
                    retry_at = Some(tokio::time::Instant::now() + backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// Invariant 3: forget the connection, clear our confirmations, wake everyone.
    fn disconnected(&mut self, why: &str) {
        // Only a connection that existed can have missed messages: a failed reconnect
        // must not wake (and so make poll) every waiter again.
        let lost = self.conn.take().is_some();
        if lost {
            let addr = self.link.addr();
            tracing::warn!(master = addr, why, "pub/sub connection lost; reconnecting");
            let span = tracing::debug_span!(target: "redlatch", "pubsub_reconnect", master = addr,
                "db.system.name" = "redis", "server.address" = addr,
                why, attempts = Empty, outcome = Empty, elapsed_ms = Empty);
            self.reconnect = Some((span, std::time::Instant::now(), 0));
        }
        self.actual.clear();
        let bit = !(1u64 << self.idx);
        for c in self.shared.channels.lock().values() {
            c.confirmed.send_modify(|b| *b &= bit);
            if lost {
                c.wake.send_modify(Wakes::maybe_missed);
            }
        }
        // Whatever is still wanted must be subscribed again on the next connection.
        let wanted: Vec<String> = self.shared.channels.lock().keys().cloned().collect();
        self.shared.ports[self.idx].pending.lock().extend(wanted);
    }

    /// Invariant 5: channels idle for LINGER leave the map; the poke unsubscribes them.
    fn expire_lingering(&mut self) {
        let now = tokio::time::Instant::now();
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.lingering)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.lingering = keep;
        for (_, name) in due {
            let removed = {
                let mut map = self.shared.channels.lock();
                let idle = map.get(&name).is_some_and(|c| {
                    c.refs == 0 && c.idle_since.is_some_and(|t| t + LINGER <= now)
                });
                idle && map.remove(&name).is_some()
            };
            if removed {
                self.shared.poke_all(&name);
            }
        }
    }

    /// Invariant 1: bring the connection in line with the desired set.
    async fn reconcile(&mut self) -> Result<(), String> {
        let mut fresh = false;
        let pending: HashSet<String> =
            std::mem::take(&mut *self.shared.ports[self.idx].pending.lock())
                .into_iter()
                .collect();
        let (mut subscribe, mut confirm, mut unsubscribe) = (vec![], vec![], vec![]);
        {
            let map = self.shared.channels.lock();
            for name in pending {
                let entry = map.get(&name);
                if let Some(since) = entry.filter(|c| c.refs == 0).and_then(|c| c.idle_since) {
                    self.lingering.push((since + LINGER, name.clone()));
                }
                match (entry.is_some(), self.actual.contains(&name)) {
                    (true, false) => subscribe.push(name),
                    (true, true) => confirm.push(name),
                    (false, true) => unsubscribe.push(name),
                    (false, false) => {}
                }
            }
        }
        if subscribe.is_empty() && unsubscribe.is_empty() {
            self.confirm(&confirm);
            return Ok(());
        }
        if self.conn.is_none() {
            if subscribe.is_empty() {
                return Ok(());
            }
            let subscriber = tokio::time::timeout(self.timeout, self.link.subscriber())
                .await
                .map_err(|_| "connect timed out".to_string())?
                .map_err(|e| e.to_string())?;
            self.conn = Some(subscriber);
            self.refused.clear();
            fresh = true;
            // Everything wanted goes on the new connection.
            subscribe = self.shared.channels.lock().keys().cloned().collect();
            unsubscribe.clear();
        }
        let sink = self.conn.as_mut().expect("connected");
        if !unsubscribe.is_empty() {
            within(self.timeout, sink.unsubscribe(&unsubscribe)).await?;
            for name in &unsubscribe {
                self.actual.remove(name);
            }
        }
        let refused = &mut self.refused;
        subscribe.retain(|c| !refused.contains(c));
        let (notices, mut others): (Vec<String>, Vec<String>) =
            (subscribe.into_iter()).partition(|c| crate::keys::books::is_notice_channel(c));
        let listened =
            super::notices::subscribe(sink, self.link.addr(), self.timeout, notices, refused);
        let mut subscribe = listened.await?;
        if !others.is_empty() {
            within(self.timeout, sink.subscribe(&others)).await?;
        }
        subscribe.append(&mut others);
        if !subscribe.is_empty() {
            self.actual.extend(subscribe.iter().cloned());
            if fresh {
                // Invariant 3: a release published before this SUBSCRIBE landed was
                // missed; wake the waiters once more now that nothing can be missed.
                let map = self.shared.channels.lock();
                for name in &subscribe {
                    if let Some(c) = map.get(name) {
                        c.wake.send_modify(Wakes::maybe_missed);
                    }
                }
            }
        }
        confirm.extend(subscribe);
        self.confirm(&confirm);
        crate::telemetry::subscriptions(self.link.addr(), self.actual.len());
        Ok(())
    }

    fn confirm(&self, names: &[String]) {
        let map = self.shared.channels.lock();
        for name in names {
            if let Some(c) = map.get(name) {
                c.confirmed.send_modify(|b| *b |= 1 << self.idx);
            }
        }
    }
}

async fn next_message(conn: &mut Option<Box<dyn Subscriber>>) -> Option<Message> {
    match conn {
        Some(subscriber) => subscriber.next_message().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
