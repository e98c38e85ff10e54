//! The faster multi-lock against the real Redisson client (a JVM per test,
//! redlatch-testkit/src/jvm.rs): `getMultiLock(group, values)` and redlatch's
//! `faster_multi_lock(group, values)` exclude each other on shared values both ways,
//! leave disjoint values free, and a release by either lets the other's waiter in.
//! Redisson 3.52 and 4.7 (3.27 has no faster multi-lock). The Java client encodes values
//! with `StringCodec` (connect option `codec=string`), so a string names the same field.

use redlatch_testkit as common;
use redlatch_testkit::per_version;

use std::collections::HashMap;
use std::time::Duration;

use common::jvm::{self, addr_of, mono_nanos, Deployment, Jvm};
use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

per_version!(
    since_3_52:
    java_holds_redlatch_waits,
    redlatch_holds_java_waits,
    watchdogs_both_ways_and_a_killed_jvm_freed_by_its_lease,
);

struct Setup {
    server: RedisServer,
    java: Jvm,
    client: Client,
    id: String,
}

async fn setup(test: &str, version: &str) -> Setup {
    let id = format!("redisson_jvm_group-{test}-{version}");
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let deployment = Deployment::Single(addr_of(&server.url()));
    let java = Jvm::start(version, &deployment, "codec=string").await;
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    Setup {
        server,
        java,
        client,
        id,
    }
}

async fn until_waiters(server: &RedisServer, group: &str, n: i64) {
    let channel = format!("redisson_lock__channel:{{{group}}}");
    assert!(
        eventually_async(Duration::from_secs(10), || numsub(server, &channel) >= n).await,
        "fewer than {n} waiters on {channel}"
    );
}

async fn java_holds_redlatch_waits(version: &str) {
    let s = setup("java-holds", version).await;
    let (java, server) = (&s.java, &s.server);
    java.call("j", "group lock class_100 Jack_001,Mary_002")
        .await
        .ok();
    // The fields Redisson wrote are the digests redlatch computes: one holder per value.
    let holder = java.holder("j").await;
    let fields: HashMap<String, String> = server.cmd(&["HGETALL", "class_100"]);
    assert_eq!(
        fields.values().filter(|v| **v == holder).count(),
        2,
        "{fields:?}"
    );
    let shared = s
        .client
        .faster_multi_lock("class_100", ["Mary_002", "Tom_003"])
        .unwrap();
    assert!(
        shared.try_lock(Duration::ZERO).await.unwrap().is_none(),
        "Mary is Java's"
    );
    assert!(shared.is_locked().await.unwrap());
    let jack = s
        .client
        .faster_multi_lock("class_100", ["Jack_001"])
        .unwrap();
    assert!(jack
        .try_lock(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    // Disjoint values of the same group are free.
    let tom = s
        .client
        .faster_multi_lock("class_100", ["Tom_003"])
        .unwrap();
    tom.try_lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("Tom is free")
        .unlock()
        .await
        .unwrap();
    // Nothing of the refused batch was written.
    let after: HashMap<String, String> = server.cmd(&["HGETALL", "class_100"]);
    assert_eq!(after, fields);
    let waiter = tokio::spawn(async move { (shared.lock().await.unwrap(), mono_nanos()) });
    until_waiters(server, "class_100", 1).await;
    let released = java
        .call("j", "group unlock class_100 Jack_001,Mary_002")
        .await;
    let (g, at) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("Java's unlock woke the redlatch waiter")
        .unwrap();
    println!(
        "Redisson {version}: faster multi-lock: Java unlock -> redlatch lock {:.2} ms",
        (at - released.before.unwrap()) as f64 / 1e6
    );
    assert!(!java
        .call("k", "group trylock class_100 Tom_003 0")
        .await
        .bool());
    assert!(java
        .call("k", "group islocked class_100 Tom_003")
        .await
        .bool());
    g.unlock().await.unwrap();
    assert!(!java
        .call("k", "group islocked class_100 Mary_002,Tom_003")
        .await
        .bool());
    jvm::record(
        &s.id,
        "RedissonFasterMultiLock",
        version,
        "standalone",
        "pass",
    );
}

async fn redlatch_holds_java_waits(version: &str) {
    let s = setup("redlatch-holds", version).await;
    let (java, server) = (&s.java, &s.server);
    let ours = s.client.faster_multi_lock("seats", ["12A", "12B"]).unwrap();
    let g = ours.lock().await.unwrap();
    assert!(!java.call("j", "group trylock seats 12B,12C 0").await.bool());
    assert!(!java.call("j", "group trylock seats 12A 100").await.bool());
    assert!(java.call("j", "group islocked seats 12B,12C").await.bool());
    // Java's refused attempts wrote nothing: only our two values are there.
    let n: i64 = server.cmd(&["HLEN", "seats"]);
    assert_eq!(n, 6);
    java.call("j", "group trylock seats 12C 0")
        .await
        .bool()
        .then_some(())
        .expect("12C is free");
    java.call("j", "group unlock seats 12C").await.ok();
    let mut waiting = java.send("j", "group lock seats 12B,12C");
    until_waiters(server, "seats", 1).await;
    assert!(
        waiting
            .answered_within(Duration::from_millis(300))
            .await
            .is_none(),
        "12B is ours"
    );
    let released = mono_nanos();
    g.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(20), waiting.reply())
        .await
        .expect("our release woke the Java waiter");
    got.ok();
    println!(
        "Redisson {version}: faster multi-lock: redlatch unlock -> Java lock {:.2} ms",
        (got.nanos - released) as f64 / 1e6
    );
    assert!(java.call("j", "group isheld seats 12B,12C").await.bool());
    let shared = s.client.faster_multi_lock("seats", ["12C"]).unwrap();
    assert!(
        shared.try_lock(Duration::ZERO).await.unwrap().is_none(),
        "12C is Java's now"
    );
    assert!(
        ours.try_lock(Duration::ZERO).await.unwrap().is_none(),
        "12B is Java's now"
    );
    java.call("j", "group unlock seats 12B,12C").await.ok();
    let g = ours
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("free again");
    g.unlock().await.unwrap();
    jvm::record(
        &s.id,
        "RedissonFasterMultiLock",
        version,
        "standalone",
        "pass",
    );
}

/// Java's watchdog keeps its values past its lease while redlatch waits, and redlatch's
/// keeps its own past its lease while Java waits (each reads the other's expiry
/// fields); a `kill -9`ed JVM's values are free once its lease ends.
async fn watchdogs_both_ways_and_a_killed_jvm_freed_by_its_lease(version: &str) {
    let id = format!("redisson_jvm_group-watchdog-{version}");
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let deployment = Deployment::Single(addr_of(&server.url()));
    let mut java = Jvm::start(version, &deployment, "codec=string watchdog=1000").await;
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(1000));
    let client = Client::connect(config).await.unwrap();
    // Ours, past three of its leases, while Java tries.
    let ours = client.faster_multi_lock("wd", ["p", "q"]).unwrap();
    let g = ours.lock().await.unwrap();
    assert!(
        !java.call("j", "group trylock wd q,r 3000").await.bool(),
        "our watchdog keeps q"
    );
    assert!(!g.lost().is_cancelled());
    g.unlock().await.unwrap();
    // Java's, past three of its leases, while we wait; then the JVM dies.
    java.call("j", "group lock wd q,r").await.ok();
    let shared = client.faster_multi_lock("wd", ["r"]).unwrap();
    assert!(
        shared
            .try_lock(Duration::from_millis(3000))
            .await
            .unwrap()
            .is_none(),
        "Java's watchdog keeps r"
    );
    let waiter = tokio::spawn(async move { shared.lock().await.map(|g| (g, shared)) });
    java.kill9();
    let (g, _) = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the dead JVM's values free after its lease")
        .unwrap()
        .unwrap();
    g.unlock().await.unwrap();
    jvm::record(
        &id,
        "RedissonFasterMultiLock",
        version,
        "standalone",
        "pass",
    );
}
