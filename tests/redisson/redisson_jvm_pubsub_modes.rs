//! The real Redisson client and redlatch wake each other on a Redis 7 cluster whichever
//! pub/sub Redisson picked: sharded (`SSUBSCRIBE`/`SPUBLISH`, its default since 3.22),
//! or classic (`SUBSCRIBE`/`PUBLISH`: 3.27 on the starts where its probe for sharded
//! pub/sub fails, 3.29+ with `shardedSubscriptionMode = OFF`). Every kind, both ways:
//! the plain lock here, the read-write lock, both semaphores, the latch through
//! `jvm_family::wake_both_ways_within`.
//!
//! Each Redisson client is started several times ([`Jvm::reconnect`]: a new client in
//! the same JVM decides its pub/sub again, as a new JVM would, without a JVM's start-up
//! time); each round prints which pub/sub it picked. Every lease is 30 s (both sides'
//! default watchdog) and every wake-up must come within [`WITHIN`]: a missed message
//! fails the test instead of the lease letting the waiter in.

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::RedisCluster;
use common::eventually_async;
use common::jvm::{self, addr_of, Deployment, Jvm};
use common::jvm_family;
use redlatch::{Client, Config};

/// A wake-up's bound, far below the 30 s leases a missed message would leave.
const WITHIN: Duration = Duration::from_secs(10);

fn deployment(cluster: &RedisCluster) -> Deployment {
    Deployment::Cluster(cluster.urls().iter().map(|u| addr_of(u)).collect())
}

/// (classic subscribers that are not redlatch's, sharded subscribers) of `channel` on
/// the primary serving it: redlatch subscribes classic with a classic marker beside.
fn foreign_and_sharded(cluster: &RedisCluster, channel: &str) -> (i64, i64) {
    let node = cluster.node(cluster.primary_for_key(channel));
    let count = |sub: &str, ch: &str| -> i64 { node.cmd::<(String, i64)>(&["PUBSUB", sub, ch]).1 };
    let marker = format!("{channel}:redlatch-waiters");
    (
        count("NUMSUB", channel) - count("NUMSUB", &marker),
        count("SHARDNUMSUB", channel),
    )
}

/// The primitives [`rounds`] wakes both ways.
const PRIMITIVES: [&str; 6] = [
    "RLock",
    "RReadWriteLock",
    "RSemaphore",
    "RPermitExpirableSemaphore",
    "RCountDownLatch",
    "RFencedLock",
];

/// Records a pass of every primitive of [`rounds`] for the matrix.
fn record_all(id: &str, version: &str, deployment: &str) {
    for p in PRIMITIVES {
        jvm::record(id, p, version, deployment, "pass");
    }
}

/// Scripts a node ran so far (EVAL and EVALSHA calls).
fn scripts_run(node: &common::RedisServer) -> u64 {
    common::calls(node, "eval") + common::calls(node, "evalsha")
}

/// The plain lock both ways on a fresh `name`; returns the pub/sub Java waited with.
async fn plain_both_ways(
    java: &Jvm,
    client: &Client,
    cluster: &RedisCluster,
    name: &str,
) -> &'static str {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = cluster.node(cluster.primary_for_key(name));
    // redlatch holds, Java waits.
    let guard = client.lock(name).lock().await.unwrap();
    let before = scripts_run(node);
    let waiting = java.send("t1", &format!("lock lock {name}"));
    let mut seen = (0, 0);
    let subscribed = eventually_async(WITHIN, || {
        seen = foreign_and_sharded(cluster, &channel);
        seen.0 + seen.1 >= 1
    });
    assert!(subscribed.await, "Java never subscribed to {channel}");
    // Redisson tries, subscribes, tries again, then sleeps on its latch.
    assert!(
        eventually_async(WITHIN, || scripts_run(node) >= before + 2).await,
        "Redisson never retried after subscribing"
    );
    let mode = match seen {
        (c, 0) if c > 0 => "classic",
        (0, s) if s > 0 => "sharded",
        _ => "both",
    };
    guard.unlock().await.unwrap();
    tokio::time::timeout(WITHIN, waiting.reply())
        .await
        .unwrap_or_else(|_| panic!("our release did not wake Java's {mode} waiter"))
        .ok();

    // Java holds, redlatch waits.
    let waiter = {
        let lock = client.lock(name);
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    let marker = format!("{channel}:redlatch-waiters");
    let listening = eventually_async(WITHIN, || {
        let n = |sub: &str, ch: &str| -> i64 { node.cmd::<(String, i64)>(&["PUBSUB", sub, ch]).1 };
        n("SHARDNUMSUB", &channel) >= 1 && n("NUMSUB", &marker) >= 1
    });
    assert!(listening.await, "redlatch never listened on {channel}");
    java.call("t1", &format!("unlock lock {name}")).await.ok();
    let g = tokio::time::timeout(WITHIN, waiter)
        .await
        .unwrap_or_else(|_| panic!("Java's {mode} release did not wake our waiter"))
        .unwrap();
    g.unlock().await.unwrap();
    mode
}

/// `rounds` Redisson clients in turn (connected with `opts`), each: the plain lock and
/// the family both ways. Returns the pub/sub each round's Java waiter used.
async fn rounds(version: &str, opts: &str, rounds: usize) -> Vec<&'static str> {
    let cluster = RedisCluster::start(3, 0);
    let dep = deployment(&cluster);
    let mut java = Jvm::start(version, &dep, opts).await;
    let client = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let mut modes = Vec::new();
    for round in 0..rounds {
        if round > 0 {
            for p in cluster.primaries() {
                let () = cluster.node(p).cmd(&["FLUSHALL"]);
            }
            java.reconnect(&dep, opts).await;
        }
        let mode = plain_both_ways(&java, &client, &cluster, &format!("plain{round}")).await;
        let subscribed = |channel: &'static str| {
            let cluster = &cluster;
            async move {
                let seen = eventually_async(WITHIN, || {
                    let (foreign, sharded) = foreign_and_sharded(cluster, channel);
                    foreign + sharded >= 1
                });
                assert!(seen.await, "nobody subscribed to {channel}");
            }
        };
        jvm_family::wake_both_ways_within(&java, &client, WITHIN, subscribed, |_| {}).await;
        println!("Redisson {version} ({opts}) round {round}: its waiters used {mode} pub/sub; every kind woke both ways");
        modes.push(mode);
    }
    modes
}

/// Redisson 3.27: sharded or classic per client start (its probe `SPUBLISH "" ""` goes
/// to whichever node it asks first and fails with MOVED unless that node serves slot 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_3_27_wakes_and_is_woken_whichever_pubsub_it_picks() {
    if !jvm::available() || common::older_than(7, "sharded pub/sub") {
        return;
    }
    let id = "redisson_jvm_pubsub_modes-3.27";
    jvm::clear_record(id);
    let modes = rounds(jvm::OLD, "", 4).await;
    let classic = modes.iter().filter(|m| **m == "classic").count();
    println!(
        "Redisson 3.27: classic pub/sub in {classic} of {} starts",
        modes.len()
    );
    record_all(id, jvm::OLD, "cluster");
}

/// Redisson 3.52 and 4.7 by default: sharded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_3_52_and_4_7_sharded_wake_and_are_woken() {
    if !jvm::available() || common::older_than(7, "sharded pub/sub") {
        return;
    }
    let id = "redisson_jvm_pubsub_modes-sharded";
    jvm::clear_record(id);
    for version in [jvm::LAST3, jvm::V4] {
        let modes = rounds(version, "", 2).await;
        assert!(
            modes.iter().all(|m| *m == "sharded"),
            "Redisson {version} by default: {modes:?}"
        );
        record_all(id, version, "cluster");
    }
}

/// Redisson 4.7 with `shardedSubscriptionMode = OFF`: classic on a Redis 7 cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_4_7_with_sharded_subscriptions_off_wakes_and_is_woken() {
    if !jvm::available() || common::older_than(7, "sharded pub/sub") {
        return;
    }
    let id = "redisson_jvm_pubsub_modes-4.7-off";
    jvm::clear_record(id);
    let modes = rounds(jvm::V4, "sharded=OFF", 2).await;
    assert!(
        modes.iter().all(|m| *m == "classic"),
        "shardedSubscriptionMode=OFF: {modes:?}"
    );
    record_all(
        id,
        jvm::V4,
        "cluster (Redisson shardedSubscriptionMode=OFF)",
    );
}
