//! A fake deployment for the engine's unit tests (deadpool tests its pool against an
//! in-memory manager; this is ours): [`Server`] models the server side of the plain
//! lock's scripts in memory (the lock hash with its lease, the waiter registry and the
//! handed key of `lua/pass_on.lua`, `PUBSUB NUMSUB`, `PUBLISH`) and the semaphore's
//! (a counter with its time to live, counters.rs), and [`Link`] is a
//! [`Transport`] onto it whose requests can be parked, delayed or lost, so that tests
//! can stop a call at any await point. Time is tokio's: tests run with paused time,
//! so they are deterministic and take no wall-clock time.
//!
//! The model follows the scripts' headers (acquire.lua, release.lua, batch.lua,
//! unwait.lua, pass_on.lua, renew.lua, force_release.lua, sem_*.lua); a script it does not model
//! fails the test. Real-Redis tests (tests/) remain the judge of the scripts themselves.
//!
//! A request takes effect when its future is first polled (as a real request is
//! written then), its reply comes after [`Server::set_latency`], and while
//! [`Server::park`] is on, replies wait until it is off again.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

mod counters;
mod scripts;

use crate::error::{Error, Result};
use crate::transport::subscriber::Message;
use crate::transport::{BoxFuture, Lane, Request, Subscriber, Transport};

/// One lock hash: holder -> count, and when its lease ends (`None`: no expiry).
#[derive(Default)]
struct Lock {
    holds: Vec<(String, i64)>,
    expires: Option<Instant>,
}

#[derive(Default)]
pub(super) struct State {
    locks: HashMap<String, Lock>,
    /// Waiter registries: (score ms, ticket), kept sorted as ZRANGE reads them.
    registries: HashMap<String, Vec<(u64, String)>>,
    /// Semaphore counters: the permits available, and when the key expires.
    counters: HashMap<String, (i64, Option<Instant>)>,
    /// `<registry>:handed`: the ticket and when it lapses.
    handed: HashMap<String, (String, Instant)>,
    /// Subscriber connections: their channels and where their messages go.
    conns: HashMap<u64, (HashSet<String>, mpsc::UnboundedSender<Message>)>,
    next_conn: u64,
    /// Every script run, by its file name, in order.
    log: Vec<&'static str>,
}

/// The fake server, shared by every [`Link`] (client) onto it.
pub(crate) struct Server {
    state: parking_lot::Mutex<State>,
    started: Instant,
    latency: parking_lot::Mutex<Duration>,
    parked: watch::Sender<bool>,
    /// Subscriptions wait while this is on (a SUBSCRIBE whose confirmation is slow).
    slow_subscribe: watch::Sender<bool>,
    /// Requests lost before they reach the server, still to come.
    lose: parking_lot::Mutex<usize>,
    /// Requests refused with an error (no effect), still to come.
    refuse: parking_lot::Mutex<Vec<Error>>,
}

impl Server {
    pub(crate) fn new() -> Arc<Server> {
        Arc::new(Server {
            state: Default::default(),
            started: Instant::now(),
            latency: parking_lot::Mutex::new(Duration::from_millis(1)),
            parked: watch::channel(false).0,
            slow_subscribe: watch::channel(false).0,
            lose: Default::default(),
            refuse: Default::default(),
        })
    }

    /// A client's transport onto this server.
    pub(crate) fn link(self: &Arc<Self>) -> Arc<dyn Transport> {
        Arc::new(Link(self.clone()))
    }

    /// How long each reply takes (after the request took effect).
    pub(crate) fn set_latency(&self, d: Duration) {
        *self.latency.lock() = d;
    }

    /// Parks every reply (the request still takes effect) until called with false.
    pub(crate) fn park(&self, on: bool) {
        self.parked.send_replace(on);
    }

    /// Holds SUBSCRIBE confirmations until called with false.
    pub(crate) fn slow_subscribe(&self, on: bool) {
        self.slow_subscribe.send_replace(on);
    }

    /// The next `n` requests are lost on the way: no effect, and they time out.
    pub(crate) fn lose_next(&self, n: usize) {
        *self.lose.lock() = n;
    }

    /// The next request is refused with `error`, at once and without effect (a node
    /// answering CLUSTERDOWN, say).
    pub(crate) fn refuse_next(&self, error: Error) {
        self.refuse.lock().push(error);
    }

    /// The holders of `name` and their counts (expired leases purged).
    pub(crate) fn holders(&self, name: &str) -> Vec<(String, i64)> {
        let mut s = self.state.lock();
        s.purge(Instant::now());
        s.locks.get(name).map_or(Vec::new(), |l| l.holds.clone())
    }

    /// Makes the lease of `name` run out `left` from now (finer than the millisecond a
    /// script can set: a lease in its last millisecond reads PTTL 0, as on Redis).
    pub(crate) fn expire_in(&self, name: &str, left: Duration) {
        if let Some(l) = self.state.lock().locks.get_mut(name) {
            l.expires = Some(Instant::now() + left);
        }
    }

    /// The tickets in the waiter registry `waiters`, oldest first.
    pub(crate) fn registry(&self, waiters: &str) -> Vec<String> {
        let s = self.state.lock();
        let r = s.registries.get(waiters);
        r.map_or(Vec::new(), |r| r.iter().map(|e| e.1.clone()).collect())
    }

    /// The ticket `<waiters>:handed` names, if any.
    pub(crate) fn handed(&self, waiters: &str) -> Option<String> {
        let mut s = self.state.lock();
        s.purge(Instant::now());
        s.handed.get(waiters).map(|h| h.0.clone())
    }

    /// The permits available at the semaphore `name` (`None`: no counter).
    pub(crate) fn counter(&self, name: &str) -> Option<i64> {
        let mut s = self.state.lock();
        s.purge(Instant::now());
        s.counter(name)
    }

    /// The scripts run so far, by file name.
    pub(crate) fn log(&self) -> Vec<&'static str> {
        self.state.lock().log.clone()
    }

    /// How many subscriber connections listen on `channel`.
    pub(crate) fn numsub(&self, channel: &str) -> usize {
        self.state.lock().numsub(channel)
    }

    fn now_ms(&self) -> u64 {
        Instant::now().duration_since(self.started).as_millis() as u64
    }

    /// Runs one request against the model (under the lock: scripts are atomic).
    fn apply(&self, request: Request<'_>) -> Result<Value> {
        let now_ms = self.now_ms();
        let mut s = self.state.lock();
        s.purge(Instant::now());
        match request {
            Request::Eval(inv) | Request::Synced(inv) => scripts::run(&mut s, inv, now_ms),
            Request::Cmd(cmd) => {
                let args: Vec<String> = (cmd.args_iter())
                    .map(|a| match a {
                        redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                        _ => String::new(),
                    })
                    .collect();
                match args.first().map(|c| c.to_ascii_uppercase()).as_deref() {
                    Some("GET") => Ok((s.counter(&args[1])).map_or(Value::Nil, |n| {
                        Value::BulkString(n.to_string().into_bytes())
                    })),
                    Some("HGET") => Ok(s.hget(&args[1], &args[2]).map_or(Value::Nil, Value::Int)),
                    Some("PTTL") => Ok(Value::Int(s.pttl(&args[1]))),
                    Some("PING") => Ok(Value::SimpleString("PONG".into())),
                    other => panic!("the fake server does not model {other:?}"),
                }
            }
            Request::Pipe(_) => panic!("the fake server does not model pipelines"),
        }
    }
}

impl State {
    /// Drops what has expired (Redis expires keys lazily too, but never shows them).
    fn purge(&mut self, now: Instant) {
        self.locks.retain(|_, l| l.expires.is_none_or(|e| e > now));
        self.handed.retain(|_, h| h.1 > now);
        self.counters.retain(|_, c| c.1.is_none_or(|e| e > now));
    }

    pub(super) fn numsub(&self, channel: &str) -> usize {
        self.conns
            .values()
            .filter(|c| c.0.contains(channel))
            .count()
    }

    fn publish(&mut self, channel: &str, payload: &str) {
        for (channels, tx) in self.conns.values() {
            if channels.contains(channel) {
                let _ = tx.send(Message {
                    channel: channel.to_string(),
                    payload: payload.as_bytes().to_vec(),
                });
            }
        }
    }

    pub(super) fn hget(&self, name: &str, holder: &str) -> Option<i64> {
        let lock = self.locks.get(name)?;
        lock.holds.iter().find(|h| h.0 == holder).map(|h| h.1)
    }

    /// HINCRBY; creates the lock (without expiry) when absent.
    pub(super) fn hincrby(&mut self, name: &str, holder: &str, by: i64) -> i64 {
        let lock = self.locks.entry(name.to_string()).or_default();
        match lock.holds.iter_mut().find(|h| h.0 == holder) {
            Some(h) => {
                h.1 += by;
                h.1
            }
            None => {
                lock.holds.push((holder.to_string(), by));
                by
            }
        }
    }

    pub(super) fn exists(&self, name: &str) -> bool {
        self.locks.contains_key(name)
    }

    pub(super) fn del(&mut self, name: &str) {
        self.locks.remove(name);
    }

    pub(super) fn pexpire(&mut self, name: &str, ms: u64) {
        if let Some(l) = self.locks.get_mut(name) {
            l.expires = Some(Instant::now() + Duration::from_millis(ms));
        }
    }

    /// PTTL: -2 missing, -1 no expiry, else the ms left.
    pub(super) fn pttl(&self, name: &str) -> i64 {
        match self.locks.get(name) {
            None => -2,
            Some(Lock { expires: None, .. }) => -1,
            Some(Lock {
                expires: Some(e), ..
            }) => e.saturating_duration_since(Instant::now()).as_millis() as i64,
        }
    }

    pub(super) fn zadd_nx(&mut self, key: &str, score: u64, ticket: &str) {
        let r = self.registries.entry(key.to_string()).or_default();
        if !r.iter().any(|e| e.1 == ticket) {
            r.push((score, ticket.to_string()));
            r.sort();
        }
    }

    pub(super) fn zrem(&mut self, key: &str, ticket: &str) {
        if let Some(r) = self.registries.get_mut(key) {
            r.retain(|e| e.1 != ticket);
            if r.is_empty() {
                self.registries.remove(key);
            }
        }
    }

    pub(super) fn handed_is(&self, waiters: &str, ticket: &str) -> bool {
        self.handed.get(waiters).is_some_and(|h| h.0 == ticket)
    }

    pub(super) fn del_handed(&mut self, waiters: &str) {
        self.handed.remove(waiters);
    }

    pub(super) fn log(&mut self, script: &'static str) {
        self.log.push(script);
    }

    /// lua/pass_on.lua: gives a freed lock to the longest-registered waiter whose
    /// client listens, or wakes everyone when someone else listens. 1 if handed.
    pub(super) fn pass_on(&mut self, lock: &str, waiters: &str, channel: &str) -> i64 {
        self.handed.remove(waiters);
        let marker = format!("{channel}:redlatch-waiters");
        if self.numsub(channel) > self.numsub(&marker) {
            self.publish(channel, "0");
            return 0;
        }
        let mut skipped = false;
        loop {
            let Some(ticket) = (self.registries.get(waiters)).and_then(|r| r.first().cloned())
            else {
                if skipped {
                    self.publish(channel, "0");
                }
                return 0;
            };
            let ticket = ticket.1;
            self.zrem(waiters, &ticket);
            let parts: Vec<&str> = ticket.split(':').collect();
            let lease = parts.get(3).and_then(|l| l.parse::<u64>().ok());
            let own = format!("{channel}:{}", parts[0]);
            if let (4, Some(lease)) = (parts.len(), lease)
                && self.numsub(&own) > 0
            {
                self.hincrby(lock, &format!("{}:{}", parts[0], parts[1]), 1);
                self.pexpire(lock, lease);
                let until = Instant::now() + Duration::from_millis(lease);
                self.handed
                    .insert(waiters.to_string(), (ticket.clone(), until));
                self.publish(&own, &format!("{ticket}|{lock}"));
                return 1;
            }
            skipped = true;
        }
    }
}

/// A client's transport onto a [`Server`].
struct Link(Arc<Server>);

impl Transport for Link {
    fn addr(&self) -> &str {
        "fake:1"
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn send<'a>(
        &'a self,
        _lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let server = &self.0;
            if let Some(error) = server.refuse.lock().pop() {
                return Err(error);
            }
            let lost = {
                let mut lose = server.lose.lock();
                let lost = *lose > 0;
                *lose = lose.saturating_sub(1);
                lost
            };
            let reply = if lost {
                None
            } else {
                Some(server.apply(request))
            };
            let latency = *server.latency.lock();
            let delivered = async {
                tokio::time::sleep(latency).await;
                let mut parked = server.parked.subscribe();
                let _ = parked.wait_for(|p| !p).await;
            };
            let timed_out = tokio::time::timeout(timeout, delivered).await.is_err();
            match reply {
                Some(reply) if !timed_out => reply,
                _ => Err(Error::Timeout {
                    addr: self.addr().to_string(),
                    after: timeout,
                }),
            }
        })
    }

    fn subscriber(&self) -> BoxFuture<'_, redis::RedisResult<Box<dyn Subscriber>>> {
        Box::pin(async move {
            let (tx, rx) = mpsc::unbounded_channel();
            let mut s = self.0.state.lock();
            let id = s.next_conn;
            s.next_conn += 1;
            s.conns.insert(id, (HashSet::new(), tx));
            let sub: Box<dyn Subscriber> = Box::new(FakeSubscriber {
                server: self.0.clone(),
                id,
                rx,
            });
            Ok(sub)
        })
    }
}

/// One subscriber connection onto a [`Server`].
struct FakeSubscriber {
    server: Arc<Server>,
    id: u64,
    rx: mpsc::UnboundedReceiver<Message>,
}

impl Subscriber for FakeSubscriber {
    fn subscribe<'a>(
        &'a mut self,
        channels: &'a [String],
    ) -> BoxFuture<'a, redis::RedisResult<()>> {
        Box::pin(async move {
            let mut slow = self.server.slow_subscribe.subscribe();
            let _ = slow.wait_for(|s| !s).await;
            let mut s = self.server.state.lock();
            if let Some(c) = s.conns.get_mut(&self.id) {
                c.0.extend(channels.iter().cloned());
            }
            Ok(())
        })
    }

    fn unsubscribe<'a>(
        &'a mut self,
        channels: &'a [String],
    ) -> BoxFuture<'a, redis::RedisResult<()>> {
        Box::pin(async move {
            let mut s = self.server.state.lock();
            if let Some(c) = s.conns.get_mut(&self.id) {
                c.0.retain(|ch| !channels.contains(ch));
            }
            Ok(())
        })
    }

    fn next_message(&mut self) -> BoxFuture<'_, Option<Message>> {
        Box::pin(self.rx.recv())
    }
}

impl Drop for FakeSubscriber {
    fn drop(&mut self) {
        self.server.state.lock().conns.remove(&self.id);
    }
}
