//! A throw-away Sentinel deployment per test: a primary, its replica (`--replicaof`) and three
//! sentinels (`redis-server <conf> --sentinel`: the same binary and mode as `redis-sentinel`,
//! which Debian packages separately), each a [`RedisServer`] (free port, private dir, killed
//! on drop). Every wait is bounded and panics with the sentinels' views and all log tails.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::thread;
use std::time::{Duration, Instant};

use super::{info_field, RedisServer};

/// `down-after-milliseconds`: a primary silent this long is subjectively down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// `failover-timeout`: also the pause before another try after a failed election (twice it).
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);
const SENTINELS: usize = 3;
const QUORUM: usize = 2;
/// Bound of the waits for the sentinels to know everyone and for a switch.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const LOG_TAIL_LINES: usize = 25;

pub struct SentinelSet {
    name: String,
    /// Data nodes: [0] started as the primary, [1] as its replica.
    servers: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    startup: Duration,
}

impl SentinelSet {
    /// Start the primary, its replica and 3 sentinels monitoring `master_name` (quorum 2,
    /// [`DOWN_AFTER`], [`FAILOVER_TIMEOUT`]), and wait until every sentinel knows the primary,
    /// the replica (link up) and the two other sentinels.
    pub fn start(master_name: &str) -> SentinelSet {
        let began = Instant::now();
        let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
        let port = primary.port().to_string();
        let replica = RedisServer::start_with(&[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--repl-diskless-sync-delay",
            "0",
        ]);
        let sentinels = (0..SENTINELS)
            .map(|_| start_sentinel(master_name, primary.port()))
            .collect();
        let mut set = SentinelSet {
            name: master_name.to_string(),
            servers: vec![primary, replica],
            sentinels,
            startup: Duration::ZERO,
        };
        set.wait_until_ready();
        set.startup = began.elapsed();
        set
    }

    /// Wall time [`SentinelSet::start`] took, from the first spawn to ready.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    pub fn master_name(&self) -> &str {
        &self.name
    }

    /// `redis://127.0.0.1:PORT` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(|s| s.url()).collect()
    }

    pub fn sentinel(&self, i: usize) -> &RedisServer {
        &self.sentinels[i]
    }

    pub fn sentinel_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.sentinels[i]
    }

    /// Data node `i`: 0 started as the primary, 1 as the replica (roles change on failover).
    pub fn server(&self, i: usize) -> &RedisServer {
        &self.servers[i]
    }

    pub fn server_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.servers[i]
    }

    /// Index of the data node at `addr` (`127.0.0.1:PORT`), if it is one of ours.
    pub fn server_index(&self, addr: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.addr() == addr)
    }

    /// The primary's `ip:port` per the first live sentinel that answers
    /// `SENTINEL GET-MASTER-ADDR-BY-NAME`.
    pub fn primary_addr(&self) -> String {
        let mut errors = String::new();
        for (i, sentinel) in self.sentinels.iter().enumerate() {
            if !sentinel.is_live() {
                continue;
            }
            match self.master_addr_of(sentinel) {
                Ok(addr) => return addr,
                Err(e) => {
                    let _ = writeln!(errors, "sentinel {i}: {e}");
                }
            }
        }
        panic!(
            "no sentinel gave the primary's address:\n{errors}{}",
            self.diagnostics()
        )
    }

    /// Index of the current primary (per [`SentinelSet::primary_addr`]).
    pub fn primary_index(&self) -> usize {
        let addr = self.primary_addr();
        self.server_index(&addr)
            .unwrap_or_else(|| panic!("sentinels name {addr}, not one of our servers"))
    }

    /// SIGKILL the current primary; returns its address (for [`SentinelSet::wait_for_switch`]).
    pub fn kill_primary(&mut self) -> String {
        let i = self.primary_index();
        self.servers[i].kill();
        self.servers[i].addr()
    }

    /// SIGSTOP the current primary; returns its address. After [`DOWN_AFTER`] the sentinels
    /// fail it over; [`RedisServer::resume`] via [`SentinelSet::server`] brings it back (the
    /// sentinels then turn it into a replica of its successor).
    pub fn pause_primary(&self) -> String {
        let i = self.primary_index();
        self.servers[i].pause();
        self.servers[i].addr()
    }

    /// Wait until every live sentinel knows the primary (flags `master`, no failover in
    /// progress), every other live data node as its replica with the link up, and the other
    /// live sentinels.
    pub fn wait_until_ready(&self) {
        self.wait(
            "the sentinels to know the primary, replica and each other",
            || self.ready(),
        );
    }

    /// After the primary at `old_addr` was killed or paused: wait until every live sentinel
    /// names the same other address, has finished the failover (flags `master`), and that
    /// server says `role:master`. Returns the new primary's address.
    pub fn wait_for_switch(&self, old_addr: &str) -> String {
        self.wait(
            &format!("the sentinels to replace primary {old_addr}"),
            || {
                let addr = self.agreed_addr()?;
                if addr == old_addr {
                    return Err(format!("the sentinels still name {old_addr}"));
                }
                let i = self
                    .server_index(&addr)
                    .ok_or_else(|| format!("sentinels name {addr}, not one of our servers"))?;
                let repl: String = self.servers[i]
                    .try_cmd(PROBE_TIMEOUT, &["INFO", "replication"])
                    .map_err(|e| format!("new primary {addr}: {e}"))?;
                if info_field(&repl, "role") != Some("master") {
                    return Err(format!("{addr} is not role:master yet"));
                }
                Ok(addr)
            },
        )
    }

    /// Each sentinel's view of the master and log tail, and each data node's log tail.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        for (i, s) in self.sentinels.iter().enumerate() {
            let _ = writeln!(
                out,
                "=== sentinel {i}: {} pid {} ({})",
                s.addr(),
                s.pid(),
                s.state()
            );
            if s.is_live() {
                let master: Result<BTreeMap<String, String>, _> =
                    s.try_cmd(PROBE_TIMEOUT, &["SENTINEL", "MASTER", &self.name]);
                let _ = writeln!(out, "SENTINEL MASTER: {master:?}");
            }
            let _ = writeln!(out, "--- log ---\n{}", s.log_tail(LOG_TAIL_LINES));
        }
        for (i, s) in self.servers.iter().enumerate() {
            let _ = writeln!(
                out,
                "=== data node {i}: {} pid {} ({})\n--- log ---\n{}",
                s.addr(),
                s.pid(),
                s.state(),
                s.log_tail(LOG_TAIL_LINES)
            );
        }
        out
    }

    fn master_addr_of(&self, sentinel: &RedisServer) -> Result<String, String> {
        let reply: Option<Vec<String>> = sentinel
            .try_cmd(
                PROBE_TIMEOUT,
                &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.name],
            )
            .map_err(|e| e.to_string())?;
        match reply.as_deref() {
            Some([ip, port]) => Ok(format!("{ip}:{port}")),
            other => Err(format!("GET-MASTER-ADDR-BY-NAME replied {other:?}")),
        }
    }

    /// The address every live sentinel names, once all have finished any failover.
    fn agreed_addr(&self) -> Result<String, String> {
        let mut agreed: Option<String> = None;
        for (i, s) in self.sentinels.iter().enumerate() {
            if !s.is_live() {
                continue;
            }
            let addr = self
                .master_addr_of(s)
                .map_err(|e| format!("sentinel {i}: {e}"))?;
            let master: HashMap<String, String> = s
                .try_cmd(PROBE_TIMEOUT, &["SENTINEL", "MASTER", &self.name])
                .map_err(|e| format!("sentinel {i}: SENTINEL MASTER: {e}"))?;
            let flags = master.get("flags").map(String::as_str);
            if flags != Some("master") {
                return Err(format!("sentinel {i}: master flags {flags:?}"));
            }
            match &agreed {
                None => agreed = Some(addr),
                Some(a) if *a == addr => {}
                Some(a) => return Err(format!("sentinels name {a} and {addr}")),
            }
        }
        agreed.ok_or_else(|| "no live sentinel".into())
    }

    fn ready(&self) -> Result<(), String> {
        let primary = self.agreed_addr()?;
        let replicas: Vec<&RedisServer> = self
            .servers
            .iter()
            .filter(|s| s.is_live() && s.addr() != primary)
            .collect();
        for r in &replicas {
            let repl: String = r
                .try_cmd(PROBE_TIMEOUT, &["INFO", "replication"])
                .map_err(|e| format!("replica {}: {e}", r.addr()))?;
            if info_field(&repl, "master_link_status") != Some("up") {
                return Err(format!("replica {}: link to the primary not up", r.addr()));
            }
        }
        for (i, s) in self.sentinels.iter().enumerate() {
            if !s.is_live() {
                continue;
            }
            let known: Vec<HashMap<String, String>> = s
                .try_cmd(PROBE_TIMEOUT, &["SENTINEL", "REPLICAS", &self.name])
                .map_err(|e| format!("sentinel {i}: SENTINEL REPLICAS: {e}"))?;
            for r in &replicas {
                let seen = known.iter().any(|k| {
                    addr_of(k) == r.addr()
                        && k.get("flags").map(String::as_str) == Some("slave")
                        && k.get("master-link-status").map(String::as_str) == Some("ok")
                });
                if !seen {
                    return Err(format!("sentinel {i} does not see replica {} up", r.addr()));
                }
            }
            let peers: Vec<HashMap<String, String>> = s
                .try_cmd(PROBE_TIMEOUT, &["SENTINEL", "SENTINELS", &self.name])
                .map_err(|e| format!("sentinel {i}: SENTINEL SENTINELS: {e}"))?;
            for (j, other) in self.sentinels.iter().enumerate() {
                if j == i || !other.is_live() {
                    continue;
                }
                let seen = peers.iter().any(|p| {
                    addr_of(p) == other.addr()
                        && p.get("flags").map(String::as_str) == Some("sentinel")
                });
                if !seen {
                    return Err(format!("sentinel {i} does not know sentinel {j}"));
                }
            }
        }
        Ok(())
    }

    /// Poll `cond` until it returns a value, within [`WAIT_TIMEOUT`].
    fn wait<T>(&self, what: &str, mut cond: impl FnMut() -> Result<T, String>) -> T {
        let deadline = Instant::now() + WAIT_TIMEOUT;
        loop {
            let why = match cond() {
                Ok(value) => return value,
                Err(why) => why,
            };
            if Instant::now() >= deadline {
                panic!(
                    "waited {WAIT_TIMEOUT:?} for {what}; last reason: {why}\n{}",
                    self.diagnostics()
                );
            }
            thread::sleep(POLL);
        }
    }
}

/// A sentinel whose config file (written into its private dir, which Sentinel needs
/// writable) monitors `127.0.0.1:primary_port` as `name`.
fn start_sentinel(name: &str, primary_port: u16) -> RedisServer {
    RedisServer::start_in(|_port, dir| {
        let conf = dir.join("sentinel.conf");
        let text = format!(
            "sentinel resolve-hostnames no\n\
             sentinel monitor {name} 127.0.0.1 {primary_port} {QUORUM}\n\
             sentinel down-after-milliseconds {name} {}\n\
             sentinel failover-timeout {name} {}\n\
             sentinel parallel-syncs {name} 1\n",
            DOWN_AFTER.as_millis(),
            FAILOVER_TIMEOUT.as_millis()
        );
        std::fs::write(&conf, text)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", conf.display()));
        vec![conf.to_string_lossy().into_owned(), "--sentinel".into()]
    })
}

/// `ip:port` of an entry of SENTINEL REPLICAS / SENTINELS.
fn addr_of(entry: &HashMap<String, String>) -> String {
    format!(
        "{}:{}",
        entry.get("ip").map_or("?", String::as_str),
        entry.get("port").map_or("?", String::as_str)
    )
}
