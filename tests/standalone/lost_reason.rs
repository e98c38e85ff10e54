//! Why a hold was lost (issue 21 item 5): `guard.lost_reason()` once `lost()` fired,
//! one test per reason the library can find out on a standalone master (a failover's
//! `MasterDataLost` is in tests/topologies/cluster_faults.rs).

use redlatch_testkit as common;

use std::time::Duration;

use common::RedisServer;
use redlatch::{Client, Config, Error, LostReason};

const LEASE: Duration = Duration::from_millis(3000);

async fn client(url: String) -> Client {
    Client::connect(Config::single(url).watchdog_timeout(LEASE))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_lock_deleted_behind_its_back_is_lost_as_expired_or_deleted() {
    let server = RedisServer::start();
    let c = client(server.url()).await;
    let guard = c.lock("gone").lock().await.unwrap();
    assert!(guard.lost_reason().is_none());
    let _: i64 = server.cmd(&["DEL", "gone"]);
    tokio::time::sleep(LEASE / 6 + Duration::from_millis(50)).await;
    c.renew_now().await;
    assert!(
        guard.lost().is_cancelled(),
        "the renewal did not find it gone"
    );
    assert!(
        matches!(guard.lost_reason(), Some(LostReason::ExpiredOrDeleted)),
        "{:?}",
        guard.lost_reason()
    );
}

#[tokio::test]
async fn closing_the_client_loses_its_holds_as_client_closed() {
    let server = RedisServer::start();
    let c = client(server.url()).await;
    let guard = c.lock("closing").lock().await.unwrap();
    c.clone().close(Duration::from_secs(1)).await;
    assert!(guard.lost().is_cancelled());
    assert!(matches!(
        guard.lost_reason(),
        Some(LostReason::ClientClosed)
    ));
}

/// Renewals refused by the ACL (no `+hexists`, which renew.lua calls): the lock is lost
/// when its validity ends, and the reason is the refusal, naming the command.
#[tokio::test]
async fn a_lock_whose_renewals_are_refused_is_lost_as_permission_denied() {
    let server = RedisServer::start();
    let _: () = server.cmd(&[
        "ACL", "SETUSER", "norenew", "on", ">pw", "~*", "&*", "+@all", "-hexists",
    ]);
    let port = server.port();
    let c = client(format!("redis://norenew:pw@127.0.0.1:{port}")).await;
    let guard = c.lock("refused").lock().await.unwrap(); // a fresh grant needs no HEXISTS
    let mut risk = guard.at_risk();
    let lost = tokio::time::timeout(3 * LEASE, guard.lost().cancelled()).await;
    assert!(
        lost.is_ok(),
        "a lock nobody can renew was never reported lost"
    );
    // At risk first: the refusals were failures on the (only) master.
    assert!(risk.borrow_and_update().is_some() || risk.has_changed().is_ok());
    match guard.lost_reason() {
        Some(r @ LostReason::PermissionDenied(Error::PermissionDenied { .. })) => {
            let text = r.to_string();
            assert!(text.contains("hexists"), "{text}");
            assert!(r.is_permission_denied());
            assert!(!text.contains("pw@"), "{text}");
        }
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
}
