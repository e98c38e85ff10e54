//! redlatch against the real Redisson client on Sentinel (a primary, its replica, three
//! sentinels): both sides sync the replica before an acquisition counts (Redisson's
//! `checkLockSyncedSlaves`, redlatch's `SyncReplicas::Auto`), and a mixed contention run
//! goes through a kill -9 of the primary and the sentinels' failover with zero overlaps
//! and nobody starved.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::jvm::{self, addr_of, Deployment, Jvm};
use common::mixed::{self, Checker, Kind, Run};
use common::sentinel::SentinelSet;
use redlatch::Client;

/// Both sides' watchdog lease: a release lost in the failover frees the lock this soon.
const WATCHDOG_MS: u64 = 3000;

#[tokio::test]
#[ignore = "the redlatch process of the mixed runs (REDLATCH_MIXED_HELPER)"]
async fn helper_mixed_participant() {
    mixed::helper_main().await;
}

fn has_hash(set: &SentinelSet, i: usize, name: &str) -> bool {
    set.server(i).cmd::<String>(&["TYPE", name]) == "hash"
}

async fn failover_during_a_mixed_run(version: &str) {
    let id = format!("redisson_jvm_sentinel-{version}");
    jvm::clear_record(&id);
    let mut set = SentinelSet::start("interop");
    let sentinels: Vec<String> = set.sentinel_urls().iter().map(|u| addr_of(u)).collect();
    let deployment = Deployment::Sentinel(set.master_name().to_string(), sentinels);
    let opts = format!("watchdog={WATCHDOG_MS} synced=true syncms=2000");
    let java = Arc::new(Jvm::start(version, &deployment, &opts).await);
    let spec = mixed::helper_spec(
        &format!(
            "sentinel|{}|{}",
            set.master_name(),
            set.sentinel_urls().join(",")
        ),
        WATCHDOG_MS,
    );
    let clients = vec![
        Client::connect(mixed::config_of(&spec)).await.unwrap(),
        Client::connect(mixed::config_of(&spec)).await.unwrap(),
    ];

    // Each side's acquisition is on the replica by the time it returns.
    let replica = 1 - set.primary_index();
    java.call("t1", "lock lock synced-java").await.ok();
    assert!(
        has_hash(&set, replica, "synced-java"),
        "Redisson's lock returned before the replica had it (checkLockSyncedSlaves)"
    );
    java.call("t1", "unlock lock synced-java").await.ok();
    let g = clients[0].lock("synced-ours").lock().await.unwrap();
    assert!(has_hash(&set, replica, "synced-ours"));
    g.unlock().await.unwrap();

    let checker = Checker::new(Kind::Plain, "mixed", None);
    let run = Run {
        kind: Kind::Plain,
        name: "mixed".into(),
        rounds: 12,
        hold: Duration::from_millis(20),
        java_threads: 3,
        redlatch_tasks: 3,
        processes: 1,
        cli: 0,
        deadline: Duration::from_secs(150),
    };
    let killer = async {
        // Kill the primary once the run is well under way.
        assert!(
            common::eventually_async(Duration::from_secs(60), || {
                checker.report(0, Duration::ZERO).sections >= 15
            })
            .await,
            "the mixed run never got going"
        );
        let old = set.kill_primary();
        let at_kill = checker.report(0, Duration::ZERO).sections;
        let new = tokio::task::block_in_place(|| set.wait_for_switch(&old));
        println!(
            "Redisson {version}: failover from {old} to {new} after section {at_kill} of the mixed run"
        );
        at_kill
    };
    let (report, at_kill) = tokio::join!(
        mixed::run(
            &run,
            &java,
            &clients,
            Some(("helper_mixed_participant", &spec)),
            None,
            &checker
        ),
        killer
    );
    report.check(
        &run,
        &format!("Redisson {version} sentinel mixed run with a failover"),
        &checker,
    );
    let total = (run.java_threads + run.redlatch_tasks + run.processes) * run.rounds;
    assert!(
        at_kill < total,
        "the primary died after the run ({at_kill} of {total} sections)"
    );
    jvm::record(&id, "RLock", version, "sentinel", "pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_during_a_mixed_run_4_7() {
    if jvm::available() {
        failover_during_a_mixed_run(jvm::V4).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_during_a_mixed_run_3_27() {
    if jvm::available() {
        failover_during_a_mixed_run(jvm::OLD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_during_a_mixed_run_3_52() {
    if jvm::available() {
        failover_during_a_mixed_run(jvm::LAST3).await;
    }
}

/// The family's wake-ups across the two through Sentinel (4.7, replica-synced on both
/// sides): read-write lock, semaphore, expirable semaphore, latch, fenced tokens, and fair
/// FIFO with waiters of both kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_family_across_the_two_through_sentinel_4_7() {
    if !jvm::available() {
        return;
    }
    let version = jvm::V4;
    let id = format!("redisson_jvm_sentinel-family-{version}");
    jvm::clear_record(&id);
    let set = SentinelSet::start("family");
    let sentinels: Vec<String> = set.sentinel_urls().iter().map(|u| addr_of(u)).collect();
    let deployment = Deployment::Sentinel(set.master_name().to_string(), sentinels);
    let java = Jvm::start(version, &deployment, "synced=true syncms=2000").await;
    let spec = mixed::helper_spec(
        &format!(
            "sentinel|{}|{}",
            set.master_name(),
            set.sentinel_urls().join(",")
        ),
        WATCHDOG_MS,
    );
    let client = Client::connect(mixed::config_of(&spec)).await.unwrap();
    let primary = set.server(set.primary_index());
    let subscribed = |channel: &'static str| async move {
        assert!(
            common::eventually_async(Duration::from_secs(10), || common::numsub(primary, channel)
                >= 1)
            .await,
            "nobody subscribed to {channel}"
        );
    };

    // Read-write lock: Java's write unlock wakes our reader; ours wakes Java's reader.
    java.call("w", "lock write rw").await.ok();
    let reader = {
        let r = client.read_write_lock("rw").read();
        tokio::spawn(async move { r.lock().await.unwrap() })
    };
    subscribed("redisson_rwlock:{rw}").await;
    java.call("w", "unlock write rw").await.ok();
    reader.await.unwrap().unlock().await.unwrap();
    let g = client.read_write_lock("rw").write().lock().await.unwrap();
    let call = java.send("r", "lock read rw");
    subscribed("redisson_rwlock:{rw}").await;
    g.unlock().await.unwrap();
    call.reply().await.ok();
    java.call("r", "unlock read rw").await.ok();
    jvm::record(&id, "RReadWriteLock", version, "sentinel", "pass");

    // Semaphore both ways.
    assert!(java.call("s", "sem sem trysetpermits 1").await.bool());
    java.call("s", "sem sem acquire 1").await.ok();
    let ours = {
        let sem = client.semaphore("sem");
        tokio::spawn(async move { sem.acquire().await.unwrap().forget() })
    };
    subscribed("redisson_sc:{sem}").await;
    java.call("s", "sem sem release 1").await.ok();
    ours.await.unwrap();
    let call = java.send("s", "sem sem acquire 1");
    subscribed("redisson_sc:{sem}").await;
    client.semaphore("sem").release().await.unwrap();
    call.reply().await.ok();
    jvm::record(&id, "RSemaphore", version, "sentinel", "pass");

    // Expirable semaphore both ways.
    assert!(java.call("x", "xsem xs trysetpermits 1").await.bool());
    let permit = java.call("x", "xsem xs acquire").await.val().to_string();
    let ours = {
        let sem = client.permit_expirable_semaphore("xs");
        tokio::spawn(async move { sem.acquire().await.unwrap() })
    };
    subscribed("redisson_sc:{xs}").await;
    java.call("x", &format!("xsem xs release {permit}"))
        .await
        .ok();
    let p = ours.await.unwrap();
    let call = java.send("x", "xsem xs acquire");
    subscribed("redisson_sc:{xs}").await;
    p.release().await.unwrap();
    let permit = call.reply().await.val().to_string();
    java.call("x", &format!("xsem xs release {permit}"))
        .await
        .ok();
    jvm::record(
        &id,
        "RPermitExpirableSemaphore",
        version,
        "sentinel",
        "pass",
    );

    // Latch both ways.
    assert!(java.call("l", "latch gate trysetcount 1").await.bool());
    let ours = {
        let latch = client.count_down_latch("gate");
        tokio::spawn(async move { latch.wait_timeout(Duration::from_secs(30)).await.unwrap() })
    };
    subscribed("redisson_countdownlatch__channel__{gate}").await;
    java.call("l", "latch gate countdown").await.ok();
    assert!(ours.await.unwrap());
    assert!(client
        .count_down_latch("gate")
        .try_set_count(1)
        .await
        .unwrap());
    let call = java.send("l", "latch gate await 30000");
    subscribed("redisson_countdownlatch__channel__{gate}").await;
    client.count_down_latch("gate").count_down().await.unwrap();
    assert!(call.reply().await.bool());
    jvm::record(&id, "RCountDownLatch", version, "sentinel", "pass");

    // Fenced tokens: one sequence.
    let t1: u64 = java
        .call("f", "lock fenced fence")
        .await
        .val()
        .parse()
        .unwrap();
    java.call("f", "unlock fenced fence").await.ok();
    let g = client.fenced_lock("fence").lock().await.unwrap();
    let t2 = g.fencing_token().unwrap();
    g.unlock().await.unwrap();
    let t3: u64 = java
        .call("f", "lock fenced fence")
        .await
        .val()
        .parse()
        .unwrap();
    java.call("f", "unlock fenced fence").await.ok();
    assert!(t1 < t2 && t2 < t3, "tokens {t1} {t2} {t3}");
    jvm::record(&id, "RFencedLock", version, "sentinel", "pass");

    // Fair lock: Java holds, then a redlatch waiter and a Java waiter queue: FIFO.
    let queue = "redisson_lock_queue:{fq}";
    let queued = |n: i64| async move {
        assert!(
            common::eventually_async(Duration::from_secs(10), || primary
                .cmd::<i64>(&["LLEN", queue])
                == n)
            .await,
            "the fair queue never reached {n}"
        );
    };
    java.call("h", "lock fair fq").await.ok();
    let ours = {
        let lock = client.fair_lock("fq");
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    queued(1).await;
    let mut theirs = java.send("j", "lock fair fq");
    queued(2).await;
    java.call("h", "unlock fair fq").await.ok();
    let g = tokio::time::timeout(Duration::from_secs(30), ours)
        .await
        .expect("FIFO: our waiter, queued first, did not get the lock")
        .unwrap();
    assert!(
        theirs
            .answered_within(Duration::from_millis(200))
            .await
            .is_none(),
        "the Java waiter behind ours got the lock"
    );
    g.unlock().await.unwrap();
    theirs.reply().await.ok();
    java.call("j", "unlock fair fq").await.ok();
    jvm::record(&id, "RFairLock", version, "sentinel", "pass");
}
