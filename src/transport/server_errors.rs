//! A server's error replies read as typed [`Error`]s: the codes that have their own
//! variant (`NOPERM`, `OOM`, `CLUSTERDOWN`, `NOAUTH`/`WRONGPASS`), the errors Redis < 7
//! wraps in `ERR Error running script ...`, and the wordings of an ACL refusal inside a
//! script (Redis 6.2 to 7.0, Redis >= 7.2 and Valkey). The engine reads a script's
//! replies through these too ([`from_master`]).

use crate::error::Error;

/// The error of a master's reply: NOPERM and OOM become their own variants (they are
/// permanent for the call), anything else stays a [`Error::Redis`]. An error a script
/// met, which Redis < 7 wraps, is first given back its own code ([`unwrap_script_error`]).
pub(crate) fn from_master(addr: &str, source: redis::RedisError) -> Error {
    let source = unwrap_script_error(source);
    let detail = || source.detail().unwrap_or_default().to_string();
    match source.code() {
        Some("NOPERM") => Error::PermissionDenied {
            addr: addr.to_string(),
            detail: detail(),
        },
        Some("OOM") => Error::OutOfMemory {
            addr: addr.to_string(),
            detail: detail(),
        },
        Some("CLUSTERDOWN") => Error::ClusterDown {
            addr: addr.to_string(),
            detail: detail(),
        },
        _ => Error::Redis {
            addr: addr.to_string(),
            source,
        },
    }
}

/// The error of a connection to a master as `user` (the URL's, `None`: `default`) on
/// database `db`: what setting it up can meet, named for what it is, beside what
/// [`from_master`] names. A refused password or a missing one
/// ([`Error::Authentication`]), a database the server does not have (a
/// [`Error::Config`] naming the index), a reply that is not RESP ([`Error::NotRedis`]).
pub(crate) fn from_link(
    addr: &str,
    user: Option<&str>,
    db: i64,
    source: redis::RedisError,
) -> Error {
    let auth = |reason: &str| Error::Authentication {
        addr: addr.to_string(),
        user: user.unwrap_or("default").to_string(),
        reason: reason.to_string(),
    };
    match (source.kind(), source.code()) {
        (redis::ErrorKind::AuthenticationFailed, _) | (_, Some("WRONGPASS")) => {
            auth("the password is wrong, or the user does not exist or is disabled (WRONGPASS)")
        }
        (_, Some("NOAUTH")) => auth("the server requires a password and none was given (NOAUTH)"),
        (redis::ErrorKind::Parse, _) => Error::NotRedis {
            addr: addr.to_string(),
        },
        _ if source.to_string().contains("refused to switch database") => {
            let detail = source.detail().unwrap_or("SELECT refused");
            Error::Config {
                reason: format!("master {addr}: database {db} cannot be used: {detail}"),
                source: Some(crate::error::Cause::new(source)),
            }
        }
        _ => from_master(addr, source),
    }
}

/// Redis < 7 answers a script whose `redis.call` failed with `ERR Error running script
/// (call to f_<sha>): @user_script:<line>: <error>`, the error itself sometimes behind a
/// second `@user_script: <line>: ` and a `-` (`-READONLY ...`, `-OOM ...`, or
/// `WRONGTYPE ...`); Redis 7 answers with the error itself. So that the codes mean the
/// same on both (WRONGTYPE is [`Error::WrongType`], OOM [`Error::OutOfMemory`], READONLY
/// a demoted Sentinel primary), the wrapped error is parsed back out when it starts with
/// a code (upper-case letters). Anything else is returned as is: an ACL refusal inside a
/// script ("The user executing the script can't run this command ...") has no code, and
/// Redis 7's own errors are never wrapped this way.
fn unwrap_script_error(source: redis::RedisError) -> redis::RedisError {
    // A script that raised again (`redis.error_reply`) what its `redis.pcall` got: Redis
    // 6.2 prefixes an ACL refusal there with `@user_script: <line>: `, which then stands
    // where the code should: given the shape Redis 7.0 gives it, `ERR <message>`.
    if let Some(code) = source.code().filter(|c| c.starts_with("@user_script")) {
        let text = format!("{code} {}", source.detail().unwrap_or_default());
        let inner = wrapped_error(&text);
        let first = inner.split(' ').next().unwrap_or_default();
        let coded = first.len() >= 2 && first.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
        let line = if coded {
            format!("-{inner}\r\n")
        } else {
            format!("-ERR {inner}\r\n")
        };
        return match redis::parse_redis_value(line.as_bytes()).map(redis::Value::extract_error) {
            Ok(Err(unwrapped)) => unwrapped,
            _ => source,
        };
    }
    if source.code() != Some("ERR") {
        return source;
    }
    let Some(inner) = source
        .detail()
        .and_then(|d| d.strip_prefix("Error running script"))
        .and_then(|d| d.split_once("): "))
        .map(|(_, inner)| wrapped_error(inner))
    else {
        return source;
    };
    let code = inner.split(' ').next().unwrap_or_default();
    if code.len() < 2 || !code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return source;
    }
    match redis::parse_redis_value(format!("-{inner}\r\n").as_bytes())
        .map(redis::Value::extract_error)
    {
        Ok(Err(unwrapped)) => unwrapped,
        _ => source,
    }
}

/// The error inside `@user_script:<line>: ` prefixes (one or two) and a leading `-`.
fn wrapped_error(mut text: &str) -> &str {
    while let Some(rest) = text.strip_prefix("@user_script:") {
        match rest.split_once(": ") {
            Some((line, tail)) if line.trim().bytes().all(|b| b.is_ascii_digit()) => text = tail,
            _ => break,
        }
    }
    let text = text.strip_prefix('-').unwrap_or(text);
    text.trim_end()
}

/// Whether a script's `ERR` is an ACL refusal of a command it called: Redis 6.2 to 7.0
/// say "The user executing the script can't run this command or subcommand"; Redis >= 7.2
/// and Valkey say "ACL failure in script: User `<u>` has no permissions to run the `'<cmd>'`
/// command" (or "... to access ..." a key or channel).
pub(crate) fn is_script_acl_refusal(detail: &str) -> bool {
    detail.contains("can't run this command") || detail.starts_with("ACL failure in script")
}

/// A [`Error::PermissionDenied`] whose server message names no command (a bare
/// `NOPERM`, or Redis's "The user executing the script can't run this command or
/// subcommand" for a call inside a script) names what we sent instead (`what`: the
/// command, or the commands the script calls), so every refusal names its cause; any
/// other error is returned as is.
pub(crate) fn name_refused(e: Error, what: impl FnOnce() -> String) -> Error {
    match e {
        Error::PermissionDenied { addr, detail } if detail.trim().is_empty() => {
            Error::PermissionDenied {
                addr,
                detail: format!("the user may not run {}", what()),
            }
        }
        Error::PermissionDenied { addr, detail } if detail.contains("this command") => {
            Error::PermissionDenied {
                addr,
                detail: format!("{detail}: refused {}", what()),
            }
        }
        // A script that caught the refusal (`redis.pcall`) and raised it again: ERR.
        Error::Redis { addr, source }
            if source.code() == Some("ERR")
                && source.detail().is_some_and(is_script_acl_refusal) =>
        {
            let detail = source.detail().unwrap_or_default();
            Error::PermissionDenied {
                addr,
                detail: format!("{detail}: refused {}", what()),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error as Redis 6.2 sends a script's failed `redis.call` (the replies below were
    /// read from a 6.2.16 server).
    fn from_62(detail: &str) -> Error {
        let line = format!("-ERR Error running script (call to f_9a67): {detail}\r\n");
        let reply = redis::parse_redis_value(line.as_bytes()).unwrap();
        from_master("127.0.0.1:7000", reply.extract_error().unwrap_err())
    }

    #[test]
    fn errors_redis_6_wraps_in_a_script_keep_their_codes() {
        let e = from_62(
            "@user_script:34: WRONGTYPE Operation against a key holding the wrong kind of value",
        );
        assert!(matches!(&e, Error::Redis { source, .. } if source.code() == Some("WRONGTYPE")));
        let e = from_62("@user_script:29: @user_script: 29: -READONLY You can't write against a read only replica.");
        assert!(matches!(&e, Error::Redis { source, .. } if source.code() == Some("READONLY")));
        let e = from_62("@user_script:29: @user_script: 29: -OOM command not allowed when used memory > 'maxmemory'.");
        assert!(
            matches!(&e, Error::OutOfMemory { detail, .. } if detail.starts_with("command not allowed")),
            "{e}"
        );
        // No code inside: left as the server said it.
        let acl = "@user_script:1: @user_script: 1: The user executing the script can't run this command or subcommand";
        let e = from_62(acl);
        assert!(
            matches!(&e, Error::Redis { source, .. } if source.code() == Some("ERR") && source.detail().is_some_and(|d| d.ends_with("subcommand"))),
            "{e}"
        );
        // What renew.lua raises again on 6.2 when `redis.pcall('hexists', ...)` is refused:
        // the prefix where the code should be; read as Redis 7.0 says it.
        let raised = redis::parse_redis_value(
            b"-@user_script: 1: The user executing the script can't run this command or subcommand\r\n",
        )
        .unwrap();
        let e = from_master("a:1", raised.extract_error().unwrap_err());
        assert!(
            matches!(&e, Error::Redis { source, .. } if source.code() == Some("ERR") && source.detail() == Some("The user executing the script can't run this command or subcommand")),
            "{e:?}"
        );
        let plain = redis::parse_redis_value(b"-ERR wrong number of arguments\r\n").unwrap();
        let e = from_master("a:1", plain.extract_error().unwrap_err());
        assert!(matches!(&e, Error::Redis { source, .. } if source.code() == Some("ERR")));
    }

    #[test]
    fn connection_errors_are_named_for_their_cause() {
        let server = |line: &str| {
            let reply = redis::parse_redis_value(line.as_bytes()).unwrap();
            reply.extract_error().unwrap_err()
        };
        let e = from_link(
            "a:1",
            None,
            0,
            server("-NOAUTH Authentication required.\r\n"),
        );
        assert!(
            matches!(&e, Error::Authentication { user, .. } if user == "default"),
            "{e:?}"
        );
        let wrong = server("-WRONGPASS invalid username-password pair or user is disabled.\r\n");
        let e = from_link("a:1", Some("locker"), 0, wrong);
        assert!(
            matches!(&e, Error::Authentication { user, .. } if user == "locker"),
            "{e:?}"
        );
        let failed = redis::RedisError::from((
            redis::ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        assert!(e.is_permanent() && !e.is_unavailable());
        let e = from_link("a:1", Some("u"), 0, failed);
        assert!(matches!(&e, Error::Authentication { .. }), "{e:?}");
        let e = from_link(
            "a:1",
            None,
            0,
            server("-CLUSTERDOWN The cluster is down\r\n"),
        );
        assert!(matches!(&e, Error::ClusterDown { .. }), "{e:?}");
        assert!(e.is_unavailable() && !e.is_permanent());
        assert_eq!(
            e.to_string(),
            "master a:1: the cluster is down (CLUSTERDOWN The cluster is down)"
        );
        let other = from_link("a:1", None, 0, server("-ERR unknown command\r\n"));
        assert!(matches!(&other, Error::Redis { .. }), "{other:?}");
    }

    #[test]
    fn a_bare_noperm_names_what_was_sent() {
        let kind = redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm);
        let bare = redis::RedisError::from((kind, ""));
        let e = from_master("127.0.0.1:7000", bare);
        assert!(matches!(&e, Error::PermissionDenied { detail, .. } if detail.is_empty()));
        let e = name_refused(e, || "'evalsha' (or a command its script calls)".into());
        let text = e.to_string();
        assert!(
            text.contains("permission denied: the user may not run 'evalsha'"),
            "{text}"
        );
        assert!(e.is_permanent());
        // Redis's message for a call inside a script names no command.
        let in_script = Error::PermissionDenied {
            addr: "a:1".into(),
            detail: "The user executing the script can't run this command or subcommand".into(),
        };
        let text = name_refused(in_script, || {
            "'evalsha' or a command its script calls ('hexists')".into()
        })
        .to_string();
        assert!(
            text.contains(
                "subcommand: refused 'evalsha' or a command its script calls ('hexists')"
            ),
            "{text}"
        );
        // A message that names the command is kept.
        let named = Error::PermissionDenied {
            addr: "a:1".into(),
            detail: "this user has no permissions to run the 'hexists' command".into(),
        };
        assert!(name_refused(named, || unreachable!())
            .to_string()
            .contains("'hexists'"));
        // A refusal a script caught (`redis.pcall`) and raised again, as ERR: Redis 7.0's
        // words, and Redis >= 7.2's and Valkey's.
        for detail in [
            "The user executing the script can't run this command or subcommand",
            "ACL failure in script: User locker has no permissions to run the 'hexists' command",
        ] {
            let line = format!("-ERR {detail}\r\n");
            let reply = redis::parse_redis_value(line.as_bytes()).unwrap();
            let raised = from_master("a:1", reply.extract_error().unwrap_err());
            let e = name_refused(raised, || "'evalsha'".into());
            assert!(matches!(&e, Error::PermissionDenied { .. }), "{e:?}");
        }
    }
}
