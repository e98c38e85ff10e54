//! Redisson wire compatibility of the read-write lock, the semaphores and the latch, in
//! both directions: the Java side runs Redisson's own scripts (tests/redisson/*.lua) by
//! EVAL, exactly as the Java client sends them.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

const JAVA: &str = "6f1c2b1e-1d4a-4b7e-9a51-3c2d7e8f9a10:57";

fn eval(server: &RedisServer, script: &str, keys: &[&str], args: &[&[u8]]) -> redis::Value {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut server.conn()).unwrap()
}

fn java_read_lock(server: &RedisServer, name: &str) -> redis::Value {
    let prefix = format!("{{{name}}}:{JAVA}:rwlock_timeout");
    let write = format!("{JAVA}:write");
    eval(
        server,
        include_str!("rw_read_lock.lua"),
        &[name, &prefix],
        &[b"30000", JAVA.as_bytes(), write.as_bytes()],
    )
}

fn java_read_unlock(server: &RedisServer, name: &str) -> redis::Value {
    let prefix = format!("{{{name}}}:{JAVA}:rwlock_timeout");
    let (channel, tag) = (format!("redisson_rwlock:{{{name}}}"), format!("{{{name}}}"));
    let latch = format!("redisson_unlock_latch:{{{name}}}:req-{}", rand_id());
    eval(
        server,
        include_str!("rw_read_unlock.lua"),
        &[name, &channel, &prefix, &tag, &latch],
        &[b"0", JAVA.as_bytes(), b"publish", b"5000"],
    )
}

fn java_write_lock(server: &RedisServer, name: &str) -> redis::Value {
    let write = format!("{JAVA}:write");
    eval(
        server,
        include_str!("rw_write_lock.lua"),
        &[name],
        &[b"30000", write.as_bytes()],
    )
}

fn java_write_unlock(server: &RedisServer, name: &str) -> redis::Value {
    let write = format!("{JAVA}:write");
    let channel = format!("redisson_rwlock:{{{name}}}");
    let latch = format!("redisson_unlock_latch:{{{name}}}:req-{}", rand_id());
    eval(
        server,
        include_str!("rw_write_unlock.lua"),
        &[name, &channel, &latch],
        &[b"1", b"30000", write.as_bytes(), b"publish", b"5000"],
    )
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn granted(v: &redis::Value) -> bool {
    matches!(v, redis::Value::Nil)
}

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn java_and_rust_readers_share_and_exclude_writers_both_ways() {
    let server = RedisServer::start();
    let rw = client(&server).await.read_write_lock("shared");
    assert!(granted(&java_read_lock(&server, "shared")));
    let ours = rw
        .read()
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("readers share");
    assert!(
        ours.scope(rw.write().try_lock(Duration::ZERO))
            .await
            .is_err(),
        "upgrade refused"
    );
    assert!(
        rw.write().try_lock(Duration::ZERO).await.unwrap().is_none(),
        "another holder's write waits for both readers"
    );
    // The Java reader leaves: our read hold keeps the lock (its own timeout key).
    assert_eq!(java_read_unlock(&server, "shared"), redis::Value::Int(0));
    assert_eq!(server.cmd::<String>(&["HGET", "shared", "mode"]), "read");
    assert!(server.cmd::<i64>(&["PTTL", "shared"]) > 0);
    // A Java writer is refused while we read.
    assert!(!granted(&java_write_lock(&server, "shared")));
    ours.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "shared"]), 0);
    assert!(granted(&java_write_lock(&server, "shared")));
    // Now our reader and writer are refused by the Java writer.
    let other = client(&server).await.read_write_lock("shared");
    assert!(other
        .read()
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    assert!(other
        .write()
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_java_write_unlock_wakes_our_waiting_readers() {
    let server = RedisServer::start();
    assert!(granted(&java_write_lock(&server, "jw")));
    let c = client(&server).await;
    let mut readers = Vec::new();
    for _ in 0..3 {
        let read = c.read_write_lock("jw").read();
        readers.push(tokio::spawn(async move {
            let g = read.lock().await.unwrap();
            let at = Instant::now();
            tokio::time::sleep(Duration::from_millis(100)).await;
            g.unlock().await.unwrap();
            at
        }));
    }
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_rwlock:{jw}"
        ) == 1)
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    assert_eq!(java_write_unlock(&server, "jw"), redis::Value::Int(1));
    for r in readers {
        let at = r.await.unwrap();
        assert!(
            at.duration_since(released) < Duration::from_secs(5),
            "woken by the \"1\" message"
        );
    }
}

#[tokio::test]
async fn our_write_unlock_publishes_redissons_read_unlock_message() {
    let server = RedisServer::start();
    let rw = client(&server).await.read_write_lock("msg");
    let w = rw.write().lock().await.unwrap();
    assert!(
        !granted(&java_read_lock(&server, "msg")),
        "a Java reader waits for our writer"
    );
    // A Java waiter listens on the channel.
    let mut sub = server.conn();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("redisson_rwlock:{msg}").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    w.unlock().await.unwrap();
    let msg = pubsub.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "1");
    drop(pubsub);
    assert!(granted(&java_read_lock(&server, "msg")));
    // Our read unlock, the last, publishes "0" and deletes the hash (Java holds none now).
    assert_eq!(java_read_unlock(&server, "msg"), redis::Value::Int(1));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "msg"]), 0);
}

#[tokio::test]
async fn a_java_downgrade_and_our_reader() {
    let server = RedisServer::start();
    // The Java thread writes, then reads (downgrade), then lets the write go.
    assert!(granted(&java_write_lock(&server, "dg")));
    assert!(granted(&java_read_lock(&server, "dg")));
    let rw = client(&server).await.read_write_lock("dg");
    assert!(
        rw.read().try_lock(Duration::ZERO).await.unwrap().is_none(),
        "a writer holds it"
    );
    let waiting = {
        let read = rw.read();
        tokio::spawn(async move {
            read.try_lock(Duration::from_secs(10))
                .await
                .map(|g| g.is_some())
        })
    };
    assert_eq!(java_write_unlock(&server, "dg"), redis::Value::Int(1));
    assert_eq!(server.cmd::<String>(&["HGET", "dg", "mode"]), "read");
    // Redisson publishes nothing on this path; our waiter retries when the Java
    // writer's lease bound ends at the latest. Here it is woken by the read unlock.
    assert_eq!(java_read_unlock(&server, "dg"), redis::Value::Int(1));
    assert!(waiting.await.unwrap().unwrap());
}

fn java_sem(server: &RedisServer, script: &str, name: &str, permits: &str) -> i64 {
    let channel = format!("redisson_sc:{{{name}}}");
    // ARGV[2]: the publish command Redisson sends (classic pub/sub on one server).
    match eval(
        server,
        script,
        &[name, &channel],
        &[permits.as_bytes(), b"publish"],
    ) {
        redis::Value::Int(i) => i,
        redis::Value::Nil => 0,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn semaphore_permits_flow_between_java_and_rust() {
    let server = RedisServer::start();
    let s = client(&server).await.semaphore("sem");
    assert_eq!(
        java_sem(&server, include_str!("sem_try_set_permits.lua"), "sem", "1"),
        1
    );
    assert!(!s.try_set_permits(5).await.unwrap());
    assert_eq!(
        eval(
            &server,
            include_str!("sem_try_acquire.lua"),
            &["sem"],
            &[b"1"]
        ),
        redis::Value::Int(1)
    );
    let waiting = {
        let s = s.clone();
        tokio::spawn(async move { s.try_acquire(Duration::from_secs(10)).await })
    };
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_sc:{sem}"
        ) == 1)
        .await
    );
    java_sem(&server, include_str!("sem_release.lua"), "sem", "1");
    let permit = waiting.await.unwrap().unwrap();
    permit
        .expect("woken by the Java release")
        .release()
        .await
        .unwrap();
    assert_eq!(
        eval(
            &server,
            include_str!("sem_try_acquire.lua"),
            &["sem"],
            &[b"1"]
        ),
        redis::Value::Int(1)
    );
    assert_eq!(s.available().await.unwrap(), 0);
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn expirable_permits_flow_between_java_and_rust() {
    let server = RedisServer::start();
    let s = client(&server).await.permit_expirable_semaphore("xs");
    s.set_permits(2).await.unwrap();
    let (timeouts, channel) = ("{xs}:timeout", "redisson_sc:{xs}");
    // A Java permit with a 300 ms lease, and one of ours.
    let java_id = [7u8; 16];
    let expiry = (now_ms() + 300).to_string();
    let now = now_ms().to_string();
    let v = eval(
        &server,
        include_str!("expirable_semaphore_try_acquire.lua"),
        &["xs", timeouts, channel],
        &[
            b"1",
            expiry.as_bytes(),
            now.as_bytes(),
            b"922337203685477",
            b"publish",
            &java_id,
        ],
    );
    assert_eq!(v, redis::Value::BulkString(b"OK".to_vec()));
    let ours = s.acquire().await.unwrap();
    assert_eq!(s.acquired().await.unwrap(), 2);
    // No permit left; the Java one expires and ours is taken back by its holder.
    let next = s.try_acquire(Duration::from_secs(10)).await.unwrap();
    assert!(next.is_some(), "the expired Java permit was reclaimed");
    // Java releases our permit by id (the ZSET member is the id's 16 bytes).
    let id: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&ours.id()[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let now = now_ms().to_string();
    let v = eval(
        &server,
        include_str!("expirable_semaphore_try_release.lua"),
        &["xs", channel, timeouts],
        &[&id, b"1", now.as_bytes(), b"publish"],
    );
    assert_eq!(v, redis::Value::Int(1));
    assert!(ours.release().await.unwrap_err().is_not_held());
    assert_eq!(s.available().await.unwrap(), 1);
}

#[tokio::test]
async fn a_java_count_down_wakes_our_latch_waiter_and_back() {
    let server = RedisServer::start();
    let latch = client(&server).await.count_down_latch("go");
    let channel = "redisson_countdownlatch__channel__{go}";
    let set = eval(
        &server,
        include_str!("latch_try_set_count.lua"),
        &["go", channel],
        &[b"1", b"2", b"publish"],
    );
    assert_eq!(set, redis::Value::Int(1));
    assert!(!latch.try_set_count(9).await.unwrap());
    let waiting = {
        let l = latch.clone();
        tokio::spawn(async move { l.wait_timeout(Duration::from_secs(10)).await })
    };
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    latch.count_down().await.unwrap();
    eval(
        &server,
        include_str!("latch_count_down.lua"),
        &["go", channel],
        &[b"0", b"publish"],
    );
    assert!(waiting.await.unwrap().unwrap());
    assert_eq!(server.cmd::<i64>(&["EXISTS", "go"]), 0);
    // Our try_set_count is seen by the Java side.
    assert!(latch.try_set_count(1).await.unwrap());
    let again = eval(
        &server,
        include_str!("latch_try_set_count.lua"),
        &["go", channel],
        &[b"1", b"2", b"publish"],
    );
    assert_eq!(again, redis::Value::Int(0));
}

/// Since Redisson 3.44 a read or write unlock of a lock that has no `mode` (free, or
/// force-unlocked by anyone, redlatch included) answers nil, which Java turns into
/// IllegalMonitorStateException, and still publishes on the channel (the fixtures are
/// 4.7's scripts: tests/redisson/redisson_jvm_fixtures.rs).
#[tokio::test]
async fn java_rw_unlocks_of_a_lock_without_mode_answer_nil() {
    let server = RedisServer::start();
    assert_eq!(java_read_unlock(&server, "gone"), redis::Value::Nil);
    assert_eq!(java_write_unlock(&server, "gone"), redis::Value::Nil);
    // Our force-unlock of a Java reader's lock: the Java unlock that follows is refused.
    assert_eq!(java_read_lock(&server, "forced"), redis::Value::Nil);
    let rw = client(&server).await.read_write_lock("forced");
    assert!(rw.read().force_unlock().await.unwrap());
    assert_eq!(java_read_unlock(&server, "forced"), redis::Value::Nil);
}
