//! [`Client`]: the masters, the pub/sub hub, the hold table and the watchdog, shared
//! by every lock of the client.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::config::Config;
use crate::error::Result;
use crate::gate::Gates;
use crate::holds::Holds;
use crate::lock::{Kind, Lock};
use crate::master::Master;
use crate::offers::Offers;
use crate::pubsub::PubSub;
use crate::quorum::{answers, fan_out};

/// A connection to one Redis master (single mode) or N independent masters (Redlock).
///
/// `Client` is `Clone + Send + Sync` and cheap to clone: clones share one connection
/// pool and **one pub/sub connection per master** among all their locks and waiters,
/// one hold table and one watchdog task. When the last clone (and every [`Lock`]
/// made from it) is dropped, the watchdog and the pub/sub connections stop; guards
/// still alive then report their lock [lost](crate::LockGuard::lost) and their leases
/// run out on their own.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    _alive: Arc<Alive>,
}

/// Cancels the background tasks when the last user-facing handle goes.
struct Alive(CancellationToken);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// State shared by clients, locks and guards.
pub(crate) struct Inner {
    pub(crate) id: Uuid,
    /// `"{id}:"`, shared by every holder id of this client.
    pub(crate) holder_prefix: String,
    pub(crate) masters: Vec<Arc<Master>>,
    pub(crate) quorum: usize,
    pub(crate) config: Config,
    pub(crate) pubsub: PubSub,
    pub(crate) holds: Holds,
    pub(crate) gates: Gates,
    /// Hand-over offers of waiting tasks: plain locks, then fair locks (offers.rs).
    pub(crate) offers: [Offers; 2],
    /// Background clean-ups (releases on drop, undoing cancelled attempts, leaving fair
    /// queues), so [`Client::close`] can wait for them.
    pub(crate) cleanups: tokio_util::task::TaskTracker,
    shutdown: CancellationToken,
}

impl Inner {
    /// The hand-over offers of plain (`fair` false) or fair locks.
    pub(crate) fn offers(&self, fair: bool) -> &Offers {
        &self.offers[usize::from(fair)]
    }

    /// Declares a hold lost and wakes this client's local waiters of its lock, which
    /// may have been waiting for that holder's release (wait.rs invariant 6).
    pub(crate) fn lose(&self, hold: &Arc<crate::holds::Hold>) {
        self.holds.lose(hold);
        self.pubsub.notify_local(&crate::names::channel(&hold.name));
    }

    /// Redlock validity of a lease: lease − (lease × drift_factor + 2 ms).
    pub(crate) fn validity_of(&self, lease: Duration) -> Duration {
        let drift = lease.mul_f64(self.config.drift_factor) + Duration::from_millis(2);
        lease.saturating_sub(drift)
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
    /// ```no_run
    /// # async fn demo() -> redlatch::Result<()> {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single("redis://127.0.0.1:6379")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(config: Config) -> Result<Client> {
        let infos = config.validate()?;
        let masters = infos
            .into_iter()
            .map(|info| {
                Master::new(
                    info,
                    config.pool_size,
                    config.effective_master_timeout(),
                    config.connect_timeout,
                )
                .map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        let quorum = config.quorum();
        let pings = fan_out(&masters, |m| async move {
            m.run_side(m.connect_timeout(), |mut c| async move {
                redis::cmd("PING").query_async::<()>(&mut c).await
            })
            .await
        })
        .await;
        answers(pings, quorum)?;
        if masters.len() > 1 && masters.len() % 2 == 0 {
            tracing::warn!(
                n = masters.len(),
                "an even number of masters tolerates no more failures than one fewer"
            );
        }
        let shutdown = CancellationToken::new();
        let clients = masters.iter().map(|m| m.redis_client().clone()).collect();
        let pubsub = PubSub::start(clients, quorum, config.connect_timeout, &shutdown);
        let period = config.watchdog_timeout / 3;
        let id = Uuid::new_v4();
        let inner = Arc::new(Inner {
            id,
            holder_prefix: crate::holder::prefix(&id),
            masters,
            quorum,
            config,
            pubsub,
            holds: Holds::default(),
            gates: Gates::default(),
            offers: Default::default(),
            cleanups: tokio_util::task::TaskTracker::new(),
            shutdown: shutdown.clone(),
        });
        tokio::spawn(crate::watchdog::run(
            Arc::downgrade(&inner),
            shutdown.clone(),
            period,
        ));
        Ok(Client {
            inner,
            _alive: Arc::new(Alive(shutdown)),
        })
    }

    /// A reentrant, non-fair lock (Redisson `RLock`). Nothing is sent to Redis yet; the
    /// name is checked by each operation.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Plain)
    }

    /// A reentrant FIFO lock (Redisson `RFairLock`): waiters queue in Redis and a release
    /// wakes only the next one.
    pub fn fair_lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Fair)
    }

    /// A reentrant lock whose guards carry a fencing token (Redisson `RFencedLock`).
    pub fn fenced_lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into(), Kind::Fenced)
    }

    /// This client's UUID: the first half of every holder id it uses.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Addresses (`host:port`) of the masters, in configuration order.
    pub fn masters(&self) -> Vec<String> {
        self.inner
            .masters
            .iter()
            .map(|m| m.addr().to_string())
            .collect()
    }

    /// Masters needed for a majority (N/2+1).
    pub fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// Locks this client currently holds (distinct name and holder pairs).
    pub fn held_locks(&self) -> usize {
        self.inner.holds.len()
    }

    /// Pub/sub channels this client is currently subscribed to for its waiters.
    pub fn subscriptions(&self) -> usize {
        self.inner.pubsub.channel_count()
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
    pub async fn close(self, timeout: Duration) {
        let inner = &self.inner;
        inner.cleanups.close();
        let _ = tokio::time::timeout(timeout, inner.cleanups.wait()).await;
        inner.shutdown.cancel();
    }

    /// Runs one watchdog round now instead of waiting for the next tick.
    pub async fn renew_now(&self) {
        crate::watchdog::renew_all(&self.inner).await;
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("masters", &self.masters())
            .finish()
    }
}
