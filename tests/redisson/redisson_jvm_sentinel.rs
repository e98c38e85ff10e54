//! redlatch against the real Redisson client on Sentinel (a primary, its replica, three
//! sentinels): both sides sync the replica before an acquisition counts (Redisson's
//! `checkLockSyncedSlaves`, redlatch's `SyncReplicas::Auto`), and a mixed contention run
//! goes through a kill -9 of the primary and the sentinels' failover with zero overlaps
//! and nobody starved.

use redlatch_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use common::jvm::{self, addr_of, Deployment, Jvm};
use common::jvm_family;
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

/// Each side's acquisition is on the replica by the time it returns.
async fn each_sides_acquisition_is_on_the_replica(set: &SentinelSet, java: &Jvm, client: &Client) {
    let replica = 1 - set.primary_index();
    java.call("t1", "lock lock synced-java").await.ok();
    assert!(
        has_hash(set, replica, "synced-java"),
        "Redisson's lock returned before the replica had it (checkLockSyncedSlaves)"
    );
    java.call("t1", "unlock lock synced-java").await.ok();
    let g = client.lock("synced-ours").lock().await.unwrap();
    assert!(has_hash(set, replica, "synced-ours"));
    g.unlock().await.unwrap();
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

    each_sides_acquisition_is_on_the_replica(&set, &java, &clients[0]).await;

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
    let helper = redlatch_testkit::test_name!("helper_mixed_participant");
    let (report, at_kill) = tokio::join!(
        mixed::run(
            &run,
            &java,
            &clients,
            Some((helper.as_str(), &spec)),
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

    jvm_family::wake_both_ways(&java, &client, subscribed, |primitive| {
        jvm::record(&id, primitive, version, "sentinel", "pass")
    })
    .await;

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
