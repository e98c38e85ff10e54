//! The non-reentrant and spin locks on a Redis Cluster (the shared test cluster,
//! redlatch-testkit/src/cluster.rs): on a key of every primary, the holder's second
//! acquisition is refused, another holder waits for the release (the non-reentrant
//! waiters woken by the sharded unlock message, the spin waiter by its next try, with
//! no subscription on any node), and nothing is left behind.

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::{shared_cluster, RedisCluster};
use redlatch::{Client, Config, Error, Lock};

async fn client(cluster: &RedisCluster) -> Client {
    Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap()
}

fn kinds(c: &Client, name: &str) -> [Lock; 3] {
    [
        c.non_reentrant_lock(name),
        c.non_reentrant_fair_lock(name),
        c.spin_lock(name),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_every_primary_the_holder_is_refused_and_a_waiter_gets_the_release() {
    let cluster = shared_cluster();
    let (a, b) = (client(cluster).await, client(cluster).await);
    for (i, primary) in cluster.primaries().into_iter().enumerate() {
        let name = cluster.key_on(primary, &format!("nr-spin-{i}-"));
        for (ours, theirs) in kinds(&a, &name).into_iter().zip(kinds(&b, &name)) {
            let kind = ours.kind();
            let guard = ours.lock().await.unwrap();
            let again = guard.scope(ours.try_lock(Duration::ZERO)).await;
            match kind {
                redlatch::Kind::Spin => {
                    // The spin lock re-enters, as Redisson's.
                    again.unwrap().expect("re-entered").unlock().await.unwrap();
                }
                _ => assert!(matches!(again, Err(Error::Reentry { .. })), "{kind:?}"),
            }
            let waiter = tokio::spawn(async move { theirs.lock().await });
            tokio::time::sleep(Duration::from_millis(30)).await;
            assert!(!waiter.is_finished(), "{kind:?}: entered a held lock");
            if kind == redlatch::Kind::Spin {
                assert_eq!(b.subscriptions(), 0, "a spin waiter subscribed");
            }
            guard.unlock().await.unwrap();
            let theirs = tokio::time::timeout(Duration::from_secs(20), waiter)
                .await
                .unwrap_or_else(|_| panic!("{kind:?}: the waiter missed the release"))
                .unwrap()
                .unwrap();
            theirs.unlock().await.unwrap();
            assert!(!ours.is_locked().await.unwrap(), "{kind:?}");
        }
    }
}
