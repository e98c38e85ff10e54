//! Sentinel mode on a real set-up (a primary, its replica, three sentinels): the
//! primary found through the sentinels, followed across a failover, waiters
//! resubscribed on the new primary, replica-synced acquisitions.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::sentinel::SentinelSet;
use redlatch::{Client, Config, Error, SyncReplicas, Topology};

fn config(set: &SentinelSet) -> Config {
    Config::sentinel(set.master_name(), set.sentinel_urls())
        .watchdog_timeout(Duration::from_secs(10))
        .unavailable_timeout(Duration::from_secs(25))
}

/// True if data node `i` holds the lock hash `name`.
fn has_lock(set: &SentinelSet, i: usize, name: &str) -> bool {
    let ty: String = set.server(i).cmd(&["TYPE", name]);
    ty == "hash"
}

#[tokio::test]
async fn the_primary_is_found_through_the_sentinels() {
    let set = SentinelSet::start("found");
    let c = Client::connect(config(&set)).await.unwrap();
    assert!(matches!(c.config().topology(), Topology::Sentinel { .. }));
    let guard = c.lock("orders:1").lock().await.unwrap();
    assert!(has_lock(&set, set.primary_index(), "orders:1"));
    guard.unlock().await.unwrap();
    // An unknown name is a clear configuration error, not a hang.
    let err = Client::connect(Config::sentinel("nobody", set.sentinel_urls()))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason: m, .. } if m.contains("nobody")),
        "{err:?}"
    );
}

#[tokio::test]
async fn after_a_failover_a_synced_lock_survives_and_waiters_are_woken() {
    let mut set = SentinelSet::start("failover");
    let cfg = config(&set).sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let (a, b) = (
        Client::connect(cfg.clone()).await.unwrap(),
        Client::connect(cfg).await.unwrap(),
    );
    let held = a.lock("job").lock().await.unwrap();
    let replica = 1 - set.primary_index();
    assert!(
        has_lock(&set, replica, "job"),
        "WAIT returned before the replica had it"
    );
    let waiter = common::timed_waiter(b.lock("job"), Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let old = set.kill_primary();
    let new = set.wait_for_switch(&old);
    assert_ne!(old, new);
    // Still held on the new primary, renewed there, and released there.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!held.lost().is_cancelled(), "the synced lock was lost");
    assert!(has_lock(&set, replica, "job"));
    let released = Instant::now();
    held.unlock().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter slept through the switch")
        .unwrap();
    // Woken by the release: the lease (10 s, renewed) is the only other way out.
    assert!(acquired.duration_since(released) < Duration::from_secs(5));
    // New operations go to the new primary without user action.
    common::lock_and_unlock(&a, "after").await;
}

#[tokio::test]
async fn a_paused_replica_fails_a_synced_acquire_with_a_typed_error() {
    let set = SentinelSet::start("paused");
    let cfg = config(&set).sync_replicas(SyncReplicas::Auto, Duration::from_millis(400));
    let c = Client::connect(cfg).await.unwrap();
    c.lock("warm").lock().await.unwrap().unlock().await.unwrap();
    let replica = 1 - set.primary_index();
    set.server(replica).pause();
    let err = c.lock("paused-job").lock().await.unwrap_err();
    set.server(replica).resume();
    assert!(
        matches!(
            err,
            Error::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!has_lock(&set, set.primary_index(), "paused-job"));
}
