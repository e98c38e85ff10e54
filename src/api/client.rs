//! [`Client`]: the masters, the pub/sub hub, the hold table and the watchdog, shared
//! by every lock of the client.

use std::sync::Arc;
use std::time::Duration;

use crate::api::config::{Config, Topology};
use crate::engine::Engine;
use crate::error::Result;
use uuid::Uuid;

/// A connection to one Redis master (single mode) or N independent masters (Redlock).
///
/// `Client` is `Clone + Send + Sync` and cheap to clone: clones share one connection
/// pool and **one pub/sub connection per master** among all their locks and waiters,
/// one hold table and one watchdog task. When the last clone (and every [`Lock`](crate::Lock)
/// made from it) is dropped, the watchdog and the pub/sub connections stop; guards
/// still alive then report their lock [lost](crate::LockGuard::lost) and their leases
/// run out on their own.
#[derive(Clone)]
pub struct Client {
    pub(crate) engine: Arc<Engine>,
    config: Arc<Config>,
    _alive: Arc<Alive>,
}

/// Stops the background tasks when the last user-facing handle goes.
struct Alive(Arc<Engine>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.stop();
    }
}

impl Client {
    /// Connects to the configured masters and starts the watchdog and pub/sub tasks.
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) / [`Error::InvalidUrl`](crate::Error::InvalidUrl)
    /// for a bad configuration; the master's error (single mode) or
    /// [`Error::NoQuorum`](crate::Error::NoQuorum) (Redlock) when fewer than a majority of
    /// masters answer a PING within the connect timeout.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// assert_eq!(client.quorum(), 1);
    /// # Ok(()) }) }
    /// ```
    pub async fn connect(mut config: Config) -> Result<Client> {
        crate::telemetry::describe();
        let engine = Engine::connect(config.deployment()?, config.settings()).await?;
        if engine.is_cluster() {
            // A lone seed that turned out to be a cluster node.
            config.topology = Topology::Cluster;
        }
        Ok(Client {
            _alive: Arc::new(Alive(engine.clone())),
            engine,
            config: Arc::new(config),
        })
    }

    /// This client's UUID: the first half of every holder id it uses.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.lock("orders:42").lock().await?;
    /// assert!(guard.holder().starts_with(&format!("{}:", client.id())));
    /// assert_ne!(client.id(), Client::connect(client.config().clone()).await?.id());
    /// # Ok(()) }) }
    /// ```
    pub fn id(&self) -> Uuid {
        self.engine.id()
    }

    /// The configuration the client was built with.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url.clone()).pool_size(4)).await?;
    /// assert_eq!(client.config().urls(), [url]);
    /// assert_eq!(client.config().connections_per_master(), 4);
    /// # Ok(()) }) }
    /// ```
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One entry per deployment the client locks on, in configuration order: the
    /// `host:port` of each master (one server, or each Redlock master); for a Cluster
    /// `cluster <seed host:port>` and for Sentinel `sentinel master <name>` (the
    /// serving node changes with slots and failovers: see
    /// [`Lock::status`](crate::Lock::status) for the node that answers for a name).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url.clone())).await?;
    /// assert_eq!(client.masters(), [url.trim_start_matches("redis://")]);
    /// # Ok(()) }) }
    /// ```
    pub fn masters(&self) -> Vec<String> {
        self.engine.addrs()
    }

    /// Masters needed for a majority (N/2+1).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// assert_eq!(client.quorum(), 1); // single mode: the one master decides
    /// assert_eq!(client.quorum(), client.config().quorum());
    /// # Ok(()) }) }
    /// ```
    pub fn quorum(&self) -> usize {
        self.engine.quorum()
    }

    /// Locks this client currently holds (distinct name and holder pairs).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// assert_eq!(client.held_locks(), 0);
    /// let a = client.lock("orders:1").lock().await?;
    /// let a2 = a.scope(client.lock("orders:1").lock()).await?; // re-entered: one hold
    /// let _b = client.lock("orders:2").lock().await?;
    /// assert_eq!(client.held_locks(), 2);
    /// a2.unlock().await?;
    /// a.unlock().await?;
    /// assert_eq!(client.held_locks(), 1);
    /// # Ok(()) }) }
    /// ```
    pub fn held_locks(&self) -> usize {
        self.engine.held_count()
    }

    /// Pub/sub channels this client is currently subscribed to for its waiters.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// assert_eq!(client.subscriptions(), 0);
    /// // Another task waits: it subscribes to the lock's channel for the unlock message
    /// // and, on a single master, to its client's wake channel and the waiters' marker
    /// // (a release hands the lock to one waiting client: docs/design.md, "Wake one waiter").
    /// let waiter = tokio::spawn({
    ///     let lock = lock.clone();
    ///     async move { lock.try_lock(Duration::from_secs(10)).await }
    /// });
    /// while client.subscriptions() == 0 {
    ///     tokio::time::sleep(Duration::from_millis(5)).await;
    /// }
    /// while client.subscriptions() < 3 {
    ///     tokio::time::sleep(Duration::from_millis(5)).await;
    /// }
    /// assert_eq!(client.subscriptions(), 3);
    /// guard.unlock().await?; // wakes the waiter
    /// let taken = waiter.await.unwrap()?.expect("acquired after the unlock");
    /// assert_eq!(client.subscriptions(), 0);
    /// # drop(taken);
    /// # Ok(()) }) }
    /// ```
    pub fn subscriptions(&self) -> usize {
        self.engine.subscriptions()
    }

    /// Shuts the client down cleanly: waits (at most `timeout`) for background work —
    /// releases of dropped guards, the answers of masters slower than the majority,
    /// undoing cancelled attempts, leaving fair queues —
    /// then stops the watchdog and the pub/sub connections, for every clone of this
    /// client. Guards still alive report their lock [lost](crate::LockGuard::lost).
    ///
    /// Call it before a short-lived program exits: a process that just returns from
    /// `main` would drop pending background releases, leaving locks to expire by lease.
    ///
    /// # Cancel safety
    /// Dropping the future before it finishes leaves the client running.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url.clone())).await?;
    /// let guard = client.lock("nightly-job").lock().await?;
    /// // ... the job ...
    /// drop(guard); // released by a background task
    /// client.close(Duration::from_secs(5)).await; // which close waits for
    ///
    /// let other = Client::connect(Config::single(url)).await?;
    /// assert!(!other.lock("nightly-job").is_locked().await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn close(self, timeout: Duration) {
        self.engine.shut_down(timeout).await;
    }

    /// Runs one watchdog round now instead of waiting for the next tick.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let config = Config::single(url.clone()).watchdog_timeout(Duration::from_millis(1800));
    /// let client = Client::connect(config).await?;
    /// let lock = client.lock("orders:42");
    /// let _guard = lock.lock().await?;
    /// // A round skips holds renewed less than timeout/6 (here 300 ms) ago.
    /// tokio::time::sleep(Duration::from_millis(300)).await;
    /// // Someone cut the lease short to 1 s:
    /// let mut admin = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    /// redis::cmd("PEXPIRE").arg("orders:42").arg(1000).exec(&mut admin).unwrap();
    /// client.renew_now().await;
    /// assert!(lock.remaining_ttl().await?.unwrap() > Duration::from_secs(1)); // 1.8 s again
    /// # Ok(()) }) }
    /// ```
    pub async fn renew_now(&self) {
        self.engine.renew_now().await;
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.engine.id())
            .field("masters", &self.masters())
            .finish()
    }
}
