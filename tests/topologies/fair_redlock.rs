//! Fair lock in Redlock mode (issue 4, item 5): a queue on every master; split rounds
//! (different orders on different masters) resolve; no entry is left on a master that
//! refused a waiter the majority granted.

use redlatch_testkit as common;

use common::fair::*;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually_async, numsub, start_many, RedisServer};
use redlatch::{Client, Config};

async fn connect(masters: &[RedisServer], stale: Duration) -> Client {
    let config = Config::redlock(masters.iter().map(RedisServer::url))
        .master_timeout(Duration::from_millis(250))
        .fair_stale_timeout(stale);
    Client::connect(config).await.unwrap()
}

/// Waits until every master is empty again; else fails, showing what is left.
async fn assert_nothing_left(masters: &[RedisServer]) {
    let empty = || masters.iter().all(|m| m.dbsize() == 0);
    if eventually_async(5 * SEC, empty).await {
        return;
    }
    let mut left = Vec::new();
    for (i, m) in masters.iter().enumerate() {
        for key in m.lock_keys("*") {
            let content: Vec<String> = match m.cmd::<String>(&["TYPE", &key]).as_str() {
                "list" => m.cmd(&["LRANGE", &key, "0", "-1"]),
                "zset" => m.cmd(&["ZRANGE", &key, "0", "-1"]),
                "hash" => m.cmd(&["HKEYS", &key]),
                _ => Vec::new(),
            };
            left.push(format!("master {i}: {key} {content:?}"));
        }
    }
    panic!("left behind: {left:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_granted_by_a_majority_leaves_the_queue_of_the_master_that_refused_it() {
    let masters = start_many(3);
    let client = connect(&masters, 30 * SEC).await;
    let name = "refused";
    // Someone else holds the lock on the third master only.
    let _: i64 = masters[2].cmd(&["HSET", name, "stranger:1", "1"]);
    let _: i64 = masters[2].cmd(&["PEXPIRE", name, "60000"]);
    let lock = client.fair_lock(name);
    let g = lock.lock().await.unwrap();
    // It queued on the third master while trying; it must not stay there, or it would
    // block that master's queue for the stale timeout once the stranger is gone.
    assert!(
        eventually_async(5 * SEC, || queue(&masters[2], name).is_empty()).await,
        "{:?}",
        queue(&masters[2], name)
    );
    g.unlock().await.unwrap();
    let _: i64 = masters[2].cmd(&["DEL", name]);
    assert_nothing_left(&masters).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_and_cancelled_waiters_leave_the_queue_on_every_master() {
    let masters = start_many(3);
    let client = connect(&masters, 30 * SEC).await;
    let name = "gave-up";
    let lock = client.fair_lock(name);
    let held = lock.lock_with_lease(20 * SEC).await.unwrap();
    let l = lock.clone();
    let timed = tokio::spawn(async move { l.try_lock(Duration::from_millis(300)).await });
    assert!(join(timed, 5 * SEC).await.unwrap().is_none());
    // The timed-out waiter sent its leave to every master before returning, but waited
    // for each answer at most the master timeout (250 ms): a loaded master answers
    // later and runs the leave then. So the queues are empty once every master ran it,
    // not necessarily when try_lock returns; 5 s bounds that, well short of the 30 s
    // stale timeout by which an entry left behind would only lapse.
    let left = || masters.iter().all(|m| queue(m, name).is_empty());
    assert!(
        eventually_async(5 * SEC, left).await,
        "the timed-out waiter is still queued: {:?}",
        masters.iter().map(|m| queue(m, name)).collect::<Vec<_>>()
    );
    let (holder, task) = spawn_lock(&lock);
    let queued = || masters.iter().all(|m| queue(m, name) == [holder.clone()]);
    assert!(eventually_async(5 * SEC, queued).await);
    task.abort();
    let gone = || masters.iter().all(|m| queue(m, name).is_empty());
    assert!(eventually_async(5 * SEC, gone).await);
    held.unlock().await.unwrap();
    assert_nothing_left(&masters).await;
}

/// Three waiters queued in a different order on each master, so each master's head is
/// another waiter: X Y Z, Y Z X, Z X Y. Nobody can win a majority as queued; the split
/// rounds must still resolve, and every waiter gets the lock in reasonable time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_vote_from_opposite_queue_orders_resolves_for_every_waiter() {
    let masters = start_many(3);
    let client = connect(&masters, 30 * SEC).await;
    let name = "rotation";
    let lock = client.fair_lock(name);
    let held = lock.lock_with_lease(20 * SEC).await.unwrap();
    // One waiter per client: under Redlock a client queues one waiter per name on the
    // masters at a time (its other tasks wait at its local gate).
    let mut clients = Vec::new();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let c = connect(&masters, 30 * SEC).await;
        let (holder, task) = spawn_lock(&c.fair_lock(name));
        clients.push(c);
        let channel = format!("redisson_lock__channel:{{{name}}}:{holder}");
        let ready = || {
            masters
                .iter()
                .all(|m| queue(m, name).last() == Some(&holder) && numsub(m, &channel) == 1)
        };
        assert!(eventually_async(5 * SEC, ready).await);
        waiters.push((holder, task));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ids: Vec<&str> = waiters.iter().map(|w| w.0.as_str()).collect();
    for (i, master) in masters.iter().enumerate() {
        let mut args = vec!["RPUSH", "scratch"];
        args.extend((0..3).map(|k| ids[(i + k) % 3]));
        let _: i64 = master.cmd(&args);
        let _: () = master.cmd(&["RENAME", "scratch", &queue_key(name)]);
        assert_eq!(
            queue(master, name)[0],
            ids[i],
            "master {i} has its own head"
        );
    }
    let started = Instant::now();
    held.unlock().await.unwrap();
    let unlocked: Vec<_> = waiters
        .into_iter()
        .map(|(_, task)| tokio::spawn(async move { task.await.unwrap().unlock().await }))
        .collect();
    for task in unlocked {
        join(task, 20 * SEC).await.unwrap();
    }
    eprintln!("three split waiters served in {:?}", started.elapsed());
    assert_nothing_left(&masters).await;
}

/// 8 tasks over 4 clients, 3 acquisitions each, against 3 masters. Mutual exclusion is
/// checked twice: an in-process flag and a read-modify-write counter on a fourth,
/// independent redis-server that only the holder touches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_contending_tasks_all_acquire_in_turn_over_three_masters() {
    const TASKS: usize = 8;
    const ROUNDS: usize = 3;
    let masters = start_many(3);
    let counter = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(connect(&masters, 5 * SEC).await);
    }
    let name = "contended";
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let lock = clients[t % clients.len()].fair_lock(name);
        let inside = inside.clone();
        let mut store = counter.conn();
        tasks.push(tokio::spawn(async move {
            let mut longest = Duration::ZERO;
            for _ in 0..ROUNDS {
                let asked = Instant::now();
                let g = lock.lock().await.unwrap();
                longest = longest.max(asked.elapsed());
                assert!(!inside.swap(true, SeqCst), "two holders at once");
                let n: i64 = redis::cmd("GET").arg("n").query(&mut store).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(5)).await;
                let _: () = redis::cmd("SET")
                    .arg("n")
                    .arg(n + 1)
                    .query(&mut store)
                    .unwrap();
                inside.store(false, SeqCst);
                g.unlock().await.unwrap();
            }
            longest
        }));
    }
    let mut longest = Duration::ZERO;
    for task in tasks {
        longest = longest.max(join(task, 40 * SEC).await);
    }
    eprintln!("longest wait for one acquisition: {longest:?}");
    // 7 others ahead at most, each holding ~10 ms; a waiter that keeps losing split
    // rounds would blow far past this.
    assert!(longest < 10 * SEC, "a waiter starved for {longest:?}");
    let total = (TASKS * ROUNDS) as i64;
    assert_eq!(counter.cmd::<i64>(&["GET", "n"]), total, "lost updates");
    assert_nothing_left(&masters).await;
}

/// Under Redlock, the tasks of one client pass the local gate one at a time: only one
/// of them is queued on the masters, and they acquire in the order they arrived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_redlock_a_client_queues_one_waiter_per_name_and_keeps_their_order() {
    let masters = start_many(3);
    let client = connect(&masters, 30 * SEC).await;
    let name = "local-order";
    let held = client.fair_lock(name).lock().await.unwrap();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (lock, order) = (client.fair_lock(name), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            order.lock().push(i);
            g.unlock().await.unwrap();
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let one_queued = || masters.iter().all(|m| queue(m, name).len() == 1);
    assert!(eventually_async(5 * SEC, one_queued).await);
    held.unlock().await.unwrap();
    for t in tasks {
        join(t, 10 * SEC).await;
    }
    assert_eq!(*order.lock(), vec![0, 1, 2, 3]);
    assert_nothing_left(&masters).await;
}
