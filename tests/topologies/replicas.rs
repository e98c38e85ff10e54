//! Replica-synced acquisitions (`Config::sync_replicas`) on a standalone primary with
//! one replica: WAIT in the same round trip, typed errors, undo, WAITAOF detection.

use redlatch_testkit as common;

use std::time::Duration;

use common::{eventually, RedisServer};
use redlatch::{Client, Config, Error, SyncReplicas};

/// A primary and its replica, the link up.
fn pair() -> (RedisServer, RedisServer) {
    pair_with(&[])
}

/// [`pair`], both servers started with `args` too.
fn pair_with(args: &[&str]) -> (RedisServer, RedisServer) {
    let primary = RedisServer::start_with(args);
    let port = primary.port().to_string();
    let replica_args: Vec<&str> = ["--replicaof", "127.0.0.1", &port]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    let replica = RedisServer::start_with(&replica_args);
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
                // Valkey 8 lists `type=replica` after the lag: read the field.
                && l.split(',').any(|f| f == "lag=0" || f == "lag=1")
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

/// Whether `server` has the WAITAOF command (Redis >= 7.2, Valkey), asked of the server
/// itself rather than judged by its version line.
fn has_waitaof(server: &RedisServer) -> bool {
    let info: redis::Value = server.cmd(&["COMMAND", "INFO", "WAITAOF"]);
    matches!(info, redis::Value::Array(v) if v.first().is_some_and(|i| *i != redis::Value::Nil))
}

#[tokio::test]
async fn aof_sync_on_a_server_without_waitaof_is_refused_at_connect() {
    // Redis < 7.2 (Debian's 7.0, 6.2) has no WAITAOF.
    let server = RedisServer::start();
    if has_waitaof(&server) {
        eprintln!(
            "skipped: {} has WAITAOF (aof_sync_waits_for_the_primary_and_replica_fsync runs instead)",
            common::server_version()
        );
        return;
    }
    let err = Client::connect(config(&server, SyncReplicas::Aof))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason: m, .. } if m.contains("WAITAOF")),
        "{err:?}"
    );
}

/// On a server with WAITAOF: refused at connect without an append-only file; with one
/// on the primary and its replica, an acquisition returns once both have fsynced it, and
/// a paused replica makes it fail typed, counting the primary's own fsync, and undone.
#[tokio::test]
async fn aof_sync_waits_for_the_primary_and_replica_fsync() {
    let probe = RedisServer::start();
    if !has_waitaof(&probe) {
        eprintln!(
            "skipped: WAITAOF needs Redis >= 7.2 or Valkey (this server: {})",
            common::server_version()
        );
        return;
    }
    // Without an append-only file, WAITAOF cannot count the primary's fsync: refused
    // at connect, the cause named (it used to fail each acquisition as "unusable data").
    let err = Client::connect(config(&probe, SyncReplicas::Aof))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Config { reason: m, .. } if m.contains("appendonly yes") && m.contains(&probe.addr())),
        "{err:?}"
    );
    drop(probe);
    // appendfsync always: each write is fsynced at once, so a short sync timeout
    // suffices. It must stay well below MAX_LAG_S (3 s): a replica paused for longer is
    // no longer waited for (it stopped acknowledging), and the acquisition below would
    // then rightly succeed on the primary's fsync alone (it did, with a 3 s timeout).
    let (primary, replica) = pair_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let c = Client::connect(
        Config::single(primary.url()).sync_replicas(SyncReplicas::Aof, Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let guard = c.lock("aof").lock().await.unwrap();
    let ty: String = replica.cmd(&["TYPE", "aof"]);
    assert_eq!(ty, "hash", "lock() returned before the replica had it");
    replica.pause();
    let err = c.lock("aof-other").lock().await.unwrap_err();
    replica.resume();
    match &err {
        Error::NotReplicated { acked, wanted, .. } => assert_eq!((*acked, *wanted), (1, 2)),
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(!c.lock("aof-other").is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    // The append-only file switched off after connect: WAITAOF is refused, after the
    // lock script ran. Nothing was acknowledged: a typed NotReplicated, the hold undone
    // (it was a BadData with an empty detail, the lock left granted).
    let _: String = primary.cmd(&["CONFIG", "SET", "appendonly", "no"]);
    let err = c.lock("aof-off").lock().await.unwrap_err();
    assert!(
        matches!(&err, Error::NotReplicated { acked: 0, .. }),
        "expected NotReplicated, got {err:?}"
    );
    assert!(!c.lock("aof-off").is_locked().await.unwrap());
    let exists: i64 = primary.cmd(&["EXISTS", "aof-off"]);
    assert_eq!(exists, 0, "the refused acquisition was left on the primary");
}
