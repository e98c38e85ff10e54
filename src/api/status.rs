//! Read-only inspection of a lock on every master, for operators (`redlatch status`).

use std::time::Duration;

use redis::Value;

use crate::api::lock::Lock;
use crate::engine::facade::{self, Inspected};
use crate::error::Result;
use crate::keys;

/// What one master holds for a lock.
///
/// With the `serde` feature it implements `Serialize` as
/// `{"master", "error", "type", "holders": [{"holder", "count"}], "ttl_ms",
/// "queue": [{"holder", "deadline_ms"}], "fencing_counter", "mode", "counter",
/// "permits": [{"holder", "deadline_ms"}], "writers_waiting": [{"holder", "deadline_ms"}],
/// "replicas": {"connected", "eligible", "waited"}}` (the fields of
/// `redlatch status --json`).
///
/// # Examples
/// See the example on [`Lock::status`].
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MasterStatus {
    /// `host:port` of the master.
    pub master: String,
    /// Set when the master could not be read; the other fields are then empty.
    pub error: Option<String>,
    /// Redis type of the key: `hash` for a lock, `none` when free, anything else is
    /// not a lock.
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub key_type: String,
    /// Holder ids with their hold counts.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::holders"))]
    pub holders: Vec<(String, u64)>,
    /// Time left on the lease; `None` when the key is absent or has no expiry.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "ttl_ms", serialize_with = "ser::millis")
    )]
    pub ttl: Option<Duration>,
    /// Fair-lock waiters in queue order, with their deadline in ms since the epoch.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::queue"))]
    pub queue: Vec<(String, Option<i64>)>,
    /// The fencing counter, if the lock was ever used as a fenced lock.
    pub fencing_counter: Option<u64>,
    /// A read-write lock's mode (`read` or `write`); its holders are in `holders`
    /// (writers end in `:write`).
    pub mode: Option<String>,
    /// The value of a string key: a semaphore's available permits or a latch's count.
    pub counter: Option<i64>,
    /// An expirable semaphore's acquired permits (id in hex) with their expiry in ms
    /// since the epoch.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::queue"))]
    pub permits: Vec<(String, Option<i64>)>,
    /// Writers waiting on a read-write lock (writer preference) and when their intent
    /// lapses, in ms since the epoch.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::queue"))]
    pub writers_waiting: Vec<(String, Option<i64>)>,
    /// The replicas of the primary serving the lock as replica sync sees them
    /// (connected, eligible, waited for by the last synced write); `None` with
    /// [`SyncReplicas::Off`](crate::SyncReplicas::Off). Known after this client's first
    /// synced write to that primary.
    pub replicas: Option<crate::ReplicaSync>,
}

impl Lock {
    /// Reads the lock's state on every master (holders, TTL, fair queue, fencing
    /// counter). Never fails because one master is down: its entry carries the error.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) only.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// let status = lock.status().await?;
    /// assert_eq!(status.len(), 1); // one entry per master
    /// let master = &status[0];
    /// assert_eq!(master.error, None);
    /// assert_eq!(master.key_type, "hash");
    /// assert_eq!(master.holders, [(guard.holder().to_string(), 1)]);
    /// assert!(master.ttl.is_some());
    /// // A server without replicas: nothing to wait for, so no acquisition was synced.
    /// let replicas = master.replicas.expect("replica sync is on by default");
    /// assert_eq!((replicas.connected, replicas.eligible, replicas.waited), (0, 0, None));
    /// guard.unlock().await?;
    /// assert_eq!(lock.status().await?[0].key_type, "none");
    /// # Ok(()) }) }
    /// ```
    pub async fn status(&self) -> Result<Vec<MasterStatus>> {
        self.check_name()?;
        let mut pipe = redis::pipe();
        // A key of another type fails HGETALL only; TYPE still says what it is.
        pipe.ignore_errors();
        pipe.cmd("TYPE").arg(self.name());
        pipe.cmd("PTTL").arg(self.name());
        pipe.cmd("HGETALL").arg(self.name());
        pipe.cmd("LRANGE")
            .arg(keys::queue(self.name()))
            .arg(0)
            .arg(-1);
        pipe.cmd("ZRANGE")
            .arg(keys::timeouts(self.name()))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
        pipe.cmd("GET").arg(keys::token(self.name()));
        pipe.cmd("HGET").arg(self.name()).arg("mode");
        pipe.cmd("GET").arg(self.name());
        (pipe.cmd("ZRANGE").arg(keys::permit_timeouts(self.name())))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
        (pipe.cmd("ZRANGE").arg(keys::rw_writers(self.name())))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
        let answers = self.client().engine.inspect(self.name(), &pipe).await;
        Ok(answers.into_iter().map(decode).collect())
    }
}

fn decode(answer: Inspected) -> MasterStatus {
    let mut st = MasterStatus {
        master: answer.serving,
        replicas: answer.replicas,
        ..Default::default()
    };
    let v = match answer.reply {
        Ok(v) if v.len() == 10 => v,
        Ok(v) => {
            st.error = Some(format!("unexpected reply of {} items", v.len()));
            return st;
        }
        Err(e) => {
            st.error = Some(e.to_string());
            return st;
        }
    };
    st.key_type = text(&v[0]).unwrap_or_default();
    st.ttl = int(&v[1]).and_then(facade::lease_left);
    if let Value::Array(items) = &v[2] {
        st.holders = items
            .chunks(2)
            .filter_map(|p| Some((text(&p[0])?, int(p.get(1)?)?.max(0) as u64)))
            .collect();
    }
    let deadlines = scored(&v[4], text);
    if let Value::Array(items) = &v[3] {
        st.queue = items
            .iter()
            .filter_map(text)
            .map(|w| {
                let d = deadlines.iter().find(|(h, _)| *h == w).map(|(_, d)| *d);
                (w, d)
            })
            .collect();
    }
    st.fencing_counter = int(&v[5]).map(|t| t.max(0) as u64);
    st.mode = text(&v[6]);
    st.counter = (st.key_type == "string").then(|| int(&v[7])).flatten();
    st.permits = (scored(&v[8], hex).into_iter())
        .map(|(id, at)| (id, Some(at)))
        .collect();
    st.writers_waiting = (scored(&v[9], text).into_iter())
        .map(|(w, at)| (w, Some(at)))
        .collect();
    st
}

/// A ZRANGE WITHSCORES reply as (member, score) pairs, members read by `member`.
fn scored(v: &Value, member: fn(&Value) -> Option<String>) -> Vec<(String, i64)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((member(&p[0])?, int(p.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(k, s)| Some((member(k)?, int(s)?)))
            .collect(),
        _ => vec![],
    }
}

/// A binary member (a permit id) in hex.
fn hex(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
        _ => None,
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Double(d) => Some(*d as i64),
        other => text(other)
            .and_then(|s| s.parse::<f64>().ok())
            .map(|f| f as i64),
    }
}

/// `Serialize` helpers for [`MasterStatus`]: durations as milliseconds, pairs as
/// objects with named fields.
#[cfg(feature = "serde")]
mod ser {
    use std::time::Duration;

    use serde::ser::{Serialize, Serializer};

    #[derive(serde::Serialize)]
    struct Holder<'a> {
        holder: &'a str,
        count: u64,
    }

    #[derive(serde::Serialize)]
    struct Waiter<'a> {
        holder: &'a str,
        deadline_ms: Option<i64>,
    }

    pub(super) fn millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .serialize(s)
    }

    pub(super) fn holders<S: Serializer>(v: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|(holder, count)| Holder {
            holder,
            count: *count,
        }))
    }

    pub(super) fn queue<S: Serializer>(
        v: &[(String, Option<i64>)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|(holder, deadline_ms)| Waiter {
            holder,
            deadline_ms: *deadline_ms,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status of a hash whose key reads PTTL `pttl`.
    fn with_pttl(pttl: i64) -> MasterStatus {
        let mut reply = vec![Value::Nil; 10];
        reply[0] = Value::SimpleString("hash".into());
        reply[1] = Value::Int(pttl);
        decode(Inspected {
            serving: "127.0.0.1:1".into(),
            replicas: None,
            reply: Ok(reply),
        })
    }

    /// A PTTL of 0 is a lease in its last millisecond (Redis keeps the key until its
    /// millisecond clock has passed the expiry), not a key without expiry.
    #[test]
    fn a_lease_in_its_last_millisecond_has_a_ttl_of_zero() {
        assert_eq!(with_pttl(1500).ttl, Some(Duration::from_millis(1500)));
        assert_eq!(with_pttl(0).ttl, Some(Duration::ZERO));
        assert_eq!(with_pttl(-1).ttl, None, "no expiry");
        assert_eq!(with_pttl(-2).ttl, None, "no key");
    }
}
