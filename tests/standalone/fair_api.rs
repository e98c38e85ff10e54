//! Fair lock (issue 4) through the rest of the API: force_unlock wakes the head waiter;
//! watchdog, explicit lease and queries behave as for the plain lock; plain and fair
//! clients on one name (documented behaviour, as with Redisson).

use redlatch_testkit as common;

use common::fair::*;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually_async, RedisServer};
use redlatch::{Client, Config, Error, Lock};

async fn connect(config: Config) -> Client {
    Client::connect(config).await.unwrap()
}

fn single(server: &RedisServer, stale: Duration) -> Config {
    Config::single(server.url()).fair_stale_timeout(stale)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_only_the_head_waiter_at_once() {
    let server = RedisServer::start();
    // Waiters refresh every 10 s and the watchdog lease is 30 s: only the wake-up
    // message can explain a quick acquisition.
    let client = connect(single(&server, 30 * SEC)).await;
    let name = "forced";
    let lock = client.fair_lock(name);
    let held = lock.lock().await.unwrap();
    let [(_, task_a), (b, task_b)] = queue_two(&server, &lock, name).await;
    let started = Instant::now();
    assert!(lock.force_unlock().await.unwrap());
    // The alternatives (the 10 s refresh, the 30 s lease) take twice the bound.
    let ga = join(task_a, 8 * SEC).await;
    assert!(started.elapsed() < 5 * SEC, "{:?}", started.elapsed());
    assert!(held.lost().is_cancelled());
    assert!(matches!(held.unlock().await, Err(Error::NotHeld { .. })));
    assert_eq!(queue(&server, name), [b.as_str()], "b keeps waiting");
    assert!(!task_b.is_finished());
    // Forced from another client too, with the lock held by a task of this one.
    let other = connect(single(&server, 30 * SEC)).await;
    let started = Instant::now();
    assert!(other.fair_lock(name).force_unlock().await.unwrap());
    let gb = join(task_b, 8 * SEC).await;
    assert!(started.elapsed() < 5 * SEC, "{:?}", started.elapsed());
    gb.unlock().await.unwrap();
    assert!(
        !other.fair_lock(name).force_unlock().await.unwrap(),
        "nothing left"
    );
    drop(ga); // its lock was forced away: dropping it releases nothing
    assert!(eventually_async(5 * SEC, || dbsize(&server) == 0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_fair_lock_past_its_lease_while_others_queue() {
    let server = RedisServer::start();
    let config = single(&server, 5 * SEC)
        .watchdog_timeout(Duration::from_millis(1500))
        .master_timeout(Duration::from_millis(400));
    let client = connect(config).await;
    let name = "watched";
    let lock = client.fair_lock(name);
    let held = lock.lock().await.unwrap();
    let (a, task_a) = spawn_lock(&lock);
    wait_queued(&server, name, &a).await;
    tokio::time::sleep(3 * SEC).await; // two leases
    assert!(lock.is_locked().await.unwrap());
    assert!(!held.lost().is_cancelled());
    assert!(!task_a.is_finished());
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl <= Duration::from_millis(1500), "{ttl:?}");
    held.unlock().await.unwrap();
    join(task_a, 5 * SEC).await.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_explicit_lease_passes_the_fair_lock_to_the_head_waiter() {
    let server = RedisServer::start();
    let client = connect(single(&server, 30 * SEC)).await;
    let name = "leased";
    let lock = client.fair_lock(name);
    // Long enough to still run while the waiter queues, on a slow machine too.
    let lease = 3 * SEC;
    let held = lock.lock_with_lease(lease).await.unwrap();
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl <= lease, "{ttl:?}");
    let (a, task_a) = spawn_lock(&lock);
    wait_queued(&server, name, &a).await;
    // No release, no message: the waiter's wait is bounded by the lease it saw.
    let ga = join(task_a, 10 * SEC).await;
    assert!(matches!(held.unlock().await, Err(Error::NotHeld { .. })));
    ga.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_report_a_fair_lock_as_they_do_a_plain_one() {
    let server = RedisServer::start();
    let client = connect(single(&server, 5 * SEC)).await;
    let lock = client.fair_lock("asked");
    assert_eq!(lock.kind(), redlatch::Kind::Fair);
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    let g1 = lock.lock().await.unwrap();
    let g2 = g1.scope(lock.try_lock(SEC)).await.unwrap().unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.is_held_by_current_task().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let field = g1.holder().to_string();
    assert_eq!(server.cmd::<i64>(&["HGET", "asked", &field]), 2);
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl > 25 * SEC && ttl <= 30 * SEC,
        "watchdog lease, got {ttl:?}"
    );
    let l = lock.clone();
    let elsewhere = tokio::spawn(async move {
        (
            l.is_locked().await.unwrap(),
            l.is_held_by_current_task().await.unwrap(),
            l.hold_count().await.unwrap(),
        )
    });
    assert_eq!(join(elsewhere, 5 * SEC).await, (true, false, 0));
    g2.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g1.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(dbsize(&server), 0);
}

#[tokio::test]
async fn a_plain_client_barges_past_the_fair_queue_when_the_lock_is_free() {
    let server = RedisServer::start();
    let client = connect(single(&server, 5 * SEC)).await;
    let name = "barged";
    // A waiter queued by some other (fair) client, with 30 s of deadline left.
    let t: Vec<String> = server.cmd(&["TIME"]);
    let deadline = (t[0].parse::<u64>().unwrap() + 30) * 1000;
    let timeouts = format!("redisson_lock_timeout:{{{name}}}");
    let _: i64 = server.cmd(&["RPUSH", &queue_key(name), "queued:1"]);
    let _: i64 = server.cmd(&["ZADD", &timeouts, &deadline.to_string(), "queued:1"]);
    let fair = client.fair_lock(name);
    assert!(fair.try_lock(Duration::ZERO).await.unwrap().is_none());
    let plain = client.lock(name);
    let g = plain.try_lock(Duration::ZERO).await.unwrap();
    assert!(g.is_some(), "the plain lock ignores the queue");
    assert_eq!(queue(&server, name), ["queued:1"], "and leaves it alone");
    g.unwrap().unlock().await.unwrap();
    let _: i64 = server.cmd(&["DEL", &queue_key(name), &timeouts]);
}

/// Fair waiters keep their order among themselves while plain clients come and go;
/// everyone gets the lock, one at a time, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_fair_clients_on_one_name_exclude_each_other_and_all_get_through() {
    let server = RedisServer::start();
    // Fair waiters notice a plain release (not published to them) within 0.5 s.
    let fair_client = connect(single(&server, Duration::from_millis(1500))).await;
    let plain_client = connect(single(&server, 5 * SEC)).await;
    let name = "mixed";
    let (fair, plain) = (fair_client.fair_lock(name), plain_client.lock(name));
    let inside = Arc::new(AtomicBool::new(false));
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let work = |lock: Lock, who: &'static str| {
        let (inside, order) = (inside.clone(), order.clone());
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            assert!(!inside.swap(true, SeqCst), "two holders at once");
            order.lock().push(who);
            tokio::time::sleep(Duration::from_millis(50)).await;
            inside.store(false, SeqCst);
            g.unlock().await.unwrap();
        })
    };
    let held = plain.lock().await.unwrap();
    let mut tasks = Vec::new();
    for who in ["fair-1", "fair-2", "fair-3"] {
        let (lock, holder) = owned(&fair);
        let task = work(lock, who);
        wait_queued(&server, name, &holder).await;
        tasks.push(task);
    }
    for who in ["plain-1", "plain-2"] {
        tasks.push(work(plain.clone(), who));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.unlock().await.unwrap();
    for task in tasks {
        join(task, 15 * SEC).await;
    }
    let order = order.lock().clone();
    eprintln!("mixed order: {order:?}");
    let fair_order: Vec<&str> = order
        .iter()
        .copied()
        .filter(|w| w.starts_with("fair"))
        .collect();
    assert_eq!(fair_order, ["fair-1", "fair-2", "fair-3"], "{order:?}");
    assert_eq!(order.len(), 5);
    assert!(eventually_async(5 * SEC, || dbsize(&server) == 0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_waiter_cancelled_while_the_lock_is_free_hands_its_turn_on_at_once() {
    let server = RedisServer::start();
    // Refresh every 10 s, lease 20 s: only the cancellation's wake-up is quick.
    let client = connect(single(&server, 30 * SEC)).await;
    let name = "handed-on";
    let lock = client.fair_lock(name);
    let held = lock.lock_with_lease(20 * SEC).await.unwrap();
    let [(_, task_a), (_, task_b)] = queue_two(&server, &lock, name).await;
    // The lock vanishes without a message (say its holder's lease ran out), so the head
    // does not know it is free; then the head gives up.
    let _: i64 = server.cmd(&["DEL", name]);
    let started = Instant::now();
    task_a.abort();
    // The alternatives (the 10 s refresh, the 20 s lease) take twice the bound.
    let gb = join(task_b, 8 * SEC).await;
    assert!(started.elapsed() < 5 * SEC, "{:?}", started.elapsed());
    assert!(matches!(held.unlock().await, Err(Error::NotHeld { .. })));
    gb.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0);
}
