//! Redisson's fair lock as a Java client drives it, for interop tests: Redisson's own
//! scripts (tests/redisson/fair_*.lua) sent by EVAL with the Java client's clock, its
//! own per-thread channel `redisson_lock__channel:{name}:<uuid>:<threadId>` on a real
//! pub/sub connection, and `RedissonLock`'s wait loops: try, subscribe, wait at most the
//! TTL the script returned, retry; `tryLock(waitTime)` runs the failed-acquire script
//! when it gives up.
//!
//! One deliberate difference: where Java retries at once (the script answered 0: the
//! lock is free but another waiter is ahead), the driver pauses 1 ms, to spare a
//! loaded test machine a hot loop.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubStream};
use tokio::time::Instant;

use super::RedisServer;

pub const FAIR_LOCK: &str = include_str!("../../tests/redisson/fair_lock.lua");
pub const FAIR_UNLOCK: &str = include_str!("../../tests/redisson/fair_unlock.lua");
pub const FAIR_ACQUIRE_FAILED: &str = include_str!("../../tests/redisson/fair_acquire_failed.lua");

/// Redisson's default `fairLockWaitTimeout` (RedissonFairLock's `threadWaitTime`).
pub const THREAD_WAIT: Duration = Duration::from_secs(300);

/// Redisson's default lease without a watchdog renewal (`lockWatchdogTimeout`).
pub const WATCHDOG_LEASE: Duration = Duration::from_secs(30);

/// The node id of the simulated Java client.
pub const JAVA_ID: &str = "6f1c2b1e-1d4a-4b7e-9a51-3c2d7e8f9a10";

/// The Java client's clock, `System.currentTimeMillis()`.
pub fn java_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn derived(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// One Java thread's `RFairLock` on one master (`redisson.getFairLock(name)` used from
/// thread `thread`).
pub struct JavaFairLock {
    client: redis::Client,
    conn: MultiplexedConnection,
    name: String,
    holder: String,
    /// `threadWaitTime`: Config.fairLockWaitTimeout.
    thread_wait: Duration,
    /// The lease each acquisition sets (no watchdog renewal here).
    lease: Duration,
    sub: Option<PubSubStream>,
    requests: u64,
}

impl JavaFairLock {
    /// Thread `thread` of the Java client on `server`, with Redisson's defaults.
    pub async fn new(server: &RedisServer, name: &str, thread: u64) -> Self {
        Self::with(server, name, thread, THREAD_WAIT, WATCHDOG_LEASE).await
    }

    /// The same with another `fairLockWaitTimeout` and lease.
    pub async fn with(
        server: &RedisServer,
        name: &str,
        thread: u64,
        thread_wait: Duration,
        lease: Duration,
    ) -> Self {
        let client = redis::Client::open(server.url()).unwrap();
        let conn = client
            .get_multiplexed_async_connection_with_config(&crate::conn::async_config())
            .await
            .unwrap();
        JavaFairLock {
            client,
            conn,
            name: name.to_string(),
            holder: format!("{JAVA_ID}:{thread}"),
            thread_wait,
            lease,
            sub: None,
            requests: 0,
        }
    }

    /// `<uuid>:<threadId>`, the field and queue entry of this thread.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Its own channel: what a fair release publishes on to wake it.
    pub fn channel(&self) -> String {
        format!(
            "{}:{}",
            derived("redisson_lock__channel", &self.name),
            self.holder
        )
    }

    /// `tryLockInnerAsync` (EVAL_LONG): `None` acquired, else the ms to wait at most.
    /// `wait`: tryLock's waitTime, `None` for lock() (then threadWaitTime is sent).
    pub async fn try_acquire(&mut self, wait: Option<Duration>) -> Option<i64> {
        let wait_ms = wait.unwrap_or(self.thread_wait).as_millis() as u64;
        redis::cmd("EVAL")
            .arg(FAIR_LOCK)
            .arg(3)
            .arg(&self.name)
            .arg(derived("redisson_lock_queue", &self.name))
            .arg(derived("redisson_lock_timeout", &self.name))
            .arg(self.lease.as_millis() as u64)
            .arg(&self.holder)
            .arg(wait_ms)
            .arg(java_now_ms())
            .query_async(&mut self.conn)
            .await
            .unwrap()
    }

    /// `unlockInnerAsync`: None (not held), Some(0) still held, Some(1) released.
    pub async fn unlock(&mut self) -> Option<i64> {
        self.requests += 1;
        let latch = format!(
            "{}:req-{}-{}",
            derived("redisson_unlock_latch", &self.name),
            self.holder,
            self.requests
        );
        let reply = redis::cmd("EVAL")
            .arg(FAIR_UNLOCK)
            .arg(5)
            .arg(&self.name)
            .arg(derived("redisson_lock_queue", &self.name))
            .arg(derived("redisson_lock_timeout", &self.name))
            .arg(derived("redisson_lock__channel", &self.name))
            .arg(&latch)
            .arg("0")
            .arg(self.lease.as_millis() as u64)
            .arg(&self.holder)
            .arg(java_now_ms())
            .arg("publish")
            .arg(5_000)
            .query_async(&mut self.conn)
            .await
            .unwrap();
        // RedissonBaseLock deletes the latch once the unlock answered.
        let _: i64 = redis::cmd("DEL")
            .arg(&latch)
            .query_async(&mut self.conn)
            .await
            .unwrap();
        reply
    }

    /// `acquireFailedAsync`: leaves the queue, giving its wait back to those behind.
    pub async fn acquire_failed(&mut self, wait: Option<Duration>) {
        let wait_ms = wait.unwrap_or(self.thread_wait).as_millis() as u64;
        let () = redis::cmd("EVAL")
            .arg(FAIR_ACQUIRE_FAILED)
            .arg(2)
            .arg(derived("redisson_lock_queue", &self.name))
            .arg(derived("redisson_lock_timeout", &self.name))
            .arg(&self.holder)
            .arg(wait_ms)
            .query_async(&mut self.conn)
            .await
            .unwrap();
    }

    /// Subscribes to its own channel (once), as `RedissonFairLock.subscribe`.
    async fn subscribe(&mut self) {
        if self.sub.is_none() {
            let mut pubsub = self.client.get_async_pubsub().await.unwrap();
            pubsub.subscribe(self.channel()).await.unwrap();
            self.sub = Some(pubsub.into_on_message());
        }
    }

    /// The latch: a message, or `max` (None: forever). True if a message came.
    async fn wait_message(&mut self, max: Option<Duration>) -> bool {
        let sub = self.sub.as_mut().expect("subscribed");
        match max {
            Some(d) if d.is_zero() => {
                // Java retries at once; see the module docs.
                tokio::time::sleep(Duration::from_millis(1)).await;
                false
            }
            Some(d) => tokio::time::timeout(d, sub.next()).await.is_ok(),
            None => sub.next().await.is_some(),
        }
    }

    /// Leaves the channel, as the `finally` of Redisson's wait loops.
    pub fn unsubscribe(&mut self) {
        self.sub = None;
    }

    /// `RedissonLock.lock()`: try; subscribe; loop { try; wait ≤ ttl (forever if < 0) }.
    pub async fn lock(&mut self) {
        if self.try_acquire(None).await.is_none() {
            return;
        }
        self.subscribe().await;
        while let Some(ttl) = self.try_acquire(None).await {
            let max = u64::try_from(ttl).ok().map(Duration::from_millis);
            self.wait_message(max).await;
        }
        self.unsubscribe();
    }

    /// `RedissonLock.tryLock(waitTime, leaseTime)`: true if acquired within `wait`;
    /// otherwise runs the failed-acquire script and returns false.
    pub async fn try_lock(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let arg = Some(wait).filter(|w| !w.is_zero());
        if self.try_acquire(arg).await.is_none() {
            return true;
        }
        if Instant::now() >= deadline {
            self.acquire_failed(arg).await;
            return false;
        }
        self.subscribe().await;
        let acquired = loop {
            let Some(ttl) = self.try_acquire(arg).await else {
                break true;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            let max = match u64::try_from(ttl) {
                Ok(ttl) if Duration::from_millis(ttl) < left => Duration::from_millis(ttl),
                _ => left,
            };
            self.wait_message(Some(max)).await;
            if Instant::now() >= deadline {
                break false;
            }
        };
        self.unsubscribe();
        if !acquired {
            self.acquire_failed(arg).await;
        }
        acquired
    }

    /// Queues once (one try and a subscription) and returns, as a thread that then dies
    /// without cleaning up (the process was killed mid-wait): its entry stays.
    pub async fn queue_and_die(mut self) {
        assert!(self.try_acquire(None).await.is_some(), "expected to queue");
    }
}
