//! Redisson 4.7's non-reentrant and spin locks against the real Java client (a JVM per
//! test, redlatch-testkit/src/jvm.rs), both ways on one name: a Java holder blocks redlatch, a
//! redlatch holder blocks Java, and the release of either lets the other in (the spin
//! locks with no message at all: each side's next try finds the lock free). Java's own
//! refusal of a re-acquisition (IllegalMonitorStateException) shows the layout we share.
//! 4.7 only: the classes are newer than 3.x (getNonReentrantLock came with 4.4).

use redlatch_testkit as common;

use std::time::Duration;

use common::jvm::{self, addr_of, Deployment, Jvm};
use common::RedisServer;
use redlatch::{Client, Config, Lock};

struct Setup {
    server: RedisServer,
    java: Jvm,
    client: Client,
}

async fn setup() -> Option<Setup> {
    if !jvm::available() {
        return None;
    }
    let server = RedisServer::start();
    let java = Jvm::start(jvm::V4, &Deployment::Single(addr_of(&server.url())), "").await;
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    Some(Setup {
        server,
        java,
        client,
    })
}

/// Generous bound for a waiter to see a release: it is woken (or spins) at once on any
/// machine; the bound only keeps a broken wake-up from hanging the test.
const WITHIN: Duration = Duration::from_secs(20);

/// The Java KIND word and our handle for it.
fn kinds(client: &Client, name: &str) -> [(&'static str, Lock); 3] {
    [
        ("nonreentrant", client.non_reentrant_lock(name)),
        ("nonreentrantfair", client.non_reentrant_fair_lock(name)),
        ("spin", client.spin_lock(name)),
    ]
}

/// The compatibility matrix's primitive (scripts/interop_matrix.py) for a KIND word.
fn primitive(word: &str) -> &'static str {
    match word {
        "nonreentrant" => "RedissonNonReentrantLock",
        "nonreentrantfair" => "RedissonNonReentrantFairLock",
        _ => "RedissonSpinLock",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_holder_blocks_redlatch_and_its_release_lets_redlatch_in() {
    let Some(s) = setup().await else { return };
    let id = "redisson_jvm_nonreentrant_spin::java_first";
    jvm::clear_record(id);
    let (java, server) = (&s.java, &s.server);
    for (word, lock) in kinds(&s.client, "java-first") {
        let name = lock.name().to_string();
        java.call("t1", &format!("lock {word} {name}")).await.ok();
        let holder = java.holder("t1").await;
        let fields: std::collections::HashMap<String, i64> = server.cmd(&["HGETALL", &name]);
        assert_eq!(fields, [(holder, 1)].into(), "{word}: Redisson's layout");
        assert!(lock.is_locked().await.unwrap());
        assert!(
            lock.try_lock(Duration::ZERO).await.unwrap().is_none(),
            "{word}"
        );
        assert!(
            lock.try_lock(Duration::from_millis(100))
                .await
                .unwrap()
                .is_none(),
            "{word}"
        );
        let waiter = tokio::spawn({
            let lock = lock.clone();
            async move { lock.lock().await }
        });
        // Still Java's while it holds.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "{word}: entered while Java held it");
        java.call("t1", &format!("unlock {word} {name}")).await.ok();
        let guard = tokio::time::timeout(WITHIN, waiter)
            .await
            .unwrap_or_else(|_| panic!("{word}: not acquired after Java's release"))
            .unwrap()
            .unwrap();
        // Now ours: Java is refused until we release.
        assert!(!java
            .call("t2", &format!("trylock {word} {name} 0"))
            .await
            .bool());
        guard.unlock().await.unwrap();
        assert!(java
            .call("t2", &format!("trylock {word} {name} 1000"))
            .await
            .bool());
        java.call("t2", &format!("unlock {word} {name}")).await.ok();
        jvm::record(id, primitive(word), jvm::V4, "standalone", "pass");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlatch_holder_blocks_java_and_its_release_lets_java_in() {
    let Some(s) = setup().await else { return };
    let id = "redisson_jvm_nonreentrant_spin::redlatch_first";
    jvm::clear_record(id);
    let java = &s.java;
    for (word, lock) in kinds(&s.client, "rust-first") {
        let name = lock.name().to_string();
        let guard = lock.lock().await.unwrap();
        assert!(!java
            .call("t1", &format!("trylock {word} {name} 0"))
            .await
            .bool());
        assert!(!java
            .call("t1", &format!("trylock {word} {name} 100"))
            .await
            .bool());
        assert!(java
            .call("t1", &format!("islocked {word} {name}"))
            .await
            .bool());
        let mut waiting = java.send("t1", &format!("lock {word} {name}"));
        assert!(
            waiting
                .answered_within(Duration::from_millis(100))
                .await
                .is_none(),
            "{word}: Java entered while redlatch held it"
        );
        guard.unlock().await.unwrap();
        let entered = tokio::time::timeout(WITHIN, waiting.reply())
            .await
            .unwrap_or_else(|_| panic!("{word}: Java not in after our release"));
        entered.ok();
        assert!(
            lock.try_lock(Duration::ZERO).await.unwrap().is_none(),
            "{word}"
        );
        java.call("t1", &format!("unlock {word} {name}")).await.ok();
        lock.try_lock(WITHIN)
            .await
            .unwrap()
            .expect("free")
            .unlock()
            .await
            .unwrap();
        jvm::record(id, primitive(word), jvm::V4, "standalone", "pass");
    }
}

/// Redisson's own refusal, on the layout we write: the Java thread that holds a
/// non-reentrant lock gets IllegalMonitorStateException from lock() and tryLock(), and
/// the hash keeps its count of 1 (ours refuses the same way: tests/standalone/non_reentrant.rs).
/// Its spin lock re-enters, as ours does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_refuses_its_own_reacquisition_and_its_spin_lock_re_enters() {
    let Some(s) = setup().await else { return };
    let (java, server) = (&s.java, &s.server);
    for word in ["nonreentrant", "nonreentrantfair"] {
        let name = format!("java-twice-{word}");
        java.call("t1", &format!("lock {word} {name}")).await.ok();
        let again = java.call("t1", &format!("trylock {word} {name} 0")).await;
        assert!(
            again.err().contains("IllegalMonitorStateException"),
            "{again:?}"
        );
        let again = java.call("t1", &format!("lock {word} {name}")).await;
        assert!(
            again.err().contains("IllegalMonitorStateException"),
            "{again:?}"
        );
        let holder = java.holder("t1").await;
        assert_eq!(server.cmd::<i64>(&["HGET", &name, &holder]), 1);
        java.call("t1", &format!("unlock {word} {name}")).await.ok();
        assert!(!s
            .client
            .non_reentrant_lock(&name)
            .is_locked()
            .await
            .unwrap());
    }
    java.call("t1", "lock spin spun").await.ok();
    java.call("t1", "lock spin spun").await.ok();
    let holder = java.holder("t1").await;
    assert_eq!(server.cmd::<i64>(&["HGET", "spun", &holder]), 2);
    assert!(s.client.spin_lock("spun").is_locked().await.unwrap());
    java.call("t1", "unlock spin spun").await.ok();
    java.call("t1", "unlock spin spun").await.ok();
    assert!(!s.client.spin_lock("spun").is_locked().await.unwrap());
}
