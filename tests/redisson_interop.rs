//! Redisson wire compatibility: the same hash, fields, channel and unlock message.
//! The Redisson side runs Redisson's own scripts (tests/redisson/*.lua) by EVAL.

mod common;

use std::time::{Duration, Instant};

use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

const REDISSON_LOCK: &str = include_str!("redisson/lock.lua");
const REDISSON_UNLOCK: &str = include_str!("redisson/unlock.lua");
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
    let inner = lock.lock().await.unwrap();
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
    let _g2 = lock.lock().await.unwrap();
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
