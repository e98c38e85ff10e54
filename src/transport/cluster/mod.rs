//! The Redis Cluster transport: each request goes to the primary serving its first
//! key's hash slot, through that primary's own [`Standalone`] transport (lanes,
//! ordering, script loading and timeouts as on a single server).
//!
//! Invariants:
//! 1. The slot map is read with `CLUSTER SLOTS` at connect, after every `MOVED`, and
//!    after a node failed to answer (a failover may have moved its slots); refreshes
//!    are coalesced, at most one every [`REFRESH_EVERY`], and run in the background:
//!    a request never waits for one.
//! 2. `MOVED slot addr`: the slot is recorded as `addr`'s at once and the request is
//!    sent there. `ASK addr` (a slot being migrated, the key already moved): the
//!    request is sent to `addr` once, preceded by `ASKING` on the same connection, and
//!    the map is left alone. `TRYAGAIN` (a multi-key request while its slot is
//!    migrating) is retried after a short pause, for as long as the request's timeout
//!    allows (a migration lasts as long as it lasts); a request whose time runs out so
//!    fails with the last `TRYAGAIN`, not a bare timeout. `CLUSTERDOWN` (the cluster
//!    does not serve the slot: a shard without a primary, a lost majority) is not
//!    retried here: it is returned at once as `Error::ClusterDown`, an outage the engine
//!    retries within the caller's bound (the wait, or the unavailable timeout), with a
//!    slot-map refresh scheduled. Every redirect and
//!    retry stays within the request's timeout; at most [`MAX_REDIRECTS`] redirects in a
//!    row. A `TRYAGAIN` starts the count again: a multi-key request on a slot being
//!    migrated whose keys neither node has all of is sent on by the source (ASK) and
//!    refused by the target (TRYAGAIN), back and forth until the migration ends (Redis
//!    < 7's group commit per slot sends such requests: batch.lua names several locks).
//!    Each is safe: these errors are given before a command runs.
//! 3. Every node runs the same script dialect: sharded (`SPUBLISH`) when the cluster
//!    runs Redis >= 7, classic before.
//! 4. A node's connections are opened with the seed's settings (credentials, TLS
//!    certificates), only the host and port differ.

mod sharded;
pub(crate) mod slots;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, Value};

use super::coalesce::Coalesced;
use super::replicas::SyncReplicas;
use super::standalone::{LinkSettings, Standalone};
use super::{BoxFuture, Dialect, Lane, Request, Subscriber, Transport};
use crate::error::{Error, Result};
use slots::{key_slot, SlotMap};

/// Redirects (MOVED, ASK) one request may follow (invariant 2).
const MAX_REDIRECTS: usize = 16;

/// The least time between two slot-map refreshes (invariant 1).
const REFRESH_EVERY: Duration = Duration::from_millis(100);

/// A Redis Cluster, reached through its primaries.
pub(crate) struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    /// This, for the background refreshes it starts.
    me: std::sync::Weak<Inner>,
    /// `cluster <seed>`, as shown where the deployment (not one node) is meant.
    label: String,
    /// The seeds' `host:port`, asked for the slot map when no known node answers.
    seeds: Vec<String>,
    /// The seed's connection settings (invariant 4).
    base: ConnectionInfo,
    /// How every node is reached (pool, timeouts, scripts, replica sync).
    link: LinkSettings,
    dialect: Dialect,
    map: parking_lot::RwLock<Arc<SlotMap>>,
    nodes: parking_lot::Mutex<HashMap<String, Arc<Standalone>>>,
    /// When a slot last changed owner (a failover, a migration).
    changed_at: parking_lot::Mutex<Option<Instant>>,
    /// The background refreshes (invariant 1).
    refresh: Coalesced,
}

/// What a failed request asks for (invariant 2).
enum Redirect {
    Moved(u16, String),
    Ask(String),
    Retry(Duration),
}

impl Cluster {
    /// Connects through `seed` (a node of the cluster, already known to answer):
    /// reads the slot map and the server version, within the connect timeout; every
    /// node is then reached with `link`.
    pub(crate) async fn connect(seed: Standalone, link: LinkSettings) -> Result<Cluster> {
        let base = seed.client().get_connection_info().clone();
        let connect_timeout = link.connect_timeout;
        let seed_addr = seed.addr().to_string();
        let host = host_of(&base);
        let slots = redis::cmd("CLUSTER").arg("SLOTS").clone();
        let reply = seed
            .send(Lane::Side, connect_timeout, Request::Cmd(&slots))
            .await?;
        let map = SlotMap::parse(&reply, &host).map_err(Error::config)?;
        let mut info = redis::cmd("INFO");
        info.arg("server");
        let info = seed
            .send(Lane::Side, connect_timeout, Request::Cmd(&info))
            .await?;
        let info: String = redis::from_redis_value(info).map_err(|e| Error::Redis {
            addr: seed_addr.clone(),
            source: e.into(),
        })?;
        let major = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
            .unwrap_or(0);
        let dialect = if major >= 7 {
            Dialect::Sharded
        } else {
            Dialect::Classic
        };
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            label: format!("cluster {seed_addr}"),
            seeds: vec![seed_addr],
            base,
            link,
            dialect,
            map: parking_lot::RwLock::new(Arc::new(map)),
            nodes: Default::default(),
            changed_at: Default::default(),
            refresh: Coalesced::new(REFRESH_EVERY),
        });
        Ok(Cluster { inner })
    }
}

impl Inner {
    /// The transport of the node at `addr`, made on first use (invariant 4).
    fn node(&self, addr: &str) -> Result<Arc<Standalone>> {
        if let Some(node) = self.nodes.lock().get(addr) {
            return Ok(node.clone());
        }
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| Error::config(format!("cluster node address {addr:?}")))?;
        let info = super::standalone::settings_at(&self.base, host, port);
        let node = Arc::new(self.link.open_at(info, self.dialect)?);
        Ok(self
            .nodes
            .lock()
            .entry(addr.to_string())
            .or_insert(node)
            .clone())
    }

    fn map(&self) -> Arc<SlotMap> {
        self.map.read().clone()
    }

    /// The primary serving `key`'s slot (any primary for a keyless request).
    fn owner(&self, key: Option<&[u8]>) -> Result<String> {
        let map = self.map();
        let owner = owner_in(&map, key).map(str::to_string);
        owner.ok_or_else(|| self.unserved(key))
    }

    /// The transport of the primary serving `key`'s slot (the request path: no
    /// address is copied).
    fn owner_node(&self, key: Option<&[u8]>) -> Result<Arc<Standalone>> {
        let map = self.map();
        match owner_in(&map, key) {
            Some(addr) => self.node(addr),
            None => Err(self.unserved(key)),
        }
    }

    fn unserved(&self, key: Option<&[u8]>) -> Error {
        Error::Redis {
            addr: self.label.clone(),
            source: redis::RedisError::from((
                redis::ErrorKind::ClusterConnectionNotFound,
                "no primary serves the slot",
                format!("slot {}", key.map_or(0, key_slot)),
            )),
        }
    }

    /// Records a MOVED answer at once (invariant 2).
    fn moved(&self, slot: u16, addr: &str) {
        let mut map = self.map.write();
        Arc::make_mut(&mut map).moved(slot, addr);
        *self.changed_at.lock() = Some(Instant::now());
    }

    /// Reads the slot map again, from the known primaries, then the seeds.
    async fn refresh(&self) -> Result<()> {
        let mut candidates: Vec<String> = self.map().primaries().to_vec();
        candidates.extend(self.seeds.iter().cloned());
        candidates.dedup();
        let slots = redis::cmd("CLUSTER").arg("SLOTS").clone();
        let mut last = None;
        for addr in candidates {
            let node = self.node(&addr)?;
            let reply = node
                .send(Lane::Side, self.link.connect_timeout, Request::Cmd(&slots))
                .await;
            let host = addr.rsplit_once(':').map_or("", |(h, _)| h);
            match reply.map(|r| SlotMap::parse(&r, host)) {
                Ok(Ok(map)) => {
                    let mut old = self.map.write();
                    let moved = (0..16384u16).any(|s| old.owner(s) != map.owner(s));
                    *old = Arc::new(map);
                    if moved {
                        *self.changed_at.lock() = Some(Instant::now());
                    }
                    return Ok(());
                }
                Ok(Err(e)) => last = Some(Error::config(e)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::config("no cluster node known")))
    }

    /// Sends `request` to the node serving its key, following redirects (invariant 2).
    async fn route(&self, lane: Lane, timeout: Duration, request: Request<'_>) -> Result<Value> {
        let started = Instant::now();
        let key = request.key();
        let mut target: Option<(String, bool)> = None;
        let mut redirects = 0;
        // The last TRYAGAIN retried: what the request ends with if its time runs out
        // while the cluster keeps saying it (not a bare timeout).
        let mut retried: Option<Error> = None;
        loop {
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(retried.unwrap_or_else(|| Error::Timeout {
                    addr: self.label.clone(),
                    after: timeout,
                }));
            }
            let (node, asking) = match target.take() {
                Some((addr, asking)) => (self.node(&addr)?, asking),
                None => (self.owner_node(key)?, false),
            };
            let reply = match asking {
                false => node.send(lane, left, request).await,
                true => asking_send(&node, lane, left, request, self.dialect).await,
            };
            let e = match reply {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let redirect = match redirect(&e) {
                Some(r @ Redirect::Retry(_)) => r,
                Some(r) if redirects < MAX_REDIRECTS => r,
                _ => {
                    // (CLUSTERDOWN too: retried by the caller, within its bound.)
                    if e.is_unavailable() {
                        // The node may have failed over (invariant 1).
                        self.schedule_refresh();
                    }
                    // Out of time while the cluster is down: that is the cause.
                    return Err(match retried {
                        Some(r) if e.is_timeout() => r,
                        _ => e,
                    });
                }
            };
            match redirect {
                Redirect::Moved(slot, to) => {
                    redirects += 1;
                    tracing::debug!(slot, from = node.addr(), to = %to, "cluster slot moved");
                    self.moved(slot, &to);
                    self.schedule_refresh();
                    target = Some((to, false));
                }
                Redirect::Ask(to) => {
                    redirects += 1;
                    target = Some((to, true));
                }
                Redirect::Retry(pause) => {
                    // A migration in progress, not a redirect loop: an ASK answered by
                    // TRYAGAIN at its target (keys split, or missing, between the two
                    // nodes) bounces for as long as the migration lasts (invariant 2).
                    redirects = 0;
                    self.schedule_refresh();
                    retried = Some(e);
                    tokio::time::sleep(pause.min(left)).await;
                }
            }
        }
    }

    /// Starts a background refresh unless one is running or one ran less than
    /// [`REFRESH_EVERY`] ago (invariant 1).
    fn schedule_refresh(&self) {
        if !self.refresh.claim() {
            return;
        }
        let Some(this) = self.me.upgrade() else {
            self.refresh.unclaim();
            return;
        };
        tokio::spawn(async move {
            let refreshed = async {
                if let Err(e) = this.refresh().await {
                    tracing::debug!(cluster = %this.label, error = %e, "slot map refresh failed");
                }
            };
            this.refresh.run(refreshed).await;
        });
    }
}

/// The primary serving `key`'s slot in `map` (any primary for a keyless request).
fn owner_in<'m>(map: &'m SlotMap, key: Option<&[u8]>) -> Option<&'m str> {
    match key {
        Some(key) => map.owner(key_slot(key)),
        None => map.primaries().first().map(String::as_str),
    }
}

/// Sends `request` preceded by `ASKING`, in one pipeline on the node's lane (a script
/// goes as EVAL: a node importing a slot may not have it cached).
async fn asking_send(
    node: &Standalone,
    lane: Lane,
    timeout: Duration,
    request: Request<'_>,
    dialect: Dialect,
) -> Result<Value> {
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING").ignore();
    let mut synced = None;
    match request {
        Request::Eval(inv) => {
            pipe.add_command(inv.eval(dialect));
        }
        Request::Synced(inv) => {
            pipe.add_command(inv.eval(dialect));
            let (wanted, wait) = node.sync_wait();
            if let Some(wait) = wait {
                pipe.add_command(wait);
            }
            synced = Some(wanted);
        }
        Request::Cmd(cmd) => {
            pipe.add_command(cmd.clone());
        }
        Request::Pipe(p) => {
            // ASKING lets only the next command in: each of a pipeline's gets its own.
            for (i, cmd) in p.cmd_iter().enumerate() {
                if i > 0 {
                    pipe.cmd("ASKING").ignore();
                }
                pipe.add_command(cmd.clone());
            }
        }
    }
    let timeout = timeout + synced.map_or(Duration::ZERO, |_| node.sync_timeout());
    let reply = node.send(lane, timeout, Request::Pipe(&pipe)).await?;
    match (request, reply) {
        (Request::Pipe(_), reply) => Ok(reply),
        (Request::Synced(_), Value::Array(mut items)) if !items.is_empty() => {
            let wanted = synced.unwrap_or(0);
            let acked = match items.get(1) {
                Some(Value::Int(n)) => (*n).max(0) as usize,
                _ => 0,
            };
            let reply = items.swap_remove(0);
            Ok(super::standalone::synced_reply(
                reply,
                acked,
                wanted,
                node.addr(),
            ))
        }
        (_, Value::Array(mut items)) if items.len() == 1 => Ok(items.remove(0)),
        (_, other) => Err(Error::Redis {
            addr: node.addr().to_string(),
            source: redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected reply to ASKING",
                format!("{other:?}"),
            )),
        }),
    }
}

/// The redirect a node's error asks for, if it is one (invariant 2).
fn redirect(e: &Error) -> Option<Redirect> {
    let Error::Redis { source, .. } = e else {
        return None;
    };
    match source.code()? {
        "MOVED" => {
            let (addr, slot) = redirect_node(source)?;
            Some(Redirect::Moved(slot, addr))
        }
        "ASK" => Some(Redirect::Ask(redirect_node(source)?.0)),
        "TRYAGAIN" => Some(Redirect::Retry(Duration::from_millis(20))),
        _ => None,
    }
}

/// `(addr, slot)` of a MOVED or ASK error, also when it is a pipeline's (the first
/// failed command's: a pipeline's commands share one slot here), whose detail redis-rs
/// does not expose as one error's.
fn redirect_node(source: &redis::RedisError) -> Option<(String, u16)> {
    if let Some((addr, slot)) = source.redirect_node() {
        return Some((addr.to_string(), slot));
    }
    let items = source.clone().into_server_errors()?;
    let (_, first) = items.first()?;
    let mut words = first.details()?.split_ascii_whitespace();
    let slot = words.next()?.parse().ok()?;
    Some((words.next()?.to_string(), slot))
}

fn host_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        ConnectionAddr::Unix(_) => String::new(),
        #[allow(unreachable_patterns)]
        _ => String::new(),
    }
}

impl Transport for Cluster {
    fn addr(&self) -> &str {
        &self.inner.label
    }

    fn timeout(&self) -> Duration {
        self.inner.link.timeout
    }

    fn connect_timeout(&self) -> Duration {
        self.inner.link.connect_timeout
    }

    fn send<'a>(
        &'a self,
        lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(self.inner.route(lane, timeout, request))
    }

    fn subscriber(&self) -> BoxFuture<'_, redis::RedisResult<Box<dyn Subscriber>>> {
        Box::pin(sharded::open(self.inner.clone()))
    }

    fn primary_addrs(&self) -> Vec<String> {
        self.inner.map().primaries().to_vec()
    }

    fn send_to<'a>(
        &'a self,
        addr: &'a str,
        lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move { self.inner.node(addr)?.send(lane, timeout, request).await })
    }

    fn shard(&self, key: &[u8]) -> usize {
        usize::from(key_slot(key))
    }

    fn node(&self, key: &[u8]) -> usize {
        self.inner.map().owner_index(key_slot(key))
    }

    fn node_batches(&self) -> bool {
        self.inner.dialect == Dialect::Sharded
    }

    fn primaries(&self) -> usize {
        self.inner.map().primaries().len().max(1)
    }

    fn serving(&self, key: &[u8]) -> String {
        self.inner
            .owner(Some(key))
            .unwrap_or_else(|_| self.inner.label.clone())
    }

    fn syncs(&self) -> bool {
        self.inner.link.sync.0 != SyncReplicas::Off
    }

    fn sync_timeout(&self) -> Duration {
        self.inner.link.sync.1
    }

    fn changed_at(&self, key: &[u8]) -> Option<Instant> {
        let moved = *self.inner.changed_at.lock();
        let node = self.inner.owner_node(Some(key)).ok();
        moved.max(node.and_then(|n| n.changed_at(key)))
    }

    fn replica_sync(&self, key: &[u8]) -> Option<super::replicas::ReplicaSync> {
        self.inner.owner_node(Some(key)).ok()?.replica_sync(key)
    }
}
