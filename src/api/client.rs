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
///
/// # Examples
/// See the example on [`Client::connect`].
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
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// // `url` is the server's `redis://host:port` (Config::from_env() reads REDLATCH_REDIS).
    /// let client = Client::connect(Config::single(url.clone()).pool_size(4)).await?;
    /// assert_eq!(client.masters(), [url.trim_start_matches("redis://")]);
    /// assert_eq!(client.quorum(), 1); // single mode: the one master decides
    /// assert_eq!(client.config().connections_per_master(), 4);
    ///
    /// let guard = client.lock("nightly-job").lock().await?;
    /// assert!(guard.holder().starts_with(&format!("{}:", client.id()))); // "{client_uuid}:{n}"
    /// assert_eq!(client.held_locks(), 1);
    /// client.renew_now().await; // a watchdog round now, rather than at its next tick
    /// // ... the job ...
    /// drop(guard); // released by a background task
    /// client.close(Duration::from_secs(5)).await; // which close waits for
    ///
    /// let other = Client::connect(Config::single(url)).await?;
    /// assert!(!other.lock("nightly-job").is_locked().await?);
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
    /// See the example on [`connect`](Self::connect).
    pub fn id(&self) -> Uuid {
        self.engine.id()
    }

    /// The configuration the client was built with.
    ///
    /// # Examples
    /// See the example on [`connect`](Self::connect).
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
    /// See the example on [`connect`](Self::connect).
    pub fn masters(&self) -> Vec<String> {
        self.engine.addrs()
    }

    /// Masters needed for a majority (N/2+1).
    ///
    /// # Examples
    /// See the example on [`connect`](Self::connect).
    pub fn quorum(&self) -> usize {
        self.engine.quorum()
    }

    /// Locks this client currently holds (distinct name and holder pairs).
    ///
    /// # Examples
    /// See the example on [`connect`](Self::connect).
    pub fn held_locks(&self) -> usize {
        self.engine.held_count()
    }

    /// Pub/sub channels this client is currently subscribed to for its waiters. Not
    /// counted: the one channel every client listens on for its life, for notices
    /// about its own holds (a force-unlock, a release request; docs/operations.md).
    ///
    /// # Examples
    /// See the example on [`Client::spin_lock`], which subscribes to nothing; a lock's waiter subscribes to its channel.
    pub fn subscriptions(&self) -> usize {
        self.engine.subscriptions()
    }

    /// Shuts the client down cleanly: waits (at most `timeout`) for background work —
    /// releases of dropped guards, the answers of masters slower than the majority,
    /// undoing cancelled attempts, leaving fair queues —
    /// then stops the watchdog and the pub/sub connections, for every clone of this
    /// client, and deletes its client record and ledger (what `redlatch status` shows
    /// of it) if time is left. Guards still alive report their lock
    /// [lost](crate::LockGuard::lost).
    ///
    /// Call it before a short-lived program exits: a process that just returns from
    /// `main` would drop pending background releases, leaving locks to expire by lease.
    ///
    /// # Cancel safety
    /// Dropping the future before it finishes leaves the client running.
    ///
    /// # Examples
    /// See the example on [`connect`](Self::connect).
    pub async fn close(self, timeout: Duration) {
        self.engine.shut_down(timeout).await;
    }

    /// Runs one watchdog round now instead of waiting for the next tick.
    ///
    /// # Examples
    /// See the example on [`connect`](Self::connect).
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
