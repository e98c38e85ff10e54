//! `Config: Deserialize` (cargo feature `serde`): a configuration file section or an
//! environment-driven config crate fills in a [`Config`] with the same names as its
//! builder methods. Durations are `"500ms"`, `"30s"`, `"2m"`, `"1h"` or a number of
//! milliseconds; unknown fields are refused, so a misspelt setting is an error, not a
//! silent default.

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::Deserialize;

use crate::api::config::Config;
use crate::engine::facade::SyncReplicas;

/// The file form of a [`Config`]; every field but the servers is optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// `single`, `redlock`, `cluster` or `sentinel`; absent: by the number of URLs.
    mode: Option<String>,
    /// The masters, the cluster's seeds, or the sentinels.
    urls: Vec<String>,
    /// Sentinel mode: the monitored primary's name.
    master_name: Option<String>,
    /// Sentinel mode: the primary's credentials, when not the sentinels'.
    master_username: Option<String>,
    master_password: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    watchdog_timeout: Option<Duration>,
    drift_factor: Option<f64>,
    #[serde(default, deserialize_with = "duration")]
    master_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    retry_jitter: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    connect_timeout: Option<Duration>,
    pool_size: Option<usize>,
    #[serde(default, deserialize_with = "duration")]
    fair_stale_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    fair_wait_time: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    unavailable_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    release_timeout: Option<Duration>,
    /// `auto`, `off`, `aof` or a replica count.
    sync_replicas: Option<Sync>,
    #[serde(default, deserialize_with = "duration")]
    sync_timeout: Option<Duration>,
    /// TLS (feature `tls`): a CA file, and a client certificate with its key.
    tls_ca_file: Option<std::path::PathBuf>,
    tls_cert_file: Option<std::path::PathBuf>,
    tls_key_file: Option<std::path::PathBuf>,
    /// The app name of the client record.
    app: Option<String>,
    deadlock_detection: Option<bool>,
    /// The bookkeeping keys' prefix, and whether they are written (config_books.rs).
    bookkeeping_prefix: Option<String>,
    bookkeeping: Option<bool>,
    /// Lock names and `prefix*`es whose metrics carry a `lock` label.
    metrics_names: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Sync {
    Count(usize),
    Word(String),
}

impl<'de> Deserialize<'de> for Config {
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use redlatch::{Config, Topology};
    /// let config: Config = serde_json::from_str(r#"{
    ///     "mode": "sentinel", "master_name": "mymaster",
    ///     "urls": ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"],
    ///     "watchdog_timeout": "10s", "master_timeout": 500, "sync_replicas": 1,
    ///     "app": "billing", "deadlock_detection": true, "metrics_names": ["orders:*"],
    ///     "bookkeeping_prefix": "billing:rl"
    /// }"#).unwrap();
    /// assert_eq!(config.bookkeeping_keys_prefix().as_deref(), Some("billing:rl"));
    /// assert_eq!(config.metrics_names_list(), ["orders:*"]);
    /// assert_eq!((config.app_name().as_str(), config.detects_deadlocks()), ("billing", true));
    /// assert_eq!(config.topology(), &Topology::Sentinel { master_name: "mymaster".into() });
    /// assert_eq!(config.effective_master_timeout(), Duration::from_millis(500));
    /// let typo = serde_json::from_str::<Config>(r#"{"urls": ["redis://h:1"], "watchdog": "1s"}"#);
    /// assert!(typo.unwrap_err().to_string().contains("unknown field `watchdog`"));
    /// ```
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let file = File::deserialize(deserializer)?;
        file.into_config().map_err(de::Error::custom)
    }
}

impl File {
    fn into_config(self) -> Result<Config, String> {
        let mut c = match (self.mode.as_deref(), self.master_name) {
            (None, None) => match self.urls.len() {
                1 => Config::single(self.urls[0].clone()),
                _ => Config::redlock(self.urls),
            },
            (Some("single"), None) if self.urls.len() == 1 => Config::single(self.urls[0].clone()),
            (Some("redlock"), None) => Config::redlock(self.urls),
            (Some("cluster"), None) => Config::cluster(self.urls),
            (Some("sentinel"), Some(name)) => Config::sentinel(name, self.urls),
            (Some("sentinel"), None) => return Err("mode sentinel needs master_name".into()),
            (Some("single"), None) => return Err("mode single takes exactly one URL".into()),
            (_, Some(_)) => return Err("master_name is for mode sentinel".into()),
            (Some(other), None) => {
                return Err(format!(
                    "mode {other:?}: expected single, redlock, cluster or sentinel"
                ))
            }
        };
        if let Some(password) = &self.master_password {
            c = c.master_auth(self.master_username.as_deref(), password);
        }
        macro_rules! set {
            ($($field:ident),*) => {$(
                if let Some(v) = self.$field {
                    c = c.$field(v);
                }
            )*};
        }
        set!(
            watchdog_timeout,
            drift_factor,
            master_timeout,
            retry_jitter,
            connect_timeout,
            pool_size,
            fair_stale_timeout,
            fair_wait_time,
            unavailable_timeout,
            release_timeout,
            app,
            deadlock_detection,
            bookkeeping_prefix,
            bookkeeping,
            metrics_names
        );
        let (mode, timeout) = c.replica_sync();
        let mode = match self.sync_replicas {
            None => mode,
            Some(Sync::Count(n)) => SyncReplicas::Count(n),
            Some(Sync::Word(w)) => match w.as_str() {
                "auto" => SyncReplicas::Auto,
                "off" => SyncReplicas::Off,
                "aof" => SyncReplicas::Aof,
                other => {
                    return Err(format!(
                        "sync_replicas {other:?}: expected auto, off, aof or a count"
                    ))
                }
            },
        };
        c = c.sync_replicas(mode, self.sync_timeout.unwrap_or(timeout));
        tls(c, self.tls_ca_file, self.tls_cert_file, self.tls_key_file)
    }
}

#[cfg(feature = "tls")]
fn tls(
    mut c: Config,
    ca: Option<std::path::PathBuf>,
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
) -> Result<Config, String> {
    if let Some(ca) = ca {
        c = c.tls_root_ca_file(ca);
    }
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(c.tls_client_cert_files(cert, key)),
        (None, None) => Ok(c),
        _ => Err("tls_cert_file and tls_key_file go together".into()),
    }
}

#[cfg(not(feature = "tls"))]
fn tls(
    c: Config,
    ca: Option<std::path::PathBuf>,
    cert: Option<std::path::PathBuf>,
    key: Option<std::path::PathBuf>,
) -> Result<Config, String> {
    match (ca, cert, key) {
        (None, None, None) => Ok(c),
        _ => Err("tls_* settings need the cargo feature `tls`".into()),
    }
}

/// A duration as `"500ms"`, `"30s"`, `"2m"`, `"1h"` or a number of milliseconds.
fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Millis(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Millis(ms) => Ok(Some(Duration::from_millis(ms))),
        Raw::Text(t) => parse_duration(&t).map(Some).map_err(de::Error::custom),
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit (ms, s, m, h)"))?;
    let per = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(format!("{text:?}: unknown unit {other:?} (ms, s, m, h)")),
    };
    n.checked_mul(per)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::config::Topology;

    fn parse(json: &str) -> Result<Config, String> {
        serde_json::from_str::<Config>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn every_mode_and_setting_reads_from_a_file() {
        let c =
            parse(r#"{"urls": ["redis://a:1"], "pool_size": 4, "drift_factor": 0.02}"#).unwrap();
        assert_eq!((c.quorum(), c.connections_per_master()), (1, 4));
        let c = parse(r#"{"urls": ["redis://a:1", "redis://b:1", "redis://c:1"]}"#).unwrap();
        assert_eq!(c.quorum(), 2);
        let c = parse(r#"{"mode": "cluster", "urls": ["redis://a:1"], "sync_replicas": "off"}"#)
            .unwrap();
        assert_eq!(c.topology(), &Topology::Cluster);
        assert_eq!(c.replica_sync().0, SyncReplicas::Off);
        let c = parse(
            r#"{"urls": ["redis://a:1"], "watchdog_timeout": "2m", "sync_replicas": 2,
                "sync_timeout": "250ms", "unavailable_timeout": 1500}"#,
        )
        .unwrap();
        assert_eq!(
            c.replica_sync(),
            (SyncReplicas::Count(2), Duration::from_millis(250))
        );
        assert!(c.validate().is_ok());
        let c = parse(r#"{"urls": ["redis://a:1"], "metrics_names": ["billing", "orders:*"]}"#)
            .unwrap();
        assert_eq!(c.metrics_names_list(), ["billing", "orders:*"]);
        assert!(c.validate().is_ok());
        // Checked as the builder's are: a '*' that does not end a prefix is refused.
        let c = parse(r#"{"urls": ["redis://a:1"], "metrics_names": ["a*b"]}"#).unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("\"a*b\""));
    }

    #[test]
    fn mistakes_are_named() {
        for (json, said) in [
            (
                r#"{"urls": ["redis://a:1"], "lease": "1s"}"#,
                "unknown field `lease`",
            ),
            (
                r#"{"mode": "sentinel", "urls": ["redis://a:1"]}"#,
                "master_name",
            ),
            (r#"{"mode": "ring", "urls": ["redis://a:1"]}"#, "ring"),
            (
                r#"{"urls": ["redis://a:1"], "watchdog_timeout": "3 days"}"#,
                "unknown unit",
            ),
            (
                r#"{"urls": ["redis://a:1"], "sync_replicas": "most"}"#,
                "most",
            ),
            (
                r#"{"mode": "single", "urls": ["redis://a:1", "redis://b:1"]}"#,
                "one URL",
            ),
        ] {
            let err = parse(json).unwrap_err();
            assert!(err.contains(said), "{json}: {err}");
        }
        assert_eq!(
            parse_duration("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(parse_duration("18446744073709551615h").is_err());
    }
}
