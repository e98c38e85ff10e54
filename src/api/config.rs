//! [`Config`]: which masters to use and how the lock behaves. Every field documents its
//! default.

use std::time::Duration;

use crate::engine::Settings;
use crate::error::{Error, Result};
use crate::transport::replicas::SyncReplicas;
#[cfg(feature = "tls")]
use crate::transport::tls::{self, is_tls};

/// The longest lease (and watchdog timeout) accepted: 30 days.
pub const MAX_LEASE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Environment variable read by [`Config::from_env`]: comma-separated Redis URLs.
pub const ENV_VAR: &str = "REDLATCH_REDIS";

/// Client configuration: the masters and the timing of the lock.
///
/// One URL is single-master mode; several URLs are Redlock over independent masters
/// (use an odd number, 3 or 5; the quorum is N/2+1).
#[derive(Clone)]
pub struct Config {
    pub(crate) urls: Vec<String>,
    pub(crate) topology: Topology,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) master_timeout: Option<Duration>,
    default_master_timeout: Duration,
    pub(crate) retry_jitter: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) pool_size: usize,
    pub(crate) fair_stale_timeout: Duration,
    pub(crate) fair_wait_time: Duration,
    pub(crate) unavailable_timeout: Option<Duration>,
    pub(crate) sync: (SyncReplicas, Duration),
    /// Sentinel mode: the primary's credentials when they differ from the sentinels'.
    pub(crate) master_auth: Option<(Option<String>, String)>,
    #[cfg(feature = "tls")]
    pub(crate) tls: tls::TlsOptions,
}

impl Config {
    /// One Redis master. `master_timeout` defaults to 1 s in this mode.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::Config;
    /// let config = Config::single("redis://127.0.0.1:7000");
    /// assert_eq!(config.urls(), ["redis://127.0.0.1:7000"]);
    /// assert_eq!(config.quorum(), 1);
    /// assert_eq!(config.effective_master_timeout(), Duration::from_secs(1));
    /// ```
    pub fn single(url: impl Into<String>) -> Self {
        Self::with_urls(vec![url.into()], Duration::from_secs(1))
    }

    /// Redlock over N independent masters (not replicas of each other), quorum N/2+1.
    /// `master_timeout` defaults to 50 ms in this mode.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::Config;
    /// let config = Config::redlock([
    ///     "redis://10.0.0.1:7000",
    ///     "redis://10.0.0.2:7000",
    ///     "redis://10.0.0.3:7000",
    /// ]);
    /// assert_eq!(config.urls().len(), 3);
    /// assert_eq!(config.quorum(), 2);
    /// assert_eq!(config.effective_master_timeout(), Duration::from_millis(50));
    /// ```
    pub fn redlock<I, S>(urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls = urls.into_iter().map(Into::into).collect();
        Self::with_urls(urls, Duration::from_millis(50))
    }

    /// A Redis Cluster, reached through one or more of its nodes (`seeds`; any node,
    /// primary or replica, will do: the first that answers is asked for the slot
    /// map). Every operation goes to the primary serving the lock name's hash slot;
    /// `MOVED` and `ASK` are followed; waiters use sharded pub/sub on Redis >= 7.
    /// Credentials and TLS settings of the first seed apply to every node.
    /// `master_timeout` defaults to 1 s, as in single mode.
    ///
    /// A single URL given to [`single`](Self::single) that turns out to be a cluster
    /// node (`cluster_enabled:1`) is used as a cluster seed too.
    ///
    /// # Examples
    /// ```
    /// use redlatch::{Config, Topology};
    /// let config = Config::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]);
    /// assert_eq!(config.topology(), &Topology::Cluster);
    /// assert_eq!(config.quorum(), 1); // one deployment, not Redlock
    /// ```
    pub fn cluster<I, S>(seeds: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls = seeds.into_iter().map(Into::into).collect();
        let mut config = Self::with_urls(urls, Duration::from_secs(1));
        config.topology = Topology::Cluster;
        config
    }

    /// Which replicas must have a lock before an acquisition succeeds, and how long to
    /// wait for them (Redisson's `checkLockSyncedSlaves` / `slavesSyncTimeout`).
    /// Default: [`SyncReplicas::Auto`] (every replica that could take over: online and
    /// caught up, not resyncing; a primary without replicas costs nothing) and 1 s.
    ///
    /// After each acquire script the primary is sent `WAIT` in the same round trip. An
    /// acquisition fewer replicas acknowledged in time is undone and fails with
    /// [`Error::NotReplicated`]. Each watchdog renewal call (one per primary per round)
    /// carries a `WAIT` too: a renewal counts (extends
    /// [`LockGuard::validity`](crate::LockGuard::validity)) only once the replicas have
    /// it; one they do not acknowledge puts the lock
    /// [`at_risk`](crate::LockGuard::at_risk). Releases are not waited for. See the
    /// docs/deployments.md for what this buys.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::{Config, SyncReplicas};
    /// let config = Config::single("redis://10.0.0.1:7000")
    ///     .sync_replicas(SyncReplicas::Off, Duration::from_secs(1));
    /// assert_eq!(config.replica_sync().0, SyncReplicas::Off);
    /// ```
    pub fn sync_replicas(mut self, mode: SyncReplicas, timeout: Duration) -> Self {
        self.sync = (mode, timeout);
        self
    }

    /// The replica-sync policy: [`sync_replicas`](Self::sync_replicas).
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::{Config, SyncReplicas};
    /// let config = Config::single("redis://10.0.0.1:7000");
    /// assert_eq!(config.replica_sync(), (SyncReplicas::Auto, Duration::from_secs(1)));
    /// ```
    pub fn replica_sync(&self) -> (SyncReplicas, Duration) {
        self.sync
    }

    /// A primary/replica set managed by Redis Sentinel: `sentinels` are the sentinels'
    /// URLs, `master_name` the name they monitor it under. The primary is looked up
    /// through them at connect and again whenever they announce a switch
    /// (`+switch-master`) or the primary stops answering; operations then go to the
    /// new primary and waiters resubscribe there. The primary is reached with the
    /// first sentinel URL's scheme and credentials unless
    /// [`master_auth`](Self::master_auth) says otherwise. `master_timeout` defaults to
    /// 1 s.
    ///
    /// # Examples
    /// ```
    /// use redlatch::{Config, Topology};
    /// let config = Config::sentinel("mymaster", ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"]);
    /// assert_eq!(config.topology(), &Topology::Sentinel { master_name: "mymaster".into() });
    /// assert_eq!(config.quorum(), 1);
    /// ```
    pub fn sentinel<I, S>(master_name: impl Into<String>, sentinels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let urls = sentinels.into_iter().map(Into::into).collect();
        let mut config = Self::with_urls(urls, Duration::from_secs(1));
        config.topology = Topology::Sentinel {
            master_name: master_name.into(),
        };
        config
    }

    /// Sentinel mode: the credentials of the primary, when they differ from those in
    /// the sentinel URLs (Redisson's `password` beside `sentinelPassword`). Never
    /// shown by `Debug`.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let config = Config::sentinel("mymaster", ["redis://:sentinel-secret@10.0.0.1:26379"])
    ///     .master_auth(None, "primary-secret");
    /// assert!(!format!("{config:?}").contains("primary-secret"));
    /// ```
    pub fn master_auth(mut self, username: Option<&str>, password: &str) -> Self {
        self.master_auth = Some((username.map(str::to_string), password.to_string()));
        self
    }

    /// How the URLs are used: independent masters, cluster seeds or sentinels.
    ///
    /// # Examples
    /// ```
    /// use redlatch::{Config, Topology};
    /// assert_eq!(Config::single("redis://127.0.0.1:7000").topology(), &Topology::Masters);
    /// ```
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Parses a comma-separated URL list like `REDLATCH_REDIS` holds.
    ///
    /// # Errors
    /// [`Error::Config`] when the list is empty.
    ///
    /// # Examples
    /// ```
    /// use redlatch::{Config, Error};
    /// let config = Config::from_list(" redis://10.0.0.1:7000 , redis://10.0.0.2:7000, redis://10.0.0.3:7000 ")?;
    /// assert_eq!(config.urls()[0], "redis://10.0.0.1:7000"); // entries are trimmed
    /// assert_eq!(config.quorum(), 2);
    /// assert_eq!(Config::from_list("redis://127.0.0.1:7000")?.quorum(), 1); // one URL: single mode
    /// assert!(matches!(Config::from_list(" , "), Err(Error::Config(_))));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_list(raw: &str) -> Result<Self> {
        let urls: Vec<&str> = raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match urls.as_slice() {
            [] => Err(Error::Config(format!("no redis url in {raw:?}"))),
            [one] => Ok(Self::single(*one)),
            many => Ok(Self::redlock(many.iter().copied())),
        }
    }

    fn with_urls(urls: Vec<String>, master_timeout: Duration) -> Self {
        Config {
            urls,
            topology: Topology::Masters,
            watchdog_timeout: Duration::from_secs(30),
            drift_factor: 0.01,
            master_timeout: None,
            default_master_timeout: master_timeout,
            retry_jitter: Duration::from_millis(50),
            connect_timeout: Duration::from_secs(2),
            pool_size: 2,
            fair_stale_timeout: Duration::from_secs(5),
            fair_wait_time: Duration::from_secs(300),
            unavailable_timeout: None,
            sync: (SyncReplicas::Auto, Duration::from_secs(1)),
            master_auth: None,
            #[cfg(feature = "tls")]
            tls: Default::default(),
        }
    }

    /// Lease used when no explicit lease is given; the watchdog renews it every
    /// timeout/3 while a guard lives. Default 30 s (Redisson's `lockWatchdogTimeout`).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let config = Config::single(url).watchdog_timeout(Duration::from_secs(3));
    /// let client = Client::connect(config).await?;
    /// let lock = client.lock("reports:daily");
    /// let _guard = lock.lock().await?; // no lease given: the watchdog's 3 s, renewed every 1 s
    /// let ttl = lock.remaining_ttl().await?.expect("a lease");
    /// assert!(ttl <= Duration::from_secs(3));
    /// # Ok(()) }) }
    /// ```
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// Clock drift allowed for, as a fraction of the lease; 2 ms are added on top.
    /// Default 0.01.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url).drift_factor(0.1)).await?;
    /// let guard = client.lock("reports:daily").lock_with_lease(Duration::from_secs(1)).await?;
    /// // validity = lease − elapsed − (lease × 0.1 + 2 ms)
    /// assert!(guard.validity() <= Duration::from_millis(898));
    /// assert!(guard.validity() > Duration::ZERO);
    /// # Ok(()) }) }
    /// ```
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Per-master timeout of every command (acquire, release, renew, queries). Default
    /// 50 ms in Redlock mode, 1 s in single mode (at most a third of the watchdog
    /// timeout either way). Keep it small compared to the lease.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::Config;
    /// let config = Config::redlock(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000", "redis://10.0.0.3:7000"])
    ///     .master_timeout(Duration::from_millis(200));
    /// assert_eq!(config.effective_master_timeout(), Duration::from_millis(200));
    /// ```
    pub fn master_timeout(mut self, timeout: Duration) -> Self {
        self.master_timeout = Some(timeout);
        self
    }

    /// The master timeout in force: the one set, or the mode's default capped at a
    /// third of the watchdog timeout.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::Config;
    /// let single = Config::single("redis://127.0.0.1:7000");
    /// assert_eq!(single.effective_master_timeout(), Duration::from_secs(1));
    /// // The default is capped at a third of the watchdog timeout...
    /// let short = single.watchdog_timeout(Duration::from_millis(600));
    /// assert_eq!(short.effective_master_timeout(), Duration::from_millis(200));
    /// // ...a value set explicitly is used as it is.
    /// let set = short.master_timeout(Duration::from_millis(20));
    /// assert_eq!(set.effective_master_timeout(), Duration::from_millis(20));
    /// ```
    pub fn effective_master_timeout(&self) -> Duration {
        self.master_timeout
            .unwrap_or_else(|| self.default_master_timeout.min(self.watchdog_timeout / 3))
    }

    /// Upper bound of the random back-off before retrying an attempt that failed for
    /// lack of a majority or because masters were unreachable. Default 50 ms.
    /// Never added to a wake-up by an unlock message.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url).retry_jitter(Duration::from_millis(10))).await?;
    /// let guard = client.lock("reports:daily").try_lock(Duration::from_millis(100)).await?;
    /// assert!(guard.is_some());
    /// # Ok(()) }) }
    /// ```
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// Time allowed to open a connection to a master. Default 2 s.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::{Duration, Instant};
    /// use redlatch::{Client, Config};
    /// // A "master" that accepts connections but never answers.
    /// let hung = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let config = Config::single(format!("redis://{}", hung.local_addr().unwrap()))
    ///     .connect_timeout(Duration::from_millis(100));
    /// let started = Instant::now();
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(err.is_timeout());
    /// assert!(started.elapsed() < Duration::from_secs(2)); // not the default 2 s
    /// # Ok(()) }) }
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Multiplexed command connections per master (each pipelines many requests).
    /// One pub/sub connection per master comes on top. Default 2.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url).pool_size(4)).await?;
    /// assert_eq!(client.config().connections_per_master(), 4);
    /// assert!(client.lock("reports:daily").try_lock(std::time::Duration::ZERO).await?.is_some());
    /// # Ok(()) }) }
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// Fair lock: a waiter that stops refreshing its queue entry (it crashed) is evicted
    /// after this long by the next fair call of a redlatch client on the lock. Live
    /// waiters refresh every third of it. Default 5 s. (A queue with only Redisson
    /// clients left evicts it by Redisson's rule instead: see
    /// [`fair_wait_time`](Self::fair_wait_time).)
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, Error};
    /// let config = Config::single(&url).fair_stale_timeout(Duration::from_secs(1));
    /// let client = Client::connect(config).await?;
    /// let guard = client.fair_lock("queue:payments").try_lock(Duration::from_millis(100)).await?;
    /// assert!(guard.is_some());
    /// // Below 30 ms it is refused.
    /// let too_short = Config::single(&url).fair_stale_timeout(Duration::from_millis(5));
    /// assert!(matches!(Client::connect(too_short).await, Err(Error::Config(_))));
    /// # Ok(()) }) }
    /// ```
    pub fn fair_stale_timeout(mut self, timeout: Duration) -> Self {
        self.fair_stale_timeout = timeout;
        self
    }

    /// Fair lock: a waiter's wait time on Redisson's wire, Redisson's `threadWaitTime`
    /// (`Config.setFairLockWaitTimeout`, default 300 s). A joining waiter's deadline is
    /// the deadline ahead plus this, every acquisition takes it off every deadline left,
    /// a waiter that gives up takes it off those behind it. Set it to the value of the
    /// Redisson clients sharing the lock (or more): then their arithmetic never evicts
    /// one of our live waiters, nor theirs behind ours. It also bounds how long a dead
    /// redlatch waiter can hold up a queue that only Redisson clients still use (our
    /// own clients evict it after [`fair_stale_timeout`](Self::fair_stale_timeout)).
    /// Default 300 s; at least `fair_stale_timeout`.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config, Error};
    /// // Java side: config.setFairLockWaitTimeout(60_000)
    /// let config = Config::single(&url).fair_wait_time(Duration::from_secs(60));
    /// let client = Client::connect(config).await?;
    /// let guard = client.fair_lock("queue:payments").try_lock(Duration::from_millis(100)).await?;
    /// assert!(guard.is_some());
    /// // Shorter than the stale timeout (5 s by default) is refused.
    /// let too_short = Config::single(&url).fair_wait_time(Duration::from_secs(1));
    /// assert!(matches!(Client::connect(too_short).await, Err(Error::Config(_))));
    /// # Ok(()) }) }
    /// ```
    pub fn fair_wait_time(mut self, wait: Duration) -> Self {
        self.fair_wait_time = wait;
        self
    }

    /// How long `lock()` keeps retrying while no majority of masters answers at all
    /// before it returns the error. Default: the watchdog timeout.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::{Duration, Instant};
    /// use redlatch::{Client, Config};
    /// let config = Config::single(&url)
    ///     .master_timeout(Duration::from_millis(50))
    ///     .unavailable_timeout(Duration::from_millis(200));
    /// let client = Client::connect(config).await?;
    /// // The master stops answering for 5 s (a stand-in for a hung or unreachable master):
    /// let mut admin = redis::Client::open(url.as_str()).unwrap().get_connection().unwrap();
    /// redis::cmd("CLIENT").arg("PAUSE").arg(5000).arg("ALL").exec(&mut admin).unwrap();
    /// let started = Instant::now();
    /// let err = client.lock("reports:daily").lock().await.unwrap_err();
    /// assert!(err.is_unavailable());
    /// assert!(started.elapsed() < Duration::from_secs(5)); // gave up after about 200 ms
    /// # Ok(()) }) }
    /// ```
    pub fn unavailable_timeout(mut self, timeout: Duration) -> Self {
        self.unavailable_timeout = Some(timeout);
        self
    }

    /// The configured URLs.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let config = Config::from_list("redis://10.0.0.1:7000,redis://10.0.0.2:7000,redis://10.0.0.3:7000")?;
    /// assert_eq!(config.urls()[1], "redis://10.0.0.2:7000");
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Command connections per master ([`pool_size`](Self::pool_size)); the pub/sub
    /// connection comes on top.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// assert_eq!(Config::single("redis://127.0.0.1:7000").connections_per_master(), 2);
    /// let config = Config::single("redis://127.0.0.1:7000").pool_size(8);
    /// assert_eq!(config.connections_per_master(), 8);
    /// ```
    pub fn connections_per_master(&self) -> usize {
        self.pool_size
    }

    /// Majority needed: N/2+1.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// assert_eq!(Config::single("redis://10.0.0.1:7000").quorum(), 1);
    /// let five = (1..=5).map(|i| format!("redis://10.0.0.{i}:7000"));
    /// assert_eq!(Config::redlock(five).quorum(), 3);
    /// ```
    pub fn quorum(&self) -> usize {
        match self.topology {
            Topology::Masters => self.urls.len() / 2 + 1,
            _ => 1,
        }
    }

    fn unavailable_after(&self) -> Duration {
        self.unavailable_timeout.unwrap_or(self.watchdog_timeout)
    }

    /// The timing the engine works with.
    pub(crate) fn settings(&self) -> Settings {
        Settings {
            watchdog_timeout: self.watchdog_timeout,
            drift_factor: self.drift_factor,
            retry_jitter: self.retry_jitter,
            connect_timeout: self.connect_timeout,
            fair_stale_timeout: self.fair_stale_timeout,
            fair_wait_time: self.fair_wait_time,
            unavailable_after: self.unavailable_after(),
            cluster: self.topology == Topology::Cluster,
        }
    }

    /// Checks every field; parses the URLs.
    pub(crate) fn validate(&self) -> Result<Vec<redis::ConnectionInfo>> {
        if self.urls.is_empty() {
            return Err(Error::Config("no redis master given".into()));
        }
        if self.urls.len() > 64 {
            return Err(Error::Config("at most 64 masters are supported".into()));
        }
        check_lease("watchdog_timeout", self.watchdog_timeout)?;
        if self.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::Config(
                "watchdog_timeout must be at least 30ms".into(),
            ));
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(Error::Config("drift_factor must be in [0, 0.5)".into()));
        }
        for (what, d) in [
            ("master_timeout", self.effective_master_timeout()),
            ("connect_timeout", self.connect_timeout),
            ("fair_stale_timeout", self.fair_stale_timeout),
            ("fair_wait_time", self.fair_wait_time),
        ] {
            if d.is_zero() || d > MAX_LEASE {
                return Err(Error::Config(format!("{what} must be > 0 and <= 30 days")));
            }
        }
        if self.sync.1.is_zero() || self.sync.1 > MAX_LEASE {
            return Err(Error::Config(
                "the replica sync timeout must be > 0 and <= 30 days".into(),
            ));
        }
        if self.retry_jitter > MAX_LEASE {
            return Err(Error::Config("retry_jitter must be <= 30 days".into()));
        }
        if self.effective_master_timeout() >= self.watchdog_timeout {
            return Err(Error::Config(
                "master_timeout must be shorter than watchdog_timeout".into(),
            ));
        }
        if self.fair_stale_timeout < Duration::from_millis(30) {
            return Err(Error::Config(
                "fair_stale_timeout must be at least 30ms".into(),
            ));
        }
        if self.fair_wait_time < self.fair_stale_timeout {
            return Err(Error::Config(
                "fair_wait_time must be at least fair_stale_timeout".into(),
            ));
        }
        if self.pool_size == 0 || self.pool_size > 64 {
            return Err(Error::Config("pool_size must be in 1..=64".into()));
        }
        let infos = self
            .urls
            .iter()
            .map(|u| parse_url(u))
            .collect::<Result<Vec<_>>>()?;
        let mut addrs: Vec<String> = infos.iter().map(|i| i.addr().to_string()).collect();
        addrs.sort();
        if let Some(w) = addrs.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Config(format!(
                "master {} is listed twice; Redlock needs independent masters",
                w[0]
            )));
        }
        #[cfg(feature = "tls")]
        if self.tls.is_set() && !infos.iter().any(is_tls) {
            return Err(Error::Config(
                "TLS certificates are configured but no master URL is rediss:// (or valkeys://)"
                    .into(),
            ));
        }
        Ok(infos)
    }

    /// Validates the configuration and makes one redis client per master, carrying the
    /// TLS certificates for `rediss://` masters.
    pub(crate) fn redis_clients(&self) -> Result<Vec<redis::Client>> {
        let infos = self.validate()?;
        #[cfg(feature = "tls")]
        let certs = match infos.iter().any(is_tls) {
            true => {
                tls::install_crypto_provider();
                self.tls.certificates()?
            }
            false => None,
        };
        infos
            .into_iter()
            .map(|info| {
                let addr = info.addr().to_string();
                #[cfg(feature = "tls")]
                if let (Some(certs), true) = (&certs, is_tls(&info)) {
                    return redis::Client::build_with_tls(info, certs.clone())
                        .map_err(|e| Error::Config(format!("master {addr}: TLS: {e}")));
                }
                redis::Client::open(info).map_err(|source| Error::Redis { addr, source })
            })
            .collect()
    }
}

impl Config {
    /// How this configuration's servers are reached: pool, timeouts, scripts, sync.
    pub(crate) fn link_settings(&self) -> crate::transport::standalone::LinkSettings {
        crate::transport::standalone::LinkSettings {
            pool_size: self.pool_size,
            timeout: self.effective_master_timeout(),
            connect_timeout: self.connect_timeout,
            scripts: crate::engine::catalogue::all(),
            sync: self.sync,
        }
    }
}

/// TLS (`rediss://` masters), with the cargo feature `tls`.
///
/// By default a master's certificate must chain to one of the Mozilla root
/// certificates bundled with the crate (webpki-roots) and match the URL's host name
/// (or IP address), and no client certificate is sent. The settings apply to every
/// `rediss://` master; setting any of them with no `rediss://` master is a
/// configuration error. Files are read, and every certificate and key checked, by
/// [`Client::connect`](crate::Client::connect), which reports a problem as
/// [`Error::Config`] naming the file (never its contents).
#[cfg(feature = "tls")]
impl Config {
    /// Trusts the CA certificates of this PEM document (one or more `CERTIFICATE`
    /// blocks) instead of the bundled roots. Default: the webpki roots.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// // Usually the contents of the CA file, e.g. include_bytes!("ca.crt"). The PEM is
    /// // checked by connect, before any connection is opened:
    /// let config = Config::single("rediss://redis.internal:6380")
    ///     .tls_root_ca_pem(b"not a certificate".to_vec());
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// assert!(err.to_string().contains("no CERTIFICATE"), "{err}");
    /// # }
    /// ```
    pub fn tls_root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.root_ca = Some(tls::Pem::Bytes(pem.into()));
        self
    }

    /// Like [`tls_root_ca_pem`](Self::tls_root_ca_pem), with the PEM read from a file
    /// when connecting.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// let config = Config::single("rediss://redis.internal:6380")
    ///     .tls_root_ca_file("/nonexistent/redis-ca.crt");
    /// // The file is read by connect; a missing one is a configuration error naming it.
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// assert!(err.to_string().contains("/nonexistent/redis-ca.crt"), "{err}");
    /// # }
    /// ```
    pub fn tls_root_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.tls.root_ca = Some(tls::Pem::File(path.into()));
        self
    }

    /// Presents this client certificate (PEM chain, leaf first) with its private key
    /// (PEM: PKCS#8, PKCS#1 or SEC1), for masters that require one
    /// (`tls-auth-clients yes`). Default: none.
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// // TLS settings need a rediss:// master: with none they are refused, not ignored.
    /// let config = Config::single("redis://127.0.0.1:6380")
    ///     .tls_client_cert_pem(b"certificate PEM".to_vec(), b"key PEM".to_vec());
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// assert!(err.to_string().contains("rediss://"), "{err}");
    /// # }
    /// ```
    pub fn tls_client_cert_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((
            tls::Pem::Bytes(cert_pem.into()),
            tls::Pem::Bytes(key_pem.into()),
        ));
        self
    }

    /// Like [`tls_client_cert_pem`](Self::tls_client_cert_pem), with both PEMs read from
    /// files when connecting (they may be the same file).
    ///
    /// # Examples
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use redlatch::{Client, Config, Error};
    /// let config = Config::single("rediss://redis.internal:6380")
    ///     .tls_root_ca_file("/etc/redis/ca.crt")
    ///     .tls_client_cert_files("/nonexistent/client.crt", "/nonexistent/client.key");
    /// // Debug shows the paths, never key material.
    /// assert!(format!("{config:?}").contains("/nonexistent/client.key"));
    /// let err = Client::connect(config).await.unwrap_err();
    /// assert!(matches!(err, Error::Config(_)));
    /// # }
    /// ```
    pub fn tls_client_cert_files(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.tls.client = Some((tls::Pem::File(cert.into()), tls::Pem::File(key.into())));
        self
    }
}

/// Like a derived Debug, with the URLs' passwords shown as `***` (and no TLS key).
impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        let mut d = f.debug_struct("Config");
        d.field("urls", &urls)
            .field("topology", &self.topology)
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("drift_factor", &self.drift_factor)
            .field("master_timeout", &self.master_timeout)
            .field("default_master_timeout", &self.default_master_timeout)
            .field("retry_jitter", &self.retry_jitter)
            .field("connect_timeout", &self.connect_timeout)
            .field("pool_size", &self.pool_size)
            .field("fair_stale_timeout", &self.fair_stale_timeout)
            .field("fair_wait_time", &self.fair_wait_time)
            .field("unavailable_timeout", &self.unavailable_timeout)
            .field("sync_replicas", &self.sync)
            .field("master_auth", &self.master_auth.as_ref().map(|_| "***"));
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls);
        d.finish()
    }
}

/// How a [`Config`]'s URLs are used.
///
/// # Examples
/// ```
/// use redlatch::{Config, Topology};
/// let config = Config::cluster(["redis://127.0.0.1:7000"]);
/// assert!(matches!(config.topology(), Topology::Cluster));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// One master, or Redlock over several independent masters (by the number of
    /// URLs).
    Masters,
    /// A Redis Cluster; the URLs are seed nodes.
    Cluster,
    /// A Sentinel-managed primary; the URLs are the sentinels'.
    Sentinel {
        /// The name the sentinels monitor the primary under.
        master_name: String,
    },
}

/// The shortest lease accepted: below it the validity left after the drift allowance
/// (lease × drift_factor + 2 ms) and a round trip is too small to ever be granted.
pub const MIN_LEASE: Duration = Duration::from_millis(10);

/// A lease must be at least [`MIN_LEASE`] and at most [`MAX_LEASE`].
pub(crate) fn check_lease(what: &str, lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if lease < MIN_LEASE {
        return Err(Error::InvalidLease(format!(
            "{what} must be at least {MIN_LEASE:?}, got {lease:?}"
        )));
    }
    if lease > MAX_LEASE {
        return Err(Error::InvalidLease(format!(
            "{what} {lease:?} is longer than 30 days"
        )));
    }
    Ok(ms as u64)
}

/// `url` with its secrets replaced by `***`, for errors, logs and `Debug` output: the
/// password of the user info (`user:***@host`; a user info without `:` may be a bare
/// password, so it is hidden whole) and `pass`/`password` query parameters (unix-socket
/// URLs). Everything before the last `@` counts as user info, so an unescaped `@` or
/// `/` in a password cannot make part of it show; a URL without a scheme is treated
/// the same way.
///
/// # Examples
/// ```
/// use redlatch::redact_url;
/// assert_eq!(redact_url("redis://alice:s3cret@db:6379/0"), "redis://alice:***@db:6379/0");
/// assert_eq!(redact_url("redis://s3cret@db:6379"), "redis://***@db:6379");
/// assert_eq!(redact_url("alice:p@ss@db:6379"), "alice:***@db:6379");
/// assert_eq!(redact_url("redis+unix:///run/redis.sock?pass=s3cret&db=1"),
///            "redis+unix:///run/redis.sock?pass=***&db=1");
/// assert_eq!(redact_url("redis://db:6379"), "redis://db:6379");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let (before_query, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    let mut out = scheme;
    match before_query.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, _password)) => out.push_str(&format!("{user}:***@")),
                None => out.push_str("***@"),
            }
            out.push_str(host);
        }
        None => out.push_str(before_query),
    }
    if let Some(query) = query {
        let params: Vec<String> = (query.split('&'))
            .map(|kv| match kv.split_once('=') {
                Some((k, _))
                    if k.eq_ignore_ascii_case("pass") || k.eq_ignore_ascii_case("password") =>
                {
                    format!("{k}=***")
                }
                _ => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

fn parse_url(url: &str) -> Result<redis::ConnectionInfo> {
    let bad = |reason: String| Error::InvalidUrl {
        url: redact_url(url),
        reason,
    };
    let scheme = url.split("://").next().unwrap_or_default();
    match scheme {
        "redis" | "redis+unix" | "unix" | "valkey" | "valkey+unix" => {}
        "rediss" | "valkeys" if cfg!(feature = "tls") => {}
        "rediss" | "valkeys" => {
            return Err(bad(
                "TLS support is not compiled in (cargo feature `tls`)".into()
            ))
        }
        _ if !url.contains("://") => return Err(bad("expected redis://host:port".into())),
        other => return Err(bad(format!("unsupported scheme {other:?}"))),
    }
    redis::IntoConnectionInfo::into_connection_info(url).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_mode() {
        let single = Config::single("redis://a");
        assert_eq!(single.effective_master_timeout(), Duration::from_secs(1));
        let short = single.watchdog_timeout(Duration::from_millis(600));
        assert_eq!(short.effective_master_timeout(), Duration::from_millis(200));
        let c = Config::redlock(["redis://a:1", "redis://b:1", "redis://c:1"]);
        assert_eq!(c.effective_master_timeout(), Duration::from_millis(50));
        assert_eq!(c.quorum(), 2);
        assert_eq!(c.watchdog_timeout, Duration::from_secs(30));
    }

    #[test]
    fn bad_urls_and_values_are_rejected() {
        assert!(matches!(
            Config::single("http://x").validate(),
            Err(Error::InvalidUrl { .. })
        ));
        assert!(matches!(
            Config::single("nonsense").validate(),
            Err(Error::InvalidUrl { .. })
        ));
        assert!(Config::single("redis://127.0.0.1:1").validate().is_ok());
        // Valkey's schemes, as redis-rs accepts them.
        assert!(Config::single("valkey://127.0.0.1:1/2").validate().is_ok());
        assert!(Config::single("valkey+unix:///run/valkey.sock")
            .validate()
            .is_ok());
        let tls = Config::single("valkeys://127.0.0.1:1").validate();
        assert_eq!(tls.is_ok(), cfg!(feature = "tls"), "{tls:?}");
        let zero = Config::single("redis://x").watchdog_timeout(Duration::ZERO);
        assert!(zero.validate().is_err());
        let dup = Config::redlock(["redis://127.0.0.1:1", "redis://127.0.0.1:1/2"]);
        assert!(matches!(dup.validate(), Err(Error::Config(_))));
        assert!(Config::single("redis://x")
            .drift_factor(0.7)
            .validate()
            .is_err());
        assert!(Config::from_list(" , ").is_err());
        assert_eq!(
            Config::from_list("redis://a:1,redis://b:1")
                .unwrap()
                .urls
                .len(),
            2
        );
    }

    #[test]
    fn passwords_never_show_in_url_errors_or_debug() {
        assert_eq!(redact_url("redis://:pw@h:1/2"), "redis://:***@h:1/2");
        assert_eq!(redact_url("rediss://u:p@ss/w@h:1"), "rediss://u:***@h:1");
        // A user info without `:` may be a bare password: hidden whole.
        assert_eq!(redact_url("redis://u@h:1"), "redis://***@h:1");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("nonsense"), "nonsense");
        for url in [
            "redis://:s3cret@h:notaport",
            "bogus://u:s3cret@h:1",
            "redis+unix://:s3cret@",
        ] {
            let err = Config::single(url).validate().unwrap_err();
            assert!(!format!("{err} {err:?}").contains("s3cret"), "{err:?}");
        }
        #[cfg(not(feature = "tls"))]
        {
            let err = Config::single("rediss://:s3cret@h:1")
                .validate()
                .unwrap_err();
            assert!(!format!("{err} {err:?}").contains("s3cret"), "{err:?}");
        }
        let config = Config::redlock(["redis://:s3cret@a:1", "redis://b:1"]);
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("s3cret") && debug.contains("redis://:***@a:1"),
            "{debug}"
        );
    }

    #[test]
    fn leases_must_be_between_ten_milliseconds_and_thirty_days() {
        assert!(check_lease("lease", Duration::from_micros(500)).is_err());
        assert!(check_lease("lease", Duration::from_millis(2)).is_err());
        assert_eq!(check_lease("lease", MIN_LEASE).unwrap(), 10);
        assert!(check_lease("lease", MAX_LEASE + Duration::from_secs(1)).is_err());
        assert_eq!(check_lease("lease", Duration::from_secs(2)).unwrap(), 2000);
    }
}
