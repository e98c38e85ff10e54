//! The workspace's integration-test harness (not published): a dev-dependency of the
//! library's, the CLI's and the bench's tests, which name it `common`
//! (`use redlatch_testkit as common;`). Compiled once, not once per test binary.
//!
//! * [`RedisServer`]: a private `redis-server` on a free 127.0.0.1 port, killed on drop.
//! * [`conn`]: the tests' own connections, with [`conn::IO_TIMEOUT`] to connect and per
//!   reply, never a client library's default.
//! * [`acl`]: the minimal ACL of docs/errors.md, and a user with it.
//! * [`tls::TestCerts`]: a test CA and certificates for TLS servers and clients.
//! * [`cluster::RedisCluster`]: a Redis Cluster of such servers (primaries, replicas), with
//!   failover and slot-migration helpers; [`cluster::shared_cluster`] for tests that only
//!   read its topology.
//! * [`sentinel::SentinelSet`]: a primary, a replica and three sentinels monitoring them.
//! * [`redisson::JavaFairLock`]: Redisson's fair lock as a Java client drives it.
//! * [`foreign::Peer`]: the real redis-py `Lock`, go-redsync and node-redlock, installed
//!   from their registries into target/peers/ and run beside redlatch on one name.
//! * [`jvm::Jvm`]: the real Redisson client in a JVM (interop/redisson/), commanded over
//!   stdin/stdout; [`jvm::record`] writes the compatibility matrix's result lines.
//! * [`jvm_family::wake_both_ways`]: the family's wake-ups both ways with Redisson, on any
//!   deployment.
//! * [`mixed::run`]: a mixed contention run (Java threads, redlatch tasks and processes,
//!   `redlatch run`) on one name, every section checked by one [`mixed::Checker`].
//! * [`peer::RedlockPeer`]: a Redlock reference client's lock (redis-py's `Lock`,
//!   redsync: `SET NX PX`, compare-and-delete) held by another process, over raw RESP.
//! * [`postgres::PgServer`]: a private PostgreSQL server on a free port (the fencing tests).
//! * [`proxy::DelayProxy`]: a loopback TCP proxy that holds what clients send until released.
//! * [`clock::FakeClock`]: a wall clock a test moves for one server (a preload shim).
//! * [`inside::Inside`]: counts the critical sections inside one lock at once.
//! * [`unreachable::Route`]: a relay in front of a server that a test cuts as a lost
//!   route would (open connections carry nothing, new ones hang in `connect()`).
//! * [`start_many`], [`numsub`]: small helpers on top of it.
//! * [`eventually`] / [`eventually_async`]: bounded polling for assertions about eventual state.
//! * [`test_name!`]: the full name of a test of the calling module, for a test that runs
//!   another of its binary's tests in a child process (`--exact NAME`).

pub mod acl;
pub mod clock;
pub mod cluster;
pub mod conn;
pub mod fair;
pub mod foreign;
pub mod inside;
pub mod jvm;
pub mod jvm_family;
pub mod mixed;
pub mod moto;
pub mod peer;
pub mod postgres;
pub mod proxy;
pub mod redisson;
pub mod redlock;
pub mod sentinel;
mod server;
pub mod shedlock;
pub mod tls;
pub mod unreachable;

pub use server::RedisServer;

use std::time::{Duration, Instant};

const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The name the test harness gives the test `name` of the calling module: its module
/// path without the test binary's crate name (`watchdog::child_process_holder` for
/// `child_process_holder` in tests/standalone/watchdog.rs), what `--exact` matches.
#[macro_export]
macro_rules! test_name {
    ($name:expr) => {
        $crate::test_path(module_path!(), $name)
    };
}

/// [`test_name!`]'s work: `module` is the caller's `module_path!()`, whose first
/// segment is the test binary's crate.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, inside)) => format!("{inside}::{name}"),
        None => name.to_string(),
    }
}

/// Start `n` independent servers (distinct ports and dirs).
pub fn start_many(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

/// Calls of one command so far, from `INFO commandstats` (scripts' inner calls count
/// too: a PUBLISH inside a script is a `publish` call).
pub fn calls(server: &RedisServer, command: &str) -> u64 {
    let info: String = server.cmd(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// The value of `name` in INFO-style `name:value` lines (`INFO`, `CLUSTER INFO`).
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.trim_end()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

/// The integers of a batch script's reply (`batch.lua`, `batch_node.lua`: one string
/// of decimal integers separated by single spaces, two per operation).
pub fn batch_integers(reply: &str) -> Vec<i64> {
    reply
        .split(' ')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("a batch reply: {reply:?}"))
        })
        .collect()
}

/// The ARGV of a batch script call (`batch.lua`, `batch_node.lua`) in their layout,
/// from each operation's code (`'a'`, `'A'` or `'r'`), lease in milliseconds and the
/// arguments that follow its lease (`batch.lua`: holder, then channel or ticket;
/// `batch_node.lua`: holder, name, registry, then channel or ticket): the codes in one
/// string, then the lease they all share, or `""` and each operation's own before its
/// arguments when they differ.
pub fn batch_argv(ops: &[(char, u64, Vec<String>)]) -> Vec<String> {
    let codes: String = ops.iter().map(|op| op.0).collect();
    let shared = ops.iter().all(|op| Some(op.1) == ops.first().map(|o| o.1));
    let common = match (shared, ops.first()) {
        (true, Some(op)) => op.1.to_string(),
        _ => String::new(),
    };
    let mut argv = vec![codes, common];
    for (_, lease, args) in ops {
        if !shared {
            argv.push(lease.to_string());
        }
        argv.extend(args.iter().cloned());
    }
    argv
}

/// `acquire.lua`'s reply (one string "<status> <value>") as (status, value).
pub fn acquire_answer(reply: &str) -> (i64, i64) {
    match batch_integers(reply)[..] {
        [status, value] => (status, value),
        _ => panic!("an acquire reply: {reply:?}"),
    }
}

/// Number of subscribers of `channel` (`PUBSUB NUMSUB channel`).
pub fn numsub(server: &RedisServer, channel: &str) -> i64 {
    let (_name, count): (String, i64) = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    count
}

/// Polls `cond` every 10 ms until it returns true or `within` has elapsed; returns whether it
/// became true. `cond` is always evaluated at least once, and once more at the deadline.
/// For test assertions about eventual state only.
pub fn eventually(within: Duration, cond: impl FnMut() -> bool) -> bool {
    eventually_every(within, POLL_INTERVAL, cond)
}

/// [`eventually`] polling every `every` instead of 10 ms: for conditions that are costly to
/// check (several servers and commands per poll) and change over seconds.
pub fn eventually_every(within: Duration, every: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(every.min(deadline - now));
    }
}

/// Async [`eventually`] for `#[tokio::test]` code: sleeps with `tokio::time::sleep`, so other
/// tasks keep running between polls.
pub async fn eventually_async(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
    }
}

/// Waits until the calls of `commands` on `server` (summed, from `INFO commandstats`)
/// have not changed for 500 ms, at most 10 s, and returns that count: the moment a
/// waiter's last attempt (after it subscribed) has landed and it sleeps. A fixed sleep
/// after the subscription is not enough on a loaded machine, where the attempt that
/// follows it can come later than any chosen delay; quiet for 500 ms means the waiter
/// was scheduled and went to sleep.
pub async fn settled_calls(server: &RedisServer, commands: &[&str]) -> u64 {
    let count = || commands.iter().map(|c| calls(server, c)).sum::<u64>();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = count();
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = count();
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        } else if quiet_since.elapsed() >= Duration::from_millis(500) {
            return last;
        }
    }
    panic!("{commands:?} calls on {} never settled", server.addr());
}

/// A port the OS just considered free (bound on 127.0.0.1:0 and released); never 6379.
fn free_port() -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("cannot bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        if port != 6379 {
            return port;
        }
    }
}

/// A free port `p` with `p + offset` free too (and both below 65536), neither 6379.
fn free_port_pair(offset: u16) -> u16 {
    loop {
        let p = free_port();
        let Some(second) = p.checked_add(offset) else {
            // Ephemeral ports are high: look below them, where p + offset fits.
            let low = 20_000 + (p % 10_000);
            if let (Ok(_a), Ok(_b)) = (
                std::net::TcpListener::bind(("127.0.0.1", low)),
                std::net::TcpListener::bind(("127.0.0.1", low + offset)),
            ) {
                if low != 6379 && low + offset != 6379 {
                    return low;
                }
            }
            continue;
        };
        if second != 6379 && std::net::TcpListener::bind(("127.0.0.1", second)).is_ok() {
            return p;
        }
    }
}

/// What `redis-server --version` says of the server on the PATH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    /// "Redis" or "Valkey".
    pub name: String,
    /// Its own version: `[8, 0, 1]` for Valkey 8.0.1.
    pub version: [u32; 3],
}

impl ServerVersion {
    /// Reads a `--version` line: `Redis server v=7.0.15 sha=...`, `Valkey server v=8.0.1 ...`.
    pub fn parse(line: &str) -> Option<ServerVersion> {
        let (name, rest) = line.split_once(" server v=")?;
        let mut parts = rest.split(' ').next()?.split('.').map(|p| p.parse().ok());
        let mut next = || parts.next().flatten();
        let version = [next()?, next()?, next()?];
        Some(ServerVersion {
            name: name.trim().to_string(),
            version,
        })
    }

    pub fn is_valkey(&self) -> bool {
        self.name.eq_ignore_ascii_case("valkey")
    }

    /// The Redis release whose commands and behaviour it has, `[major, minor]`: Redis's
    /// own; Valkey forked Redis 7.2.4 and every Valkey release so far (7.2, 8.0, 8.1)
    /// answers `redis_version:7.2.4` in INFO, without Redis 7.4's or 8's additions.
    pub fn redis_compatible(&self) -> [u32; 2] {
        if self.is_valkey() {
            [7, 2]
        } else {
            [self.version[0], self.version[1]]
        }
    }
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [a, b, c] = self.version;
        write!(f, "{} {a}.{b}.{c}", self.name)
    }
}

/// The `redis-server` on the PATH (the one every test starts), read once.
pub fn server_version() -> &'static ServerVersion {
    static VERSION: std::sync::OnceLock<ServerVersion> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        let out = std::process::Command::new("redis-server")
            .arg("--version")
            .output()
            .expect("redis-server --version");
        let text = String::from_utf8_lossy(&out.stdout);
        ServerVersion::parse(&text).unwrap_or_else(|| panic!("cannot read a version in {text:?}"))
    })
}

/// The major version of Redis the `redis-server` on the PATH is compatible with (7 for
/// Redis 7.0.15, 6 for 6.2.16, 7 for Valkey 8.0.1: see [`ServerVersion::redis_compatible`]).
pub fn server_major() -> u32 {
    server_version().redis_compatible()[0]
}

/// Whether the `redis-server` on the PATH is older than Redis `major` (tests of a
/// behaviour that version brought say why they skip, and pass).
pub fn older_than(major: u32, what: &str) -> bool {
    let old = server_major() < major;
    if old {
        let server = server_version();
        let [a, b] = server.redis_compatible();
        let compatible = if server.is_valkey() {
            format!(", Redis {a}.{b} compatible")
        } else {
            String::new()
        };
        eprintln!("skipped: {what} needs Redis >= {major} (this server: {server}{compatible})");
    }
    old
}

/// PID of the redis-server answering PING at `url` (from INFO server), if any answers.
/// Used at startup to make sure the server on the port is ours, not a stranger's.
fn serving_pid(url: &str) -> Option<u32> {
    let client = redis::Client::open(url).ok()?;
    let mut conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let pong: String = redis::cmd("PING").query(&mut conn).ok()?;
    if pong != "PONG" {
        return None;
    }
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
}

/// Spawns a waiter that takes `lock`, notes when it got it, and unlocks; returns it once
/// the waiter is subscribed to the lock's channel on `server` (so a release from now on
/// wakes it by message).
/// Spawns a task that takes `lock`, notes when it got it, holds it for `hold`,
/// releases it and returns that instant (it panics on an error).
pub fn timed_waiter(lock: redlatch::Lock, hold: Duration) -> tokio::task::JoinHandle<Instant> {
    tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        let at = Instant::now();
        tokio::time::sleep(hold).await;
        guard.unlock().await.unwrap();
        at
    })
}

pub async fn subscribed_waiter(
    server: &RedisServer,
    lock: redlatch::Lock,
) -> tokio::task::JoinHandle<Instant> {
    let channel = format!("redisson_lock__channel:{{{}}}", lock.name());
    let waiter = timed_waiter(lock, Duration::ZERO);
    let subscribed = eventually_async(Duration::from_secs(5), || numsub(server, &channel) == 1);
    assert!(subscribed.await, "the waiter never subscribed to {channel}");
    waiter
}

/// Takes and releases `name` once through `client`, panicking with the error if either
/// fails: "this client still works here".
pub async fn lock_and_unlock(client: &redlatch::Client, name: &str) {
    let guard = (client.lock(name).lock().await).unwrap_or_else(|e| panic!("lock {name}: {e}"));
    (guard.unlock().await).unwrap_or_else(|e| panic!("unlock {name}: {e}"));
}

/// A storm of cancelled `lock()` calls: `calls` calls over `names` locks named
/// `prefix0`, `prefix1`, ..., each dropped after a patience of 0–3 ms, a third of them
/// also aborted from outside mid-flight; then `client.close()`. What a correct client
/// leaves behind is nothing ([`assert_no_holds`]).
pub async fn cancelled_storm(client: &redlatch::Client, prefix: &str, names: usize, calls: usize) {
    let calls: Vec<_> = (0..calls)
        .map(|i| {
            let lock = client.lock(format!("{prefix}{}", i % names));
            // A spread of patiences, 0–3 ms (the testkit is shared with the CLI's
            // tests, which have no random-number crate).
            let patience = Duration::from_micros((i as u64).wrapping_mul(2654435761) % 3000);
            tokio::spawn(async move {
                if let Ok(Ok(guard)) = tokio::time::timeout(patience, lock.lock()).await {
                    drop(guard);
                }
            })
        })
        .collect();
    for (i, call) in calls.iter().enumerate() {
        if i % 3 == 0 {
            call.abort();
        }
    }
    for call in calls {
        let _ = call.await;
    }
    client.clone().close(Duration::from_secs(10)).await;
}

/// Panics if a lock on `server` whose name matches `pattern` still has a holder of
/// the client `client_id`; `context` starts the message.
pub fn assert_no_holds(server: &RedisServer, pattern: &str, client_id: &str, context: &str) {
    let keys: Vec<String> = server.lock_keys(pattern);
    for key in keys {
        let fields: Vec<String> = server.cmd(&["HKEYS", &key]);
        if fields.iter().any(|f| f.starts_with(client_id)) {
            // How it got there: the hash, the lease left, and the waiter registry.
            let registry = format!("redlatch_lock_waiters:{{{key}}}");
            let waiting: Vec<String> = server.cmd(&["ZRANGE", &registry, "0", "-1"]);
            let handed: Option<String> = server.cmd(&["GET", &format!("{registry}:handed")]);
            panic!(
                "{context}: {} keeps {key} for {fields:?} after close ({:?}, PTTL {}; \
                 registered {waiting:?}, handed to {handed:?})",
                server.addr(),
                server.cmd::<Vec<String>>(&["HGETALL", &key]),
                server.cmd::<i64>(&["PTTL", &key])
            );
        }
    }
}

/// Asserts that `ttl_ms` (a `PTTL` read just now) is what is left of a lease of `lease`
/// set at some point since `since`: at most `lease`, and at least `lease` less the time
/// since `since` (10 ms of rounding), so a loaded machine's slower steps never fail it.
/// A lease that may have run out by now is only checked for its upper bound.
pub fn assert_lease_left(ttl_ms: i64, lease: Duration, since: Instant, what: &str) {
    let lease_ms = lease.as_millis() as i64;
    assert!(
        ttl_ms <= lease_ms,
        "{what}: {ttl_ms} ms left of a {lease_ms} ms lease"
    );
    let elapsed = since.elapsed().as_millis() as i64;
    if elapsed + 10 < lease_ms {
        assert!(
            ttl_ms >= lease_ms - elapsed - 10,
            "{what}: {ttl_ms} ms left of a {lease_ms} ms lease set {elapsed} ms ago at most"
        );
    }
}
