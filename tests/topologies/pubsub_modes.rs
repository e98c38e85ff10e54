//! Wake-ups across pub/sub modes on a Redis 7 cluster, and a waiter's wake-up through
//! faults of its subscription.
//!
//! On a Redis 7 cluster redlatch publishes with `SPUBLISH`; a Redisson that subscribes
//! classic (3.27 on some starts, 3.29+ with `shardedSubscriptionMode = OFF`) publishes
//! and listens with classic pub/sub. Here a plain redis connection stands in for that
//! Redisson (the JVM tests, tests/redisson/redisson_jvm_pubsub_modes.rs, run the real one): a
//! classic subscriber on the slot's primary hears every kind's release, a classic
//! `PUBLISH` wakes redlatch's waiters, and redlatch alone never publishes classic (a
//! classic `PUBLISH` on a cluster goes to every node over the cluster bus).
//!
//! Faults: a release that lands while the waiter's subscriber connection is being
//! killed, on a standalone server and on a cluster, and a release that lands between a
//! waiter's refused attempt and its subscription. A slot migration and the failovers
//! are in tests/topologies/cluster_faults.rs (`a_slot_migration_under_held_and_waited_locks_loses_
//! nothing`, `waiters_follow_a_manual_failover_and_are_woken`) and tests/topologies/sentinel.rs.
//!
//! Every lease here is 30 s (the default watchdog): a waiter that missed the message
//! would retry only then, far past the bounds asserted.

use redlatch_testkit as common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::cluster::RedisCluster;
use common::{eventually_async, RedisServer};
use redlatch::{Client, Config};

/// A wake-up's bound: a message and one attempt, on a loaded machine. The lease that
/// would be the only other way out is 30 s.
const WOKEN: Duration = Duration::from_secs(5);

/// A classic subscriber of `channel` on `url` (what a Redisson in classic mode opens):
/// returns once subscribed, then sends each message's payload and arrival time.
fn classic_listener(url: &str, channel: &str) -> mpsc::Receiver<(String, Instant)> {
    let (tx, rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (url, channel) = (url.to_string(), channel.to_string());
    std::thread::spawn(move || {
        let mut conn = common::conn::sync_conn(url.as_str());
        let mut pubsub = conn.as_pubsub();
        pubsub.subscribe(&channel).unwrap();
        pubsub
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(msg) = pubsub.get_message() {
                let payload: String = msg.get_payload().unwrap_or_default();
                if tx.send((payload, Instant::now())).is_err() {
                    return;
                }
            }
        }
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    rx
}

/// Waits for the next message on `rx`, at most [`WOKEN`]; returns its payload and how
/// long after `since` it came.
fn heard(rx: &mpsc::Receiver<(String, Instant)>, since: Instant, what: &str) -> String {
    let (payload, at) = rx
        .recv_timeout(WOKEN)
        .unwrap_or_else(|_| panic!("the classic subscriber never heard {what}"));
    assert!(at.duration_since(since) <= WOKEN, "{what}: {payload}");
    payload
}

/// (classic, sharded) subscribers of `channel` on node `node`.
fn counts(node: &RedisServer, channel: &str) -> (i64, i64) {
    let (_, classic): (String, i64) = node.cmd(&["PUBSUB", "NUMSUB", channel]);
    let (_, sharded): (String, i64) = node.cmd(&["PUBSUB", "SHARDNUMSUB", channel]);
    (classic, sharded)
}

/// Returns once redlatch listens on `channel` both ways (sharded, and classic with its
/// marker) on the primary serving it.
async fn listening_both_ways(cluster: &RedisCluster, channel: &str) {
    let node = cluster.node(cluster.primary_for_key(channel));
    let marker = format!("{channel}:redlatch-waiters");
    let ok = eventually_async(Duration::from_secs(10), || {
        let (classic, sharded) = counts(node, channel);
        classic >= 1 && sharded >= 1 && counts(node, &marker).0 >= 1
    });
    assert!(ok.await, "redlatch never listened on {channel} both ways");
}

fn classic_publishes(cluster: &RedisCluster) -> u64 {
    (0..cluster.len())
        .map(|i| common::calls(cluster.node(i), "publish"))
        .sum()
}

/// redlatch alone, contended: every wake-up goes sharded, nothing classic.
async fn alone_redlatch_never_publishes_classic(
    cluster: &RedisCluster,
    client: &Client,
    other: &Client,
) {
    let before = classic_publishes(cluster);
    for round in 0..5 {
        let g = client.lock("alone").lock().await.unwrap();
        let waiter = common::timed_waiter(other.lock("alone"), Duration::ZERO);
        listening_both_ways(cluster, "redisson_lock__channel:{alone}").await;
        let released = Instant::now();
        g.unlock().await.unwrap();
        let got = tokio::time::timeout(WOKEN, waiter)
            .await
            .unwrap_or_else(|_| panic!("round {round}: our waiter was not woken"))
            .unwrap();
        assert!(got.duration_since(released) <= WOKEN);
    }
    assert_eq!(
        classic_publishes(cluster),
        before,
        "redlatch published classic with only redlatch listening"
    );
}

/// Our releases reach a classic listener, every kind.
async fn every_kinds_release_reaches_a_classic_listener(cluster: &RedisCluster, client: &Client) {
    let url_of = |channel: &str| cluster.node(cluster.primary_for_key(channel)).url();
    let ch = "redisson_lock__channel:{plain}";
    let rx = classic_listener(&url_of(ch), ch);
    let g = client.lock("plain").lock().await.unwrap();
    let t = Instant::now();
    g.unlock().await.unwrap();
    assert_eq!(heard(&rx, t, "the plain lock's release"), "0");

    let ch = "redisson_rwlock:{rw}";
    let rx = classic_listener(&url_of(ch), ch);
    let g = client.read_write_lock("rw").write().lock().await.unwrap();
    let t = Instant::now();
    g.unlock().await.unwrap();
    heard(&rx, t, "the write lock's release");

    let ch = "redisson_sc:{sem}";
    let rx = classic_listener(&url_of(ch), ch);
    let t = Instant::now();
    client.semaphore("sem").release().await.unwrap();
    assert_eq!(heard(&rx, t, "the semaphore's release"), "1");

    let ch = "redisson_sc:{xs}";
    let xs = client.permit_expirable_semaphore("xs");
    assert!(xs.try_set_permits(1).await.unwrap());
    let permit = xs.acquire().await.unwrap();
    let rx = classic_listener(&url_of(ch), ch);
    let t = Instant::now();
    permit.release().await.unwrap();
    heard(&rx, t, "the expirable semaphore's release");

    let ch = "redisson_countdownlatch__channel__{gate}";
    let latch = client.count_down_latch("gate");
    assert!(latch.try_set_count(1).await.unwrap());
    let rx = classic_listener(&url_of(ch), ch);
    let t = Instant::now();
    latch.count_down().await.unwrap();
    heard(&rx, t, "the latch's count-down");
}

/// A classic release (Redisson's: delete, PUBLISH "0") wakes our lock waiter; and
/// our semaphore waiter (Redisson's release: INCRBY, PUBLISH the permits).
async fn classic_releases_wake_our_waiters(cluster: &RedisCluster, client: &Client) {
    let node = cluster.node(cluster.primary_for_key("java"));
    let _: i64 = node.cmd(&["HSET", "java", "java-client:1", "1"]);
    let _: i64 = node.cmd(&["PEXPIRE", "java", "30000"]);
    let waiter = common::timed_waiter(client.lock("java"), Duration::ZERO);
    listening_both_ways(cluster, "redisson_lock__channel:{java}").await;
    let released = Instant::now();
    let _: i64 = node.cmd(&["DEL", "java"]);
    let _: i64 = node.cmd(&["PUBLISH", "redisson_lock__channel:{java}", "0"]);
    let got = tokio::time::timeout(WOKEN, waiter)
        .await
        .expect("a classic release did not wake our lock waiter")
        .unwrap();
    assert!(got.duration_since(released) <= WOKEN);

    let sem = client.semaphore("javasem");
    assert!(sem.try_set_permits(0).await.unwrap());
    let ours = tokio::spawn(async move { sem.acquire().await.unwrap().forget() });
    listening_both_ways(cluster, "redisson_sc:{javasem}").await;
    let node = cluster.node(cluster.primary_for_key("javasem"));
    let released = Instant::now();
    let _: i64 = node.cmd(&["INCRBY", "javasem", "1"]);
    let _: i64 = node.cmd(&["PUBLISH", "redisson_sc:{javasem}", "1"]);
    tokio::time::timeout(WOKEN, ours)
        .await
        .expect("a classic release did not wake our semaphore waiter")
        .unwrap();
    assert!(released.elapsed() <= WOKEN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_redis_7_cluster_classic_and_sharded_listeners_hear_each_other() {
    if common::older_than(7, "sharded pub/sub") {
        return;
    }
    let cluster = RedisCluster::start(3, 0);
    let client = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let other = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    alone_redlatch_never_publishes_classic(&cluster, &client, &other).await;
    every_kinds_release_reaches_a_classic_listener(&cluster, &client).await;
    classic_releases_wake_our_waiters(&cluster, &client).await;
}

/// Kills every pub/sub connection on `node` (`CLIENT KILL TYPE pubsub` misses RESP3
/// ones, which redlatch's cluster subscriber uses: those go by ID, flag `P`).
fn kill_subscribers(node: &RedisServer) {
    let list: String = node.cmd(&["CLIENT", "LIST"]);
    for line in list.lines() {
        let field = |name: &str| {
            line.split(' ')
                .find_map(|f| f.strip_prefix(name))
                .unwrap_or_default()
        };
        if field("flags=").contains('P') {
            let _: redis::RedisResult<i64> = node.try_cmd(
                Duration::from_secs(2),
                &["CLIENT", "KILL", "ID", field("id=")],
            );
        }
    }
}

/// The holder releases right as the waiter's subscriber connection is killed (the
/// message goes nowhere): the hub reconnects, resubscribes and wakes the waiter, which
/// retries and gets the free lock.
async fn release_as_the_subscription_dies(
    holder: &Client,
    waiter: &Client,
    node: &RedisServer,
    subscribed: impl Fn() -> bool,
) {
    for round in 0..3 {
        let name = "killed";
        let g = holder.lock(name).lock().await.unwrap();
        let w = common::timed_waiter(waiter.lock(name), Duration::ZERO);
        assert!(eventually_async(Duration::from_secs(10), &subscribed).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
        kill_subscribers(node);
        let released = Instant::now();
        g.unlock().await.unwrap();
        let got = tokio::time::timeout(WOKEN, w)
            .await
            .unwrap_or_else(|_| {
                panic!("round {round}: the waiter slept through a killed subscription")
            })
            .unwrap();
        assert!(got.duration_since(released) <= WOKEN);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_as_the_waiters_subscription_is_killed_still_wakes_it() {
    let server = RedisServer::start();
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    release_as_the_subscription_dies(&a, &b, &server, || {
        common::numsub(&server, "redisson_lock__channel:{killed}") >= 1
    })
    .await;

    if common::older_than(7, "the cluster case (sharded pub/sub)") {
        return;
    }
    let cluster = RedisCluster::start(3, 0);
    let config = || Config::cluster(cluster.urls());
    let (a, b) = (
        Client::connect(config()).await.unwrap(),
        Client::connect(config()).await.unwrap(),
    );
    let node = cluster.node(cluster.primary_for_key("killed"));
    release_as_the_subscription_dies(&a, &b, node, || {
        counts(node, "redisson_lock__channel:{killed}").1 >= 1
    })
    .await;
}

/// The holder releases the moment the waiter's first attempt was refused (keyspace
/// notification of its registration), before or while the waiter subscribes: the
/// attempt that follows the subscription finds the lock free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_between_a_waiters_attempt_and_its_subscription_is_not_missed() {
    let server = RedisServer::start();
    let _: String = server.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kz"]);
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    for round in 0..5 {
        let name = format!("race{round}");
        let registry = format!("__keyspace@0__:redlatch_lock_waiters:{{{name}}}");
        let rx = classic_listener(&server.url(), &registry);
        let g = a.lock(&name).lock().await.unwrap();
        let w = common::timed_waiter(b.lock(&name), Duration::ZERO);
        // The waiter's first refused attempt registers it (zadd).
        let (event, _) = tokio::task::spawn_blocking(move || rx.recv_timeout(WOKEN))
            .await
            .unwrap()
            .expect("the waiter never registered");
        assert_eq!(event, "zadd");
        let released = Instant::now();
        g.unlock().await.unwrap();
        let got = tokio::time::timeout(WOKEN, w)
            .await
            .unwrap_or_else(|_| {
                panic!("round {round}: a release before the subscription was missed")
            })
            .unwrap();
        assert!(got.duration_since(released) <= WOKEN);
    }
}
