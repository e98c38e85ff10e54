//! [`Config`] from the Redis set-up an application already has: a
//! `redis::ConnectionInfo`, a `redis::Client`, a deadpool-redis `Config`, or the
//! environment in every mode. Each is turned into the URL form the rest of the library
//! works with, so TLS, the ACL user, the database and the RESP version are written once.

use redis::{ConnectionAddr, ConnectionInfo, ProtocolVersion};

use crate::api::config::{Config, ENV_VAR};
use crate::error::{Error, Result};

/// How [`Config::from_env`] reads the deployment's kind: `single`, `redlock`, `cluster`
/// or `sentinel` (then [`ENV_SENTINEL_MASTER`] names the primary). Unset: one URL in
/// [`ENV_VAR`] is a single master, a list is Redlock.
pub const ENV_MODE: &str = "REDLATCH_MODE";

/// The name the sentinels monitor the primary under, with `REDLATCH_MODE=sentinel`.
pub const ENV_SENTINEL_MASTER: &str = "REDLATCH_SENTINEL_MASTER";

impl Config {
    /// One master given as a `redis::ConnectionInfo` (address, TLS, ACL user and
    /// password, database, RESP version), as the application built it for redis-rs.
    ///
    /// # Errors
    /// [`Error::Config`] for what a URL cannot carry: TLS parameters built into the
    /// address (give certificates with the `Config::tls_*` methods instead).
    ///
    /// # Examples
    /// ```
    /// use redis::IntoConnectionInfo;
    /// use redlatch::Config;
    /// let info = "redis://alice:s3cret@10.0.0.1:7000/2?protocol=resp3".into_connection_info().unwrap();
    /// let config = Config::from_connection_info(&info)?;
    /// assert_eq!(config.urls(), ["redis://alice:s3cret@10.0.0.1:7000/2?protocol=resp3"]);
    /// assert!(!format!("{config:?}").contains("s3cret")); // never shown
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn from_connection_info(info: &ConnectionInfo) -> Result<Config> {
        Ok(Config::single(url_of(info)?))
    }

    /// One master given as the `redis::Client` the application already uses (its
    /// connection settings are copied; the client is not shared).
    ///
    /// # Errors
    /// As [`from_connection_info`](Self::from_connection_info).
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let redis_client = redis::Client::open("redis://127.0.0.1:7000").unwrap(); // the app's own
    /// let config = Config::from_redis_client(&redis_client)?;
    /// assert_eq!(config.urls(), ["redis://127.0.0.1:7000"]);
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn from_redis_client(client: &redis::Client) -> Result<Config> {
        Self::from_connection_info(client.get_connection_info())
    }

    /// One master given as a deadpool-redis `Config` (its `url`, else its
    /// `connection`, else deadpool's default server), with the pool's `max_size` as
    /// [`pool_size`](Self::pool_size) (at most 64).
    ///
    /// # Errors
    /// As [`from_connection_info`](Self::from_connection_info).
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let mut pool_config = deadpool_redis::Config::from_url("redis://10.0.0.1:7000/1");
    /// pool_config.pool = Some(deadpool_redis::PoolConfig::new(8));
    /// let config = Config::from_deadpool(&pool_config)?;
    /// assert_eq!(config.urls(), ["redis://10.0.0.1:7000/1"]);
    /// assert_eq!(config.connections_per_master(), 8);
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn from_deadpool(config: &deadpool_redis::Config) -> Result<Config> {
        let mut out = match (&config.url, &config.connection) {
            (Some(url), _) => Config::single(url.clone()),
            (None, Some(info)) => Self::from_connection_info(&info.clone().into())?,
            // As deadpool-redis itself: its default connection (127.0.0.1:6379).
            (None, None) => {
                Self::from_connection_info(&deadpool_redis::ConnectionInfo::default().into())?
            }
        };
        if let Some(pool) = &config.pool {
            out = out.pool_size(pool.max_size.clamp(1, 64));
        }
        Ok(out)
    }

    /// Reads the deployment from the environment: [`ENV_VAR`] (`REDLATCH_REDIS`, a
    /// comma-separated URL list), [`ENV_MODE`] (`single`, `redlock`, `cluster` or
    /// `sentinel`; unset: one URL is a single master, a list is Redlock) and, for
    /// Sentinel, [`ENV_SENTINEL_MASTER`] (the URLs are then the sentinels').
    ///
    /// # Errors
    /// [`Error::Config`] when the URL list is unset or empty, the mode unknown, a
    /// single mode given several URLs, or Sentinel's master name missing.
    ///
    /// # Examples
    /// ```standalone_crate
    /// use redlatch::{Config, Topology, ENV_MODE, ENV_SENTINEL_MASTER, ENV_VAR};
    /// // SAFETY (each `set_var`/`remove_var` below): this example is a process of its
    /// // own with one thread.
    /// unsafe { std::env::set_var(ENV_VAR, "redis://10.0.0.1:7000,redis://10.0.0.2:7000,redis://10.0.0.3:7000") };
    /// let config = Config::from_env()?;
    /// assert_eq!(config.quorum(), 2); // a list: Redlock
    ///
    /// unsafe { std::env::set_var(ENV_MODE, "cluster") };
    /// assert_eq!(Config::from_env()?.topology(), &Topology::Cluster); // seeds
    ///
    /// unsafe { std::env::set_var(ENV_MODE, "sentinel") };
    /// unsafe { std::env::set_var(ENV_SENTINEL_MASTER, "mymaster") };
    /// let config = Config::from_env()?;
    /// assert_eq!(config.topology(), &Topology::Sentinel { master_name: "mymaster".into() });
    ///
    /// unsafe { std::env::remove_var(ENV_SENTINEL_MASTER) };
    /// assert!(matches!(Config::from_env(), Err(redlatch::Error::Config { .. })));
    /// for var in [ENV_VAR, ENV_MODE] {
    ///     unsafe { std::env::remove_var(var) };
    /// }
    /// assert!(matches!(Config::from_env(), Err(redlatch::Error::Config { .. })));
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn from_env() -> Result<Self> {
        let raw =
            std::env::var(ENV_VAR).map_err(|_| Error::config(format!("{ENV_VAR} is not set")))?;
        let mode = std::env::var(ENV_MODE).ok();
        let master = std::env::var(ENV_SENTINEL_MASTER).ok();
        from_parts(&raw, mode.as_deref(), master.as_deref())
    }

    /// The environment's deployment if it names one, else `default`: [`Config::from_env`]
    /// when [`ENV_VAR`] (`REDLATCH_REDIS`) is set, `default` when none of the three
    /// variables is. An environment that is set but invalid is an error, never a
    /// silent fallback to `default` (a typo such as `REDLATCH_MODE=clusterr` would
    /// otherwise lock on another Redis than the one meant).
    ///
    /// # Errors
    /// [`Error::Config`] as [`Config::from_env`] when `REDLATCH_REDIS` is set; also when
    /// it is unset but [`ENV_MODE`] or [`ENV_SENTINEL_MASTER`] is set (half a
    /// deployment).
    ///
    /// # Examples
    /// ```standalone_crate
    /// use redlatch::{Config, Topology, ENV_MODE, ENV_VAR};
    /// // SAFETY (each `set_var`/`remove_var` below): this example is a process of its
    /// // own with one thread.
    /// let local = || Config::single("redis://127.0.0.1:6379");
    /// unsafe { std::env::remove_var(ENV_VAR) };
    /// assert_eq!(Config::from_env_or(local())?.urls(), ["redis://127.0.0.1:6379"]);
    ///
    /// unsafe { std::env::set_var(ENV_VAR, "redis://10.0.0.1:7000") };
    /// unsafe { std::env::set_var(ENV_MODE, "cluster") };
    /// assert_eq!(Config::from_env_or(local())?.topology(), &Topology::Cluster);
    ///
    /// unsafe { std::env::set_var(ENV_MODE, "clusterr") }; // set but invalid: an error
    /// assert!(matches!(Config::from_env_or(local()), Err(redlatch::Error::Config { .. })));
    ///
    /// unsafe { std::env::remove_var(ENV_VAR) }; // REDLATCH_MODE alone: half a deployment
    /// assert!(matches!(Config::from_env_or(local()), Err(redlatch::Error::Config { .. })));
    /// # Ok::<(), redlatch::Error>(())
    /// ```
    pub fn from_env_or(default: Config) -> Result<Self> {
        if std::env::var_os(ENV_VAR).is_some() {
            return Config::from_env();
        }
        match [ENV_MODE, ENV_SENTINEL_MASTER]
            .into_iter()
            .find(|v| std::env::var_os(v).is_some())
        {
            Some(set) => Err(Error::config(format!("{set} is set but {ENV_VAR} is not"))),
            None => Ok(default),
        }
    }
}

/// The configuration `REDLATCH_REDIS`, `REDLATCH_MODE` and `REDLATCH_SENTINEL_MASTER`
/// describe.
fn from_parts(raw: &str, mode: Option<&str>, master: Option<&str>) -> Result<Config> {
    let urls: Vec<&str> = (raw.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(Error::config(format!("no redis url in {ENV_VAR}")));
    }
    let mode = mode.map(str::trim).filter(|m| !m.is_empty());
    match mode.map(str::to_ascii_lowercase).as_deref() {
        None => Config::from_list(raw),
        Some("single") => match urls.as_slice() {
            [one] => Ok(Config::single(*one)),
            _ => Err(Error::config(format!(
                "{ENV_MODE}=single takes one URL, {ENV_VAR} has {}",
                urls.len()
            ))),
        },
        Some("redlock") => Ok(Config::redlock(urls)),
        Some("cluster") => Ok(Config::cluster(urls)),
        Some("sentinel") => match master.map(str::trim).filter(|m| !m.is_empty()) {
            Some(name) => Ok(Config::sentinel(name, urls)),
            None => Err(Error::config(format!(
                "{ENV_MODE}=sentinel needs {ENV_SENTINEL_MASTER} (the monitored primary's name)"
            ))),
        },
        Some(other) => Err(Error::config(format!(
            "{ENV_MODE}={other:?}: expected single, redlock, cluster or sentinel"
        ))),
    }
}

/// The URL that redis-rs parses back into `info` (TCP, TLS with `#insecure`, unix
/// socket; user, password, database, `protocol=resp3`).
fn url_of(info: &ConnectionInfo) -> Result<String> {
    let redis = info.redis_settings();
    let mut userinfo = String::new();
    if let Some(user) = redis.username() {
        userinfo.push_str(&encode(user));
    }
    if let Some(password) = redis.password() {
        userinfo.push(':');
        userinfo.push_str(&encode(password));
    }
    let resp3 = matches!(redis.protocol(), ProtocolVersion::RESP3);
    let url = match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            let at = if userinfo.is_empty() { "" } else { "@" };
            let mut url = format!("redis://{userinfo}{at}{}:{port}", bracket(host));
            if redis.db() != 0 {
                url.push_str(&format!("/{}", redis.db()));
            }
            if resp3 {
                url.push_str("?protocol=resp3");
            }
            url
        }
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            tls_params,
        } => {
            if tls_params.is_some() {
                return Err(Error::config(
                    "TLS parameters inside a redis::ConnectionInfo cannot be carried over: \
                     give the CA and client certificate with Config::tls_* instead",
                ));
            }
            let at = if userinfo.is_empty() { "" } else { "@" };
            let mut url = format!("rediss://{userinfo}{at}{}:{port}", bracket(host));
            url.push_str(&format!("/{}", redis.db()));
            if resp3 {
                url.push_str("?protocol=resp3");
            }
            if *insecure {
                url.push_str("#insecure");
            }
            url
        }
        ConnectionAddr::Unix(path) => {
            let mut query = vec![format!("db={}", redis.db())];
            if let Some(user) = redis.username() {
                query.push(format!("user={}", encode(user)));
            }
            if let Some(password) = redis.password() {
                query.push(format!("pass={}", encode(password)));
            }
            if resp3 {
                query.push("protocol=resp3".into());
            }
            format!("redis+unix://{}?{}", path.display(), query.join("&"))
        }
        other => {
            return Err(Error::config(format!(
                "unsupported redis address {other:?}"
            )))
        }
    };
    Ok(url)
}

/// An IPv6 host in brackets, others as they are.
fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use redis::IntoConnectionInfo;

    use super::*;
    use crate::api::config::Topology;

    fn round_trip(url: &str) -> String {
        let info = url.into_connection_info().unwrap();
        let back = url_of(&info).unwrap();
        let again = back.as_str().into_connection_info().unwrap();
        assert_eq!(again.addr(), info.addr(), "{url} -> {back}");
        let (a, b) = (again.redis_settings(), info.redis_settings());
        assert_eq!(
            (a.db(), a.username(), a.password()),
            (b.db(), b.username(), b.password()),
            "{url} -> {back}"
        );
        assert_eq!(format!("{:?}", a.protocol()), format!("{:?}", b.protocol()));
        back
    }

    #[test]
    fn connection_infos_survive_the_trip_through_a_url() {
        round_trip("redis://127.0.0.1:7000");
        round_trip("redis://alice:p%40ss%3Aw%2Frd@db.example:6380/3?protocol=resp3");
        round_trip("redis://:only-a-password@[::1]:7000");
        round_trip("redis+unix:///run/redis.sock?db=2&user=bob&pass=s%20cret");
        round_trip("valkey://10.0.0.1:7000/1");
        assert_eq!(round_trip("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn the_environment_describes_every_mode() {
        let urls = "redis://a:1, redis://b:2 ,redis://c:3";
        assert_eq!(from_parts(urls, None, None).unwrap().quorum(), 2);
        assert_eq!(from_parts("redis://a:1", None, None).unwrap().quorum(), 1);
        let cluster = from_parts(urls, Some("Cluster"), None).unwrap();
        assert_eq!(cluster.topology(), &Topology::Cluster);
        assert_eq!(cluster.urls().len(), 3);
        let sentinel = from_parts(urls, Some("sentinel"), Some("mymaster")).unwrap();
        assert_eq!(
            sentinel.topology(),
            &Topology::Sentinel {
                master_name: "mymaster".into()
            }
        );
        assert_eq!(from_parts(urls, Some("redlock"), None).unwrap().quorum(), 2);
        for (mode, master) in [
            (Some("single"), None),
            (Some("sentinel"), None),
            (Some("sentinel"), Some(" ")),
            (Some("ring"), None),
        ] {
            let err = from_parts(urls, mode, master).unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{mode:?}: {err}");
        }
        assert!(from_parts(" , ", None, None).is_err());
        assert!(
            from_parts(urls, Some(""), None).is_ok(),
            "empty mode: by count"
        );
    }
}
