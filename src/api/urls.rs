//! Redis URLs: parsed into connection settings, and shown with their secrets hidden.

use crate::error::{Error, Result};

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

/// Parses one master URL; an unsupported scheme or a malformed URL is
/// [`Error::InvalidUrl`], shown redacted.
pub(crate) fn parse_url(url: &str) -> Result<redis::ConnectionInfo> {
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
