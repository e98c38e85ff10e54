//! Checking a [`Config`] before it is used: the bounds of every field, the URLs
//! (parsed, never shown with their passwords) and the bounds of a lease.

use std::time::Duration;

use crate::api::config::{Config, MAX_LEASE};
use crate::api::urls::parse_url;
use crate::error::{Error, Result};

impl Config {
    /// Checks every field; parses the URLs.
    pub(crate) fn validate(&self) -> Result<Vec<redis::ConnectionInfo>> {
        if self.urls.is_empty() {
            return Err(Error::config("no redis master given"));
        }
        if self.urls.len() > 64 {
            return Err(Error::config("at most 64 masters are supported"));
        }
        check_lease("watchdog_timeout", self.watchdog_timeout)?;
        if self.watchdog_timeout < Duration::from_millis(30) {
            return Err(Error::config("watchdog_timeout must be at least 30ms"));
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(Error::config("drift_factor must be in [0, 0.5)"));
        }
        for (what, d) in [
            ("master_timeout", self.effective_master_timeout()),
            ("connect_timeout", self.connect_timeout),
            ("fair_stale_timeout", self.fair_stale_timeout),
            ("fair_wait_time", self.fair_wait_time),
        ] {
            if d.is_zero() || d > MAX_LEASE {
                return Err(Error::config(format!("{what} must be > 0 and <= 30 days")));
            }
        }
        if self.sync.1.is_zero() || self.sync.1 > MAX_LEASE {
            return Err(Error::config(
                "the replica sync timeout must be > 0 and <= 30 days",
            ));
        }
        if self.retry_jitter > MAX_LEASE {
            return Err(Error::config("retry_jitter must be <= 30 days"));
        }
        if self.effective_master_timeout() >= self.watchdog_timeout {
            return Err(Error::config(
                "master_timeout must be shorter than watchdog_timeout",
            ));
        }
        if self.fair_stale_timeout < Duration::from_millis(30) {
            return Err(Error::config("fair_stale_timeout must be at least 30ms"));
        }
        if self.fair_wait_time < self.fair_stale_timeout {
            return Err(Error::config(
                "fair_wait_time must be at least fair_stale_timeout",
            ));
        }
        if self.pool_size == 0 || self.pool_size > 64 {
            return Err(Error::config("pool_size must be in 1..=64"));
        }
        for name in &self.metrics_names {
            if name.is_empty() || name.strip_suffix('*').unwrap_or(name).contains('*') {
                return Err(Error::config(format!(
                    "metrics_names entry {name:?} is not a name or a prefix ending in '*'"
                )));
            }
        }
        self.check_app()?;
        self.check_bookkeeping()?;
        let infos = self
            .urls
            .iter()
            .map(|u| parse_url(u))
            .collect::<Result<Vec<_>>>()?;
        let mut addrs: Vec<String> = infos.iter().map(|i| i.addr().to_string()).collect();
        addrs.sort();
        if let Some(w) = addrs.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::config(format!(
                "master {} is listed twice; Redlock needs independent masters",
                w[0]
            )));
        }
        Ok(infos)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::urls::redact_url;

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
        assert!(matches!(dup.validate(), Err(Error::Config { .. })));
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
