//! The faster multi-lock on a Redis Cluster: every value lives under the group key, in
//! its one hash slot; groups on different primaries; waiters woken by the sharded
//! release message; the watchdog renews through routing; a group name whose keys would
//! span slots is refused.

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::{shared_cluster, RedisCluster};
use common::eventually_async;
use redlatch::{Client, Config, Error};

async fn client(cluster: &RedisCluster) -> Client {
    Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_on_every_primary_exclude_wake_and_renew() {
    let cluster = shared_cluster();
    let config = Config::cluster(cluster.urls()).watchdog_timeout(Duration::from_millis(900));
    let a = Client::connect(config).await.unwrap();
    let (b, c) = (client(cluster).await, client(cluster).await);
    for primary in 0..3 {
        let group = cluster.key_on(primary, "fml-");
        let held = a
            .faster_multi_lock(&group, ["x", "y"])
            .unwrap()
            .lock()
            .await
            .unwrap();
        // All values in the one key, on the primary serving its slot.
        let n: i64 = cluster.node(primary).cmd(&["HLEN", &group]);
        assert_eq!(n, 6, "two values, three fields each, under {group}");
        // Past three of its leases: renewed through routing.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!held.lost().is_cancelled());
        let lock = b.faster_multi_lock(&group, ["y", "z"]).unwrap();
        assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
        held.unlock().await.unwrap();
        // b holds under its 30 s watchdog lease; c's waiter (30 s timeouts too) can
        // only be let in early by the release's (sharded) message.
        let held = lock.lock().await.unwrap();
        let other = c.faster_multi_lock(&group, ["x", "y"]).unwrap();
        let waiter = tokio::spawn(async move { other.lock().await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        held.unlock().await.unwrap();
        let g = tokio::time::timeout(Duration::from_secs(15), waiter)
            .await
            .expect("woken by the release")
            .unwrap()
            .unwrap();
        g.unlock().await.unwrap();
        assert!(
            eventually_async(Duration::from_secs(5), || {
                cluster.node(primary).cmd::<i64>(&["EXISTS", &group]) == 0
            })
            .await
        );
    }
}

#[tokio::test]
async fn a_group_whose_keys_would_span_slots_is_refused() {
    let cluster = shared_cluster();
    let c = client(cluster).await;
    assert!(matches!(
        c.faster_multi_lock("a{b", ["x"]),
        Err(Error::InvalidName(_))
    ));
    let tagged = c.faster_multi_lock("{orders}:batch", ["x"]).unwrap();
    tagged.lock().await.unwrap().unlock().await.unwrap();
}
