//! Self-tests of the shared test harness in redlatch-testkit/.

use redlatch_testkit as common;

use common::{eventually, eventually_async, numsub, start_many, RedisServer};
use std::collections::HashSet;
use std::net::TcpStream;
use std::time::Duration;

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn server_starts_answers_and_is_killed_on_drop() {
    let server = RedisServer::start();
    let (port, pid, dir) = (server.port(), server.pid(), server.dir().to_path_buf());
    assert_ne!(port, 6379);
    assert_eq!(server.url(), format!("redis://127.0.0.1:{port}"));
    assert_eq!(server.addr(), format!("127.0.0.1:{port}"));
    assert!(server.is_running());
    assert!(process_exists(pid));
    assert_eq!(server.cmd::<String>(&["PING"]), "PONG");
    assert_eq!(server.cmd::<String>(&["SET", "k", "v"]), "OK");
    assert_eq!(server.dbsize(), 1);
    let info: String = server.cmd(&["INFO", "server"]);
    assert!(info.contains(&format!("process_id:{pid}")), "{info}");
    assert!(
        server.log().contains("Ready to accept connections"),
        "{}",
        server.log()
    );
    assert!(dir.is_dir());

    drop(server);
    assert!(!process_exists(pid), "redis-server {pid} survived drop");
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(!dir.exists(), "temp dir {} not removed", dir.display());
}

/// The server a test starts is the `redis-server` first on the PATH (scripts/versions.sh
/// puts another build there): its INFO names the version `--version` gave.
#[test]
fn the_started_server_is_the_one_on_the_path() {
    let version = common::server_version();
    let server = RedisServer::start();
    let info: String = server.cmd(&["INFO", "server"]);
    let [a, b, c] = version.version;
    let own = format!("{a}.{b}.{c}");
    if version.is_valkey() {
        assert_eq!(
            common::info_field(&info, "valkey_version"),
            Some(&*own),
            "{info}"
        );
        assert_eq!(
            common::info_field(&info, "server_name"),
            Some("valkey"),
            "{info}"
        );
        // What Valkey answers as the Redis version it is compatible with.
        let [ra, rb] = version.redis_compatible();
        let redis = common::info_field(&info, "redis_version").unwrap_or_default();
        assert!(redis.starts_with(&format!("{ra}.{rb}.")), "{info}");
    } else {
        assert_eq!(
            common::info_field(&info, "redis_version"),
            Some(&*own),
            "{info}"
        );
    }
    eprintln!("server: {version} (pid {})", server.pid());
}

#[test]
fn version_lines_are_read_for_redis_and_valkey() {
    use common::ServerVersion;
    let redis = ServerVersion::parse(
        "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0",
    )
    .unwrap();
    assert_eq!((redis.is_valkey(), redis.version), (false, [7, 0, 15]));
    assert_eq!(redis.redis_compatible(), [7, 0]);
    let old = ServerVersion::parse("Redis server v=6.2.16 sha=00000000:0 malloc=libc").unwrap();
    assert_eq!(old.redis_compatible(), [6, 2]);
    let valkey =
        ServerVersion::parse("Valkey server v=8.0.1 sha=00000000:1 malloc=libc bits=64").unwrap();
    assert_eq!((valkey.is_valkey(), valkey.version), (true, [8, 0, 1]));
    assert_eq!(valkey.redis_compatible(), [7, 2]);
    assert_eq!(valkey.to_string(), "Valkey 8.0.1");
    assert_eq!(ServerVersion::parse("redis-server: not a version"), None);
}

#[test]
fn kill_is_idempotent_and_stops_the_server() {
    let mut server = RedisServer::start();
    let pid = server.pid();
    server.kill();
    assert!(!server.is_running());
    assert!(!process_exists(pid));
    server.kill();
    assert!(!server.is_running());
}

#[test]
fn restart_keeps_the_port_and_loses_data_without_aof() {
    let mut server = RedisServer::start();
    let (port, old_pid) = (server.port(), server.pid());
    let _: () = server.cmd(&["SET", "k", "v"]);
    server.restart();
    assert!(server.is_running());
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), old_pid);
    assert_eq!(server.dbsize(), 0);

    // restart after an explicit kill works too
    server.kill();
    server.restart();
    assert_eq!(server.cmd::<String>(&["PING"]), "PONG");
}

#[test]
fn restart_with_appendfsync_always_keeps_data() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let config: Vec<String> = server.cmd(&["CONFIG", "GET", "appendonly"]);
    assert_eq!(config, ["appendonly", "yes"]);
    let _: () = server.cmd(&["SET", "k", "v"]);
    let _: () = server.cmd(&["HSET", "h", "f", "1"]);
    server.restart();
    assert_eq!(
        server.cmd::<Option<String>>(&["GET", "k"]).as_deref(),
        Some("v")
    );
    assert_eq!(server.cmd::<i64>(&["HGET", "h", "f"]), 1);
}

#[test]
fn pause_makes_commands_time_out_and_resume_recovers() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert_eq!(
        redis::cmd("PING").query::<String>(&mut conn).unwrap(),
        "PONG"
    );

    server.pause();
    assert!(server.is_running(), "a paused server is still running");
    let err = redis::cmd("PING").query::<String>(&mut conn).unwrap_err();
    assert!(err.is_timeout(), "expected a timeout, got {err:?}");

    server.resume();
    let mut fresh = server.conn();
    fresh
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(
        redis::cmd("PING").query::<String>(&mut fresh).unwrap(),
        "PONG"
    );
}

#[test]
fn dropping_a_paused_server_still_kills_it() {
    let server = RedisServer::start();
    let pid = server.pid();
    server.pause();
    drop(server);
    assert!(!process_exists(pid));
}

#[test]
fn many_servers_get_distinct_ports() {
    let servers = start_many(3);
    let ports: HashSet<u16> = servers.iter().map(|s| s.port()).collect();
    assert_eq!(ports.len(), 3);
    let pids: HashSet<u32> = servers.iter().map(|s| s.pid()).collect();
    assert_eq!(pids.len(), 3);
    // independent data sets
    let _: () = servers[0].cmd(&["SET", "only-here", "1"]);
    assert_eq!(servers[0].dbsize(), 1);
    assert_eq!(servers[1].dbsize(), 0);
    assert_eq!(servers[2].dbsize(), 0);
}

#[test]
fn numsub_counts_subscribers_and_eventually_sees_them_leave() {
    let server = RedisServer::start();
    assert_eq!(numsub(&server, "chan"), 0);
    let mut conn = server.conn();
    let mut pubsub = conn.as_pubsub();
    pubsub.subscribe("chan").unwrap();
    assert!(eventually(Duration::from_secs(5), || numsub(
        &server, "chan"
    ) == 1));
    pubsub.unsubscribe("chan").unwrap();
    assert!(eventually(Duration::from_secs(5), || numsub(
        &server, "chan"
    ) == 0));
}

#[test]
fn eventually_gives_up_after_the_deadline() {
    let start = std::time::Instant::now();
    assert!(!eventually(Duration::from_millis(100), || false));
    assert!(start.elapsed() >= Duration::from_millis(100));
    let mut calls = 0;
    assert!(eventually(Duration::from_secs(1), || {
        calls += 1;
        calls == 3
    }));
    assert_eq!(calls, 3);
}

#[tokio::test]
async fn eventually_async_polls_until_true_or_deadline() {
    let start = std::time::Instant::now();
    assert!(!eventually_async(Duration::from_millis(100), || false).await);
    assert!(start.elapsed() >= Duration::from_millis(100));
    let mut calls = 0;
    assert!(
        eventually_async(Duration::from_secs(1), || {
            calls += 1;
            calls == 3
        })
        .await
    );
    assert_eq!(calls, 3);
}
