//! Waiting without polling: pub/sub wake-ups, timeouts, cancellation.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn a_waiter_wakes_on_release_far_sooner_than_the_lease() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("wake").lock().await.unwrap();
    let waiter = common::subscribed_waiter(&server, b.lock("wake")).await;
    // On a single master the waiter listens on the lock's channel, its client's wake
    // channel and the waiters' marker (a release hands the lock to one client).
    assert!(eventually_async(Duration::from_secs(5), || b.subscriptions() == 3).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    held.unlock().await.unwrap();
    let acquired = waiter.await.unwrap();
    // The lease (watchdog, 30 s) would be the only other way out: 5 s proves the message.
    assert!(acquired.duration_since(released) < Duration::from_secs(5));
    assert!(eventually_async(Duration::from_secs(5), || b.subscriptions() == 0).await);
}

#[tokio::test]
async fn an_idle_waiter_sends_nothing_to_redis() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("idle").lock().await.unwrap();
    let lock_b = b.lock("idle");
    let waiter = tokio::spawn(async move { lock_b.lock().await.map(drop) });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_lock__channel:{idle}"
        ) == 1)
        .await
    );
    // Its attempt after subscribing has landed (quiet for 500 ms), however late.
    let before = common::settled_calls(&server, &["evalsha"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = calls(&server, "evalsha");
    assert_eq!(after - before, 0, "the waiter polled Redis while waiting");
    held.unlock().await.unwrap();
    waiter.await.unwrap().unwrap();
}

#[tokio::test]
async fn try_lock_returns_none_when_its_wait_runs_out() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("busy").lock().await.unwrap();
    let started = Instant::now();
    let got = b
        .lock("busy")
        .try_lock(Duration::from_millis(400))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(got.is_none());
    assert!(
        took >= Duration::from_millis(400),
        "returned early: {took:?}"
    );
    assert!(took < Duration::from_secs(3), "returned late: {took:?}");
    assert!(b
        .lock("busy")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    assert!(
        eventually_async(Duration::from_secs(1), || numsub(
            &server,
            "redisson_lock__channel:{busy}"
        ) == 0)
        .await
    );
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn cancelled_waiters_leave_no_subscription_behind() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("cancel").lock().await.unwrap();
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let l = b.lock("cancel");
            tokio::spawn(async move { l.lock().await.map(drop) })
        })
        .collect();
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_lock__channel:{cancel}"
        ) == 1)
        .await
    );
    for w in &waiters {
        w.abort();
    }
    // The last waiter unsubscribes promptly (well within a second).
    assert!(
        eventually_async(Duration::from_secs(1), || numsub(
            &server,
            "redisson_lock__channel:{cancel}"
        ) == 0)
        .await
    );
    assert_eq!(b.subscriptions(), 0);
    held.unlock().await.unwrap();
    assert!(eventually_async(Duration::from_secs(2), || server.dbsize() == 0).await);
}

/// Spawns `lock()`, lets the runtime run `polls` scheduler turns, then aborts it: on a
/// current-thread runtime this lands the cancellation at a different await point each
/// time (before the request, while the reply is in flight, while subscribing...).
async fn cancel_after(lock: &redlatch::Lock, polls: u32) {
    let l = lock.clone();
    let task = tokio::spawn(async move { l.lock().await.map(drop) });
    for _ in 0..polls {
        tokio::task::yield_now().await;
    }
    task.abort();
    let _ = task.await;
}

#[tokio::test]
async fn a_lock_future_cancelled_at_any_point_leaves_no_lock_and_no_subscription() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let lock = b.lock("anywhere");
    for polls in 0..80 {
        // Free lock: cancelled mid-acquire, or acquired and dropped at once.
        cancel_after(&lock, polls).await;
        // Busy lock: cancelled while subscribing or waiting.
        let held = a
            .lock("anywhere")
            .try_lock(Duration::from_secs(3))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("cancelling after {polls} polls leaked the lock"));
        cancel_after(&lock, polls).await;
        held.unlock().await.unwrap();
        let clean = eventually_async(Duration::from_secs(2), || {
            server.cmd::<i64>(&["EXISTS", "anywhere"]) == 0
                && numsub(&server, "redisson_lock__channel:{anywhere}") == 0
        })
        .await;
        assert!(
            clean,
            "left state behind after cancelling after {polls} polls"
        );
    }
    assert_eq!(b.held_locks(), 0);
    assert_eq!(b.subscriptions(), 0);
}

#[tokio::test]
async fn force_unlock_wakes_waiters() {
    let server = RedisServer::start();
    let (a, b, c) = (
        client(&server).await,
        client(&server).await,
        client(&server).await,
    );
    let held = a.lock("forced").lock().await.unwrap();
    let lock_b = b.lock("forced");
    let waiter = tokio::spawn(async move { lock_b.lock().await.unwrap().unlock().await });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_lock__channel:{forced}"
        ) == 1)
        .await
    );
    let started = Instant::now();
    assert!(c.lock("forced").force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    // The old holder's hold is gone: its unlock says so.
    assert!(held.unlock().await.unwrap_err().is_not_held());
    assert!(!c.lock("forced").force_unlock().await.unwrap());
}

#[tokio::test]
async fn local_waiters_of_one_client_take_turns_in_arrival_order() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let held = client.lock("turns").lock().await.unwrap();
    let order = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let (l, o) = (client.lock("turns"), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = l.lock().await.unwrap();
            o.lock().push(i);
            g.unlock().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    held.unlock().await.unwrap();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(*order.lock(), vec![0, 1, 2, 3, 4]);
}
