//! The standalone transport: one Redis server, reached through a few long-lived
//! multiplexed connections taken from a deadpool pool; every request bounded by a
//! timeout, errors tagged with the address.
//!
//! Invariants:
//! 1. A request never waits longer than its timeout (connecting included: a
//!    SIGSTOPped server costs one timeout, not a TCP timeout).
//! 2. A connection that failed with an I/O error is discarded, together with the other
//!    slots' connections to the same server (a crashed or restarted server broke them
//!    all); the next request opens a fresh one through the pool, so a restarted server
//!    costs one failed request, not one per slot.
//! 3. Connections are reused without deadpool's per-checkout PING (a round trip per
//!    request): each slot keeps its pooled object checked out and hands out clones of
//!    the multiplexed connection.
//! 4. [`Lane::Lock`] is slot 0, one ordered connection; [`Lane::Side`] spreads over
//!    the other slots (see [`Lane`]).
//! 5. Lock-lane requests are written in the order they were sent, also when the slot
//!    must first be refilled: a FIFO ticket is held from the start of a send until its
//!    request is written (the first poll of the connection's call, made without tokio's
//!    budget). Without it, a request that waits for a fresh connection could be
//!    overtaken by a later one (a release overtaking the acquire it undoes would leave
//!    a grant behind). "Written" means in redis-rs's queue of the connection, which
//!    keeps its order only while it is not full: the connection's [`Flow`] admits a
//!    request only while it has room (flow.rs).
//! 6. A script's first call on this server (since its connections were last discarded,
//!    or since a NOSCRIPT) is written as one pipeline, `SCRIPT LOAD` then `EVALSHA`
//!    ([`Cached`]), and later calls as EVALSHA alone: a call never meets NOSCRIPT on a
//!    fresh or restarted server, whose reload would be written after requests written
//!    meanwhile, reordering them (issue 11.7). Nothing is loaded before it is needed: a
//!    process that takes one simple lock sends two small scripts, not the catalogue.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use deadpool_redis::{Connection as Pooled, Manager, Pool};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};

use super::flow::{Flow, QUEUE};
use super::replicas::{Replicas, SyncReplicas};
use super::script::Cached;
use super::subscriber::Classic;
use super::{BoxFuture, Dialect, Invocation, Lane, Request, Subscriber, Transport};
use crate::error::{Error, Result};
use crate::telemetry;

/// A connection slot: a pooled object kept checked out, and the count of its ordered
/// requests (flow.rs; used on the lock lane's slot).
#[derive(Default)]
struct Slot {
    conn: parking_lot::Mutex<Option<(Pooled, Arc<Flow>)>>,
    refill: tokio::sync::Mutex<()>,
}

/// One standalone Redis server.
pub(crate) struct Standalone {
    addr: String,
    client: redis::Client,
    pool: Pool,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    timeout: Duration,
    connect_timeout: Duration,
    /// The scripts this server is known to hold (invariant 6).
    cached: Cached,
    /// The scripts' variant this server runs (a cluster node with sharded pub/sub runs
    /// the sharded one).
    dialect: Dialect,
    /// Replica-synced acquisitions (replicas.rs).
    replicas: Replicas,
    /// The FIFO ticket of lock-lane writes (invariant 5).
    order: tokio::sync::Mutex<()>,
    /// When the connections were last discarded after an I/O error (invariant 2).
    reset_at: parking_lot::Mutex<Option<std::time::Instant>>,
}

impl Standalone {
    /// A transport to the server of `client`, with `pool_size` command connections
    /// (opened on first use) and requests bounded by `timeout` by default.
    ///
    /// `client` carries the address and the connection settings, TLS certificates
    /// included; the pool opens its connections from the same connection info.
    pub(crate) fn new(
        client: redis::Client,
        pool_size: usize,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self> {
        let info = client.get_connection_info().clone();
        let addr = info.addr().to_string();
        let redis_err = |source| Error::Redis {
            addr: addr.clone(),
            source,
        };
        let conn_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            // Never full: the lock lane's order depends on it (flow.rs invariant 1).
            .set_pipeline_buffer_size(QUEUE);
        let manager = Manager::new_with_config(info, conn_config).map_err(redis_err)?;
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .build()
            .map_err(|e| Error::config_from(format!("master {addr}: pool"), e))?;
        Ok(Standalone {
            addr,
            client,
            pool,
            slots: (0..pool_size).map(|_| Slot::default()).collect(),
            next: AtomicUsize::new(0),
            timeout,
            connect_timeout,
            cached: Cached::default(),
            dialect: Dialect::Classic,
            replicas: Replicas::new(SyncReplicas::Off, Duration::ZERO),
            order: tokio::sync::Mutex::new(()),
            reset_at: parking_lot::Mutex::new(None),
        })
    }

    /// Runs the scripts' `dialect` variant (set before the first request).
    pub(crate) fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Syncs acquisitions to replicas per `mode`, waiting at most `timeout`.
    pub(crate) fn with_sync(mut self, mode: SyncReplicas, timeout: Duration) -> Self {
        self.replicas = Replicas::new(mode, timeout);
        self
    }

    /// The acknowledgements a synced write waits for now and the command that waits
    /// for them (none: nothing to wait for).
    pub(crate) fn sync_wait(&self) -> (usize, Option<redis::Cmd>) {
        let wanted = self.replicas.wanted();
        self.replicas.waited(wanted);
        (wanted, self.replicas.wait_cmd(wanted))
    }

    /// Counts the replicas on `conn` and which are eligible (replicas.rs invariant 1).
    async fn count_replicas(&self, conn: &mut MultiplexedConnection) -> Result<()> {
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        match info.query_async::<String>(conn).await {
            Ok(text) => self.replicas.record(&text),
            // An ACL without INFO: no replica can be seen (docs/errors.md says to grant
            // it, or to name a count).
            Err(e) if e.code() == Some("NOPERM") => {
                tracing::warn!(master = %self.addr, "INFO is not permitted: SyncReplicas::Auto \
                    sees no replicas; grant +info or use SyncReplicas::Count");
                self.replicas.record("");
            }
            Err(e) => return Err(self.err(e)),
        }
        Ok(())
    }

    /// How much longer a synced write may take than a plain one.
    pub(crate) fn sync_timeout(&self) -> Duration {
        self.replicas.timeout()
    }

    /// The connection settings of this server (a cluster derives its other nodes').
    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }

    /// `source` as the error of this master: named for its cause (error.rs
    /// `from_link`: authentication, database, protocol, then the server's codes).
    fn err(&self, source: redis::RedisError) -> Error {
        let settings = self.client.get_connection_info().redis_settings();
        crate::transport::server_errors::from_link(
            &self.addr,
            settings.username(),
            settings.db(),
            source,
        )
    }

    /// A connection from slot `i`, opening one through the pool when the slot is empty.
    async fn conn(&self, i: usize) -> Result<(MultiplexedConnection, Arc<Flow>)> {
        if let Some((c, flow)) = self.slots[i].conn.lock().as_ref() {
            return Ok(((**c).clone(), flow.clone()));
        }
        // Boxed: the pool's future is large and only needed on this cold path; inline
        // it would be copied around with every request's future.
        Box::pin(self.refill(i)).await
    }

    async fn refill(&self, i: usize) -> Result<(MultiplexedConnection, Arc<Flow>)> {
        let slot = &self.slots[i];
        let _refill = slot.refill.lock().await;
        if let Some((c, flow)) = slot.conn.lock().as_ref() {
            return Ok(((**c).clone(), flow.clone()));
        }
        let pooled = self.pool.get().await.map_err(|e| match e {
            // The connect timeout ran out (no answer to the TCP handshake, or to the
            // HELLO / AUTH that follows): a timeout with its duration, as a request's.
            deadpool_redis::PoolError::Backend(source) if source.is_timeout() => Error::Timeout {
                addr: self.addr.clone(),
                after: self.connect_timeout,
            },
            deadpool_redis::PoolError::Backend(source) => self.err(source),
            other => Error::config_from(format!("master {}: pool", self.addr), other),
        })?;
        let mut conn = (*pooled).clone();
        if self.replicas.needs_count()
            && let Err(e) = self.count_replicas(&mut conn).await
        {
            drop(Pooled::take(pooled));
            return Err(e);
        }
        let flow = Arc::new(Flow::default());
        *slot.conn.lock() = Some((pooled, flow.clone()));
        Ok((conn, flow))
    }

    /// Drops every slot's connection after an I/O error on one of them (invariant 2).
    /// Requests in flight keep their clones and finish.
    fn discard_all(&self) {
        *self.reset_at.lock() = Some(std::time::Instant::now());
        // The server may have restarted without the scripts (invariant 6).
        self.cached.forget();
        for slot in self.slots.iter() {
            if let Some((pooled, _)) = slot.conn.lock().take() {
                drop(Pooled::take(pooled));
            }
        }
    }

    /// The slot of a lane (invariant 4).
    fn slot(&self, lane: Lane) -> usize {
        let n = self.slots.len();
        match (lane, n) {
            (Lane::Lock, _) | (Lane::Side, 1) => 0,
            (Lane::Side, _) => 1 + self.next.fetch_add(1, Ordering::Relaxed) % (n - 1),
        }
    }

    /// Runs `request` on `conn`; a synced write also waits for its replicas. Its first
    /// poll writes the request (invariant 5).
    async fn call(
        &self,
        conn: &mut MultiplexedConnection,
        request: Request<'_>,
    ) -> redis::RedisResult<Value> {
        match request {
            Request::Eval(inv) => inv.run(conn, self.dialect, &self.cached).await,
            Request::Synced(inv) => self.call_synced(conn, inv).await,
            Request::Cmd(cmd) => cmd.query_async(conn).await,
            Request::Pipe(pipe) => pipe.query_async(conn).await,
        }
    }

    /// Runs `inv`, then waits for the replicas (replicas.rs invariant 2).
    async fn call_synced(
        &self,
        conn: &mut MultiplexedConnection,
        inv: &Invocation,
    ) -> redis::RedisResult<Value> {
        let (mut wanted, wait) = self.sync_wait();
        let (reply, acked) = match &wait {
            Some(wait) => {
                let (reply, acked) = inv.run_then(conn, self.dialect, wait, &self.cached).await?;
                if let Value::ServerError(e) = &acked {
                    // The write ran, the wait was refused (a `WAITAOF` after the
                    // append-only file was switched off): nothing acknowledged, so
                    // the caller undoes it (NotReplicated); the cause goes to the log.
                    tracing::warn!(node = %self.addr, error = %e, "replica sync refused by the server; counted as no acknowledgement");
                }
                (reply, self.replicas.acked(&acked))
            }
            None => (inv.run(conn, self.dialect, &self.cached).await?, 0),
        };
        // Replicas that did not acknowledge may have stopped being eligible since the
        // count (restarted, resyncing): judged again on a fresh count (replicas.rs
        // invariant 3).
        if acked < wanted && self.replicas.counts() && self.count_replicas(conn).await.is_ok() {
            wanted = wanted.min(self.replicas.wanted());
            self.replicas.waited(wanted);
        }
        Ok(synced_reply(reply, acked, wanted, &self.addr))
    }

    /// Admits a request of the lock lane's connection (`ordered`: its ticket is held)
    /// by the connection's flow, so that it goes in the connection's queue in its first
    /// poll (flow.rs): `Some(its number)`; `Some(None)` for a request not counted;
    /// `None` if the connection stays full until `write_by`.
    async fn admit(
        &self,
        ordered: bool,
        flow: &Arc<Flow>,
        conn: &MultiplexedConnection,
        write_by: tokio::time::Instant,
    ) -> Option<Option<u64>> {
        match ordered {
            true => flow.admit(conn, write_by, self.timeout).await.map(Some),
            false => Some(None),
        }
    }

    async fn send_on(&self, lane: Lane, timeout: Duration, request: Request<'_>) -> Result<Value> {
        // A synced write may also wait for its replicas. Their count is read when a
        // connection is opened and, once stale, on the synced write's connection just
        // before it is written, still holding the lock lane's ticket (so no later
        // request overtakes it, invariant 5): the write waits for the replicas as they
        // are now, not as they were a while ago (a replica restarted meanwhile and
        // resyncing is not waited for).
        //
        // A synced write's extra time only starts once it is written: until then it
        // has the plain `timeout`, like every request, so a request sent after it on
        // the lock lane (an undoing release) never gives up on being written before
        // it does (invariant 5 keeps them in order only if that holds).
        let (base, write_by) = (timeout, tokio::time::Instant::now() + timeout);
        let timeout = match request {
            Request::Synced(_) => timeout + self.replicas.timeout(),
            _ => timeout,
        };
        let late = || Error::Timeout {
            addr: self.addr.clone(),
            after: base,
        };
        let work = async {
            let slot = self.slot(lane);
            // Invariant 5: the ticket is taken in the first poll, in send order, by
            // every request on the lock lane's connection (slot 0: the side lane's too
            // when it is the only one).
            let ticket = match slot {
                // Uncontended (the usual case): no await at all.
                0 => Some(match self.order.try_lock() {
                    Ok(ticket) => ticket,
                    Err(_) => tokio::time::timeout_at(write_by, self.order.lock())
                        .await
                        .map_err(|_| late())?,
                }),
                _ => None,
            };
            let (mut conn, flow) = tokio::time::timeout_at(write_by, self.conn(slot))
                .await
                .map_err(|_| late())??;
            let ordered = ticket.is_some();
            // (Not for renewals, on the side lane: see `syncs_renewals`.)
            if lane == Lane::Lock
                && matches!(request, Request::Synced(_))
                && self.replicas.needs_count()
            {
                let n = self
                    .admit(ordered, &flow, &conn, write_by)
                    .await
                    .ok_or_else(late)?;
                // A failed count keeps the old one; the write then fails or succeeds
                // on its own.
                let count = self.count_replicas(&mut conn);
                if tokio::time::timeout_at(write_by, count).await.is_ok()
                    && let Some(n) = n
                {
                    flow.answered(n);
                }
            }
            let n = self
                .admit(ordered, &flow, &conn, write_by)
                .await
                .ok_or_else(late)?;
            let call = self.call(&mut conn, request);
            let mut call = std::pin::pin!(call);
            // The first poll writes the request to the connection; then the next
            // request may go. Without tokio's budget: a spent one would leave the
            // request unwritten (flow.rs).
            let once = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx)));
            let first = tokio::task::unconstrained(once).await;
            drop(ticket);
            let reply = match first {
                Poll::Ready(reply) => reply,
                Poll::Pending => call.await,
            };
            if let Some(n) = n {
                flow.answered(n);
            }
            reply.map_err(|e| {
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
                    self.discard_all();
                }
                crate::transport::server_errors::name_refused(self.err(e), || request.describe())
            })
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                addr: self.addr.clone(),
                after: timeout,
            }),
        }
    }
}

impl Transport for Standalone {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn timeout(&self) -> Duration {
        self.timeout
    }

    fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    fn send<'a>(
        &'a self,
        lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let reply = self.send_on(lane, timeout, request).await;
            if reply.is_err() {
                telemetry::error(&self.addr);
            }
            reply
        })
    }

    fn syncs(&self) -> bool {
        // With no replica to wait for, an acquisition is an ordinary call (no cost for
        // a master without replicas), except once its count is stale: that synced call
        // counts them again (replicas.rs invariant 1).
        self.replicas.active()
    }

    fn grants_need_replicas(&self) -> bool {
        self.replicas.known_to_wait()
    }

    fn syncs_renewals(&self) -> bool {
        self.replicas.wanted() > 0
    }

    fn sync_timeout(&self) -> Duration {
        self.replicas.timeout()
    }

    fn replica_sync(&self, _key: &[u8]) -> Option<super::replicas::ReplicaSync> {
        self.replicas.snapshot()
    }

    fn changed_at(&self, _key: &[u8]) -> Option<std::time::Instant> {
        *self.reset_at.lock()
    }

    fn subscriber(&self) -> BoxFuture<'_, redis::RedisResult<Box<dyn Subscriber>>> {
        Box::pin(async {
            let pubsub = self.client.get_async_pubsub().await?;
            Ok(Box::new(Classic::new(pubsub)) as Box<dyn Subscriber>)
        })
    }
}

/// How every server of one deployment is reached (a cluster's nodes, Sentinel's
/// successive primaries, each Redlock master): pool, timeouts, replica sync.
#[derive(Clone)]
pub(crate) struct LinkSettings {
    pub(crate) pool_size: usize,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) sync: (SyncReplicas, Duration),
}

impl LinkSettings {
    /// A transport to the server of `client`, running the scripts' `dialect`.
    pub(crate) fn open(&self, client: redis::Client, dialect: Dialect) -> Result<Standalone> {
        let link = Standalone::new(client, self.pool_size, self.timeout, self.connect_timeout)?;
        Ok(link
            .with_dialect(dialect)
            .with_sync(self.sync.0, self.sync.1))
    }

    /// The same, to the server `info` names.
    pub(crate) fn open_at(
        &self,
        info: redis::ConnectionInfo,
        dialect: Dialect,
    ) -> Result<Standalone> {
        let addr = info.addr().to_string();
        let client = redis::Client::open(info).map_err(|source| Error::Redis { addr, source })?;
        self.open(client, dialect)
    }
}

/// `base`'s connection settings (credentials, database, TLS certificates) for the
/// server at `host:port`: how a cluster reaches its other nodes and Sentinel the
/// primary it is told about.
pub(crate) fn settings_at(
    base: &redis::ConnectionInfo,
    host: &str,
    port: u16,
) -> redis::ConnectionInfo {
    use redis::ConnectionAddr;
    base.clone().set_addr(match base.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_string(), port),
    })
}

/// The answer of a [`Request::Synced`] (replicas.rs invariant 2).
pub(crate) fn synced_reply(reply: Value, acked: usize, wanted: usize, node: &str) -> Value {
    Value::Array(vec![
        reply,
        Value::Int(acked as i64),
        Value::Int(wanted as i64),
        Value::BulkString(node.as_bytes().to_vec()),
    ])
}
