//! Fair (FIFO) lock on one master (issue 4): arrival order, one wake-up per release,
//! no stuck queue (cancelled, timed-out and crashed waiters), queue keys that do not leak.
//! Force-unlock, leases, queries and plain/fair mixes are in fair_api.rs; Redlock in
//! fair_redlock.rs.

use redlatch_testkit as common;

use common::fair::*;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

async fn connect(server: &RedisServer, stale: Duration) -> Client {
    let config = Config::single(server.url()).fair_stale_timeout(stale);
    Client::connect(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_waiters_queued_one_after_another_acquire_in_exactly_that_order() {
    let server = RedisServer::start();
    let clients = [
        connect(&server, 5 * SEC).await,
        connect(&server, 5 * SEC).await,
    ];
    let name = "fifo";
    let first = clients[0].fair_lock(name);
    let held = first.lock().await.unwrap();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (mut holders, mut tasks) = (Vec::new(), Vec::new());
    for i in 0..20 {
        let (lock, holder) = owned(&clients[i % 2].fair_lock(name));
        let order = order.clone();
        let task = tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            order.lock().push(i);
            // Re-entering (the same owner) never queues, even with others waiting.
            let again = lock.try_lock(Duration::ZERO).await.unwrap().unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 2);
            again.unlock().await.unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 1);
            g.unlock().await.unwrap();
        });
        wait_queued(&server, name, &holder).await;
        holders.push(holder);
        tasks.push(task);
    }
    assert_eq!(queue(&server, name), holders);
    assert_eq!(zcard(&server, name), 20);
    // The holder re-enters past the 20 waiters.
    let nested = held.scope(first.lock()).await.unwrap();
    assert_eq!(first.hold_count().await.unwrap(), 2);
    nested.unlock().await.unwrap();
    assert!(order.lock().is_empty());
    held.unlock().await.unwrap();
    for task in tasks {
        join(task, 20 * SEC).await;
    }
    assert_eq!(*order.lock(), (0..20).collect::<Vec<_>>());
    assert_eq!(dbsize(&server), 0, "queue keys left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_lock_without_wait_stays_out_of_the_queue_and_a_timed_out_one_leaves_at_once() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "try";
    let lock = client.fair_lock(name);
    let held = lock.lock().await.unwrap();
    let other = lock.clone();
    let once = tokio::spawn(async move { other.try_lock(Duration::ZERO).await.unwrap() });
    assert!(join(once, 5 * SEC).await.is_none());
    assert_eq!(dbsize(&server), 1, "only the lock itself: nobody queued");

    let (first, waiter) = spawn_lock(&lock);
    wait_queued(&server, name, &first).await;
    let (other, me) = owned(&lock);
    let timed = tokio::spawn(async move {
        let started = Instant::now();
        let got = other.try_lock(Duration::from_millis(700)).await.unwrap();
        (got.is_none(), started.elapsed())
    });
    wait_queued(&server, name, &me).await;
    assert_eq!(queue(&server, name), [first.clone(), me.clone()]);
    let (gave_up, waited) = join(timed, 10 * SEC).await;
    assert!(gave_up);
    assert!(
        waited >= Duration::from_millis(700) && waited < 5 * SEC,
        "{waited:?}"
    );
    // No `eventually`: the entry is gone when try_lock returns.
    assert_eq!(queue(&server, name), [first.as_str()]);
    assert_eq!(zcard(&server, name), 1);
    let channel = waiter_channel(name, &me);
    assert!(eventually_async(5 * SEC, || numsub(&server, &channel) == 0).await);

    held.unlock().await.unwrap();
    join(waiter, 5 * SEC).await.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0);
}

/// (pub/sub connections, channels they subscribe to) from `CLIENT LIST TYPE pubsub`.
/// Pub/sub connections and their waiters' subscriptions: each client's own notice
/// channel (one per client, for its life) is not a waiter's.
fn pubsub_connections(server: &RedisServer) -> (usize, usize) {
    let list: String = server.cmd(&["CLIENT", "LIST", "TYPE", "pubsub"]);
    let subs: usize = list
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("sub="))
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    let notices: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", "redlatch_client__channel:*"]);
    (list.lines().count(), subs.saturating_sub(notices.len()))
}

/// Each lock() that has to wait runs the acquire script twice before it sleeps: once to
/// join the queue and once more after subscribing (SPEC §6: subscribe, then re-try, so a
/// release in between is not missed). What a release costs is the rest: the woken head's
/// one call. We allow 1.6 per acquisition for a stray wake-up or a deadline refresh on a
/// loaded machine; a thundering herd (every waiter re-trying on every release) would cost
/// about 16 (half of the 32 waiters on average), and even a herd of 2 would fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_waiters_cost_one_wake_up_per_acquisition_over_one_pubsub_connection_each() {
    const CLIENTS: usize = 4;
    const TASKS: usize = 32;
    const TOTAL: usize = 200;
    let server = RedisServer::start();
    // A 30 s stale timeout: no deadline refresh (every 10 s) during the test.
    let owner = connect(&server, 30 * SEC).await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(connect(&server, 30 * SEC).await);
    }
    // Load the scripts, so no NOSCRIPT round trip is counted.
    let warm = owner.fair_lock("warm-up");
    warm.lock_with_lease(5 * SEC)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let name = "herd";
    let held = owner
        .fair_lock(name)
        .lock_with_lease(20 * SEC)
        .await
        .unwrap();
    let before = calls(&server, "evalsha");
    let (slots, inside) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let lock = clients[t % CLIENTS].fair_lock(name);
        let (slots, inside) = (slots.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = 0;
            while slots.fetch_add(1, SeqCst) < TOTAL {
                let g = lock.lock_with_lease(20 * SEC).await.unwrap();
                assert!(!inside.swap(true, SeqCst), "two holders at once");
                tokio::task::yield_now().await;
                inside.store(false, SeqCst);
                g.unlock().await.unwrap();
                mine += 1;
            }
            mine
        }));
    }
    let all_listening = || pubsub_connections(&server).1 == TASKS;
    assert!(eventually_async(10 * SEC, all_listening).await);
    assert_eq!(queue(&server, name).len(), TASKS);
    let (connections, _) = pubsub_connections(&server);
    // The owner listens too (its notice channel), on a connection of its own.
    assert_eq!(
        connections,
        CLIENTS + 1,
        "one shared pub/sub connection per client"
    );
    for c in &clients {
        assert_eq!(c.subscriptions(), TASKS / CLIENTS);
    }
    held.unlock().await.unwrap();
    let mut done = 0;
    for task in tasks {
        done += join(task, 30 * SEC).await;
    }
    assert_eq!(done, TOTAL);
    // Fair acquire and release scripts are one EVALSHA each; 201 releases ran.
    let releases = TOTAL as i64 + 1;
    let acquires = (calls(&server, "evalsha") - before) as i64 - releases;
    let wake_ups = (acquires as f64 - 2.0 * TOTAL as f64) / TOTAL as f64;
    eprintln!("{acquires} acquire calls for {TOTAL} acquisitions: {wake_ups:.2} wake-ups each");
    assert!(
        wake_ups <= 1.6,
        "{wake_ups:.2} acquire calls per acquisition after queueing"
    );
    assert!(pubsub_connections(&server).0 <= CLIENTS + 1);
    assert!(eventually_async(5 * SEC, || dbsize(&server) == 0).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_waiters_leave_the_queue_at_once_and_those_behind_move_up() {
    let server = RedisServer::start();
    // 30 s: only the waiter's own clean-up can explain a prompt removal.
    let client = connect(&server, 30 * SEC).await;
    let name = "cancel";
    let lock = client.fair_lock(name);
    let held = lock.lock_with_lease(20 * SEC).await.unwrap();
    let [(a, task_a), (b, task_b)] = queue_two(&server, &lock, name).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (l, c) = owned(&lock);
    let task_c = tokio::spawn(async move {
        tokio::select! {
            g = l.lock() => Some(g.unwrap()),
            _ = stopped => None, // drops the lock() future mid-wait
        }
    });
    wait_queued(&server, name, &c).await;
    let (d, task_d) = spawn_lock(&lock);
    wait_queued(&server, name, &d).await;

    task_b.abort();
    let moved_up = || queue(&server, name) == [a.clone(), c.clone(), d.clone()];
    assert!(
        eventually_async(5 * SEC, moved_up).await,
        "{:?}",
        queue(&server, name)
    );
    assert!(eventually_async(5 * SEC, || numsub(&server, &waiter_channel(name, &b)) == 0).await);
    stop.send(()).unwrap();
    assert!(join(task_c, 5 * SEC).await.is_none());
    let moved_up = || queue(&server, name) == [a.clone(), d.clone()];
    assert!(
        eventually_async(5 * SEC, moved_up).await,
        "{:?}",
        queue(&server, name)
    );
    assert!(eventually_async(5 * SEC, || numsub(&server, &waiter_channel(name, &c)) == 0).await);
    assert_eq!(zcard(&server, name), 2);

    held.unlock().await.unwrap();
    let ga = join(task_a, 5 * SEC).await;
    assert_eq!(queue(&server, name), [d.as_str()]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!task_d.is_finished(), "d waits for a");
    ga.unlock().await.unwrap();
    join(task_d, 5 * SEC).await.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0, "queue keys left behind");
    assert!(eventually_async(5 * SEC, || client.subscriptions() == 0).await);
}

/// Set by the parent test: the URL of the server the helper process queues on.
const HELPER_ENV: &str = "REDLATCH_FAIR_KILLED_WAITER_URL";
const KILLED_NAME: &str = "killed";

/// Not a test of its own: run by `a_waiter_process_killed_while_queued...` as a separate
/// process that queues for the lock, prints `QUEUED <holder>` and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helper_process_queued_waiter() {
    let Ok(url) = std::env::var(HELPER_ENV) else {
        return;
    };
    let config = Config::single(url.clone()).fair_stale_timeout(SEC);
    let client = Client::connect(config).await.unwrap();
    let (lock, holder) = owned(&client.fair_lock(KILLED_NAME));
    let _waiting = tokio::spawn(async move { lock.lock().await.map(drop) });
    let mut conn = common::conn::async_conn(url.as_str()).await;
    for _ in 0..500 {
        let q: Vec<String> = redis::cmd("LRANGE")
            .arg(queue_key(KILLED_NAME))
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        if q.contains(&holder) {
            println!("QUEUED {holder}");
            // The parent kills us long before this runs out.
            tokio::time::sleep(30 * SEC).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never queued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_process_killed_while_queued_is_passed_over_after_its_stale_timeout() {
    let server = RedisServer::start();
    // This process uses the default 5 s stale timeout; the helper's is 1 s.
    let client = connect(&server, 5 * SEC).await;
    let lock = client.fair_lock(KILLED_NAME);
    let held = lock.lock().await.unwrap();
    let (mut child, dead) = queued_helper(
        &redlatch_testkit::test_name!("helper_process_queued_waiter"),
        (HELPER_ENV, server.url()),
    )
    .await;
    let (next, task) = spawn_lock(&lock);
    wait_queued(&server, KILLED_NAME, &next).await;
    assert_eq!(queue(&server, KILLED_NAME), [dead.clone(), next.clone()]);

    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    held.unlock().await.unwrap();
    let released = Instant::now();
    let g = join(task, 10 * SEC).await;
    // The dead entry lasts at most 1 s; the live waiter notices at its next deadline
    // refresh (every 5 s / 3) at worst. 4 s of margin for a loaded machine.
    let waited = released.elapsed();
    assert!(waited < SEC + 5 * SEC / 3 + 4 * SEC, "{waited:?}");
    assert!(!queue(&server, KILLED_NAME).contains(&dead));
    g.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0, "queue keys left behind");
}

/// Milliseconds on the server's clock (the clock the queue deadlines use).
fn server_ms(server: &RedisServer) -> u64 {
    let t: Vec<String> = server.cmd(&["TIME"]);
    t[0].parse::<u64>().unwrap() * 1000 + t[1].parse::<u64>().unwrap() / 1000
}

#[tokio::test]
async fn entries_left_by_crashed_clients_are_evicted_and_never_hold_the_lock_back_long() {
    let server = RedisServer::start();
    let client = connect(&server, Duration::from_millis(600)).await;
    let name = "ghosts";
    let lock = client.fair_lock(name);
    // A Redisson client that died mid-wait: its deadline runs out in 1.5 s. Another one
    // left a list entry without a deadline: it is dropped as soon as it is examined.
    let deadline = (server_ms(&server) + 1500).to_string();
    let _: i64 = server.cmd(&["RPUSH", &queue_key(name), "no-deadline:1", "ghost:1"]);
    let _: i64 = server.cmd(&["ZADD", &timeout_key(name), &deadline, "ghost:1"]);
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert_eq!(
        queue(&server, name),
        ["ghost:1"],
        "a live head keeps its turn"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0, "nobody barged in");
    let started = Instant::now();
    let g = lock.try_lock(10 * SEC).await.unwrap().expect("acquired");
    let waited = started.elapsed();
    // Not before the ghost's deadline, on the server's clock (the time since `started`
    // is no measure: a loaded machine may have spent some of the 1.5 s before it)...
    let now = server_ms(&server);
    let deadline: u64 = deadline.parse().unwrap();
    assert!(now >= deadline, "acquired {} ms early", deadline - now);
    // ...and soon after it: one refresh period (200 ms) and a loaded machine's margin.
    assert!(waited < 6 * SEC, "{waited:?}");
    g.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_stale_timeout_does_not_cut_short_the_queue_of_longer_waiting_clients() {
    let server = RedisServer::start();
    let name = "mixed-stale";
    let owner = connect(&server, 5 * SEC).await;
    let patient = connect(&server, 30 * SEC).await;
    let hasty = connect(&server, Duration::from_millis(300)).await;
    let held = owner.fair_lock(name).lock().await.unwrap();
    let (first, task) = spawn_lock(&patient.fair_lock(name));
    wait_queued(&server, name, &first).await;
    let hasty = hasty.fair_lock(name);
    assert!(hasty
        .try_lock(Duration::from_millis(500))
        .await
        .unwrap()
        .is_none());
    // The hasty client refreshed the queue keys with its own 300 ms timeout last.
    tokio::time::sleep(SEC).await;
    assert_eq!(
        queue(&server, name),
        [first.as_str()],
        "the patient waiter lost its place"
    );
    held.unlock().await.unwrap();
    let released = Instant::now();
    let g = join(task, 15 * SEC).await;
    // Woken by the release, not by its own refresh 10 s later.
    assert!(released.elapsed() < 5 * SEC, "{:?}", released.elapsed());
    g.unlock().await.unwrap();
    assert_eq!(dbsize(&server), 0);
}
