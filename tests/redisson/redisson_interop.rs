//! Redisson wire compatibility: the same hash, fields, channel and unlock message.
//! The Redisson side runs Redisson's own scripts (tests/redisson/*.lua) by EVAL.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

const REDISSON_LOCK: &str = include_str!("lock.lua");
const REDISSON_UNLOCK: &str = include_str!("unlock.lua");
const JAVA_HOLDER: &str = "6f1c2b1e-1d4a-4b7e-9a51-3c2d7e8f9a10:57";

fn redisson_lock(server: &RedisServer, name: &str, lease_ms: u64) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(REDISSON_LOCK)
        .arg(1)
        .arg(name)
        .arg(lease_ms)
        .arg(JAVA_HOLDER)
        .query(&mut server.conn())
        .unwrap()
}

fn redisson_unlock(server: &RedisServer, name: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(REDISSON_UNLOCK)
        .arg(3)
        .arg(name)
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg(format!("redisson_unlock_latch:{{{name}}}:req-1"))
        .arg("0")
        .arg(30_000)
        .arg(JAVA_HOLDER)
        .arg("publish")
        .arg(5_000)
        .query(&mut server.conn())
        .unwrap()
}

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn a_lock_held_by_redisson_blocks_us() {
    let server = RedisServer::start();
    assert_eq!(redisson_lock(&server, "java", 30_000), None);
    let lock = client(&server).await.lock("java");
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert!(lock
        .try_lock(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert!(lock.is_locked().await.unwrap());
    assert!(!lock.is_held_by_current_task().await.unwrap());
    assert_eq!(server.cmd::<i64>(&["HGET", "java", JAVA_HOLDER]), 1);
}

#[tokio::test]
async fn our_lock_blocks_redisson_and_its_unlock_attempt_changes_nothing() {
    let server = RedisServer::start();
    let g = client(&server).await.lock("rust").lock().await.unwrap();
    let pttl = redisson_lock(&server, "rust", 30_000).expect("redisson must be refused");
    assert!(pttl > 0);
    assert_eq!(
        redisson_unlock(&server, "rust"),
        None,
        "not held by the java thread"
    );
    let fields: Vec<String> = server.cmd(&["HKEYS", "rust"]);
    assert_eq!(fields, vec![g.holder().to_string()]);
    g.unlock().await.unwrap();
    assert_eq!(
        redisson_lock(&server, "rust", 30_000),
        None,
        "free again for redisson"
    );
}

#[tokio::test]
async fn redissons_unlock_message_wakes_our_waiter() {
    let server = RedisServer::start();
    assert_eq!(redisson_lock(&server, "handoff", 30_000), None);
    let client = client(&server).await;
    let lock = client.lock("handoff");
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_lock__channel:{handoff}"
        ) == 1)
        .await
    );
    let released = Instant::now();
    assert_eq!(redisson_unlock(&server, "handoff"), Some(1));
    let (at, g) = waiter.await.unwrap().unwrap();
    // The Java lease was 30 s: only the message explains a quick hand-over.
    assert!(at.duration_since(released) < Duration::from_secs(5));
    // The unlock latch key Redisson leaves behind does not confuse us.
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "redisson_unlock_latch:{handoff}:req-1"]),
        1
    );
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn our_full_release_publishes_zero_and_a_reentrant_one_publishes_nothing() {
    let server = RedisServer::start();
    let mut sub_conn = server.conn();
    let mut pubsub = sub_conn.as_pubsub();
    pubsub.subscribe("redisson_lock__channel:{msg}").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let lock = client(&server).await.lock("msg");
    let outer = lock.lock().await.unwrap();
    let inner = outer.scope(lock.lock()).await.unwrap();
    inner.unlock().await.unwrap();
    assert!(
        pubsub.get_message().is_err(),
        "a reentrant release must not publish"
    );
    outer.unlock().await.unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{msg}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
}

#[tokio::test]
async fn names_with_a_hash_tag_get_no_extra_braces() {
    let server = RedisServer::start();
    let mut sub_conn = server.conn();
    let mut pubsub = sub_conn.as_pubsub();
    pubsub
        .subscribe("redisson_lock__channel:{tenant}:7")
        .unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let lock = client(&server).await.lock("{tenant}:7");
    lock.lock().await.unwrap().unlock().await.unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{tenant}:7");
}

#[tokio::test]
async fn a_redisson_reentrant_hold_counts_like_ours() {
    let server = RedisServer::start();
    let lock = client(&server).await.lock("counts");
    let g = lock.lock().await.unwrap();
    let _g2 = g.scope(lock.lock()).await.unwrap();
    assert_eq!(server.cmd::<i64>(&["HGET", "counts", g.holder()]), 2);
    // A Redisson client re-entering its own lock: count 2 under its field.
    assert_eq!(redisson_lock(&server, "java-counts", 10_000), None);
    assert_eq!(redisson_lock(&server, "java-counts", 10_000), None);
    assert_eq!(server.cmd::<i64>(&["HGET", "java-counts", JAVA_HOLDER]), 2);
    assert!(client(&server)
        .await
        .lock("java-counts")
        .is_locked()
        .await
        .unwrap());
}

/// Issue 14: a Redisson waiter (a subscriber of the shared channel that is not one of
/// our registered waiters) is still woken by our release, beside our own waiter.
#[tokio::test]
async fn our_release_wakes_a_redisson_waiter_beside_our_registered_one() {
    let server = RedisServer::start();
    let mut sub_conn = server.conn();
    let mut java = sub_conn.as_pubsub();
    java.subscribe("redisson_lock__channel:{mixed}").unwrap();
    java.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let holder = client(&server).await;
    let g = holder.lock("mixed").lock().await.unwrap();
    let ours = client(&server).await.lock("mixed");
    let waiter = tokio::spawn(async move { ours.lock().await.unwrap().unlock().await });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_lock__channel:{mixed}:redlatch-waiters"
        ) == 1)
        .await,
        "our waiter never subscribed"
    );
    g.unlock().await.unwrap();
    let msg = java
        .get_message()
        .expect("the Redisson waiter was not woken");
    assert_eq!(msg.get_channel_name(), "redisson_lock__channel:{mixed}");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("our waiter was not woken")
        .unwrap()
        .unwrap();
}

/// Issue 14: Redisson's release publishes only "0" on the shared channel; our
/// registered waiters (each its own client) still listen there and one takes the lock.
#[tokio::test]
async fn redissons_release_wakes_our_registered_waiters() {
    let server = RedisServer::start();
    assert_eq!(redisson_lock(&server, "java-first", 30_000), None);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let c = client(&server).await;
        let lock = c.lock("java-first");
        let tx = tx.clone();
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            tx.send(()).unwrap();
            g.unlock().await.unwrap();
        });
        clients.push(c);
    }
    let registered = || {
        server.cmd::<i64>(&["ZCARD", "redlatch_lock_waiters:{java-first}"]) == 2
            && numsub(&server, "redisson_lock__channel:{java-first}") == 2
    };
    assert!(eventually_async(Duration::from_secs(5), registered).await);
    assert_eq!(redisson_unlock(&server, "java-first"), Some(1));
    for _ in 0..2 {
        // The Java lease was 30 s: only the messages explain quick acquisitions.
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("our waiters were not woken by Redisson's release")
            .unwrap();
    }
}
