//! Fencing tokens across a failover: the counter (`redisson_lock_token:{name}`) is
//! INCRed by the acquire script, so with replica sync on (the default,
//! `SyncReplicas::Auto`) the replica acknowledged the increment before `lock()` returned
//! and the promoted replica hands out larger tokens: Redis Cluster (kill -9 of the
//! primary) and Sentinel. (Redlock over restarted masters: fencing_restart.rs.)

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::RedisCluster;
use common::sentinel::SentinelSet;
use redlatch::{Client, Lock, SyncReplicas};

const WAIT: Duration = Duration::from_secs(20);

/// Takes and releases `lock`; its token.
async fn token(lock: &Lock) -> u64 {
    let g = lock.try_lock(WAIT).await.unwrap().expect("a free lock");
    let t = g.fencing_token().unwrap();
    g.unlock().await.unwrap();
    t
}

/// The fencing counter of `name` on `server` (read from a replica with READONLY).
fn counter(server: &common::RedisServer, name: &str) -> Option<u64> {
    let mut conn = server.conn();
    let _ = redis::cmd("READONLY").exec(&mut conn);
    redis::cmd("GET")
        .arg(format!("redisson_lock_token:{{{name}}}"))
        .query(&mut conn)
        .unwrap()
}

#[tokio::test]
async fn cluster_tokens_keep_growing_across_the_failover_of_the_primary() {
    let mut cluster = RedisCluster::start(3, 1);
    let cfg = redlatch::Config::cluster(cluster.urls())
        .unavailable_timeout(WAIT)
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let c = Client::connect(cfg).await.unwrap();
    let primary = cluster.primaries()[0];
    let replica = cluster.replica_of(primary);
    let name = cluster.key_on(primary, "fenced-");
    let lock = c.fenced_lock(&name);
    let mut last = 0;
    for _ in 0..3 {
        last = token(&lock).await;
    }
    // Acknowledged before lock() returned: the replica's counter is the last token.
    assert_eq!(counter(cluster.node(replica), &name), Some(last));
    cluster.kill(primary);
    assert_eq!(cluster.wait_for_failover(primary), replica);
    let after = token(&lock).await;
    assert!(
        after > last,
        "token {after} after {last}: the promoted replica went back"
    );
}

#[tokio::test]
async fn sentinel_tokens_keep_growing_across_the_failover_of_the_primary() {
    let mut set = SentinelSet::start("fenced");
    let cfg = redlatch::Config::sentinel(set.master_name(), set.sentinel_urls())
        .unavailable_timeout(WAIT)
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let c = Client::connect(cfg).await.unwrap();
    let lock = c.fenced_lock("ledger");
    let mut last = 0;
    for _ in 0..3 {
        last = token(&lock).await;
    }
    let replica = 1 - set.primary_index();
    assert_eq!(counter(set.server(replica), "ledger"), Some(last));
    let old = set.kill_primary();
    let new = set.wait_for_switch(&old);
    assert_ne!(old, new);
    let after = token(&lock).await;
    assert!(
        after > last,
        "token {after} after {last}: the promoted replica went back"
    );
}
