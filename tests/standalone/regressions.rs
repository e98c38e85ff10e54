//! Regression tests for defects found in review (each failed before its fix):
//! lost wake-ups, lease shortening, spinning, self-deadlock, polling during outages.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::{calls, RedisServer};
use redlatch::{Client, Config};

async fn single(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

/// F1 (wait.rs invariant 6): a waiter whose lock is held by another task of the same
/// client ignores the unlock message of a force-unlock done by ANOTHER client: it
/// re-checks the local hold table (entry still present until the next watchdog tick)
/// and goes back to sleep for the remaining lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_wakes_on_a_force_unlock_by_another_client() {
    let server = RedisServer::start();
    let (a, b) = (single(&server).await, single(&server).await);
    let _held = a.lock("f1").lock().await.unwrap(); // watchdog lease 30 s
    let la = a.lock("f1");
    let waiter = tokio::spawn(async move {
        let g = la.try_lock(Duration::from_secs(4)).await.unwrap();
        g.is_some()
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(b.lock("f1").force_unlock().await.unwrap());
    let t0 = Instant::now();
    let got = waiter.await.unwrap();
    assert!(
        got,
        "lock was free for {:?} but the waiter of client A never took it",
        t0.elapsed()
    );
}

/// F2 (attempt.rs validity): a lease <= 2 ms is accepted by check_lease but its
/// validity (lease - lease*drift - 2 ms) is 0, so every attempt is "granted then
/// undone": a free lock is never acquired, and the loop spins against Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_too_short_to_ever_be_valid_is_rejected() {
    let server = RedisServer::start();
    let a = single(&server).await;
    let before = calls(&server, "evalsha");
    let r = a
        .lock("f2")
        .try_lock_with_lease(Duration::from_secs(1), Duration::from_millis(2))
        .await;
    let calls = calls(&server, "evalsha") - before;
    assert!(
        matches!(r, Err(redlatch::Error::InvalidLease(_))),
        "lease 2 ms: {r:?} after {calls} script calls"
    );
    assert_eq!(calls, 0, "an invalid lease must not reach Redis");
}

/// F3 (lease shortening): a nested acquisition with a short explicit lease (or its
/// release, which re-applies the releasing guard's lease) sets the key's PEXPIRE to
/// that short lease while an outer watchdog guard is alive. The watchdog only renews
/// every timeout/3, so the lock expires and another client acquires it while the
/// outer guard believes it holds it (lost() not cancelled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_short_lease_never_shortens_the_outer_lease() {
    let server = RedisServer::start();
    let (a, b) = (single(&server).await, single(&server).await);
    let lock = a.lock("f3");
    let outer = lock.lock().await.unwrap(); // watchdog, 30 s
    let inner = outer
        .scope(lock.lock_with_lease(Duration::from_millis(300)))
        .await
        .unwrap();
    inner.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let other = b.lock("f3").try_lock(Duration::ZERO).await.unwrap();
    assert!(
        other.is_none() || outer.lost().is_cancelled(),
        "client B acquired the lock while A's outer watchdog guard is alive and not lost"
    );
}

/// F4 (pubsub.rs disconnected()): in Redlock mode with one master down, the actor of
/// the dead master retries its connection every <= 1 s and each failure bumps the wake
/// counter of EVERY channel: all idle waiters re-run a full Redlock attempt every
/// second (SPEC 6: an idle waiter sends nothing to Redis).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_waiters_send_nothing_while_a_minority_master_is_down() {
    let mut servers = common::start_many(3);
    servers[2].kill();
    let cfg = common::redlock::config(&servers);
    let a = Client::connect(cfg.clone()).await.unwrap();
    let b = Client::connect(cfg).await.unwrap();
    let _g = a.lock("f4").lock().await.unwrap();
    let lb = b.lock("f4");
    let w = tokio::spawn(async move {
        lb.try_lock(Duration::from_secs(20))
            .await
            .map(|g| g.is_some())
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = common::calls(&servers[0], "evalsha");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let calls = common::calls(&servers[0], "evalsha") - before;
    w.abort();
    assert!(
        calls <= 1,
        "one idle waiter sent {calls} scripts to a live master in 4 s"
    );
}

/// F5, revised by issue 21: two concurrent lock() calls of one task (join!) on a free
/// lock once deadlocked (the second waited for a local release of its own task), and
/// the first fix made them re-enter each other: both inside at once. Each call is its
/// own holder now: they take turns, and both finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_lock_calls_joined_in_one_task_take_turns_instead_of_deadlocking() {
    let server = RedisServer::start();
    let a = single(&server).await;
    let lock = a.lock("f5");
    let r = tokio::spawn(async move {
        let inside = std::sync::atomic::AtomicBool::new(false);
        let section = || async {
            let g = lock.lock().await?;
            assert!(
                !inside.swap(true, std::sync::atomic::Ordering::SeqCst),
                "both inside"
            );
            tokio::task::yield_now().await;
            inside.store(false, std::sync::atomic::Ordering::SeqCst);
            g.unlock().await
        };
        tokio::time::timeout(Duration::from_secs(30), async {
            let (x, y) = tokio::join!(section(), section());
            (x.is_ok(), y.is_ok())
        })
        .await
    })
    .await
    .unwrap();
    assert_eq!(
        r.expect("join!(section, section) in one task never finished"),
        (true, true)
    );
}

/// F6 (attempt.rs step 5 + release_on notify_local): after a split vote the clean-up
/// release publishes "0" and calls notify_local on the waiter's OWN channel, so the
/// waiter's wait(jitter) returns at once: no jitter, a hot retry loop (and every
/// other waiter of the name is woken by each failed attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_vote_backs_off_instead_of_spinning() {
    let servers = common::start_many(3);
    let other = common::redlock::OTHER;
    common::redlock::prelock(&servers[0], "f6", other, Duration::from_secs(30));
    common::redlock::prelock(&servers[1], "f6", other, Duration::from_secs(30));
    let b = Client::connect(common::redlock::config(&servers))
        .await
        .unwrap();
    let lb = b.lock("f6");
    let w = tokio::spawn(async move {
        lb.try_lock(Duration::from_secs(5))
            .await
            .map(|g| g.is_some())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = common::calls(&servers[2], "evalsha");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = common::calls(&servers[2], "evalsha") - before;
    w.abort();
    // jitter <= 50 ms: at most ~2 scripts (acquire + undo) per ~25 ms on average.
    assert!(
        calls < 200,
        "waiter sent {calls} scripts in 1 s to the master it won"
    );
}
