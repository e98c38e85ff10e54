//! Recovery: flushed scripts, dropped pub/sub connections, restarted Redis.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

#[tokio::test]
async fn script_flush_is_recovered_transparently() {
    let server = RedisServer::start();
    let c = Client::connect(Config::single(server.url())).await.unwrap();
    let lock = c.lock("flushed");
    let g = lock.lock().await.unwrap();
    server.cmd::<String>(&["SCRIPT", "FLUSH"]);
    let g2 = g.scope(lock.lock()).await.unwrap();
    server.cmd::<String>(&["SCRIPT", "FLUSH"]);
    g2.unlock().await.unwrap();
    server.cmd::<String>(&["SCRIPT", "FLUSH"]);
    c.renew_now().await;
    assert!(!g.lost().is_cancelled());
    server.cmd::<String>(&["SCRIPT", "FLUSH"]);
    assert!(lock.force_unlock().await.unwrap());
    let fair = c.fair_lock("flushed-fair");
    server.cmd::<String>(&["SCRIPT", "FLUSH"]);
    fair.lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn a_killed_pubsub_connection_is_reestablished_and_waiters_still_wake() {
    let server = RedisServer::start();
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    let held = a.lock("pubsub").lock().await.unwrap();
    let lock_b = b.lock("pubsub");
    let waiter = tokio::spawn(async move { lock_b.lock().await.map(|g| (Instant::now(), g)) });
    let channel = "redisson_lock__channel:{pubsub}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    // Both clients' pub/sub connections: each keeps one for its notice channel.
    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert_eq!(killed, 2);
    // Resubscribed on a new connection.
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (at, g) = waiter.await.unwrap().unwrap();
    assert!(at.duration_since(released) < Duration::from_secs(5));
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn a_restarted_redis_is_used_again_and_lost_locks_are_reported() {
    let mut server = RedisServer::start();
    let c = Client::connect(
        Config::single(server.url())
            .watchdog_timeout(Duration::from_millis(900))
            .unavailable_timeout(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    let g = c.lock("restart").lock().await.unwrap();
    server.restart();
    // The data is gone (no AOF): the watchdog reports the lock lost.
    tokio::time::timeout(Duration::from_secs(5), g.lost().cancelled())
        .await
        .expect("lost() must fire after an empty restart");
    assert!(g.unlock().await.unwrap_err().is_not_held());
    // Connections are re-established transparently.
    let g = c.lock("restart").lock().await.unwrap();
    assert!(c.lock("restart").is_held_by_current_task().await.unwrap());
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn a_waiter_survives_a_redis_restart_and_acquires_afterwards() {
    let mut server = RedisServer::start();
    let cfg = || {
        Config::single(server.url())
            .watchdog_timeout(Duration::from_secs(30))
            .unavailable_timeout(Duration::from_secs(20))
    };
    let (a, b) = (
        Client::connect(cfg()).await.unwrap(),
        Client::connect(cfg()).await.unwrap(),
    );
    let _held = a.lock("survive").lock().await.unwrap();
    let lock_b = b.lock("survive");
    let waiter = tokio::spawn(async move { lock_b.lock().await.map(drop) });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_lock__channel:{survive}"
        ) == 1)
        .await
    );
    server.restart();
    // The old lock is gone with the data; the reconnect wakes the waiter, which takes it.
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter must wake after the restart")
        .unwrap()
        .unwrap();
}
