//! redlatch against the real Redisson client on a Redis Cluster: the plain lock both ways
//! and a mixed contention run on the three versions, and the family's wake-ups on 4.7.
//! redlatch waits and wakes with sharded pub/sub (`SSUBSCRIBE` / `SPUBLISH`) on a Redis 7
//! cluster, as Redisson does by default, and also hears and reaches a Redisson that
//! subscribes classic there (tests/redisson/redisson_jvm_pubsub_modes.rs). Before Redis 7 (no
//! sharded pub/sub) both use classic pub/sub on the primary serving the channel's slot.

use redlatch_testkit as common;
use redlatch_testkit::per_version;

use std::sync::Arc;
use std::time::Duration;

use common::cluster::RedisCluster;
use common::eventually_async;
use common::jvm::{self, addr_of, mono_nanos, Deployment, Jvm};
use common::jvm_family;
use common::mixed::{self, Checker, Kind, Run};
use redlatch::Client;

const WATCHDOG_MS: u64 = 5000;

#[tokio::test]
#[ignore = "the redlatch process of the mixed runs (REDLATCH_MIXED_HELPER)"]
async fn helper_mixed_participant() {
    mixed::helper_main().await;
}

per_version!(rlock_both_ways_and_a_mixed_run_on_a_cluster);

fn ms(nanos: i64) -> f64 {
    nanos as f64 / 1e6
}

fn deployment(cluster: &RedisCluster) -> Deployment {
    Deployment::Cluster(cluster.urls().iter().map(|u| addr_of(u)).collect())
}

/// (classic, sharded) subscribers of `channel` on the primary serving it.
fn subscribers(cluster: &RedisCluster, channel: &str) -> (i64, i64) {
    let node = cluster.node(cluster.primary_for_key(channel));
    let (_, classic): (String, i64) = node.cmd(&["PUBSUB", "NUMSUB", channel]);
    if common::server_major() < 7 {
        return (classic, 0);
    }
    let (_, sharded): (String, i64) = node.cmd(&["PUBSUB", "SHARDNUMSUB", channel]);
    (classic, sharded)
}

async fn until_subscribed(cluster: &RedisCluster, channel: &str) -> (i64, i64) {
    let mut seen = (0, 0);
    assert!(
        eventually_async(Duration::from_secs(10), || {
            seen = subscribers(cluster, channel);
            seen.0 + seen.1 >= 1
        })
        .await,
        "nobody subscribed to {channel}"
    );
    seen
}

/// Scripts a node ran so far (EVAL and EVALSHA calls).
fn scripts_run(node: &common::RedisServer) -> u64 {
    common::calls(node, "eval") + common::calls(node, "evalsha")
}

fn mode((classic, sharded): (i64, i64)) -> &'static str {
    match (classic > 0, sharded > 0) {
        (true, false) => "classic",
        (false, true) => "sharded",
        _ => "both",
    }
}

/// A mixed run on the cluster: `kind` on `name`, 6 rounds each of 3 Java threads, 3
/// tasks of `client` and a redlatch process (`spec`), checked by `checker` and
/// reported as `context`.
async fn mixed_run(
    java: &Arc<Jvm>,
    client: Client,
    spec: &str,
    checker: &Checker,
    kind: Kind,
    name: &str,
    context: &str,
) -> mixed::Report {
    let run = Run {
        kind,
        name: name.into(),
        rounds: 6,
        hold: Duration::from_millis(3),
        java_threads: 3,
        redlatch_tasks: 3,
        processes: 1,
        cli: 0,
        deadline: Duration::from_secs(90),
    };
    let clients = vec![client];
    let report = mixed::run(
        &run,
        java,
        &clients,
        Some((
            redlatch_testkit::test_name!("helper_mixed_participant").as_str(),
            spec,
        )),
        None,
        checker,
    )
    .await;
    report.check(&run, context, checker);
    report
}

async fn rlock_both_ways_and_a_mixed_run_on_a_cluster(version: &str) {
    let id = format!("redisson_jvm_cluster-rlock-{version}");
    jvm::clear_record(&id);
    let cluster = RedisCluster::start(3, 0);
    let opts = format!("watchdog={WATCHDOG_MS}");
    let java = Arc::new(Jvm::start(version, &deployment(&cluster), &opts).await);
    let spec = mixed::helper_spec(
        &format!("cluster|{}", cluster.urls().join(",")),
        WATCHDOG_MS,
    );
    let client = Client::connect(mixed::config_of(&spec)).await.unwrap();
    let name = "handoff";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let node = cluster.node(cluster.primary_for_key(name));

    // redlatch holds (10 s lease), Java waits (with whichever pub/sub it picked).
    let lease = Duration::from_secs(10);
    let guard = client.lock(name).lock_with_lease(lease).await.unwrap();
    let scripts_before = scripts_run(node);
    let waiting = java.send("t1", &format!("lock lock {name}"));
    let theirs = until_subscribed(&cluster, &channel).await;
    assert!(
        eventually_async(Duration::from_secs(10), || scripts_run(node)
            >= scripts_before + 2)
        .await,
        "Redisson never retried after subscribing"
    );
    let ours_released = mono_nanos();
    guard.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(30), waiting.reply())
        .await
        .expect("Redisson's waiter was not woken by redlatch's release on the cluster");
    got.ok();

    // Java holds (60 s lease), redlatch waits: woken by Redisson's unlock message.
    java.call("t1", &format!("unlock lock {name}")).await.ok();
    java.call("t1", &format!("lock lock {name} 60000"))
        .await
        .ok();
    let waiter = {
        let lock = client.lock(name);
        tokio::spawn(async move { (lock.lock().await.unwrap(), mono_nanos()) })
    };
    let ours = until_subscribed(&cluster, &channel).await;
    let released = java.call("t1", &format!("unlock lock {name}")).await;
    let (guard, at) = match tokio::time::timeout(Duration::from_secs(30), waiter).await {
        Ok(r) => r.unwrap(),
        Err(_) => panic!(
            "redlatch's waiter was not woken by Redisson's unlock on the cluster \
             (the name's node ran {} PUBLISH and {} SPUBLISH calls; subscribers {:?})",
            common::calls(node, "publish"),
            common::calls(node, "spublish"),
            subscribers(&cluster, &channel)
        ),
    };
    guard.unlock().await.unwrap();
    println!(
        "Redisson {version} on a cluster: redlatch waits with {} pub/sub, Redisson with {}; \
         Java unlock -> redlatch {:.2} ms, redlatch unlock -> Java {:.2} ms",
        mode(ours),
        mode(theirs),
        ms(at - released.before.unwrap()),
        ms(got.nanos - ours_released)
    );

    // Mixed run: 3 Java threads, 3 redlatch tasks, a redlatch process.
    let checker = Checker::new(Kind::Plain, "mixed", None);
    let context = format!("Redisson {version} cluster mixed run");
    let report = mixed_run(
        &java,
        client,
        &spec,
        &checker,
        Kind::Plain,
        "mixed",
        &context,
    )
    .await;
    assert_eq!(report.errors, 0);
    jvm::record(&id, "RLock", version, "cluster", "pass");
}

/// The family's wake-ups across the two on a cluster (4.7): fair lock, read-write lock,
/// semaphore, latch; and a fair mixed run with its FIFO check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_family_wakes_across_the_two_on_a_cluster_4_7() {
    if !jvm::available() {
        return;
    }
    let version = jvm::V4;
    let id = format!("redisson_jvm_cluster-family-{version}");
    jvm::clear_record(&id);
    let cluster = RedisCluster::start(3, 0);
    let opts = format!("watchdog={WATCHDOG_MS}");
    let java = Arc::new(Jvm::start(version, &deployment(&cluster), &opts).await);
    let spec = mixed::helper_spec(
        &format!("cluster|{}", cluster.urls().join(",")),
        WATCHDOG_MS,
    );
    let client = Client::connect(mixed::config_of(&spec)).await.unwrap();

    let subscribed = |channel: &'static str| {
        let cluster = &cluster;
        async move {
            until_subscribed(cluster, channel).await;
        }
    };
    jvm_family::wake_both_ways(&java, &client, subscribed, |primitive| {
        jvm::record(&id, primitive, version, "cluster", "pass")
    })
    .await;

    // Multi-lock over names on different nodes.
    let (a, b) = (cluster.key_on(0, "ma"), cluster.key_on(1, "mb"));
    let names = format!("{a},{b}");
    java.call("m", &format!("multi lock {names}")).await.ok();
    let ours = {
        let m = client.multi_lock([a.clone(), b.clone()]);
        tokio::spawn(async move { m.lock().await.unwrap() })
    };
    until_subscribed(&cluster, &format!("redisson_lock__channel:{{{a}}}")).await;
    java.call("m", &format!("multi unlock {names}")).await.ok();
    let g = tokio::time::timeout(Duration::from_secs(30), ours)
        .await
        .expect("multi-lock: Java's unlock did not wake us")
        .unwrap();
    assert!(!java
        .call("m", &format!("multi trylock {names} 100"))
        .await
        .bool());
    g.unlock().await.unwrap();
    assert!(java
        .call("m", &format!("multi trylock {names} 5000"))
        .await
        .bool());
    java.call("m", &format!("multi unlock {names}")).await.ok();
    jvm::record(&id, "RedissonMultiLock", version, "cluster", "pass");

    // Fair lock: a mixed run, FIFO checked against the queue on its node.
    let queue = {
        let key = "redisson_lock_queue:{fair}".to_string();
        let node = cluster.node(cluster.primary_for_key(&key)).url();
        Arc::new(move || {
            let mut conn = common::conn::sync_conn(node.as_str());
            redis::cmd("LRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query::<Vec<String>>(&mut conn)
                .unwrap()
        }) as Arc<dyn Fn() -> Vec<String> + Send + Sync>
    };
    let checker = Checker::new(Kind::Fair, "fair", Some(queue));
    let context = "Redisson 4.7 cluster fair mixed run";
    mixed_run(&java, client, &spec, &checker, Kind::Fair, "fair", context).await;
    jvm::record(&id, "RFairLock", version, "cluster", "pass");
}
