//! [`Config`]: which masters to use and how the lock behaves. Every field documents its
//! default.

use std::time::Duration;

use crate::api::urls::redact_url;
#[cfg(feature = "tls")]
use crate::engine::facade::TlsOptions;
use crate::engine::facade::{Deployment, Shape, SyncReplicas};
use crate::engine::Settings;
use crate::error::{Error, Result};

/// How long a release keeps asking masters that did not answer, unless
/// [`Config::release_timeout`] says otherwise: 3 s (why: see there).
pub const DEFAULT_RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// The longest lease (and watchdog timeout) accepted: 30 days.
pub const MAX_LEASE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Environment variable read by [`Config::from_env`]: comma-separated Redis URLs.
pub const ENV_VAR: &str = "REDLATCH_REDIS";

/// Client configuration: the masters and the timing of the lock.
///
/// One URL is single-master mode; several URLs are Redlock over independent masters
/// (use an odd number, 3 or 5; the quorum is N/2+1).
///
/// # Examples
/// Every setting, at its default (the values are checked by [`Client::connect`](crate::Client::connect)):
/// ```
/// use std::time::Duration;
/// use redlatch::Config;
/// let config = Config::redlock(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000", "redis://10.0.0.3:7000"])
///     .watchdog_timeout(Duration::from_secs(30)) // the lease the watchdog renews every 10 s
///     .drift_factor(0.01) // validity = lease − elapsed − (lease × 0.01 + 2 ms)
///     .retry_jitter(Duration::from_millis(50)) // random pause before retrying without a majority
///     .connect_timeout(Duration::from_secs(2))
///     .pool_size(2) // command connections per master
///     .fair_stale_timeout(Duration::from_secs(5)) // a crashed fair-lock waiter leaves the queue
///     .fair_wait_time(Duration::from_secs(300)) // Redisson's threadWaitTime
///     .unavailable_timeout(Duration::from_secs(30)); // how long lock() retries without a majority
/// assert_eq!(config.quorum(), 2);
/// assert_eq!(config.connections_per_master(), 2);
/// assert_eq!(config.effective_master_timeout(), Duration::from_millis(50)); // Redlock's default
/// ```
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
    pub(crate) release_timeout: Option<Duration>,
    pub(crate) sync: (SyncReplicas, Duration),
    /// Sentinel mode: the primary's credentials when they differ from the sentinels'.
    pub(crate) master_auth: Option<(Option<String>, String)>,
    /// The app name of the client record (config_observe.rs).
    pub(crate) app: Option<String>,
    pub(crate) deadlock_detection: bool,
    /// The bookkeeping keys' prefix and whether they are written, each `None` for the
    /// environment's or the default (config_books.rs).
    pub(crate) bookkeeping: (Option<String>, Option<bool>),
    #[cfg(feature = "tls")]
    pub(crate) tls: TlsOptions,
    /// The lock names metrics carry a `lock` label for ([`Config::metrics_names`]).
    pub(crate) metrics_names: Vec<String>,
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
    /// assert!(matches!(Config::from_list(" , "), Err(Error::Config { .. })));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_list(raw: &str) -> Result<Self> {
        let urls: Vec<&str> = raw
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        match urls.as_slice() {
            [] => Err(Error::config(format!("no redis url in {raw:?}"))),
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
            release_timeout: None,
            sync: (SyncReplicas::Auto, Duration::from_secs(1)),
            master_auth: None,
            app: None,
            deadlock_detection: false,
            bookkeeping: (None, None),
            #[cfg(feature = "tls")]
            tls: Default::default(),
            metrics_names: Vec::new(),
        }
    }

    /// Lease used when no explicit lease is given; the watchdog renews it every
    /// timeout/3 while a guard lives. Default 30 s (Redisson's `lockWatchdogTimeout`).
    ///
    /// # Examples
    /// See the example on [`Config`].
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.watchdog_timeout = timeout;
        self
    }

    /// Clock drift allowed for, as a fraction of the lease; 2 ms are added on top.
    /// Default 0.01.
    ///
    /// # Examples
    /// See the example on [`Config`].
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
    /// See the example on [`Config`].
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// Time allowed to open a connection to a master. Default 2 s.
    ///
    /// # Examples
    /// See the example on [`Config`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Multiplexed command connections per master (each pipelines many requests).
    /// One pub/sub connection per master comes on top. Default 2.
    ///
    /// # Examples
    /// See the example on [`Config`].
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
    /// See the example on [`Config`].
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
    /// See the example on [`Config`].
    pub fn fair_wait_time(mut self, wait: Duration) -> Self {
        self.fair_wait_time = wait;
        self
    }

    /// How long `lock()` keeps retrying while no majority of masters answers at all
    /// before it returns the error. Default: the watchdog timeout.
    ///
    /// # Examples
    /// See the example on [`Config`].
    pub fn unavailable_timeout(mut self, timeout: Duration) -> Self {
        self.unavailable_timeout = Some(timeout);
        self
    }

    /// How long `unlock()`, `release()` and the background release of a dropped guard
    /// keep asking masters that did not answer before they give up and leave the
    /// lease to expire on its own (`Error::NoQuorum` or the master's error). Default:
    /// [`DEFAULT_RELEASE_TIMEOUT`] (3 s), or the unavailable timeout where that is
    /// shorter. A shutdown is the usual caller: Kubernetes kills a pod 30 s after
    /// asking it to stop, so an unlock during an outage must not wait a lease's length
    /// (the watchdog timeout, which the unavailable timeout defaults to). 3 s still
    /// covers a dropped connection replaced and a master restarting from a small data
    /// set; a hold not released by then is freed by its lease, which the watchdog no
    /// longer renews. A request already sent is given one master timeout however short
    /// this is.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// use std::time::Duration;
    /// let config = Config::single("redis://127.0.0.1:7000");
    /// assert_eq!(config.effective_release_timeout(), Duration::from_secs(3));
    /// let config = config.release_timeout(Duration::from_secs(10));
    /// assert_eq!(config.effective_release_timeout(), Duration::from_secs(10));
    /// ```
    pub fn release_timeout(mut self, timeout: Duration) -> Self {
        self.release_timeout = Some(timeout);
        self
    }

    /// The release timeout in force: the one set, else [`DEFAULT_RELEASE_TIMEOUT`] or
    /// the unavailable timeout, whichever is shorter.
    ///
    /// # Examples
    /// See the example on [`release_timeout`](Self::release_timeout).
    pub fn effective_release_timeout(&self) -> Duration {
        (self.release_timeout)
            .unwrap_or_else(|| DEFAULT_RELEASE_TIMEOUT.min(self.unavailable_after()))
    }

    /// The lock names whose metrics (feature `metrics`) carry a `lock` label: the
    /// acquisition counter, the wait-time and the hold-time histograms. Each entry is
    /// an exact name, or a prefix ending in `*` (`"orders:*"`; `"*"` alone is every
    /// name: one series per name, so only where the names are few). A `*` anywhere
    /// but at the end is refused. Every other name is counted in the series without
    /// a `lock` label, as when this is not set (the default: nothing labelled, and
    /// nothing spent asking). Cardinality is the list's: a label per allowed name.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let config = Config::single("redis://127.0.0.1:7000")
    ///     .metrics_names(["billing:nightly", "orders:*"]);
    /// assert_eq!(config.metrics_names_list(), ["billing:nightly", "orders:*"]);
    /// ```
    pub fn metrics_names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.metrics_names = names.into_iter().map(Into::into).collect();
        self
    }

    /// The names and prefixes given to [`metrics_names`](Self::metrics_names).
    ///
    /// # Examples
    /// See the example on [`metrics_names`](Self::metrics_names).
    pub fn metrics_names_list(&self) -> &[String] {
        &self.metrics_names
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
            release_after: self.effective_release_timeout(),
            cluster: self.topology == Topology::Cluster,
            metrics_names: crate::telemetry::LockNames::new(&self.metrics_names),
            app: self.app_name().into(),
            deadlock_detection: self.deadlock_detection,
            books: self.books(),
        }
    }

    /// The deployment to connect to, in the plain terms of the engine: the validated
    /// configuration with its URLs parsed.
    pub(crate) fn deployment(&self) -> Result<Deployment> {
        Ok(Deployment {
            servers: self.validate()?,
            shape: match &self.topology {
                Topology::Masters => Shape::Masters,
                Topology::Cluster => Shape::Cluster,
                Topology::Sentinel { master_name } => Shape::Sentinel {
                    master_name: master_name.clone(),
                },
            },
            master_auth: self.master_auth.clone(),
            pool_size: self.pool_size,
            timeout: self.effective_master_timeout(),
            connect_timeout: self.connect_timeout,
            sync: self.sync,
            #[cfg(feature = "tls")]
            tls: self.tls.clone(),
        })
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
            .field("release_timeout", &self.release_timeout)
            .field("sync_replicas", &self.sync)
            .field("master_auth", &self.master_auth.as_ref().map(|_| "***"))
            .field("metrics_names", &self.metrics_names)
            .field("app", &self.app)
            .field("deadlock_detection", &self.deadlock_detection)
            .field("bookkeeping", &self.bookkeeping);
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
