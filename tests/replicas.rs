//! Replica-synced acquisitions (`Config::sync_replicas`) on a standalone primary with
//! one replica: WAIT in the same round trip, typed errors, undo, WAITAOF detection.

mod common;

use std::time::Duration;

use common::{eventually, RedisServer};
use redlatch::{Client, Config, Error, SyncReplicas};

/// A primary and its replica, the link up.
fn pair() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let up = eventually(Duration::from_secs(10), || {
        let info: String = replica.cmd(&["INFO", "replication"]);
        info.contains("master_link_status:up")
    });
    assert!(up, "the replica never synced");
    // Eligible on the primary's side too (issue 21.2: online, acknowledging, caught
    // up): only then does an acquisition wait for it. A loaded machine can take a
    // while before the replica's first acknowledgement.
    let eligible = eventually(Duration::from_secs(20), || {
        let info: String = primary.cmd(&["INFO", "replication"]);
        info.lines().any(|l| {
            l.starts_with("slave0:")
                && l.contains("state=online")
                && !l.contains("offset=0,")
                && (l.ends_with("lag=0") || l.ends_with("lag=1"))
        })
    });
    assert!(
        eligible,
        "the replica never acknowledged the primary's stream"
    );
    (primary, replica)
}

fn config(primary: &RedisServer, mode: SyncReplicas) -> Config {
    Config::single(primary.url()).sync_replicas(mode, Duration::from_millis(300))
}

#[tokio::test]
async fn auto_waits_for_the_replica_and_fails_typed_when_it_is_paused() {
    let (primary, replica) = pair();
    let c = Client::connect(config(&primary, SyncReplicas::Auto))
        .await
        .unwrap();
    let guard = c.lock("synced").lock().await.unwrap();
    let ty: String = replica.cmd(&["TYPE", "synced"]);
    assert_eq!(ty, "hash", "lock() returned before the replica had it");
    replica.pause();
    // A re-entry the replica does not see is undone too: the count stays 1.
    let err = guard.scope(c.lock("synced").lock()).await.unwrap_err();
    let fresh = c.lock("other").lock().await.unwrap_err();
    replica.resume();
    for e in [&err, &fresh] {
        match e {
            Error::NotReplicated {
                addr,
                acked,
                wanted,
                timeout,
            } => {
                assert_eq!(addr, &primary.addr());
                assert_eq!((*acked, *wanted), (0, 1));
                assert_eq!(*timeout, Duration::from_millis(300));
            }
            other => panic!("expected NotReplicated, got {other:?}"),
        }
    }
    assert!(err.to_string().contains("0 of 1 replicas"), "{err}");
    assert_eq!(c.lock("synced").hold_count().await.unwrap(), 1);
    assert!(!c.lock("other").is_locked().await.unwrap());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_count_above_the_replicas_fails_and_off_never_waits() {
    let (primary, replica) = pair();
    let two = Client::connect(config(&primary, SyncReplicas::Count(2)))
        .await
        .unwrap();
    let err = two.lock("two").lock().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotReplicated {
                acked: 1,
                wanted: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!two.lock("two").is_locked().await.unwrap());
    replica.pause();
    let off = Client::connect(config(&primary, SyncReplicas::Off))
        .await
        .unwrap();
    let g = off.lock("off").lock().await.unwrap();
    replica.resume();
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn a_fair_and_a_fenced_acquire_are_synced_too() {
    let (primary, replica) = pair();
    let c = Client::connect(config(&primary, SyncReplicas::Auto))
        .await
        .unwrap();
    c.lock("warm").lock().await.unwrap().unlock().await.unwrap();
    replica.pause();
    let fair = c.fair_lock("fair").lock().await.unwrap_err();
    let fenced = c.fenced_lock("fenced").lock().await.unwrap_err();
    replica.resume();
    for e in [fair, fenced] {
        assert!(matches!(e, Error::NotReplicated { .. }), "{e:?}");
    }
    assert!(!c.fair_lock("fair").is_locked().await.unwrap());
    assert!(!c.fenced_lock("fenced").is_locked().await.unwrap());
}

#[tokio::test]
async fn aof_sync_on_a_server_without_waitaof_is_refused_at_connect() {
    // Debian's Redis 7.0 has no WAITAOF (7.2+).
    let server = RedisServer::start();
    let version: String = server.cmd(&["INFO", "server"]);
    if !version.contains("redis_version:7.0") {
        eprintln!("skipped: this server may have WAITAOF");
        return;
    }
    let err = Client::connect(config(&server, SyncReplicas::Aof))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("WAITAOF")),
        "{err:?}"
    );
}
