//! What the bench reads from the servers themselves: INFO counters, the cluster's slot
//! map, key slots, and addresses.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{ConnectionInfo, Value};

/// Bound of one reply (or pipeline) on a probe's connection.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A direct connection to one server, for INFO counters and cluster metadata.
pub struct Probe {
    conn: MultiplexedConnection,
}

/// Server-side counters of one server at one moment (`INFO commandstats`, `INFO cpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    /// EVALSHA + EVAL calls (every lock script call, whichever way it was sent).
    pub scripts: u64,
    /// Microseconds spent running those calls (`usec`, command execution only).
    pub script_usec: u64,
    /// EVALSHA + EVAL calls refused before running (`rejected_calls`: on a cluster,
    /// CROSSSLOT, MOVED, ASK).
    pub rejected: u64,
    /// WAIT calls (replica-synced acquisitions).
    pub waits: u64,
    /// Server CPU time, user + system, in microseconds (all of the server's work:
    /// reading, parsing, replying, replicating, not only running commands).
    pub cpu_us: u64,
}

impl Counters {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Counters) -> Counters {
        Counters {
            scripts: self.scripts.saturating_sub(before.scripts),
            script_usec: self.script_usec.saturating_sub(before.script_usec),
            rejected: self.rejected.saturating_sub(before.rejected),
            waits: self.waits.saturating_sub(before.waits),
            cpu_us: self.cpu_us.saturating_sub(before.cpu_us),
        }
    }
}

impl Probe {
    /// Connects; a reply may take up to [`RESPONSE_TIMEOUT`] (redis-rs's default of
    /// 500 ms is too short for the bench's long pipelines on a loaded machine).
    pub async fn open(info: impl redis::IntoConnectionInfo) -> redis::RedisResult<Probe> {
        let client = redis::Client::open(info)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        Ok(Probe { conn })
    }

    /// The connection, for commands of the bench's own (bare redis-rs workloads).
    pub fn conn(&self) -> MultiplexedConnection {
        self.conn.clone()
    }

    async fn info(&mut self, section: &str) -> redis::RedisResult<String> {
        redis::cmd("INFO")
            .arg(section)
            .query_async(&mut self.conn)
            .await
    }

    /// The counters now.
    pub async fn counters(&mut self) -> redis::RedisResult<Counters> {
        let stats = self.info("commandstats").await?;
        let cpu = self.info("cpu").await?;
        let calls = |cmd: &str| field(&stats, &format!("cmdstat_{cmd}:calls="));
        let usec = |cmd: &str| stat(&stats, cmd, "usec");
        let seconds = |f: &str| {
            cpu.lines()
                .find_map(|l| l.strip_prefix(f))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Ok(Counters {
            scripts: calls("evalsha") + calls("eval"),
            script_usec: usec("evalsha") + usec("eval"),
            rejected: stat(&stats, "evalsha", "rejected_calls")
                + stat(&stats, "eval", "rejected_calls"),
            waits: calls("wait"),
            cpu_us: ((seconds("used_cpu_user:") + seconds("used_cpu_sys:")) * 1e6) as u64,
        })
    }

    /// `connected_clients` from `INFO clients`.
    pub async fn connected_clients(&mut self) -> redis::RedisResult<u64> {
        let info = self.info("clients").await?;
        Ok(field(&info, "connected_clients:"))
    }

    /// `connected_slaves` from `INFO replication`.
    pub async fn connected_replicas(&mut self) -> redis::RedisResult<u64> {
        let info = self.info("replication").await?;
        Ok(field(&info, "connected_slaves:"))
    }

    /// Number of keys in the current database.
    pub async fn dbsize(&mut self) -> redis::RedisResult<u64> {
        redis::cmd("DBSIZE").query_async(&mut self.conn).await
    }

    /// `CLUSTER SLOTS` as (first slot, last slot, primary host, primary port).
    pub async fn cluster_slots(&mut self) -> redis::RedisResult<Vec<(u16, u16, String, u16)>> {
        let v: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut self.conn)
            .await?;
        parse_slots(&v).ok_or_else(|| {
            redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected CLUSTER SLOTS reply",
                format!("{v:?}"),
            ))
        })
    }

    /// The hash slot of each key (`CLUSTER KEYSLOT`, pipelined), as the server computes it.
    pub async fn key_slots(&mut self, keys: &[String]) -> redis::RedisResult<Vec<u16>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(10_000) {
            let mut pipe = redis::pipe();
            for k in chunk {
                pipe.cmd("CLUSTER").arg("KEYSLOT").arg(k);
            }
            let slots: Vec<u16> = pipe.query_async(&mut self.conn).await?;
            out.extend(slots);
        }
        Ok(out)
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME name` (on a sentinel).
    pub async fn sentinel_primary(&mut self, name: &str) -> redis::RedisResult<(String, u16)> {
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name)
            .query_async(&mut self.conn)
            .await
    }
}

/// Every probe's counters now, in order (zeros for a server that does not answer: the
/// figures derived from it then show the gap rather than failing the run).
pub async fn counters(probes: &mut [Probe]) -> Vec<Counters> {
    let mut out = Vec::with_capacity(probes.len());
    for p in probes.iter_mut() {
        out.push(p.counters().await.unwrap_or_default());
    }
    out
}

/// Per server, `after` minus `before`.
pub fn deltas(before: &[Counters], after: &[Counters]) -> Vec<Counters> {
    after.iter().zip(before).map(|(a, b)| a.since(b)).collect()
}

/// The primary of each slot range of a `CLUSTER SLOTS` reply.
fn parse_slots(v: &Value) -> Option<Vec<(u16, u16, String, u16)>> {
    let Value::Array(ranges) = v else { return None };
    ranges
        .iter()
        .map(|r| {
            let Value::Array(r) = r else { return None };
            let int = |v: &Value| match v {
                Value::Int(i) => u16::try_from(*i).ok(),
                _ => None,
            };
            let Some(Value::Array(primary)) = r.get(2) else {
                return None;
            };
            let host = match primary.first()? {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            Some((
                int(r.first()?)?,
                int(r.get(1)?)?,
                host,
                int(primary.get(1)?)?,
            ))
        })
        .collect()
}

fn field(info: &str, prefix: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// One `name=value` of a `cmdstat_<cmd>:` line.
fn stat(info: &str, cmd: &str, name: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:")))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        })
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Host and port of a `redis://host:port[/db]` URL, for redis-benchmark.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let info: ConnectionInfo = redis::IntoConnectionInfo::into_connection_info(url).ok()?;
    match info.addr() {
        redis::ConnectionAddr::Tcp(h, p) => Some((h.clone(), *p)),
        redis::ConnectionAddr::TcpTls { host, port, .. } => Some((host.clone(), *port)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_parsed() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=42,usec=10,usec_per_call=0.24,\
                    rejected_calls=5,failed_calls=0\r\ncmdstat_eval:calls=3,usec=7\r\n\
                    connected_clients:7\r\n";
        assert_eq!(field(info, "cmdstat_evalsha:calls="), 42);
        assert_eq!(field(info, "connected_clients:"), 7);
        assert_eq!(field(info, "cmdstat_get:calls="), 0);
        assert_eq!(stat(info, "evalsha", "usec"), 10);
        assert_eq!(stat(info, "eval", "usec"), 7);
        assert_eq!(stat(info, "get", "usec"), 0);
        assert_eq!(stat(info, "evalsha", "rejected_calls"), 5);
        assert_eq!(
            host_port("redis://127.0.0.1:7000/0"),
            Some(("127.0.0.1".into(), 7000))
        );
    }

    #[test]
    fn cluster_slots_are_parsed() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
                node("10.0.0.4", 7003),
            ]),
            Value::Array(vec![Value::Int(5461), Value::Int(16383), node("", 7001)]),
        ]);
        assert_eq!(
            parse_slots(&reply),
            Some(vec![
                (0, 5460, "10.0.0.1".to_string(), 7000),
                (5461, 16383, String::new(), 7001)
            ])
        );
        assert_eq!(parse_slots(&Value::Int(1)), None);
    }
}
