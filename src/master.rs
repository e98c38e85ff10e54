//! One Redis master: a few long-lived multiplexed connections taken from a deadpool
//! pool, every command bounded by the master timeout, errors tagged with the address.
//!
//! Invariants:
//! 1. A command never waits longer than `master_timeout` (connecting included: a
//!    SIGSTOPped master costs one timeout, not a TCP timeout).
//! 2. A connection that failed with an I/O error is discarded, together with the other
//!    slots' connections to the same master (a crashed or restarted master broke them
//!    all); the next command opens a fresh one through the pool, so a restarted master
//!    costs one failed command, not one per slot.
//! 3. Connections are reused without deadpool's per-checkout PING (a round trip per
//!    command): each slot keeps its pooled object checked out and hands out clones of
//!    the multiplexed connection.
//! 4. Every lock script (acquire, release, batch, fair, force) goes over slot 0, one
//!    ordered connection: a release that timed out on our side but was already written
//!    is executed before any later acquire by the same holder, so it can never delete a
//!    newer grant. Renewals and queries use the other slots, so a flood of lock traffic
//!    cannot hold up the watchdog.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deadpool_redis::{Connection as Pooled, Manager, Pool};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, FromRedisValue};

use crate::error::{Error, Result};

/// A command connection slot: a pooled object kept checked out.
#[derive(Default)]
struct Slot {
    conn: parking_lot::Mutex<Option<Pooled>>,
    refill: tokio::sync::Mutex<()>,
}

/// One master of the client.
pub(crate) struct Master {
    addr: String,
    client: redis::Client,
    pool: Pool,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    timeout: Duration,
    connect_timeout: Duration,
    batcher: crate::batch::Batcher,
}

impl Master {
    pub(crate) fn new(
        info: redis::ConnectionInfo,
        pool_size: usize,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self> {
        let addr = info.addr().to_string();
        let redis_err = |source| Error::Redis {
            addr: addr.clone(),
            source,
        };
        let client = redis::Client::open(info.clone()).map_err(redis_err)?;
        let conn_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None);
        let manager = Manager::new_with_config(info, conn_config).map_err(redis_err)?;
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .build()
            .map_err(|e| Error::Config(format!("master {addr}: {e}")))?;
        Ok(Master {
            addr,
            client,
            pool,
            slots: (0..pool_size).map(|_| Slot::default()).collect(),
            next: AtomicUsize::new(0),
            timeout,
            connect_timeout,
            batcher: Default::default(),
        })
    }

    /// The group-commit queue (see batch.rs).
    pub(crate) fn batcher(&self) -> &crate::batch::Batcher {
        &self.batcher
    }

    /// `host:port`, as shown in errors.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// The per-command timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The client used to open this master's pub/sub connection.
    pub(crate) fn redis_client(&self) -> &redis::Client {
        &self.client
    }

    /// Wraps a client error with this master's address.
    pub(crate) fn err(&self, source: redis::RedisError) -> Error {
        Error::Redis {
            addr: self.addr.clone(),
            source,
        }
    }

    fn timed_out(&self, after: Duration) -> Error {
        Error::Timeout {
            addr: self.addr.clone(),
            after,
        }
    }

    /// A connection from slot `i`, opening one through the pool when the slot is empty.
    async fn conn(&self, i: usize) -> Result<MultiplexedConnection> {
        if let Some(c) = self.slots[i].conn.lock().as_ref() {
            return Ok((**c).clone());
        }
        // Boxed: the pool's future is large and only needed on this cold path; inline
        // it would be copied around with every command's future.
        Box::pin(self.refill(i)).await
    }

    async fn refill(&self, i: usize) -> Result<MultiplexedConnection> {
        let slot = &self.slots[i];
        let _refill = slot.refill.lock().await;
        if let Some(c) = slot.conn.lock().as_ref() {
            return Ok((**c).clone());
        }
        let pooled = self.pool.get().await.map_err(|e| match e {
            deadpool_redis::PoolError::Backend(source) => self.err(source),
            other => Error::Config(format!("master {}: pool: {other}", self.addr)),
        })?;
        let conn = (*pooled).clone();
        *slot.conn.lock() = Some(pooled);
        Ok(conn)
    }

    /// Drops every slot's connection after an I/O error on one of them (invariant 2).
    /// Commands in flight keep their clones and finish.
    fn discard_all(&self) {
        for slot in self.slots.iter() {
            if let Some(pooled) = slot.conn.lock().take() {
                drop(Pooled::take(pooled));
            }
        }
    }

    /// Runs `f` on connection slot `i`, bounded by `timeout` (connecting included).
    async fn run_on<T, F, Fut>(&self, i: usize, timeout: Duration, f: F) -> Result<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let work = async {
            let conn = self.conn(i).await?;
            f(conn).await.map_err(|e| {
                if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
                    self.discard_all();
                }
                self.err(e)
            })
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(self.timed_out(timeout)),
        }
    }

    /// Runs a lock script within the master timeout, on the lock lane (invariant 4).
    pub(crate) async fn run<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.run_on(0, self.timeout, f).await
    }

    /// Runs `f` on a side connection (renewals, queries, PING), bounded by `timeout`.
    pub(crate) async fn run_side<T, F, Fut>(&self, timeout: Duration, f: F) -> Result<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let n = self.slots.len();
        let i = match n {
            1 => 0,
            _ => 1 + self.next.fetch_add(1, Ordering::Relaxed) % (n - 1),
        };
        self.run_on(i, timeout, f).await
    }

    /// Runs one read-only command on a side connection within the master timeout. A
    /// read is idempotent, so a connection that turned out broken (the master
    /// restarted since it was last used) costs one retry on a fresh one, not an error.
    pub(crate) async fn query<T: FromRedisValue + Send>(&self, cmd: redis::Cmd) -> Result<T> {
        let once = |cmd: redis::Cmd| {
            self.run_side(self.timeout, |mut c| async move {
                cmd.query_async(&mut c).await
            })
        };
        match once(cmd.clone()).await {
            Err(Error::Redis { source, .. })
                if source.is_io_error() || source.is_connection_dropped() =>
            {
                once(cmd).await
            }
            other => other,
        }
    }
}
