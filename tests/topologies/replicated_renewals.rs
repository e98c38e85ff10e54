//! Renewals synced to the replicas (issue 21 item 3): with replica sync on (the default)
//! a renewal extends the holder's validity only once the eligible replicas have it, so
//! after a failover the holder's validity never outlasts the lock on the new primary.
//! The replication link is cut (the replica paused and its connection killed on the
//! primary, so nothing buffered reaches it later) before the renewal.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::sentinel::SentinelSet;
use common::{eventually, info_field, RedisServer};
use redlatch::{Client, Config, SyncReplicas};

/// Lets a renewal round take the hold (holds renewed less than lease/6 ago wait).
async fn past_young(lease: Duration) {
    tokio::time::sleep(lease / 6 + Duration::from_millis(50)).await;
}

/// Pauses `replica` and kills its link on `primary`: nothing written on the primary
/// from now on reaches it, not even from a socket buffer once it resumes.
fn cut(primary: &RedisServer, replica: &RedisServer) {
    replica.pause();
    let killed: i64 = primary.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1, "the replica's link");
}

/// When the key `name` on `server` expires, at the latest (its PTTL read after `now`);
/// `None` if it is gone.
fn expires_after(server: &RedisServer, name: &str) -> Option<Instant> {
    let before = Instant::now();
    let pttl: i64 = server.cmd(&["PTTL", name]);
    (pttl > 0).then(|| before + Duration::from_millis(pttl as u64))
}

#[tokio::test]
async fn a_renewal_the_replica_did_not_get_does_not_extend_the_validity() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let up = eventually(Duration::from_secs(10), || {
        let info: String = replica.cmd(&["INFO", "replication"]);
        info_field(&info, "master_link_status") == Some("up")
    });
    assert!(up, "the replica never synced");
    primary.set_replicated("warm", "1", 1);
    let lease = Duration::from_secs(3);
    let config = Config::single(primary.url())
        .watchdog_timeout(lease)
        .sync_replicas(SyncReplicas::Auto, Duration::from_millis(300));
    let c = Client::connect(config).await.unwrap();
    let guard = c.lock("job").lock().await.unwrap();
    // Replicated renewals count.
    past_young(lease).await;
    let before = guard.valid_until();
    c.renew_now().await;
    assert!(
        guard.valid_until() > before,
        "a replicated renewal did not count"
    );
    // The link cut: renewed on the primary, not on the replica: does not count.
    cut(&primary, &replica);
    past_young(lease).await;
    let before = guard.valid_until();
    c.renew_now().await;
    let (after, risk) = (guard.valid_until(), *guard.at_risk().borrow());
    let on_primary = expires_after(&primary, "job");
    replica.resume();
    assert_eq!(
        after, before,
        "an unreplicated renewal extended the validity"
    );
    assert_eq!(
        risk,
        Some(before),
        "not at risk while renewals are not replicated"
    );
    assert!(
        on_primary.is_some_and(|e| e > before + Duration::from_millis(100)),
        "the primary was not renewed: the test proves nothing"
    );
    // The replica back (it resyncs from the primary): renewals count again.
    let mut renewed = false;
    for _ in 0..40 {
        past_young(lease).await;
        let before = guard.valid_until();
        c.renew_now().await;
        if guard.valid_until() > before {
            renewed = true;
            break;
        }
    }
    assert!(
        renewed,
        "renewals never counted again after the replica came back"
    );
    assert_eq!(*guard.at_risk().borrow(), None);
    assert!(!guard.lost().is_cancelled());
    guard.unlock().await.unwrap();
}

/// The scenario: replication cut, a renewal, `kill -9` of the primary, Sentinel
/// promotes the replica: the holder's validity does not outlast the lock there.
#[tokio::test]
async fn after_a_failover_the_validity_never_outlasts_the_lock_on_the_new_primary() {
    let mut set = SentinelSet::start("renewals");
    let lease = Duration::from_secs(10);
    let config = Config::sentinel(set.master_name(), set.sentinel_urls())
        .watchdog_timeout(lease)
        .unavailable_timeout(Duration::from_secs(25))
        .sync_replicas(SyncReplicas::Auto, Duration::from_millis(500));
    let c = Client::connect(config).await.unwrap();
    let guard = c.lock("job").lock().await.unwrap();
    let (p, r) = (set.primary_index(), 1 - set.primary_index());
    let ty: String = set.server(r).cmd(&["TYPE", "job"]);
    assert_eq!(ty, "hash", "the acquisition was not replicated");
    // Time passes, so that a renewal counted now would extend the validity well past
    // the replica's copy of the lease.
    past_young(lease).await;
    cut(set.server(p), set.server(r));
    c.renew_now().await;
    let on_primary = expires_after(set.server(p), "job").expect("held on the primary");
    let old = set.kill_primary();
    set.server(r).resume();
    let new = set.wait_for_switch(&old);
    assert_eq!(set.server_index(&new), Some(r));
    // The validity first, then the key: a renewal in between only moves the key later.
    let valid_until = guard.valid_until();
    let on_new = expires_after(set.server(r), "job");
    match on_new {
        Some(e) => assert!(
            valid_until <= e,
            "the holder's validity ends {:?} after the lock on the new primary",
            valid_until - e
        ),
        None => assert!(
            valid_until <= Instant::now(),
            "the lock is gone on the new primary, yet the holder's validity runs"
        ),
    }
    // The unreplicated renewal had extended the old primary's copy past the validity:
    // without replica sync of renewals the validity would have followed it.
    assert!(on_primary > valid_until + Duration::from_millis(500));
}
