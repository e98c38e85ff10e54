//! Writes guarded by the lock (issue 27.2) on real servers: each write kind lands while
//! the lock is held; a holder stalled past its lease resumes and has its write refused
//! while the new holder's lands; keys outside the lock's slot are refused before
//! anything is sent; a user's script runs only while the lock is held; a cluster
//! routes them to the lock's slot; Redlock refuses them.

use redlatch_testkit as common;

use std::sync::LazyLock;
use std::time::Duration;

use common::cluster::shared_cluster;
use common::RedisServer;
use redlatch::{Client, Config, Error, GuardedScript};

static CAS: LazyLock<GuardedScript> = LazyLock::new(|| {
    GuardedScript::new(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/lua/examples/cas.lua"
    )))
});

async fn client(url: String, lease: Duration) -> Client {
    Client::connect(Config::single(url).watchdog_timeout(lease))
        .await
        .unwrap()
}

#[tokio::test]
async fn every_write_kind_lands_while_held_and_none_after() {
    let server = RedisServer::start();
    let c = client(server.url(), Duration::from_secs(30)).await;
    for lock in [c.fenced_lock("{o}:1"), c.lock("{o}:1")] {
        let _ = server.cmd::<i64>(&["DEL", "{o}:s", "{o}:h", "{o}:n", "{o}:l", "{o}:x"]);
        let guard = lock.lock().await.unwrap();
        let w = guard.guarded();
        w.set("{o}:s", "v1").await.unwrap();
        assert_eq!(w.hset("{o}:h", &[("a", "1"), ("b", "2")]).await.unwrap(), 2);
        // The reply counts new fields only: "b" is updated, "c" added.
        assert_eq!(w.hset("{o}:h", &[("b", "2"), ("c", "3")]).await.unwrap(), 1);
        assert_eq!(w.incr_by("{o}:n", 3).await.unwrap(), 3);
        assert_eq!(w.incr_by("{o}:n", -1).await.unwrap(), 2);
        assert_eq!(w.rpush("{o}:l", &["x", "y"]).await.unwrap(), 2);
        let id = w.xadd("{o}:x", &[("k", "v")]).await.unwrap();
        assert!(id.contains('-'), "{id}");
        let ms_seq = |id: &str| {
            let (ms, seq) = id.split_once('-').unwrap();
            (ms.parse::<u64>().unwrap(), seq.parse::<u64>().unwrap())
        };
        let next = w.xadd("{o}:x", &[("k", "w")]).await.unwrap();
        assert!(ms_seq(&next) > ms_seq(&id), "{next} after {id}");
        assert_eq!(server.cmd::<String>(&["GET", "{o}:s"]), "v1");
        assert_eq!(server.cmd::<String>(&["HGET", "{o}:h", "b"]), "2");
        assert_eq!(
            server.cmd::<Vec<String>>(&["LRANGE", "{o}:l", "0", "-1"]),
            ["x", "y"]
        );
        assert_eq!(server.cmd::<i64>(&["XLEN", "{o}:x"]), 2);
        assert_eq!(w.del(["{o}:s", "{o}:h", "{o}:none"]).await.unwrap(), 2);
        // Already gone: nothing deleted.
        assert_eq!(w.del(["{o}:s"]).await.unwrap(), 0);
        // Another key: refused before sending, nothing written.
        let err = w.set("{other}:s", "v").await.unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
        assert_eq!(server.cmd::<i64>(&["EXISTS", "{other}:s"]), 0);
        // Broken by an operator: every write is refused, nothing written.
        lock.force_unlock().await.unwrap();
        assert!(w.set("{o}:s", "late").await.unwrap_err().is_not_held());
        assert!(w.incr_by("{o}:n", 100).await.unwrap_err().is_not_held());
        assert!(w.del(["{o}:l"]).await.unwrap_err().is_not_held());
        assert_eq!(server.cmd::<i64>(&["EXISTS", "{o}:s"]), 0);
        assert_eq!(server.cmd::<i64>(&["GET", "{o}:n"]), 2);
        assert_eq!(server.cmd::<i64>(&["LLEN", "{o}:l"]), 2);
        drop(guard);
    }
    // A lock named without braces: its whole name is the tag.
    let guard = c.lock("acct:7").lock().await.unwrap();
    guard.guarded().set("{acct:7}:balance", 1).await.unwrap();
    assert!(matches!(
        guard.guarded().set("acct:7:balance", 1).await,
        Err(Error::Unsupported { .. })
    ));
}

/// A holder whose process stalls (its runtime thread blocked, so nothing renews) past
/// its lease: another client takes the lock and writes; the first resumes and writes
/// with its guard: Redis refuses it, and the new holder's value stays.
#[tokio::test]
async fn a_holder_stalled_past_its_lease_has_its_write_refused_while_the_new_holders_lands() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let url = server.url();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
    let stalled = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let c = client(url, lease).await;
            let guard = c.fenced_lock("{ledger}").lock().await.unwrap();
            guard.guarded().set("{ledger}:owner", "A").await.unwrap();
            held_tx.send(guard.fencing_token().unwrap()).unwrap();
            // The stall: the whole runtime, watchdog included, blocked.
            resume_rx.recv().unwrap();
            let w = guard.guarded();
            (
                w.set("{ledger}:owner", "A (late)").await,
                w.incr_by("{ledger}:writes", 1).await,
            )
        })
    });
    let token_a = tokio::task::spawn_blocking(move || held_rx.recv().unwrap())
        .await
        .unwrap();
    let b = client(server.url(), Duration::from_secs(30)).await;
    let guard_b = tokio::time::timeout(Duration::from_secs(30), b.fenced_lock("{ledger}").lock())
        .await
        .expect("B gets the lock once A's lease ran out")
        .unwrap();
    assert!(guard_b.fencing_token().unwrap() > token_a);
    guard_b.guarded().set("{ledger}:owner", "B").await.unwrap();
    guard_b
        .guarded()
        .incr_by("{ledger}:writes", 1)
        .await
        .unwrap();
    resume_tx.send(()).unwrap();
    let (set, incr) = tokio::task::spawn_blocking(move || stalled.join().unwrap())
        .await
        .unwrap();
    assert!(matches!(set, Err(Error::NotHeld { .. })), "{set:?}");
    assert!(matches!(incr, Err(Error::NotHeld { .. })), "{incr:?}");
    assert_eq!(server.cmd::<String>(&["GET", "{ledger}:owner"]), "B");
    assert_eq!(server.cmd::<i64>(&["GET", "{ledger}:writes"]), 1);
    // B goes on writing: the late attempt changed nothing for it.
    guard_b.guarded().set("{ledger}:owner", "B2").await.unwrap();
    guard_b.unlock().await.unwrap();
}

#[tokio::test]
async fn a_users_script_runs_only_while_the_lock_is_held_and_reentry_writes_too() {
    let server = RedisServer::start();
    let c = client(server.url(), Duration::from_secs(30)).await;
    let lock = c.fenced_lock("{acct}:9");
    let guard = lock.lock().await.unwrap();
    guard.guarded().set("{acct}:9:bal", "10").await.unwrap();
    let swapped: bool = guard
        .guarded()
        .script(&CAS, &["{acct}:9:bal"], &["10", "25"])
        .await
        .unwrap();
    assert!(swapped);
    // Re-entered: a later token of the same holder; the outer guard still writes.
    guard
        .scope(async {
            let inner = lock.lock().await.unwrap();
            assert!(inner.fencing_token() > guard.fencing_token());
            inner.guarded().set("{acct}:9:inner", "1").await.unwrap();
            inner.unlock().await.unwrap();
        })
        .await;
    guard.guarded().set("{acct}:9:outer", "1").await.unwrap();
    // Keys outside the slot are refused before sending.
    let err = guard
        .guarded()
        .script::<bool, _>(&CAS, &["elsewhere"], &["a", "b"])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    lock.force_unlock().await.unwrap();
    let err = guard
        .guarded()
        .script::<bool, _>(&CAS, &["{acct}:9:bal"], &["25", "99"])
        .await
        .unwrap_err();
    assert!(err.is_not_held(), "{err:?}");
    assert_eq!(server.cmd::<String>(&["GET", "{acct}:9:bal"]), "25");
}

#[tokio::test]
async fn on_a_cluster_guarded_writes_go_to_the_locks_slot() {
    let cluster = shared_cluster();
    let c = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let name = format!("{{g{}}}:lock", std::process::id());
    let tag = format!("{{g{}}}", std::process::id());
    let guard = c.fenced_lock(name.clone()).lock().await.unwrap();
    let key = format!("{tag}:counter");
    assert_eq!(guard.guarded().incr_by(key.clone(), 2).await.unwrap(), 2);
    let swapped: bool = guard
        .guarded()
        .script(&CAS, &[key.as_str()], &["2", "7"])
        .await
        .unwrap();
    assert!(swapped);
    let node = cluster.node(cluster.primary_for_key(&key));
    assert_eq!(node.cmd::<i64>(&["GET", &key]), 7);
    c.fenced_lock(name).force_unlock().await.unwrap();
    assert!(guard
        .guarded()
        .incr_by(key, 1)
        .await
        .unwrap_err()
        .is_not_held());
}

#[tokio::test]
async fn redlock_refuses_guarded_writes_with_the_reason() {
    let servers = common::start_many(3);
    let c = Client::connect(common::redlock::config(&servers))
        .await
        .unwrap();
    let guard = c.fenced_lock("{r}").lock().await.unwrap();
    let err = guard.guarded().set("{r}:k", "v").await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { reason, .. } if reason.contains("majority")),
        "{err:?}"
    );
    for s in &servers {
        assert_eq!(s.cmd::<i64>(&["EXISTS", "{r}:k"]), 0);
    }
}
