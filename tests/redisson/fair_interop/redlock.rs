//! The fair lock on Redisson's wire over Redlock's three masters: a dead redlatch
//! waiter is passed over and the order kept, dead Java entries keep their turn until
//! their deadlines (part of `fair_interop`).

use redlatch_testkit as common;

use common::fair::*;
use common::redisson::*;

use std::time::{Duration, Instant};

use common::{eventually_async, start_many, RedisServer};
use redlatch::{Client, Config};

use super::{dead_redlatch_waiter, join_all, rust_waiter, until_just_before, Log};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_masters_a_dead_redlatch_waiter_is_passed_over_and_order_kept() {
    let masters = start_many(3);
    let refs: Vec<&RedisServer> = masters.iter().collect();
    let config = Config::redlock(masters.iter().map(RedisServer::url))
        .master_timeout(Duration::from_millis(250))
        .fair_stale_timeout(5 * SEC);
    // Under Redlock a client queues one waiter per name at a time (its local gate):
    // one client per waiter.
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(Client::connect(config.clone()).await.unwrap());
    }
    let name = "dead-rust-3";
    let held = clients[4].fair_lock(name).lock().await.unwrap();
    let (mut child, dead) = dead_redlatch_waiter(&refs, name, THREAD_WAIT).await;
    let log = Log::default();
    let (mut expected, mut tasks) = (Vec::new(), Vec::new());
    for client in &clients[..4] {
        let lock = client.fair_lock(name);
        let (h, task) = rust_waiter(&masters[0], &lock, &log).await;
        expected.push(h);
        tasks.push(task);
    }
    for m in &masters {
        assert_eq!(queue(m, name)[0], dead);
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let released = Instant::now();
    held.unlock().await.unwrap();
    let first_served = || !log.lock().is_empty();
    assert!(eventually_async(10 * SEC, first_served).await);
    let waited = released.elapsed();
    assert!(waited < SEC + 5 * SEC / 3 + 4 * SEC, "{waited:?}");
    join_all(tasks, 20 * SEC).await;
    assert_eq!(*log.lock(), expected);
    for m in &masters {
        assert!(eventually_async(5 * SEC, || dbsize(m) == 0).await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_three_masters_dead_java_entries_keep_their_turn_until_their_deadlines() {
    let masters = start_many(3);
    let config = Config::redlock(masters.iter().map(RedisServer::url))
        .master_timeout(Duration::from_millis(250))
        .fair_stale_timeout(5 * SEC);
    let (a, b) = (
        Client::connect(config.clone()).await.unwrap(),
        Client::connect(config).await.unwrap(),
    );
    let name = "dead-java-3";
    let held = a.fair_lock(name).lock_with_lease(2 * SEC).await.unwrap();
    // A Java thread (threadWaitTime 3 s) that queued on every master and died: its
    // deadlines are the lock's PTTL + 3 s.
    let mut due = Vec::new();
    for m in &masters {
        let dead = JavaFairLock::with(m, name, 2, 3 * SEC, 3 * SEC).await;
        let dead_id = dead.holder().to_string();
        dead.queue_and_die().await;
        due.push(m.cmd::<f64>(&["ZSCORE", &timeout_key(name), &dead_id]));
    }
    let log = Log::default();
    let (ours, task) = rust_waiter(&masters[0], &b.fair_lock(name), &log).await;
    for m in &masters {
        assert_eq!(queue(m, name).len(), 2, "{:?}", queue(m, name));
    }
    held.unlock().await.unwrap();
    // Checked just before the first deadline, not a fixed time after the unlock
    // (which could fall past it on a loaded machine).
    let first = due.iter().cloned().fold(f64::MAX, f64::min);
    if until_just_before(first, Duration::from_millis(300)).await {
        assert!(
            log.lock().is_empty(),
            "the dead thread's turn was taken early"
        );
    }
    join(task, 15 * SEC).await;
    let late = java_now_ms() as f64 - due.iter().cloned().fold(f64::MIN, f64::max);
    // Served within a refresh period (5 s / 3) of the last deadline, with margin.
    assert!(
        late < (5_000 / 3 + 4_000) as f64,
        "{late} ms after the deadlines"
    );
    assert_eq!(*log.lock(), [ours]);
    for m in &masters {
        assert!(eventually_async(5 * SEC, || dbsize(m) == 0).await);
    }
}
