//! Bad input and unavailable Redis: typed errors, never a panic, a hang or a leak.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::RedisServer;
use redlatch::{Client, Config, Error, MAX_LEASE, MAX_NAME_LEN};

mod auth;
mod multi_master;

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn invalid_urls_are_rejected_before_connecting() {
    let mut urls = vec!["http://127.0.0.1:1", "127.0.0.1:6379", "redis://[::1"];
    if cfg!(not(feature = "tls")) {
        // Without the feature rediss:// is refused up front (tests/standalone/tls.rs has the rest).
        urls.push("rediss://:s3cret@127.0.0.1:1");
    }
    for url in urls {
        let err = Client::connect(Config::single(url)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{url}: {err}");
        assert!(err.to_string().starts_with("invalid redis url"), "{err}");
        assert!(!format!("{err} {err:?}").contains("s3cret"), "{err:?}");
    }
    let err = Client::connect(Config::redlock(Vec::<String>::new()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
}

#[tokio::test]
async fn fair_timeouts_below_their_minimums_are_configuration_errors() {
    let server = RedisServer::start();
    let too_short = Config::single(server.url()).fair_stale_timeout(Duration::from_millis(5));
    let err = Client::connect(too_short).await.unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("fair_stale_timeout"), "{err}");
    // The wait time is at least the stale timeout (5 s by default).
    let too_short = Config::single(server.url()).fair_wait_time(Duration::from_secs(1));
    let err = Client::connect(too_short).await.unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("fair_wait_time"), "{err}");
}

#[tokio::test]
async fn an_unreachable_redis_fails_fast_with_the_masters_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let err = Client::connect(Config::single(format!("redis://127.0.0.1:{port}")))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(err, Error::Redis { .. } | Error::Timeout { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.is_unavailable());
}

#[tokio::test]
async fn a_stalled_redis_times_out_at_connect_instead_of_hanging() {
    let server = RedisServer::start();
    server.pause();
    let started = Instant::now();
    let err =
        Client::connect(Config::single(server.url()).connect_timeout(Duration::from_millis(500)))
            .await
            .unwrap_err();
    server.resume();
    // A stalled server never answers: without the connect timeout this hangs.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.is_timeout(), "{err}");
}

/// A connect that times out is `Error::Timeout` with the connect timeout, whether the
/// server accepted the connection and never answered (SIGSTOP) or the handshake itself
/// got no answer (an unreachable host: a cut route); it used to be `Error::Redis`
/// with a bare "timed out" in the second case.
#[tokio::test]
async fn a_connect_timeout_is_a_timeout_with_its_duration() {
    let server = RedisServer::start();
    let route = common::unreachable::Route::to(server.port());
    route.cut();
    server.pause();
    let after = Duration::from_millis(400);
    for url in [route.url(), server.url()] {
        let started = Instant::now();
        let err = Client::connect(Config::single(&url).connect_timeout(after))
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(&err, Error::Timeout { after: a, .. } if *a == after),
            "{url}: {err:?}"
        );
        assert!(err.to_string().contains("timed out after 400ms"), "{err}");
        assert!(err.is_timeout() && err.is_unavailable(), "{err}");
        assert!(
            took <= after + Duration::from_millis(500),
            "{url}: {took:?}"
        );
    }
    server.resume();
}

#[tokio::test]
async fn empty_and_oversized_names_are_invalid_everywhere() {
    let server = RedisServer::start();
    let c = client(&server).await;
    for name in [String::new(), "x".repeat(MAX_NAME_LEN + 1)] {
        let lock = c.lock(name.clone());
        assert!(matches!(lock.lock().await, Err(Error::InvalidName(_))));
        assert!(matches!(
            lock.try_lock(Duration::ZERO).await,
            Err(Error::InvalidName(_))
        ));
        assert!(matches!(lock.is_locked().await, Err(Error::InvalidName(_))));
        assert!(matches!(
            lock.force_unlock().await,
            Err(Error::InvalidName(_))
        ));
        assert!(matches!(
            c.fair_lock(name).lock().await,
            Err(Error::InvalidName(_))
        ));
    }
    // The largest allowed name works end to end.
    let big = c.lock("y".repeat(MAX_NAME_LEN));
    big.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(server.dbsize(), 0);
}

#[tokio::test]
async fn zero_tiny_and_absurd_leases_are_invalid() {
    let server = RedisServer::start();
    let lock = client(&server).await.lock("lease");
    for lease in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_millis(9),
        MAX_LEASE + Duration::from_secs(1),
    ] {
        let err = lock.lock_with_lease(lease).await.unwrap_err();
        assert!(matches!(err, Error::InvalidLease(_)), "{lease:?}: {err}");
        let err = lock
            .try_lock_with_lease(Duration::ZERO, lease)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::InvalidLease(_)));
    }
    assert_eq!(server.dbsize(), 0);
    let bad = Config::single(server.url()).watchdog_timeout(Duration::ZERO);
    assert!(matches!(
        Client::connect(bad).await,
        Err(Error::InvalidLease(_) | Error::Config { .. })
    ));
}

#[tokio::test]
async fn a_key_of_another_type_is_reported_and_left_alone() {
    let server = RedisServer::start();
    let c = client(&server).await;
    server.cmd::<String>(&["SET", "str", "value"]);
    for lock in [c.lock("str"), c.fair_lock("str"), c.fenced_lock("str")] {
        let err = lock.lock().await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{err}");
        assert!(err.to_string().contains("another type"), "{err}");
        assert!(matches!(
            lock.try_lock(Duration::from_secs(1)).await,
            Err(Error::WrongType { .. })
        ));
        assert!(matches!(
            lock.hold_count().await,
            Err(Error::WrongType { .. })
        ));
        assert!(matches!(
            lock.force_unlock().await,
            Err(Error::WrongType { .. })
        ));
    }
    assert_eq!(server.cmd::<String>(&["GET", "str"]), "value");
    // is_locked() reports it as lock() does: the key and its master named.
    match c.lock("str").is_locked().await {
        Err(Error::WrongType { name, addr }) => {
            assert_eq!(name, "str");
            assert_eq!(addr, server.addr());
        }
        other => panic!("expected WrongType, got {other:?}"),
    }
}

/// A hash without expiry at a lock's name (never written so by a lock script: each
/// sets a lease) would never free: `lock()` reports it at once instead of waiting
/// forever, and `is_locked()` the same way, naming key and master.
#[tokio::test]
async fn a_lock_key_without_expiry_is_bad_data_not_a_wait() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let _: i64 = server.cmd(&["HSET", "stuck", "someone:1", "1"]);
    for lock in [
        c.lock("stuck"),
        c.fair_lock("stuck"),
        c.fenced_lock("stuck"),
    ] {
        let started = Instant::now();
        let waited = tokio::time::timeout(Duration::from_secs(20), lock.lock()).await;
        let err = waited.expect("lock() must not wait on it").unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20));
        match &err {
            Error::BadData { name, addr, detail } => {
                assert_eq!(name, "stuck");
                assert_eq!(addr, &server.addr());
                assert!(detail.contains("no expiry"), "{detail}");
            }
            other => panic!("expected BadData, got {other:?}"),
        }
        assert!(err.is_permanent());
        let err = lock.is_locked().await.unwrap_err();
        assert!(
            matches!(&err, Error::BadData { detail, .. } if detail.contains("no expiry")),
            "{err}"
        );
        let tried = lock.try_lock(Duration::from_secs(5)).await;
        assert!(matches!(tried, Err(Error::BadData { .. })), "{tried:?}");
    }
    assert_eq!(server.cmd::<i64>(&["HGET", "stuck", "someone:1"]), 1);
    // With a lease, the same hash is a lock held by someone: busy, not an error.
    let _: i64 = server.cmd(&["PEXPIRE", "stuck", "60000"]);
    assert!(c.lock("stuck").is_locked().await.unwrap());
    assert!(c
        .lock("stuck")
        .try_lock(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
}

/// A lock on a read-only replica fails with the server's READONLY (the Sentinel transport
/// looks the primary up again on it), on every version: Redis 7 refuses the script up
/// front; Redis 6.2 runs it and wraps the refused write's error in its own "ERR Error
/// running script" (so does it WRONGTYPE and OOM), which must not hide the code.
#[tokio::test]
async fn a_lock_on_a_replica_fails_with_readonly() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    let c = client(&replica).await;
    let lock = c.lock("on-a-replica");
    let err = tokio::time::timeout(Duration::from_secs(10), lock.try_lock(Duration::ZERO))
        .await
        .expect("no answer from the replica")
        .unwrap_err();
    match &err {
        Error::Redis { source, .. } => {
            assert_eq!(source.code(), Some("READONLY"), "{err}");
        }
        other => panic!("not the server's READONLY: {other}"),
    }
}

#[tokio::test]
async fn redis_going_down_gives_an_error_not_a_hang() {
    let mut server = RedisServer::start();
    let c = Client::connect(
        Config::single(server.url())
            .master_timeout(Duration::from_millis(200))
            .unavailable_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let held = c.lock("down").lock().await.unwrap();
    server.kill();
    let started = Instant::now();
    let err = c.lock("other").lock().await.unwrap_err();
    assert!(err.is_unavailable(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let r = c.lock("other").try_lock(Duration::from_millis(300)).await;
    assert!(
        r.is_err(),
        "an unreachable master is an error, not contention"
    );
    assert!(held.unlock().await.unwrap_err().is_unavailable());
    assert!(c.lock("other").is_locked().await.is_err());
}

#[tokio::test]
async fn unlock_after_force_unlock_says_not_held_and_lost_fires() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let g = c.lock("forced").lock().await.unwrap();
    assert!(c.lock("forced").force_unlock().await.unwrap());
    assert!(g.lost().is_cancelled());
    let err = g.unlock().await.unwrap_err();
    assert!(matches!(err, Error::NotHeld { .. }), "{err}");
    assert_eq!(c.held_locks(), 0);
}

/// `Config::from_env` with REDLATCH_REDIS set to a list, set to nothing, and unset, each
/// in a child process running [`from_env_child`]: the environment is the process's, and
/// this binary's other tests run beside this one.
#[test]
fn from_env_reads_redlatch_redis() {
    let lists = [
        Some("redis://127.0.0.1:1, redis://127.0.0.1:2,redis://127.0.0.1:3"),
        Some(""),
        None,
    ];
    for value in lists {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                redlatch_testkit::test_name!("from_env_child").as_str(),
                "--nocapture",
                "--test-threads=1",
            ])
            .env("REDLATCH_FROM_ENV_CHILD", "1")
            .env_remove(redlatch::ENV_MODE)
            .env_remove(redlatch::ENV_SENTINEL_MASTER);
        match value {
            Some(v) => child.env(redlatch::ENV_VAR, v),
            None => child.env_remove(redlatch::ENV_VAR),
        };
        let out = child.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{value:?}: {stdout}");
        assert!(stdout.contains("from_env checked"), "{value:?}: {stdout}");
    }
}

/// The child of [`from_env_reads_redlatch_redis`] (returns at once elsewhere): three
/// URLs are Redlock with a quorum of 2; an empty or missing variable is an error.
#[test]
fn from_env_child() {
    if std::env::var_os("REDLATCH_FROM_ENV_CHILD").is_none() {
        return;
    }
    let cfg = Config::from_env();
    match std::env::var(redlatch::ENV_VAR) {
        Ok(list) if !list.is_empty() => {
            let cfg = cfg.unwrap();
            assert_eq!(cfg.urls().len(), 3);
            assert_eq!(cfg.quorum(), 2);
        }
        _ => assert!(cfg.is_err()),
    }
    println!("from_env checked");
}

#[tokio::test]
async fn status_shows_the_type_of_a_key_that_is_not_a_lock() {
    let server = RedisServer::start();
    let c = client(&server).await;
    server.cmd::<String>(&["SET", "not-a-lock", "v"]);
    let st = c.lock("not-a-lock").status().await.unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].key_type, "string");
    assert!(st[0].error.is_none(), "{:?}", st[0].error);
    assert!(st[0].holders.is_empty());
}
