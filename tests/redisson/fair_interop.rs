//! The fair lock on Redisson's wire (issue 13): Java waiters (Redisson's current
//! RFairLock scripts, driven as a Java client drives them: redlatch-testkit/src/redisson.rs) and
//! redlatch waiters in one queue keep strict FIFO order; nobody live is evicted or left
//! asleep while the lock is free; give-ups, cancellations and dead waiters of both kinds.

use redlatch_testkit as common;

use common::fair::*;
use common::redisson::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{eventually_async, RedisServer};
use redlatch::{Client, Config, Lock};
use tokio::task::JoinHandle;

mod redlock;

/// Who got the lock, in order.
type Log = Arc<parking_lot::Mutex<Vec<String>>>;

/// How long each waiter holds the lock once it has it.
const HOLD: Duration = Duration::from_millis(100);

async fn connect(server: &RedisServer, stale: Duration) -> Client {
    let config = Config::single(server.url()).fair_stale_timeout(stale);
    Client::connect(config).await.unwrap()
}

/// Java thread `thread` holding `name` with a 60 s lease (no watchdog): only a message
/// can wake a waiter before that.
async fn java_holder(server: &RedisServer, name: &str, thread: u64) -> JavaFairLock {
    let mut j = JavaFairLock::with(server, name, thread, THREAD_WAIT, 60 * SEC).await;
    assert_eq!(j.try_acquire(None).await, None, "the lock must be free");
    j
}

/// A Java thread waiting in `lock()`; once it has the lock it logs itself, holds it for
/// `HOLD` and unlocks. Returns once it is queued at the tail and subscribed.
async fn java_waiter(
    server: &RedisServer,
    name: &str,
    thread: u64,
    log: &Log,
) -> (String, JoinHandle<()>) {
    let mut j = JavaFairLock::new(server, name, thread).await;
    let holder = j.holder().to_string();
    let (log, me) = (log.clone(), holder.clone());
    let task = tokio::spawn(async move {
        j.lock().await;
        log.lock().push(me);
        tokio::time::sleep(HOLD).await;
        assert_eq!(j.unlock().await, Some(1), "released");
    });
    wait_queued(server, name, &holder).await;
    (holder, task)
}

/// A redlatch task waiting in `lock()`, logging, holding and unlocking as
/// [`java_waiter`]. Returns once it is queued at the tail and subscribed.
async fn rust_waiter(server: &RedisServer, lock: &Lock, log: &Log) -> (String, JoinHandle<()>) {
    let ((l, holder), log) = (owned(lock), log.clone());
    let task = tokio::spawn(async move {
        let g = l.lock().await.unwrap();
        log.lock().push(g.holder().to_string());
        tokio::time::sleep(HOLD).await;
        g.unlock().await.unwrap();
    });
    wait_queued(server, lock.name(), &holder).await;
    (holder, task)
}

/// Sleeps until `margin` before `deadline` (ms on the system clock, as Redisson's
/// queue deadlines) and returns true; false at once if that moment has passed (a
/// loaded machine got there late: there is nothing left to check before it).
async fn until_just_before(deadline: f64, margin: Duration) -> bool {
    let at = (deadline as u64).saturating_sub(margin.as_millis() as u64);
    let now = java_now_ms();
    if now >= at {
        eprintln!("{} ms past the moment to check: not checked", now - at);
        return false;
    }
    tokio::time::sleep(Duration::from_millis(at - now)).await;
    true
}

async fn join_all(tasks: Vec<JoinHandle<()>>, within: Duration) {
    let deadline = Instant::now() + within;
    for task in tasks {
        let left = deadline.saturating_duration_since(Instant::now());
        join(task, left).await;
    }
}

/// Everything gone once every waiter is through (the unlock latches are deleted by
/// the Java driver, the queue keys by the last one to leave).
async fn assert_clean(server: &RedisServer) {
    assert!(
        eventually_async(5 * SEC, || dbsize(server) == 0).await,
        "left behind: {:?}",
        server.lock_keys("*")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_java_and_redlatch_waiters_queued_alternately_are_served_in_exactly_that_order() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "mixed-fifo";
    let lock = client.fair_lock(name);
    let log = Log::default();
    let mut holder = java_holder(&server, name, 1).await;
    let (mut expected, mut tasks) = (Vec::new(), Vec::new());
    for i in 0..6 {
        let (h, task) = if i % 2 == 0 {
            java_waiter(&server, name, 10 + i, &log).await
        } else {
            rust_waiter(&server, &lock, &log).await
        };
        expected.push(h);
        tasks.push(task);
    }
    assert_eq!(queue(&server, name), expected);
    assert_eq!(holder.unlock().await, Some(1));
    join_all(tasks, 20 * SEC).await;
    assert_eq!(*log.lock(), expected);
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_waiter_behind_a_redlatch_waiter_keeps_its_place_across_several_java_acquires() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "java-behind-rust";
    let lock = client.fair_lock(name);
    let log = Log::default();
    let mut holder = java_holder(&server, name, 1).await;
    let (mut expected, mut tasks) = (Vec::new(), Vec::new());
    for thread in [10, 11, 12] {
        let (h, task) = java_waiter(&server, name, thread, &log).await;
        expected.push(h);
        tasks.push(task);
    }
    let (ours, task) = rust_waiter(&server, &lock, &log).await;
    expected.push(ours.clone());
    tasks.push(task);
    let (last, task) = java_waiter(&server, name, 13, &log).await;
    expected.push(last.clone());
    tasks.push(task);
    assert_eq!(holder.unlock().await, Some(1));
    // Three Java acquisitions, each taking threadWaitTime off every deadline: both
    // stay queued, in order, until their turn.
    let three_served = || log.lock().len() >= 3;
    assert!(eventually_async(10 * SEC, three_served).await);
    let q = queue(&server, name);
    assert!(
        q == [ours.clone(), last.clone()] || q == [last.clone()],
        "lost a place: {q:?} after {:?}",
        log.lock()
    );
    join_all(tasks, 20 * SEC).await;
    assert_eq!(*log.lock(), expected);
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_unlock_wakes_the_redlatch_waiter_behind_and_a_redlatch_unlock_the_java_one() {
    let server = RedisServer::start();
    // Deadline refresh every 10 s: only the unlock message explains a quick turn.
    let client = connect(&server, 30 * SEC).await;
    let name = "wake-both-ways";
    let lock = client.fair_lock(name);
    let mut holder = java_holder(&server, name, 1).await;
    let (ours, task) = spawn_lock(&lock);
    wait_queued(&server, name, &ours).await;
    let log = Log::default();
    let (java, java_task) = java_waiter(&server, name, 2, &log).await;
    assert_eq!(queue(&server, name), [ours, java.clone()]);
    let released = Instant::now();
    assert_eq!(holder.unlock().await, Some(1));
    let g = join(task, 10 * SEC).await;
    assert!(released.elapsed() < 5 * SEC, "{:?}", released.elapsed());
    // The Java thread sleeps up to the 30 s it was told; our release wakes it.
    tokio::time::sleep(HOLD).await;
    let released = Instant::now();
    g.unlock().await.unwrap();
    join(java_task, 10 * SEC).await;
    assert!(released.elapsed() < 5 * SEC, "{:?}", released.elapsed());
    assert_eq!(*log.lock(), [java]);
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_waiter_that_gives_up_ahead_of_a_redlatch_waiter_leaves_it_its_place() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "java-gives-up";
    let lock = client.fair_lock(name);
    let log = Log::default();
    let mut holder = java_holder(&server, name, 1).await;
    // tryLock(6 s): it queues with a 6 s wait and gives those 6 s back to everyone
    // behind it when it gives up (Redisson's failed-acquire script).
    let mut quitter = JavaFairLock::new(&server, name, 2).await;
    let quitter_id = quitter.holder().to_string();
    let gave_up = tokio::spawn(async move { !quitter.try_lock(6 * SEC).await });
    wait_queued(&server, name, &quitter_id).await;
    let (ours, task) = rust_waiter(&server, &lock, &log).await;
    let (java, java_task) = java_waiter(&server, name, 3, &log).await;
    assert!(
        join(gave_up, 15 * SEC).await,
        "the lock was held throughout"
    );
    // Our waiter refreshes its entry meanwhile (every 5 s / 3).
    tokio::time::sleep(2 * SEC).await;
    assert_eq!(queue(&server, name), [ours.clone(), java.clone()]);
    assert_eq!(holder.unlock().await, Some(1));
    join_all(vec![task, java_task], 15 * SEC).await;
    assert_eq!(*log.lock(), [ours, java]);
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlatch_waiters_that_give_up_or_are_cancelled_strand_no_java_waiter() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "rust-gives-up";
    let lock = client.fair_lock(name);
    let log = Log::default();
    let mut holder = java_holder(&server, name, 1).await;
    let (j1, t1) = java_waiter(&server, name, 10, &log).await;
    // A redlatch waiter that will be cancelled, and one whose try_lock runs out.
    let (cancelled, doomed) = spawn_lock(&lock);
    wait_queued(&server, name, &cancelled).await;
    let (l, timed_id) = owned(&lock);
    let timed = tokio::spawn(async move { l.try_lock(SEC).await.unwrap().is_none() });
    wait_queued(&server, name, &timed_id).await;
    let (j2, t2) = java_waiter(&server, name, 11, &log).await;
    let (r2, t3) = rust_waiter(&server, &lock, &log).await;
    let (j3, t4) = java_waiter(&server, name, 12, &log).await;
    doomed.abort();
    assert!(join(timed, 10 * SEC).await, "the lock was held throughout");
    let left = || queue(&server, name) == [j1.clone(), j2.clone(), r2.clone(), j3.clone()];
    assert!(
        eventually_async(5 * SEC, left).await,
        "{:?}",
        queue(&server, name)
    );
    assert_eq!(holder.unlock().await, Some(1));
    join_all(vec![t1, t2, t3, t4], 20 * SEC).await;
    assert_eq!(*log.lock(), [j1, j2, r2, j3]);
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_java_waiter_keeps_its_turn_until_its_redisson_deadline_and_no_longer() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "dead-java";
    let lock = client.fair_lock(name);
    let log = Log::default();
    // The holder's lease runs out in 3 s; the dead thread's threadWaitTime is 3 s, so
    // its Redisson deadline is about 6 s away (lock PTTL + threadWaitTime).
    let mut holder = JavaFairLock::with(&server, name, 1, THREAD_WAIT, 3 * SEC).await;
    assert_eq!(holder.try_acquire(None).await, None);
    let dead = JavaFairLock::with(&server, name, 2, 3 * SEC, 3 * SEC).await;
    let dead_id = dead.holder().to_string();
    dead.queue_and_die().await;
    let deadline: f64 = server.cmd(&["ZSCORE", &timeout_key(name), &dead_id]);
    let (ours, task) = rust_waiter(&server, &lock, &log).await;
    let (java, java_task) = java_waiter(&server, name, 3, &log).await;
    // Not asserted: its lease may have run out on a slow machine.
    holder.unlock().await;
    // Nobody takes the dead thread's turn before its deadline (checked just before
    // it, not a fixed time after the unlock: that could fall past it)...
    if until_just_before(deadline, Duration::from_millis(300)).await {
        assert!(log.lock().is_empty(), "{:?}", log.lock());
        assert_eq!(queue(&server, name)[0], dead_id);
    }
    // ...and once it passed, the live waiters behind it go in order, soon: within a
    // refresh period (5 s / 3) of the deadline, with a loaded machine's margin.
    join_all(vec![task, java_task], 15 * SEC).await;
    let late = java_now_ms() as f64 - deadline;
    assert!(
        late < (5_000 / 3 + 4_000) as f64,
        "served {late} ms after the deadline"
    );
    assert_eq!(*log.lock(), [ours, java]);
    assert_clean(&server).await;
}

/// Set by the parent test: the URLs of the masters the helper process queues on.
const HELPER_ENV: &str = "REDLATCH_FAIR_INTEROP_DEAD_URLS";

/// Not a test of its own: run by the dead-redlatch-waiter tests as a separate process
/// that queues (stale timeout 1 s, the given wait time), prints `QUEUED <holder>` and
/// waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helper_process_queued_redlatch_waiter() {
    let Ok(urls) = std::env::var(HELPER_ENV) else {
        return;
    };
    let mut words = urls.split(' ');
    let (name, wait_ms, urls) = (
        words.next().unwrap(),
        words.next().unwrap(),
        words.next().unwrap(),
    );
    let wait = Duration::from_millis(wait_ms.parse().unwrap());
    let urls: Vec<String> = urls.split(',').map(String::from).collect();
    let config = if urls.len() == 1 {
        Config::single(urls[0].clone())
    } else {
        Config::redlock(urls.clone())
    };
    let config = config.fair_stale_timeout(SEC).fair_wait_time(wait);
    let client = Client::connect(config).await.unwrap();
    let (lock, holder) = owned(&client.fair_lock(name));
    let _waiting = tokio::spawn(async move { lock.lock().await.map(drop) });
    let mut conns: Vec<redis::Connection> = urls
        .iter()
        .map(|u| common::conn::sync_conn(u.as_str()))
        .collect();
    for _ in 0..500 {
        let everywhere = conns.iter_mut().all(|c| {
            let q: Vec<String> = redis::cmd("LRANGE")
                .arg(queue_key(name))
                .arg(0)
                .arg(-1)
                .query(c)
                .unwrap();
            q.contains(&holder)
        });
        if everywhere {
            println!("QUEUED {holder}");
            // The parent kills us long before this runs out.
            tokio::time::sleep(60 * SEC).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never queued");
}

/// Starts the helper process queued on `name` on `masters` with wait time `wait`;
/// returns it and its holder.
async fn dead_redlatch_waiter(
    masters: &[&RedisServer],
    name: &str,
    wait: Duration,
) -> (tokio::process::Child, String) {
    let urls: Vec<String> = masters.iter().map(|m| m.url()).collect();
    let env = format!("{name} {} {}", wait.as_millis(), urls.join(","));
    queued_helper(
        &redlatch_testkit::test_name!("helper_process_queued_redlatch_waiter"),
        (HELPER_ENV, env),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redlatch_waiter_is_passed_over_soon_and_the_java_waiter_behind_is_woken() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "dead-rust";
    let lock = client.fair_lock(name);
    let log = Log::default();
    let mut holder = java_holder(&server, name, 1).await;
    let (mut child, dead) = dead_redlatch_waiter(&[&server], name, THREAD_WAIT).await;
    let (j1, t1) = java_waiter(&server, name, 10, &log).await;
    let (r1, t2) = rust_waiter(&server, &lock, &log).await;
    let (j2, t3) = java_waiter(&server, name, 11, &log).await;
    assert_eq!(queue(&server, name), [dead.as_str(), &j1, &r1, &j2]);
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    let released = Instant::now();
    assert_eq!(holder.unlock().await, Some(1));
    // The dead entry's liveness lapses after 1 s; our live waiter notices at its next
    // refresh (every 5 s / 3) and wakes the Java thread, which slept on a 60 s bound.
    let first_served = || !log.lock().is_empty();
    assert!(eventually_async(10 * SEC, first_served).await);
    let waited = released.elapsed();
    assert!(waited < SEC + 5 * SEC / 3 + 4 * SEC, "{waited:?}");
    join_all(vec![t1, t2, t3], 20 * SEC).await;
    assert_eq!(*log.lock(), [j1, r1, j2]);
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_only_java_waiters_left_a_dead_redlatch_waiter_goes_at_its_redisson_deadline() {
    let server = RedisServer::start();
    let name = "dead-rust-java-only";
    // The holder's lease is 3 s and the dead waiter's wait time 5 s: its deadline, as
    // Redisson reads it, is at most 3 s + 5 s after its last refresh.
    let mut holder = JavaFairLock::with(&server, name, 1, THREAD_WAIT, 3 * SEC).await;
    assert_eq!(holder.try_acquire(None).await, None);
    let (mut child, dead) = dead_redlatch_waiter(&[&server], name, 5 * SEC).await;
    let log = Log::default();
    let (java, task) = java_waiter(&server, name, 10, &log).await;
    assert_eq!(queue(&server, name), [dead, java.clone()]);
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let killed = Instant::now();
    // Not asserted: its lease may have run out on a slow machine.
    holder.unlock().await;
    // No redlatch client is left to see that its liveness lapsed: Redisson's scripts
    // evict it when its deadline passes, and the Java thread goes next.
    join(task, 20 * SEC).await;
    let waited = killed.elapsed();
    assert!(waited < 3 * SEC + 5 * SEC + 5 * SEC, "{waited:?}");
    assert_eq!(*log.lock(), [java]);
    // Its liveness entry expires on its own.
    assert_clean(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_queue_entries_follow_redissons_deadline_arithmetic() {
    let server = RedisServer::start();
    let client = connect(&server, 5 * SEC).await;
    let name = "arithmetic";
    let lock = client.fair_lock(name);
    let mut holder = java_holder(&server, name, 1).await;
    let score = |h: &str| -> f64 { server.cmd(&["ZSCORE", &timeout_key(name), h]) };
    let mut j1 = JavaFairLock::new(&server, name, 10).await;
    assert!(j1.try_acquire(None).await.is_some());
    let (ours, task) = spawn_lock(&lock);
    wait_queued(&server, name, &ours).await;
    let mut j2 = JavaFairLock::new(&server, name, 11).await;
    assert!(j2.try_acquire(None).await.is_some());
    let wait_ms = THREAD_WAIT.as_millis() as f64;
    // Behind a Java entry, ours lies at least threadWaitTime later, so that entry's
    // acquisition (which takes threadWaitTime off everyone) leaves ours in the future.
    let gap = score(&ours) - score(j1.holder());
    assert!(gap >= wait_ms, "{gap}");
    assert_eq!(score(j2.holder()) - score(&ours), wait_ms);
    assert_eq!(holder.unlock().await, Some(1));
    let before = score(&ours);
    assert_eq!(j1.try_acquire(None).await, None, "j1 is the head");
    assert_eq!(score(&ours), before - wait_ms);
    assert!(score(&ours) > java_now_ms() as f64 + 60_000.0);
    assert_eq!(j1.unlock().await, Some(1));
    let g = join(task, 10 * SEC).await;
    // Our acquisition takes the same threadWaitTime off those behind.
    assert_eq!(
        score(j2.holder()) - (before - wait_ms),
        wait_ms - wait_ms,
        "j2 must lie exactly where Redisson would put it"
    );
    g.unlock().await.unwrap();
    assert_eq!(j2.try_acquire(None).await, None);
    assert_eq!(j2.unlock().await, Some(1));
    assert_clean(&server).await;
}
