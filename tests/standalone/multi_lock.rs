//! The multi-lock (Redisson RedissonMultiLock): all or none, no deadlock between
//! overlapping sets taken in different orders, one `lost()` for every part.

use redlatch_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use common::inside::Values;
use common::{eventually_async, numsub, RedisServer};
use redlatch::{Acquire, Client, Config, Error, Hold, LostReason, MultiLock};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_in_different_orders_never_deadlock_nor_overlap() {
    let server = RedisServer::start();
    let names = ["m:a", "m:b", "m:c", "m:d"];
    let holders: Arc<Values> = Default::default();
    let mut tasks = Vec::new();
    for c in 0..3 {
        let client = client(&server).await;
        for t in 0..3usize {
            let holders = holders.clone();
            // Each task its own overlapping set, listed in its own order.
            let mut set: Vec<&'static str> =
                names.iter().copied().cycle().skip(c + t).take(3).collect();
            if t % 2 == 1 {
                set.reverse();
            }
            let m = client.multi_lock(set.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..8 {
                    let g = m.lock().await.unwrap();
                    holders.hold(&set).await;
                    g.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("deadlock: a multi-lock never finished")
            .unwrap();
    }
    let keys: Vec<String> = server.lock_keys("*");
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test]
async fn all_or_none_a_busy_part_leaves_nothing_held() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("p:2").lock().await.unwrap();
    let m = b.multi_lock(["p:1", "p:2", "p:3"]);
    assert!(m.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert!(m
        .try_lock(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    for n in ["p:1", "p:3"] {
        assert!(!b.lock(n).is_locked().await.unwrap(), "{n} kept");
    }
    // Waiting: it gets all of them once the busy part is free.
    let waiter = tokio::spawn(async move { m.lock().await.map(|g| g.names().len()) });
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.unwrap(), 3);
}

#[tokio::test]
async fn a_lost_part_cancels_the_guards_lost_token() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let g = client.multi_lock(["l:1", "l:2"]).lock().await.unwrap();
    assert!(!g.lost().is_cancelled());
    client.lock("l:2").force_unlock().await.unwrap();
    let lost = g.lost();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .is_ok()
    );
    assert!(g.unlock().await.unwrap_err().is_not_held());
    assert!(!client.lock("l:1").is_locked().await.unwrap());
}

/// The guard has the shape of every hold: it is at risk while a part is (the earliest
/// end), asked to release when a part is, and says why a part was lost.
#[tokio::test]
async fn the_guard_follows_its_parts_risk_revocation_and_loss() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(4500);
    let config = Config::single(server.url()).watchdog_timeout(lease);
    let client = Client::connect(config).await.unwrap();
    let g = client.multi_lock(["h:1", "h:2"]).lock().await.unwrap();
    let mut risk = g.at_risk();
    assert_eq!(*risk.borrow(), None);
    let revoke = g.revoke_requested();
    let other = self::client(&server).await;
    other.lock("h:2").request_release().await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(5), revoke.cancelled()).await;
    assert!(
        heard.is_ok(),
        "a part's release request did not reach the guard"
    );
    // Renewed just now, then the master stops answering: the next round flags the risk.
    tokio::time::sleep(lease / 6 + Duration::from_millis(50)).await;
    client.renew_now().await;
    server.pause();
    let flagged = tokio::time::timeout(2 * lease, risk.wait_for(|r| r.is_some())).await;
    let flagged = flagged.is_ok_and(|r| r.is_ok());
    let end = *risk.borrow();
    server.resume();
    assert!(flagged, "never at risk");
    let end = end.expect("at risk with an end");
    assert!(
        end <= std::time::Instant::now() + lease,
        "an end past the lease: {end:?}"
    );
    // A renewal that counts clears it.
    tokio::time::sleep(lease / 6 + Duration::from_millis(50)).await;
    client.renew_now().await;
    let cleared = tokio::time::timeout(lease, risk.wait_for(|r| r.is_none())).await;
    assert!(cleared.is_ok(), "still at risk after a renewal");
    assert!(g.lost_reason().is_none());
    client.lock("h:1").force_unlock().await.unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), g.lost().cancelled()).await;
    assert!(lost.is_ok());
    assert!(matches!(g.lost_reason(), Some(LostReason::ForceUnlocked)));
    drop(g);
    // Taken through the shared shape: a `dyn Hold` from a `dyn Acquire`.
    let wanted: Box<dyn Acquire> = Box::new(client.multi_lock(["h:1", "h:2"]));
    let hold: Box<dyn Hold> = wanted.acquire_hold(None, None).await.unwrap().unwrap();
    assert!(hold.holder().starts_with(&client.id().to_string()));
    assert!(hold.validity() > Duration::ZERO && hold.fencing_token().is_none());
    let busy = other.multi_lock(["h:2"]);
    assert!(busy
        .acquire_hold(Some(Duration::ZERO), None)
        .await
        .unwrap()
        .is_none());
    hold.unlock().await.unwrap();
    assert!(!client.lock("h:2").is_locked().await.unwrap());
}

#[tokio::test]
async fn a_cancelled_multi_lock_leaves_no_part_or_subscription() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a.lock("c:3").lock().await.unwrap();
    for delay_ms in [0u64, 1, 5, 20, 150] {
        let m = b.multi_lock(["c:1", "c:2", "c:3"]);
        let t = tokio::spawn(async move { m.lock().await.map(drop) });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        t.abort();
        let _ = t.await;
    }
    assert!(
        eventually_async(Duration::from_secs(5), || {
            let keys: Vec<String> = server.lock_keys("*");
            keys == ["c:3"] && numsub(&server, "redisson_lock__channel:{c:3}") == 0
        })
        .await
    );
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn mixed_kinds_and_bad_input() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let err = client
        .multi_lock(Vec::<String>::new())
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err:?}");
    let err = client.multi_lock(["ok", ""]).lock().await.unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err:?}");
    assert!(
        !client.lock("ok").is_locked().await.unwrap(),
        "a part kept after an error"
    );
    let m = MultiLock::new([
        client.read_write_lock("mx").read(),
        client.fenced_lock("mx:f"),
    ]);
    let g = m.lock_with_lease(Duration::from_secs(5)).await.unwrap();
    assert_eq!(g.names(), ["mx", "mx:f"]);
    assert!(g.validity() < Duration::from_secs(5));
    g.unlock().await.unwrap();
}
