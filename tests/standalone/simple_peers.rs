//! The simple lock beside the real clients of its wire (issue 46.8), each installed from
//! its registry by the test kit (redlatch_testkit::foreign): redis-py's `Lock` (PyPI),
//! go-redsync v4 (the Go module proxy) and node-redlock (npm). On one name for a few
//! seconds, the peer process and two redlatch tasks take turns, each side retrying every
//! few milliseconds: nobody is ever inside with another (an "inside" counter INCRed on
//! entry), both sides enter, and no key is left. Skipped with a message where the
//! peer's toolchain is missing; required by .ci/run (REDLATCH_REQUIRE_PEERS=1).

use redlatch_testkit as common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::foreign::{finished, Peer};
use common::RedisServer;
use redlatch::{BackOff, Client, Config};

/// How long both sides contend.
const SECONDS: f64 = 3.0;

/// A test-side connection that waits as long as the test may (30 s), never a client
/// library's default timeout.
async fn conn(url: &str) -> redis::aio::MultiplexedConnection {
    let wait = Some(Duration::from_secs(30));
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(wait)
        .set_response_timeout(wait);
    let client = redis::Client::open(url).unwrap();
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

async fn beside(peer: Peer) {
    if !peer.available() {
        return;
    }
    let server = RedisServer::start();
    let name = format!("peers:{peer:?}");
    let inside = format!("peers:inside:{peer:?}");
    // Installed (once) before the clock starts, so both sides contend for SECONDS.
    let child =
        tokio::task::block_in_place(|| peer.contend(server.port(), &name, SECONDS, &inside));
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let (entered, overlaps) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let until = tokio::time::Instant::now() + Duration::from_secs_f64(SECONDS);
    let every = BackOff::constant(Duration::from_millis(5)).unwrap();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let lock = client.simple_lock_with(name.clone(), every);
            let (entered, overlaps, inside) = (entered.clone(), overlaps.clone(), inside.clone());
            let url = server.url();
            tokio::spawn(async move {
                let mut conn = conn(&url).await;
                while let Some(left) = until.checked_duration_since(tokio::time::Instant::now()) {
                    let Some(guard) = lock.try_lock(left).await.unwrap() else {
                        break;
                    };
                    let now: i64 = redis::cmd("INCR")
                        .arg(&inside)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    if now != 1 {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    let _: i64 = redis::cmd("DECR")
                        .arg(&inside)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    guard.unlock().await.unwrap();
                    entered.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let (theirs, their_overlaps) =
        tokio::task::block_in_place(|| finished(peer, child, Duration::from_secs(120)));
    let (ours, our_overlaps) = (
        entered.load(Ordering::Relaxed),
        overlaps.load(Ordering::Relaxed),
    );
    let said = format!("{}: redlatch entered {ours} (overlaps {our_overlaps}), it {theirs} (overlaps {their_overlaps})", peer.label());
    eprintln!("{said}");
    assert_eq!((our_overlaps, their_overlaps), (0, 0), "{said}");
    assert!(ours > 0 && theirs > 0, "both sides enter: {said}");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", &name]),
        0,
        "a key left: {said}"
    );
    assert_eq!(server.cmd::<i64>(&["GET", &inside]), 0, "{said}");
    client.close(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_redis_py_lock_no_overlap_both_enter_no_key_left() {
    beside(Peer::RedisPy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_go_redsync_no_overlap_both_enter_no_key_left() {
    beside(Peer::Redsync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_node_redlock_no_overlap_both_enter_no_key_left() {
    beside(Peer::NodeRedlock).await;
}
