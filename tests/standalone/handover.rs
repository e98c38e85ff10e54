//! Local hand-over: the last hold of a plain lock passes to the next waiting task of
//! the same client in the release script, unless another client waits for the lock.

use redlatch_testkit as common;

use std::time::Duration;

use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn the_lock_passes_to_a_local_waiter_without_ever_being_free() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let first = c.lock("relay").lock().await.unwrap();
    let lock = c.lock("relay");
    let waiter = tokio::spawn(async move {
        let g = lock.lock().await.unwrap();
        let holder = g.holder().to_string();
        (g, holder)
    });
    let channel = "redisson_lock__channel:{relay}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    // Listen on the channel from outside: a hand-over publishes nothing.
    let mut conn = server.conn();
    let mut raw = conn.as_pubsub();
    raw.subscribe(channel).unwrap();
    raw.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.unlock().await.unwrap();
    let (g, holder) = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    // Another listener (ours) made NUMSUB 2 here, so this one may have been a normal
    // release; both are correct. What must hold: the waiter owns the lock now.
    let fields: Vec<String> = server.cmd(&["HKEYS", "relay"]);
    assert_eq!(fields, vec![holder.clone()]);
    assert_eq!(server.cmd::<i64>(&["HGET", "relay", &holder]), 1);
    let ttl: i64 = server.cmd(&["PTTL", "relay"]);
    assert!(
        ttl > 25_000,
        "the receiver's own (watchdog) lease, got {ttl}"
    );
    drop(raw);
    g.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "relay"]), 0);
}

fn published(server: &RedisServer) -> u64 {
    common::calls(server, "publish")
}

#[tokio::test]
async fn a_relay_between_local_tasks_publishes_nothing() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let lock = c.lock("quiet");
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let g = lock.lock().await.unwrap();
                tokio::task::yield_now().await;
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // 100 acquisitions by 4 tasks: most hand-overs happen inside the release script,
    // so far fewer than 100 unlock messages are published.
    let n = published(&server);
    assert!(n < 60, "{n} publishes for 100 acquisitions");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "quiet"]), 0);
}

#[tokio::test]
async fn a_waiter_of_another_client_is_never_bypassed_by_a_hand_over() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("shared").lock().await.unwrap();
    let local = a.lock("shared");
    let local_waiter = tokio::spawn(async move { local.lock().await.unwrap().unlock().await });
    let remote = b.lock("shared");
    let remote_waiter = tokio::spawn(async move { remote.lock().await.unwrap().unlock().await });
    let channel = "redisson_lock__channel:{shared}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 2).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = published(&server);
    held.unlock().await.unwrap();
    // Another client listens: the release is a normal one, published for everyone.
    assert!(
        published(&server) > before,
        "the lock was handed over past client B"
    );
    tokio::time::timeout(Duration::from_secs(5), local_waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), remote_waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_handed_to_a_waiter_that_gave_up_is_released_for_it() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let first = c.lock("orphaned").lock().await.unwrap();
    let lock = c.lock("orphaned");
    let waiter = tokio::spawn(async move { lock.lock().await.map(drop) });
    let channel = "redisson_lock__channel:{orphaned}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    tokio::time::sleep(Duration::from_millis(200)).await; // the waiter posts its offer
                                                          // Hold the hand-over script in flight, then let the waiter give up meanwhile.
    server.pause();
    let unlock = tokio::spawn(async move { first.unlock().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    waiter.abort();
    let _ = waiter.await;
    server.resume();
    tokio::time::timeout(Duration::from_secs(5), unlock)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Whatever the script did (handed over, or released because the waiter had
    // unsubscribed first), nobody is left holding the lock.
    let free = || server.cmd::<i64>(&["EXISTS", "orphaned"]) == 0;
    assert!(eventually_async(Duration::from_secs(5), free).await);
    assert_eq!(c.held_locks(), 0);
}

mod fair {
    //! The fair lock's hand-over: the last hold passes to the queue head in the release
    //! script when the head is a waiting task of the releasing client; FIFO is unchanged.

    use super::*;
    use common::fair::{join, queue, queue_two, spawn_lock, wait_queued, SEC};
    use redlatch::{Lock, LockGuard};
    use tokio::task::JoinHandle;

    /// A held fair lock `name` and two tasks of the same client queued behind it, in
    /// order: (lock, guard, [(holder id, task); 2]).
    async fn held_with_two_queued(
        c: &Client,
        server: &RedisServer,
        name: &str,
    ) -> (Lock, LockGuard, [(String, JoinHandle<LockGuard>); 2]) {
        let lock = c.fair_lock(name);
        let held = lock.lock().await.unwrap();
        let queued = queue_two(server, &lock, name).await;
        (lock, held, queued)
    }

    #[tokio::test]
    async fn the_lock_passes_down_a_local_queue_without_a_publish() {
        let server = RedisServer::start();
        let c = client(&server).await;
        let (_lock, held, [(first, t1), (second, t2)]) =
            held_with_two_queued(&c, &server, "fair-relay").await;
        let before = published(&server);
        held.unlock().await.unwrap();
        let g1 = join(t1, 5 * SEC).await;
        assert_eq!(g1.holder(), first);
        assert_eq!(queue(&server, "fair-relay"), vec![second.clone()]);
        let fields: Vec<String> = server.cmd(&["HKEYS", "fair-relay"]);
        assert_eq!(fields, vec![first.clone()]);
        let ttl: i64 = server.cmd(&["PTTL", "fair-relay"]);
        assert!(
            ttl > 25_000,
            "the receiver's own (watchdog) lease, got {ttl}"
        );
        assert!(!t2.is_finished());
        g1.unlock().await.unwrap();
        let g2 = join(t2, 5 * SEC).await;
        assert_eq!(g2.holder(), second);
        assert_eq!(published(&server), before, "a hand-over publishes nothing");
        assert!(queue(&server, "fair-relay").is_empty());
        g2.unlock().await.unwrap();
        assert_eq!(server.cmd::<i64>(&["EXISTS", "fair-relay"]), 0);
        assert_eq!(c.held_locks(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_remote_queue_head_is_never_bypassed() {
        let server = RedisServer::start();
        let (a, b) = (client(&server).await, client(&server).await);
        let (la, lb) = (a.fair_lock("fair-mixed"), b.fair_lock("fair-mixed"));
        let held = la.lock().await.unwrap();
        // Queue: a1 (client A), b1 (client B), a2 (client A).
        let mut order = Vec::new();
        for lock in [&la, &lb, &la] {
            let (holder, task) = spawn_lock(lock);
            wait_queued(&server, "fair-mixed", &holder).await;
            order.push((holder, task));
        }
        let mut before = published(&server);
        held.unlock().await.unwrap();
        let mut tasks = order.into_iter();
        // A's release hands over to a1 (no publish); a1's release must wake b1 (a
        // publish to b1's channel), although a2, of a1's own client, waits as well.
        let (a1, t) = tasks.next().unwrap();
        let g = join(t, 5 * SEC).await;
        assert_eq!((g.holder(), published(&server)), (a1.as_str(), before));
        g.unlock().await.unwrap();
        let (b1, t) = tasks.next().unwrap();
        let g = join(t, 5 * SEC).await;
        assert_eq!(g.holder(), b1);
        assert!(published(&server) > before, "b1 was not woken by a message");
        before = published(&server);
        let (a2, t) = tasks.next().unwrap();
        assert!(!t.is_finished());
        g.unlock().await.unwrap();
        let g = join(t, 5 * SEC).await;
        assert_eq!(g.holder(), a2);
        assert!(published(&server) > before, "B's release publishes to a2");
        g.unlock().await.unwrap();
        assert_eq!(server.cmd::<i64>(&["EXISTS", "fair-mixed"]), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lock_handed_to_a_waiter_that_gave_up_goes_to_the_next() {
        let server = RedisServer::start();
        let c = client(&server).await;
        let (_lock, held, [(first, t1), (second, t2)]) =
            held_with_two_queued(&c, &server, "fair-orphan").await;
        tokio::time::sleep(Duration::from_millis(100)).await; // both post their offers
                                                              // Hold the hand-over script in flight; the head gives up meanwhile.
        server.pause();
        let unlock = tokio::spawn(async move { held.unlock().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        t1.abort();
        let _ = t1.await;
        server.resume();
        join(unlock, 5 * SEC).await.unwrap();
        let g2 = join(t2, 5 * SEC).await;
        assert_eq!(g2.holder(), second);
        let fields: Vec<String> = server.cmd(&["HKEYS", "fair-orphan"]);
        assert_eq!(fields, vec![second.clone()]);
        assert!(!queue(&server, "fair-orphan").contains(&first));
        g2.unlock().await.unwrap();
        let free = || server.cmd::<i64>(&["EXISTS", "fair-orphan"]) == 0;
        assert!(eventually_async(5 * SEC, free).await);
        assert_eq!(c.held_locks(), 0);
    }
}

/// Runs one hand-over on `lock`, so its script is loaded: a stalled EVALSHA of a script
/// Redis does not know yet fails with NOSCRIPT after the stall, without running.
async fn load_hand_over_script(lock: &redlatch::Lock) {
    let held = lock.lock().await.unwrap();
    let l = lock.clone();
    let first = tokio::spawn(async move { l.lock().await.unwrap().unlock().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.unlock().await.unwrap();
    first.await.unwrap();
}

/// Waits until the waiter's attempt after subscribing has landed (no script call for
/// 500 ms), then 200 ms more for it to post its offer: the offer lives in this process,
/// Redis cannot show it (a local waiter is in no waiter registry), but the refused
/// attempt comes first, so no fixed delay from the subscription has to cover an
/// attempt that a loaded machine runs late.
async fn refused_then_offered(server: &RedisServer) {
    common::settled_calls(server, &["evalsha", "eval"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A hand-over whose script outlives the master timeout (Redis stalls while it is in
/// flight): the releaser's unlock fails, the waiter learns the outcome from Redis once
/// it answers, and takes the lock with exactly one hold (not a second, leaked one).
async fn a_hand_over_that_timed_out(fair: bool) {
    let server = RedisServer::start();
    let config = Config::single(server.url()).master_timeout(Duration::from_millis(200));
    let c = Client::connect(config).await.unwrap();
    let name = if fair { "stall-fair" } else { "stall" };
    let lock = if fair {
        c.fair_lock(name)
    } else {
        c.lock(name)
    };
    load_hand_over_script(&lock).await;
    let held = lock.lock().await.unwrap();
    let (l, holder) = common::fair::owned(&lock);
    let waiter = tokio::spawn(async move {
        let g = l.lock().await.unwrap();
        let count = l.hold_count().await.unwrap();
        g.unlock().await.unwrap();
        count
    });
    let channel = if fair {
        format!("redisson_lock__channel:{{{name}}}:{holder}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    };
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, &channel) == 1).await);
    refused_then_offered(&server).await;
    server.pause();
    let unlocked = held.unlock().await;
    assert!(
        unlocked.is_err(),
        "the hand-over outlived the master timeout"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume();
    let count = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter got the lock")
        .unwrap();
    assert_eq!(count, 1, "one hold, the handed one");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", name]),
        0,
        "nothing left behind"
    );
    assert_eq!(c.held_locks(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_that_timed_out_leaves_the_waiter_one_hold() {
    a_hand_over_that_timed_out(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_hand_over_that_timed_out_leaves_the_waiter_one_hold() {
    a_hand_over_that_timed_out(true).await;
}

/// A waiter whose deadline passes while the hand-over script it was offered is stalled
/// in Redis: the outcome is settled in the background once Redis answers, and the lock
/// it may have been handed is released then, not at the end of its 30 s lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_over_to_a_waiter_that_ran_out_of_time_is_settled_and_released() {
    let server = RedisServer::start();
    let config = Config::single(server.url()).master_timeout(Duration::from_millis(200));
    let c = Client::connect(config).await.unwrap();
    let lock = c.lock("settle");
    load_hand_over_script(&lock).await;

    let held = lock.lock().await.unwrap();
    let l = lock.clone();
    let waiter = tokio::spawn(async move { l.try_lock(Duration::from_millis(700)).await });
    let channel = "redisson_lock__channel:{settle}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    refused_then_offered(&server).await;
    server.pause();
    assert!(
        held.unlock().await.is_err(),
        "the hand-over outlived the master timeout"
    );
    tokio::time::sleep(Duration::from_millis(700)).await; // the waiter's time runs out
    server.resume();
    let r = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(!matches!(r, Ok(Some(_))), "the waiter gave up: {r:?}");
    let free = || server.cmd::<i64>(&["EXISTS", "settle"]) == 0;
    assert!(
        eventually_async(Duration::from_secs(5), free).await,
        "the handed lock was released, not left to its lease"
    );
    // The lock works as usual afterwards.
    let g = lock
        .try_lock(Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert!(free());
}
