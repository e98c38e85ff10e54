//! Writes guarded by the lock and cooperative revocation (issue 27.2, 27.3) on a
//! Sentinel deployment: a guarded write lands on the primary while the lock is held; a
//! release request reaches the holder; after the primary is killed and the sentinels
//! promote its replica, the same guard (its lock acknowledged by the replica, as
//! `SyncReplicas::Auto` makes it) still writes, on the new primary, and a force-unlock
//! there makes its next write refused.

use redlatch_testkit as common;

use std::time::Duration;

use common::sentinel::SentinelSet;
use redlatch::{Client, Config, SyncReplicas};

#[tokio::test]
async fn guarded_writes_and_release_requests_follow_a_sentinel_failover() {
    let mut set = SentinelSet::start("guarded");
    let config = Config::sentinel(set.master_name(), set.sentinel_urls())
        .watchdog_timeout(Duration::from_secs(10))
        .unavailable_timeout(Duration::from_secs(25))
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let (holder, asker) = (
        Client::connect(config.clone()).await.unwrap(),
        Client::connect(config).await.unwrap(),
    );
    let guard = holder.fenced_lock("{job}:lock").lock().await.unwrap();
    assert_eq!(
        guard.guarded().incr_by("{job}:runs", 1).await.unwrap(),
        1,
        "the write lands while the lock is held"
    );
    let primary = set.server(set.primary_index());
    assert_eq!(primary.cmd::<i64>(&["GET", "{job}:runs"]), 1);

    let revoke = guard.revoke_requested();
    // A request may reach the holder's client before it listens: the marker beside the
    // lock is read when listening starts, so either order is heard.
    let asked = asker.lock("{job}:lock").request_release().await.unwrap();
    assert_eq!(asked.holders, [guard.holder().to_string()]);
    assert!(
        tokio::time::timeout(Duration::from_secs(10), revoke.cancelled())
            .await
            .is_ok(),
        "the release request was not heard"
    );

    let old = set.kill_primary();
    let new = set.wait_for_switch(&old);
    assert_ne!(old, new);
    // The lock came across with the replica: the guard still holds it on the new
    // primary, so its write lands there (retried while the client finds the primary).
    let mut landed = None;
    for _ in 0..60 {
        match guard.guarded().incr_by("{job}:runs", 1).await {
            Ok(n) => {
                landed = Some(n);
                break;
            }
            Err(e) if e.is_not_held() => panic!("the lock did not survive the failover: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    assert_eq!(landed, Some(2), "the write after the failover");
    let promoted = set.server(set.server_index(&new).expect("a known server"));
    assert_eq!(promoted.cmd::<i64>(&["GET", "{job}:runs"]), 2);

    asker
        .fenced_lock("{job}:lock")
        .force_unlock()
        .await
        .unwrap();
    let refused = guard.guarded().incr_by("{job}:runs", 1).await.unwrap_err();
    assert!(refused.is_not_held(), "{refused}");
    assert_eq!(promoted.cmd::<i64>(&["GET", "{job}:runs"]), 2);
}
