//! What the bench reads from the masters themselves: INFO counters and addresses.

use redis::aio::MultiplexedConnection;

/// A direct connection to one master, for INFO counters.
pub struct Probe {
    conn: MultiplexedConnection,
}

impl Probe {
    pub async fn open(url: &str) -> redis::RedisResult<Probe> {
        let client = redis::Client::open(url)?;
        let conn = client.get_multiplexed_async_connection().await?;
        Ok(Probe { conn })
    }

    async fn info(&mut self, section: &str) -> redis::RedisResult<String> {
        redis::cmd("INFO")
            .arg(section)
            .query_async(&mut self.conn)
            .await
    }

    /// Calls of one command so far (`INFO commandstats`), e.g. "evalsha".
    pub async fn calls(&mut self, command: &str) -> redis::RedisResult<u64> {
        let info = self.info("commandstats").await?;
        Ok(field(&info, &format!("cmdstat_{command}:calls=")))
    }

    /// `connected_clients` from `INFO clients`.
    pub async fn connected_clients(&mut self) -> redis::RedisResult<u64> {
        let info = self.info("clients").await?;
        Ok(field(&info, "connected_clients:"))
    }

    /// Number of keys in the current database.
    pub async fn dbsize(&mut self) -> redis::RedisResult<u64> {
        redis::cmd("DBSIZE").query_async(&mut self.conn).await
    }
}

fn field(info: &str, prefix: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Host and port of a `redis://host:port[/db]` URL, for redis-benchmark.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let info = redis::IntoConnectionInfo::into_connection_info(url).ok()?;
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
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=42,usec=10\r\nconnected_clients:7\r\n";
        assert_eq!(field(info, "cmdstat_evalsha:calls="), 42);
        assert_eq!(field(info, "connected_clients:"), 7);
        assert_eq!(field(info, "cmdstat_get:calls="), 0);
        assert_eq!(
            host_port("redis://127.0.0.1:7000/0"),
            Some(("127.0.0.1".into(), 7000))
        );
    }
}
