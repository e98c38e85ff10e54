//! Which masters to use (`--redis`, `REDLATCH_REDIS`, the default) and connecting with
//! a bounded timeout.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use redlatch::{Client, Config, ENV_VAR};

use crate::exit::{self, Failure};

/// Used when neither `--redis` nor `REDLATCH_REDIS` names a master.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Time allowed to open a connection and get a PING answer from a majority.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Per-master command timeouts the library uses by default (single / Redlock).
const SINGLE_MASTER_TIMEOUT: Duration = Duration::from_secs(1);
const REDLOCK_MASTER_TIMEOUT: Duration = Duration::from_millis(50);
/// How long an inspection (`status`) waits for each master at least: no lease is at
/// stake, and an operator wants a busy master's answer rather than a timeout after the
/// 50 ms a Redlock acquisition allows (a master that is down still fails at once).
pub const QUERY_MASTER_TIMEOUT: Duration = Duration::from_secs(1);

/// The global `--app NAME`, set once by the binary before any subcommand runs.
static APP: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the app name every client of this process shows in its record (`--app`;
/// else the library's default: `$REDLATCH_APP`, then the executable's name).
pub fn set_app(name: String) {
    let _ = APP.set(name);
}

/// The global `--bookkeeping PREFIX|off`, set once by the binary.
static BOOKKEEPING: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the bookkeeping prefix (or `off`) of every client of this process
/// (`--bookkeeping`, `$REDLATCH_BOOKKEEPING`).
pub fn set_bookkeeping(prefix: String) {
    let _ = BOOKKEEPING.set(prefix);
}

/// The `--redis` option shared by every subcommand.
#[derive(Args, Debug, Clone, Default)]
pub struct RedisArgs {
    /// Redis master URL (redis://[user:pass@]host:port[/db], or valkey://). Repeat it
    /// for Redlock over independent masters (use 3 or 5). Default: $REDLATCH_REDIS
    /// (comma-separated; $REDLATCH_MODE single|redlock|cluster|sentinel and
    /// $REDLATCH_SENTINEL_MASTER say how to read it), then redis://127.0.0.1:6379.
    #[arg(long = "redis", value_name = "URL")]
    pub urls: Vec<String>,

    /// The --redis URLs are seed nodes of one Redis Cluster (detected on its own for a
    /// single URL whose server says cluster_enabled:1).
    #[arg(long, conflicts_with = "sentinel")]
    pub cluster: bool,

    /// The --redis URLs are sentinels monitoring the primary named NAME.
    #[arg(long, value_name = "NAME")]
    pub sentinel: Option<String>,

    /// Replicas that must acknowledge each acquisition: auto (every connected
    /// replica), off, or a count.
    #[arg(long = "sync-replicas", value_name = "auto|off|N", default_value = "auto",
          value_parser = parse_sync)]
    pub sync_replicas: redlatch::SyncReplicas,

    /// rediss:// masters: trust the CA certificate(s) of this PEM file instead of the
    /// bundled webpki (Mozilla) roots.
    #[arg(long = "tls-ca", value_name = "FILE", env = "REDLATCH_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// rediss:// masters: present this client certificate (PEM file; needs --tls-key).
    #[arg(
        long = "tls-cert",
        value_name = "FILE",
        env = "REDLATCH_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,

    /// Private key (PEM file) of --tls-cert.
    #[arg(
        long = "tls-key",
        value_name = "FILE",
        env = "REDLATCH_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
}

impl RedisArgs {
    /// The configuration these flags (or the environment) describe.
    pub fn config(&self) -> Result<Config, Failure> {
        let mut config = match self.urls.as_slice() {
            [one] => Config::single(one.clone()),
            [_, _, ..] => Config::redlock(self.urls.iter().cloned()),
            // The environment can describe every mode (REDLATCH_MODE, Config::from_env).
            [] => match std::env::var(ENV_VAR) {
                Ok(list) if !list.trim().is_empty() => Config::from_env()
                    .map_err(|e| exit::from_error(&format!("bad {ENV_VAR}"), &e))?,
                _ => Config::single(DEFAULT_URL),
            },
        };
        if self.cluster {
            config = Config::cluster(config.urls().to_vec());
        } else if let Some(name) = &self.sentinel {
            config = Config::sentinel(name.clone(), config.urls().to_vec());
        }
        let timeout = config.replica_sync().1;
        config = config.sync_replicas(self.sync_replicas, timeout);
        if let Some(app) = APP.get() {
            config = config.app(app.clone());
        }
        config = match BOOKKEEPING.get().map(String::as_str) {
            None => config,
            Some("off") => config.bookkeeping(false),
            Some(prefix) => config.bookkeeping_prefix(prefix),
        };
        self.with_tls(config)
    }

    /// Adds --tls-ca / --tls-cert / --tls-key (files are read when connecting).
    #[cfg(feature = "tls")]
    fn with_tls(&self, mut config: Config) -> Result<Config, Failure> {
        if let Some(ca) = &self.tls_ca {
            config = config.tls_root_ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            config = config.tls_client_cert_files(cert, key);
        }
        Ok(config)
    }

    #[cfg(not(feature = "tls"))]
    fn with_tls(&self, config: Config) -> Result<Config, Failure> {
        match (&self.tls_ca, &self.tls_cert, &self.tls_key) {
            (None, None, None) => Ok(config),
            _ => Err(Failure::usage(
                "--tls-ca, --tls-cert and --tls-key need redlatch built with the cargo feature `tls`",
            )),
        }
    }
}

/// `--sync-replicas`: `auto`, `off` or a replica count.
fn parse_sync(s: &str) -> Result<redlatch::SyncReplicas, String> {
    match s {
        "auto" => Ok(redlatch::SyncReplicas::Auto),
        "off" => Ok(redlatch::SyncReplicas::Off),
        n => n
            .parse()
            .map(redlatch::SyncReplicas::Count)
            .map_err(|_| format!("{s:?}: expected auto, off or a number of replicas")),
    }
}

/// `config` for an inspection, which holds no lock: its master timeout raised to at
/// least [`QUERY_MASTER_TIMEOUT`], under a watchdog timeout long enough for it (the
/// library wants the master timeout below a third of it; nothing is renewed here).
pub fn for_queries(config: Config) -> Config {
    let master = config.effective_master_timeout().max(QUERY_MASTER_TIMEOUT);
    config.watchdog_timeout(master * 30).master_timeout(master)
}

/// Sets the watchdog timeout, keeping the per-master timeout well below it (the
/// library refuses a master timeout that is not shorter than the watchdog's).
pub fn with_watchdog(config: Config, watchdog: Duration) -> Config {
    let default = if config.quorum() > 1 {
        REDLOCK_MASTER_TIMEOUT
    } else {
        SINGLE_MASTER_TIMEOUT
    };
    let master = default.min(watchdog / 5).max(Duration::from_millis(5));
    config.watchdog_timeout(watchdog).master_timeout(master)
}

/// Connects within [`CONNECT_TIMEOUT`] (plus a little slack for the whole fan-out).
pub async fn connect(config: Config) -> Result<Client, Failure> {
    connect_within(config, None).await
}

/// What `--wait W` may take past `W` (docs/guarantees.md, "Bounds"): the library's
/// [`redlatch::WAIT_SLACK`] (or one master timeout, if shorter); one master timeout
/// for `--wait 0` (`--nonblock`), a single try.
pub fn wait_slack(config: &Config, wait: Duration) -> Duration {
    let master = config.effective_master_timeout();
    if wait.is_zero() {
        master
    } else {
        master.min(redlatch::WAIT_SLACK)
    }
}

/// The wait left of `--wait W` after `elapsed` (connecting): at least 1 ms when `W`
/// was not zero, so that the lock's wait keeps the slack of a wait (a zero wait is a
/// single try with a whole master timeout).
pub fn wait_left(wait: Duration, elapsed: Duration) -> Duration {
    if wait.is_zero() {
        wait
    } else {
        wait.saturating_sub(elapsed).max(Duration::from_millis(1))
    }
}

/// Connects as [`connect`] does, within `bound` too when one is given (`run --wait`:
/// --wait itself, counted from the start; the wait slack is the lock's).
pub async fn connect_within(config: Config, bound: Option<Duration>) -> Result<Client, Failure> {
    let urls: Vec<String> = config
        .urls()
        .iter()
        .map(|u| redlatch::redact_url(u))
        .collect();
    let urls = urls.join(", ");
    let limit = bound.unwrap_or(Duration::MAX);
    let config = config.connect_timeout(CONNECT_TIMEOUT.min(limit));
    let bound = (CONNECT_TIMEOUT * 2).min(limit);
    match tokio::time::timeout(bound, Client::connect(config)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(exit::from_error(&format!("cannot use redis {urls}"), &e)),
        Err(_) => Err(Failure::new(
            exit::UNAVAILABLE,
            format!("cannot reach redis {urls}: no answer within {bound:?}"),
        )),
    }
}
