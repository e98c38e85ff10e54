//! Walking a deployment's keyspace for a listing: `SCAN cursor MATCH pattern COUNT
//! 1000` (never `KEYS`, which blocks the server for the whole keyspace) on every
//! master, on each of a cluster's primaries, until its cursor comes back to 0 or the
//! listing's deadline passes.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use redis::Value;
use tokio::time::Instant;

use super::listing::Unread;
use crate::engine::masters::master::Master;
use crate::transport::{Lane, Request};

/// Keys asked for per `SCAN` call: a hint to the server, which may answer more or fewer.
const COUNT: usize = 1000;

/// The keys matching each of `patterns` on every master's primaries, and the primaries
/// not read to the end (an error, or the deadline).
pub(crate) async fn keys(
    masters: &[std::sync::Arc<Master>],
    patterns: &[&str],
    deadline: Instant,
) -> (BTreeSet<String>, Vec<Unread>) {
    let walks = masters.iter().flat_map(|m| {
        let primaries = m.link().primary_addrs();
        primaries.into_iter().flat_map(move |addr| {
            patterns
                .iter()
                .map(move |p| walk(m, addr.clone(), p, deadline))
        })
    });
    let mut found = BTreeSet::new();
    let mut unread: Vec<Unread> = Vec::new();
    for result in join_all(walks).await {
        match result {
            Ok(keys) => found.extend(keys),
            Err(u) if !unread.iter().any(|seen| seen.master == u.master) => unread.push(u),
            Err(_) => {}
        }
    }
    (found, unread)
}

/// One primary's keys matching `pattern`, cursor by cursor.
async fn walk(
    m: &Master,
    addr: String,
    pattern: &str,
    deadline: Instant,
) -> Result<Vec<String>, Unread> {
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(unread(&addr, "the listing's deadline passed".into()));
        }
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(COUNT);
        let timeout = left.min(m.timeout());
        let reply = m
            .link()
            .send_to(&addr, Lane::Side, timeout, Request::Cmd(&cmd))
            .await;
        let (next, batch) = match reply.map(parse) {
            Ok(Some(page)) => page,
            Ok(None) => return Err(unread(&addr, "unexpected SCAN reply".into())),
            Err(e) => return Err(unread(&addr, e.to_string())),
        };
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

fn unread(master: &str, error: String) -> Unread {
    Unread {
        master: master.to_string(),
        error,
    }
}

/// A SCAN reply: the next cursor and the keys (as text; a key that is not UTF-8 is no
/// name a lock can have).
fn parse(v: Value) -> Option<(u64, Vec<String>)> {
    let Value::Array(mut parts) = v else {
        return None;
    };
    if parts.len() != 2 {
        return None;
    }
    let keys = parts.pop()?;
    let cursor: u64 = redis::from_redis_value(parts.pop()?).ok()?;
    let keys: Vec<Vec<u8>> = redis::from_redis_value(keys).ok()?;
    let keys = keys.into_iter().filter_map(|k| String::from_utf8(k).ok());
    Some((cursor, keys.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_page_is_its_cursor_and_keys() {
        let v = Value::Array(vec![bulk("17"), Value::Array(vec![bulk("a"), bulk("b")])]);
        assert_eq!(parse(v), Some((17, vec!["a".into(), "b".into()])));
    }

    #[test]
    fn a_reply_of_another_shape_is_none() {
        assert_eq!(parse(Value::Int(0)), None);
        assert_eq!(parse(Value::Array(vec![bulk("0")])), None);
    }
}
