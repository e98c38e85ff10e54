//! What the lock scripts answer, and the wire rules every typed call shares: typing a
//! script's error, reading its integers, sending an acquisition synced to replicas and
//! judging the replicas' acknowledgements. Imports nothing of the engine, so every
//! script call (kinds/, masters/plain_ops.rs, kinds/renew.rs, kinds/rw_layout.rs) and the master
//! (master.rs) can use it without a circle.

use std::time::Duration;

use redis::Value;

use crate::error::{Error, Result};
use crate::transport::{Invocation, Lane, Request, Transport};

/// What an acquire script answered on one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Granted: `fresh` if the key was created, else re-entered; `token` for fenced locks;
    /// `current` for fenced locks under Redlock: the master has not restarted since its
    /// counter was last written back (`lua/fenced_acquire.lua`), else false.
    Granted {
        fresh: bool,
        token: Option<u64>,
        current: bool,
    },
    /// Held by someone else for `pttl_ms` more (-1: no expiry, -2: free but queued).
    Busy { pttl_ms: i64 },
}

/// What a release script answered on one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    NotHeld,
    StillHeld,
    Released,
}

/// What a key without expiry at a lock's name is: a lock always has a lease (Redisson's
/// and redlatch's scripts set one with every write), so nothing would ever free it; it
/// was written by something else (or PERSISTed). `lock()` reports it instead of waiting
/// forever, `is_locked()` and `redlatch status` the same way.
pub(crate) fn no_expiry(name: &str, addr: String) -> Error {
    Error::BadData {
        name: name.to_string(),
        addr,
        detail: "the key has no expiry, and a lock always has a lease: it never frees by \
                 itself (written by something else, or PERSISTed); delete it \
                 (`force_unlock`, `redlatch unlock --force`)"
            .to_string(),
    }
}

/// Types a script's error by its code: WRONGTYPE, a refused command, unusable data.
pub(crate) fn typed(name: &str, e: Error) -> Error {
    match e {
        Error::Redis { source, addr } if source.code() == Some("WRONGTYPE") => Error::WrongType {
            name: name.to_string(),
            addr,
        },
        // A script that failed at run time: its user may not run a command it calls
        // (Redis reports that as ERR inside scripts, worded per version), or it met data it cannot use (our
        // scripts raise nothing else). Both are permanent, not an outage to retry.
        Error::Redis { source, addr } if source.code() == Some("ERR") => {
            let detail = source.detail().unwrap_or_default().to_string();
            if crate::transport::server_errors::is_script_acl_refusal(&detail) {
                Error::PermissionDenied { addr, detail }
            } else {
                Error::BadData {
                    name: name.to_string(),
                    addr,
                    detail,
                }
            }
        }
        other => other,
    }
}

/// A reply no script of ours gives: a protocol error naming the master at `addr`.
pub(crate) fn protocol(addr: &str, what: &str, v: &Value) -> Error {
    crate::transport::server_errors::from_master(
        addr,
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "unexpected script reply",
            format!("{what}: {v:?}"),
        )),
    )
}

/// An integer reply, else `None`.
pub(crate) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// A batch script's answers (`batch.lua`, `batch_node.lua`): one string of two
/// decimal integers per operation, separated by single spaces; `None` unless it holds
/// exactly `ops` pairs.
pub(crate) fn batch_answers(v: &Value, ops: usize) -> Option<Vec<(i64, i64)>> {
    let Value::BulkString(bytes) = v else {
        return None;
    };
    let mut numbers = bytes.split(|&b| b == b' ').map(decimal);
    let mut answers = Vec::with_capacity(ops);
    for _ in 0..ops {
        answers.push((numbers.next()??, numbers.next()??));
    }
    numbers.next().is_none().then_some(answers)
}

/// A decimal integer with an optional leading `-`, as Lua's `%d` writes it.
fn decimal(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
    }
    Some(if negative { -n } else { n })
}

/// `batch.lua`'s status for a key of another type.
pub(crate) const WRONG_TYPE: i64 = 3;

/// A key of another type than the script expects.
pub(crate) fn wrong_type(addr: &str, name: &str) -> Error {
    Error::WrongType {
        name: name.to_string(),
        addr: addr.to_string(),
    }
}

/// Sends an acquisition script: synced to replicas when the deployment asks for it
/// (transport/replicas.rs). Returns the script's reply and, when fewer replicas than
/// wanted acknowledged it, the error to report should the reply be a grant.
pub(crate) async fn send_acquire(
    link: &dyn Transport,
    timeout: Duration,
    inv: &Invocation,
) -> Result<(Value, Option<Error>)> {
    if !link.syncs() {
        let v = link.send(Lane::Lock, timeout, Request::Eval(inv)).await?;
        return Ok((v, None));
    }
    let v = link.send(Lane::Lock, timeout, Request::Synced(inv)).await?;
    judge_synced(link, v, true)
}

/// A synced write's answer (`[reply, acked, wanted, node]`): the script's reply and,
/// when fewer replicas than wanted acknowledged it, the error to report should the reply
/// count (counted per primary: an acquisition's, or a renewal's).
pub(crate) fn judge_synced(
    link: &dyn Transport,
    v: Value,
    acquisition: bool,
) -> Result<(Value, Option<Error>)> {
    let Some((reply, acked, wanted, addr)) = crate::transport::synced_parts(v) else {
        return Err(Error::Redis {
            addr: link.addr().to_string(),
            source: redis::RedisError::from((redis::ErrorKind::Parse, "unexpected synced reply")),
        });
    };
    crate::telemetry::replicas_waited(&addr, wanted, acked, acquisition);
    let short = (acked < wanted).then(|| Error::NotReplicated {
        addr,
        acked,
        wanted,
        timeout: link.sync_timeout(),
    });
    Ok((reply, short))
}

/// What a release that may hand the lock over (`release.lua`, `fair_release.lua`) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandOver {
    NotHeld,
    StillHeld,
    /// Released normally (another client waits, or no offered waiter is next): the
    /// next waiter was woken.
    Released,
    /// The offered waiter at this index holds the lock now.
    To(usize),
}

/// A renewal's answer for one lock: a lock renewed on a primary whose replicas did
/// not acknowledge it (`short`) is not renewed (watchdog.rs invariant 6).
pub(crate) fn unreplicated(held: bool, short: &Option<Error>) -> Result<bool> {
    match (held, short) {
        (true, Some(e)) => Err(e.clone()),
        (held, _) => Ok(held),
    }
}

/// An acquire script's `{status, value}` reply (acquire.lua, batch.lua's, the fair and
/// read-write acquires).
pub(crate) fn read_acquire(addr: &str, name: &str, v: Value) -> Result<Acquire> {
    read_acquire_as(addr, name, v, false)
}

/// fenced_acquire.lua's `{status, value, token, current}` reply.
pub(crate) fn read_fenced(addr: &str, name: &str, v: Value) -> Result<Acquire> {
    read_acquire_as(addr, name, v, true)
}

fn read_acquire_as(addr: &str, name: &str, v: Value, fenced: bool) -> Result<Acquire> {
    // acquire.lua answers one string "<status> <value>" (the scripts before it, like
    // the non-reentrant guard, and the other kinds' acquire scripts an array).
    if let (false, Some(&[answer])) = (fenced, batch_answers(&v, 1).as_deref()) {
        return acquire_status(addr, name, answer, (None, false), false);
    }
    let Value::Array(items) = &v else {
        return Err(protocol(addr, "acquire", &v));
    };
    let (status, value) = match (items.first().and_then(int), items.get(1).and_then(int)) {
        (Some(s), Some(x)) => (s, x),
        _ => return Err(protocol(addr, "acquire", &v)),
    };
    let token = items.get(2).and_then(int).map(|t| t as u64);
    let current = items.get(3).and_then(int) == Some(1);
    acquire_status(addr, name, (status, value), (token, current), fenced)
}

/// An acquire's status and value (and, fenced, its token and whether the master is
/// current) as an [`Acquire`]; status 3 is a key of another type.
pub(crate) fn acquire_status(
    addr: &str,
    name: &str,
    (status, value): (i64, i64),
    (token, current): (Option<u64>, bool),
    fenced: bool,
) -> Result<Acquire> {
    Ok(match status {
        0 => Acquire::Busy { pttl_ms: value },
        1 | 2 => Acquire::Granted {
            fresh: status == 1,
            token: token.filter(|_| fenced),
            current: current && fenced,
        },
        WRONG_TYPE => return Err(wrong_type(addr, name)),
        _ => return Err(protocol(addr, "acquire", &Value::Int(status))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script_err(line: &[u8]) -> Error {
        let reply = redis::parse_redis_value(line).unwrap();
        crate::transport::server_errors::from_master("a:1", reply.extract_error().unwrap_err())
    }

    #[test]
    fn an_acl_refusal_inside_a_script_is_permission_denied_on_every_version() {
        // As Redis 7.0.15, then Redis 7.4.1 and Valkey 8.0.1 (same words) answer a script
        // calling HEXISTS for a user without +hexists.
        for line in [
            &b"-ERR The user executing the script can't run this command or subcommand script: 9a67, on @user_script:34.\r\n"[..],
            &b"-ERR ACL failure in script: User locker has no permissions to run the 'hexists' command script: 9a67, on @user_script:34.\r\n"[..],
        ] {
            let e = typed("l", script_err(line));
            assert!(matches!(&e, Error::PermissionDenied { .. }), "{e:?}");
            assert!(e.is_permanent(), "{e:?}");
        }
        // Any other error a script raises is data it cannot use.
        let e = typed("l", script_err(b"-ERR user_script:1: bad lock state\r\n"));
        assert!(matches!(&e, Error::BadData { .. }), "{e:?}");
    }

    #[test]
    fn a_batch_reply_is_read_as_exactly_its_operations_pairs() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let answers = batch_answers(&bulk("1 1 -1 0 0 86399 3 0"), 4);
        assert_eq!(answers, Some(vec![(1, 1), (-1, 0), (0, 86_399), (3, 0)]));
        assert_eq!(
            batch_answers(&bulk("2 9223372036854775807"), 1),
            Some(vec![(2, i64::MAX)])
        );
        // Too few or too many numbers, anything but decimals, or not a string: no answers.
        for (reply, ops) in [
            ("1 1 1", 2),
            ("1 1 1 0 1", 2),
            ("1 1", 2),
            ("1  1", 1),
            ("1 x", 1),
            ("1 -", 1),
            ("1 1.5", 1),
            ("1 9223372036854775808", 1),
            ("", 1),
        ] {
            assert_eq!(batch_answers(&bulk(reply), ops), None, "{reply:?}");
        }
        let array = Value::Array(vec![Value::Int(1), Value::Int(1)]);
        assert_eq!(batch_answers(&array, 1), None);
    }
}
