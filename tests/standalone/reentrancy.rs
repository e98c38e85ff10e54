//! Reentrancy in a guard's scope: nesting, unwinding, other tasks and calls wait,
//! guards move. (tests/standalone/exclusion_in_task.rs: futures of one task exclude each other.)

use redlatch_testkit as common;

use std::time::Duration;

use common::RedisServer;
use redlatch::{Client, Config};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn nesting_three_deep_counts_up_and_unwinds_to_a_free_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("nest");
    let g1 = lock.lock().await.unwrap();
    let g2 = g1.scope(lock.lock()).await.unwrap();
    let g3 = g2.scope(lock.lock()).await.unwrap();
    assert_eq!(g3.holder(), g1.holder());
    assert_eq!(lock.hold_count().await.unwrap(), 3);
    let field = g1.holder().to_string();
    assert_eq!(server.cmd::<i64>(&["HGET", "nest", &field]), 3);
    g3.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    g2.unlock().await.unwrap();
    assert!(lock.is_held_by_current_task().await.unwrap());
    g1.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert_eq!(server.cmd::<i64>(&["EXISTS", "nest"]), 0);
}

#[tokio::test]
async fn the_holder_field_is_the_client_uuid_and_a_number() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let g = client.lock("who").lock().await.unwrap();
    let (uuid, n) = g.holder().split_once(':').unwrap();
    assert_eq!(uuid, client.id().to_string());
    assert_eq!(uuid.len(), 36);
    assert!(n.parse::<u64>().is_ok());
    let fields: Vec<String> = server.cmd(&["HKEYS", "who"]);
    assert_eq!(fields, vec![g.holder().to_string()]);
    let ttl: i64 = server.cmd(&["PTTL", "who"]);
    assert!(
        ttl > 25_000 && ttl <= 30_000,
        "watchdog lease is 30 s, got {ttl}"
    );
    g.unlock().await.unwrap();
    // An explicit owner is one holder wherever it asks; another owner waits.
    let lock = client.lock("owned");
    let (a, b) = (client.owner(), client.owner());
    assert_ne!(a.number(), b.number());
    let held = lock.owned_by(a).lock().await.unwrap();
    assert!(lock
        .owned_by(b)
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let nested = lock.owned_by(a).try_lock(Duration::ZERO).await.unwrap();
    nested.expect("the owner re-enters").unlock().await.unwrap();
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn another_task_of_the_same_client_waits_until_release() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("other-task");
    let g = lock.lock().await.unwrap();
    let l2 = lock.clone();
    let waiter = tokio::spawn(async move {
        let g = l2.lock().await.unwrap();
        let held = l2.hold_count().await.unwrap();
        g.unlock().await.unwrap();
        held
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the other task must wait");
    assert_eq!(
        g.scope(lock.try_lock(Duration::ZERO))
            .await
            .unwrap()
            .map(|g| g.name().to_string()),
        Some("other-task".into())
    );
    // That try_lock re-entered (count 2) and its guard was dropped: still held once.
    // A dropped guard releases in the background, so the count comes down when that
    // release has run, not at a fixed time after the drop.
    let field = g.holder().to_string();
    let once = || server.cmd::<i64>(&["HGET", "other-task", &field]) == 1;
    assert!(
        common::eventually_async(Duration::from_secs(5), once).await,
        "count {} after the re-entered guard was dropped",
        server.cmd::<i64>(&["HGET", "other-task", &field])
    );
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(!waiter.is_finished());
    g.unlock().await.unwrap();
    assert_eq!(waiter.await.unwrap(), 1);
}

#[tokio::test]
async fn a_guard_moved_to_another_task_releases_with_its_own_identity() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("moved");
    let g = lock.lock().await.unwrap();
    tokio::spawn(async move { g.unlock().await })
        .await
        .unwrap()
        .unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn dropping_guards_releases_in_the_background() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("dropped");
    let g1 = lock.lock().await.unwrap();
    let g2 = g1.scope(lock.lock()).await.unwrap();
    // Re-entered: one hold.
    assert_eq!(client.held_locks(), 1);
    // Each client is a holder of its own: another connect, another id.
    assert_ne!(
        client.id(),
        Client::connect(Config::single(server.url()))
            .await
            .unwrap()
            .id()
    );
    drop(g2);
    assert!(
        common::eventually_async(Duration::from_secs(5), || server.cmd::<Option<i64>>(&[
            "HGET",
            "dropped",
            g1.holder()
        ]) == Some(1))
        .await
    );
    drop(g1);
    assert!(
        common::eventually_async(Duration::from_secs(5), || server
            .cmd::<i64>(&["EXISTS", "dropped"])
            == 0)
        .await
    );
    assert_eq!(client.held_locks(), 0);
}

/// User code nests our futures in its own async fns; this must compile without raising
/// the recursion limit (rustc's layout queries overflow on deeply nested futures).
async fn three_levels_deep(lock: redlatch::Lock) -> redlatch::Result<()> {
    async fn inner(lock: redlatch::Lock) -> redlatch::Result<()> {
        let g = lock.lock().await?;
        drop(
            g.scope(lock.try_lock_with_lease(Duration::ZERO, Duration::from_secs(1)))
                .await?
                .expect("re-entered in the scope"),
        );
        g.unlock().await
    }
    async fn middle(lock: redlatch::Lock) -> redlatch::Result<()> {
        inner(lock).await
    }
    middle(lock).await
}

#[tokio::test]
async fn lock_calls_nested_in_user_async_fns_compile_and_run() {
    let server = RedisServer::start();
    let client = client(&server).await;
    tokio::spawn(three_levels_deep(client.lock("deep")))
        .await
        .unwrap()
        .unwrap();
    // The dropped inner guard is released in the background.
    let free = common::eventually_async(Duration::from_secs(5), || {
        server.cmd::<i64>(&["EXISTS", "deep"]) == 0
    });
    assert!(
        free.await,
        "{:?}",
        server.cmd::<Vec<String>>(&["HGETALL", "deep"])
    );
}

#[test]
fn lock_futures_and_guards_are_send_and_static() {
    fn send_static<T: Send + 'static>(_: &T) {}
    fn check(lock: redlatch::Lock) {
        send_static(&async move { lock.lock().await });
    }
    fn guard_is_send<T: Send + Sync + 'static>() {}
    guard_is_send::<redlatch::LockGuard>();
    guard_is_send::<redlatch::Client>();
    let _ = check;
}

#[tokio::test]
async fn close_waits_for_background_releases_before_returning() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let guards: Vec<_> = futures_lock_all(&client, 50).await;
    drop(guards);
    client.clone().close(Duration::from_secs(5)).await;
    // Every drop-release has reached Redis by the time close() returns.
    assert_eq!(server.dbsize(), 0);
}

async fn futures_lock_all(client: &Client, n: usize) -> Vec<redlatch::LockGuard> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(client.lock(format!("close:{i}")).lock().await.unwrap());
    }
    out
}
