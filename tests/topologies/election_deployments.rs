//! Leader election (issue 27.1) on Redis Cluster (keys and sharded channel in one
//! slot) and on Sentinel across a failover: the leader survives it (its lock and record
//! were synced to the replica), the next term is greater, the observer goes on.

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::{key_slot, shared_cluster};
use common::sentinel::SentinelSet;
use redlatch::{Change, ChangeKind, Client, Config, Observer, SyncReplicas};

/// The next change, retrying errors (a failover in progress) within `within`.
async fn next(observer: &mut Observer, within: Duration) -> Change {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, observer.next()).await {
            Ok(Ok(c)) => return c,
            Ok(Err(e)) => {
                eprintln!("observer: {e} (retrying)");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => panic!("no change within {within:?}"),
        }
    }
}

fn summary(c: &Change) -> (ChangeKind, u64, String) {
    (c.kind, c.term, c.value.clone())
}

#[tokio::test]
async fn an_election_on_a_cluster_keeps_its_keys_in_one_slot() {
    let cluster = shared_cluster();
    let config = || Config::cluster(cluster.urls());
    let (a, b) = (
        Client::connect(config()).await.unwrap(),
        Client::connect(config()).await.unwrap(),
    );
    let name = format!("svc-{}", std::process::id());
    let mut observer = b.election(name.clone()).observe().await.unwrap();
    let mut leading = a.election(name.clone()).campaign("a1").await.unwrap();
    leading.proclaim("a2").await.unwrap();
    let waiting = tokio::spawn({
        let e = b.election(name.clone());
        async move { e.campaign("b1").await }
    });
    let term_a = leading.term();
    // Everything the election wrote lives in the name's slot.
    let lock = a.election(name.clone()).lock_name();
    let slot = key_slot(lock.as_bytes());
    for key in [
        format!("redlatch_election_leader:{{{name}}}"),
        format!("redlatch_election_log:{{{name}}}"),
    ] {
        assert_eq!(key_slot(key.as_bytes()), slot);
        let node = cluster.node(cluster.primary_for_key(&key));
        assert_eq!(node.cmd::<i64>(&["EXISTS", &key]), 1, "{key}");
    }
    leading.resign().await.unwrap();
    let leading_b = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("b elected after a resigned")
        .unwrap()
        .unwrap();
    assert!(leading_b.term() > term_a);
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(summary(&next(&mut observer, Duration::from_secs(10)).await));
    }
    assert_eq!(
        seen,
        [
            (ChangeKind::Elected, term_a, "a1".into()),
            (ChangeKind::Proclaimed, term_a, "a2".into()),
            (ChangeKind::Resigned, term_a, "a2".into()),
            (ChangeKind::Elected, leading_b.term(), "b1".into()),
        ]
    );
    let now = a.election(name).leader().await.unwrap().unwrap();
    assert_eq!((now.term, now.value.as_str()), (leading_b.term(), "b1"));
    leading_b.resign().await.unwrap();
}

#[tokio::test]
async fn on_sentinel_a_leader_survives_a_failover_and_terms_keep_growing() {
    let mut set = SentinelSet::start("elect");
    let config = Config::sentinel(set.master_name(), set.sentinel_urls())
        .watchdog_timeout(Duration::from_secs(10))
        .unavailable_timeout(Duration::from_secs(25))
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let (a, b, watcher) = (
        Client::connect(config.clone()).await.unwrap(),
        Client::connect(config.clone()).await.unwrap(),
        Client::connect(config).await.unwrap(),
    );
    let mut observer = watcher.election("jobs").observe().await.unwrap();
    let leading = a.election("jobs").campaign("a").await.unwrap();
    let term_a = leading.term();
    let waiting = tokio::spawn({
        let e = b.election("jobs");
        async move { e.campaign("b").await }
    });
    let first = next(&mut observer, Duration::from_secs(10)).await;
    assert_eq!(summary(&first), (ChangeKind::Elected, term_a, "a".into()));

    let old = set.kill_primary();
    let new = set.wait_for_switch(&old);
    assert_ne!(old, new);
    // The lock and the record were acknowledged by the replica before campaign returned.
    let mut leader = None;
    for _ in 0..100 {
        match a.election("jobs").leader().await {
            Ok(l) => {
                leader = l;
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let leader = leader.expect("the leader is still recorded after the failover");
    assert_eq!((leader.term, leader.value.as_str()), (term_a, "a"));
    assert!(
        !leading.lost().is_cancelled(),
        "the synced leadership was lost"
    );
    assert!(!waiting.is_finished(), "b was elected while a led");

    leading.resign().await.unwrap();
    let leading_b = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("b elected on the new primary")
        .unwrap()
        .unwrap();
    assert!(leading_b.term() > term_a, "{} > {term_a}", leading_b.term());
    let resigned = next(&mut observer, Duration::from_secs(20)).await;
    assert_eq!(
        summary(&resigned),
        (ChangeKind::Resigned, term_a, "a".into())
    );
    let elected = next(&mut observer, Duration::from_secs(20)).await;
    assert_eq!(
        summary(&elected),
        (ChangeKind::Elected, leading_b.term(), "b".into())
    );
    leading_b.resign().await.unwrap();
}
