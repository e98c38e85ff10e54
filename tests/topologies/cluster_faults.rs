//! Redis Cluster under faults, each test on its own 3-primary, 3-replica cluster:
//! failover (kill -9 and CLUSTER FAILOVER), slot migration while locks are held and
//! waited on, and replica-synced acquisitions (`Config::sync_replicas`).

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::cluster::{key_in_slot, key_slot, RedisCluster};
use common::eventually_async;
use futures_util::future::join_all;
use redlatch::{Client, Config, Error, SyncReplicas};

fn config(cluster: &RedisCluster) -> Config {
    Config::cluster(cluster.urls())
        .watchdog_timeout(Duration::from_millis(3000))
        .unavailable_timeout(Duration::from_secs(20))
}

/// True if node `i` (a primary, or a replica read with READONLY) holds the lock
/// hash `name`.
fn has_lock(cluster: &RedisCluster, i: usize, name: &str) -> bool {
    let mut conn = cluster.node(i).conn();
    redis::cmd("READONLY").exec(&mut conn).unwrap();
    let ty: String = redis::cmd("TYPE").arg(name).query(&mut conn).unwrap();
    ty == "hash"
}

#[tokio::test]
async fn a_synced_lock_survives_the_failover_of_its_primary() {
    let mut cluster = RedisCluster::start(3, 1);
    // A lease that outlasts the failover (renewals fail until the replica is promoted).
    let cfg = config(&cluster)
        .watchdog_timeout(Duration::from_secs(10))
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let c = Client::connect(cfg.clone()).await.unwrap();
    let primary = cluster.primaries()[0];
    let replica = cluster.replica_of(primary);
    let name = cluster.key_on(primary, "synced-");
    let guard = c.lock(&name).lock().await.unwrap();
    // Acknowledged by the replica before lock() returned: it has the lock now.
    assert!(
        has_lock(&cluster, replica, &name),
        "the replica lacks {name}"
    );
    cluster.kill(primary);
    let promoted = cluster.wait_for_failover(primary);
    assert_eq!(promoted, replica);
    assert!(has_lock(&cluster, promoted, &name));
    // Nobody else can take it, and operations resume without user action.
    let other = Client::connect(cfg).await.unwrap();
    let tried = other
        .lock(&name)
        .try_lock(Duration::from_millis(200))
        .await
        .unwrap();
    assert!(tried.is_none(), "granted twice after the failover");
    // Renewals reach the new primary.
    tokio::time::sleep(Duration::from_millis(4000)).await;
    assert!(!guard.lost().is_cancelled(), "the synced lock was lost");
    c.renew_now().await;
    let ttl = other.lock(&name).remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl > Duration::from_secs(8),
        "not renewed on the new primary: {ttl:?}"
    );
    guard.unlock().await.unwrap();
    let next = other.lock(&name).lock().await.unwrap();
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn an_unreplicated_lock_is_reported_lost_after_a_failover() {
    let mut cluster = RedisCluster::start(3, 1);
    // A lease that outlasts the failover: the renewal on the promoted replica finds the
    // lock gone (rather than its validity running out first).
    let cfg = config(&cluster)
        .watchdog_timeout(Duration::from_secs(10))
        .sync_replicas(SyncReplicas::Off, Duration::from_secs(1));
    let c = Client::connect(cfg).await.unwrap();
    let primary = cluster.primaries()[0];
    let replica = cluster.replica_of(primary);
    let name = cluster.key_on(primary, "unsynced-");
    // The replica is frozen and its link cut: the grant never reaches it (a link left
    // open would deliver it from the socket buffer once the replica resumes).
    cluster.pause(replica);
    let killed: i64 = cluster
        .node(primary)
        .cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, 1, "the replica's link");
    let guard = c.lock(&name).lock().await.unwrap();
    cluster.kill(primary);
    cluster.resume(replica);
    let promoted = cluster.wait_for_failover(primary);
    assert!(
        !has_lock(&cluster, promoted, &name),
        "the replica had it after all"
    );
    // The watchdog finds it gone on the new primary.
    let lost = tokio::time::timeout(Duration::from_secs(15), guard.lost().cancelled()).await;
    assert!(lost.is_ok(), "the lost lock was never reported");
    // Reported as lost with the old primary's data, not as an expiry.
    assert!(
        matches!(
            guard.lost_reason(),
            Some(redlatch::LostReason::MasterDataLost)
        ),
        "{:?}",
        guard.lost_reason()
    );
}

#[tokio::test]
async fn a_paused_replica_fails_a_synced_acquire_and_leaves_no_lock() {
    let cluster = RedisCluster::start(3, 1);
    let cfg = config(&cluster).sync_replicas(SyncReplicas::Auto, Duration::from_millis(500));
    let c = Client::connect(cfg).await.unwrap();
    let primary = cluster.primaries()[1];
    let replica = cluster.replica_of(primary);
    let name = cluster.key_on(primary, "paused-replica-");
    // Counted while it is connected.
    c.lock(&name).lock().await.unwrap().unlock().await.unwrap();
    cluster.pause(replica);
    let started = Instant::now();
    let err = c.lock(&name).lock().await.unwrap_err();
    let took = started.elapsed();
    cluster.resume(replica);
    match &err {
        Error::NotReplicated {
            addr,
            acked,
            wanted,
            ..
        } => {
            assert_eq!((*acked, *wanted), (0, 1));
            assert_eq!(addr, &cluster.node(primary).addr());
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(
        took >= Duration::from_millis(500),
        "failed before the timeout: {took:?}"
    );
    assert!(
        !has_lock(&cluster, primary, &name),
        "the failed acquire left a lock"
    );
    // A lock on another primary is unaffected.
    let elsewhere = cluster.key_on(cluster.primaries()[0], "healthy-");
    common::lock_and_unlock(&c, &elsewhere).await;
}

#[tokio::test]
async fn waiters_follow_a_manual_failover_and_are_woken() {
    let cluster = RedisCluster::start(3, 1);
    // A 10 s lease: a waiter that missed the message would retry when the holder's
    // lease could have run out, seconds later than the bound below on any machine.
    let config = || config(&cluster).watchdog_timeout(Duration::from_secs(10));
    let (a, b) = (
        Client::connect(config()).await.unwrap(),
        Client::connect(config()).await.unwrap(),
    );
    let primary = cluster.primaries()[2];
    let name = cluster.key_on(primary, "manual-failover-");
    let held = a.lock(&name).lock().await.unwrap();
    let waiter = common::timed_waiter(b.lock(&name), Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.failover(cluster.replica_of(primary));
    // The holder keeps it through the switch (it was replicated) and releases it on
    // the new primary; the waiter, resubscribed there, is woken.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!held.lost().is_cancelled());
    let released = Instant::now();
    held.unlock().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("the waiter slept through the failover")
        .unwrap();
    // The lease (10 s, renewed) would be the only other way out.
    assert!(acquired.duration_since(released) < Duration::from_secs(5));
}

#[tokio::test]
async fn a_slot_migration_under_held_and_waited_locks_loses_nothing() {
    let cluster = RedisCluster::start(3, 1);
    let (a, b) = (
        Client::connect(config(&cluster)).await.unwrap(),
        Client::connect(config(&cluster)).await.unwrap(),
    );
    let [from, to] = [cluster.primaries()[0], cluster.primaries()[1]];
    let name = cluster.key_on(from, "migrating-");
    let slot = key_slot(name.as_bytes());
    let held = a.lock(&name).lock().await.unwrap();
    let waiter = common::timed_waiter(b.lock(&name), Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.begin_migration(slot, from, to);
    // Mid-migration (ASK for moved keys): the holder re-enters and releases once.
    let nested = held.scope(a.lock(&name).lock()).await.unwrap();
    nested.unlock().await.unwrap();
    // The lock and its waiter registry (the waiter registered: docs/design.md, "Wake one").
    assert_eq!(cluster.move_slot_keys(slot, from, to), 2);
    // Keys moved, slot not yet handed over: operations follow ASK.
    assert!(a.lock(&name).is_locked().await.unwrap());
    cluster.finish_migration(slot, from, to);
    assert!(has_lock(&cluster, to, &name));
    let released = Instant::now();
    held.unlock().await.unwrap();
    let acquired = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter was never woken after the migration")
        .unwrap();
    assert!(acquired.duration_since(released) < Duration::from_secs(2));
    // A third client, fresh, is routed to the new owner at once.
    let c = Client::connect(config(&cluster)).await.unwrap();
    let freed = eventually_async(Duration::from_secs(5), || !has_lock(&cluster, to, &name));
    assert!(freed.await);
    c.lock(&name).lock().await.unwrap().unlock().await.unwrap();
}

/// `errorstat_<code>` of `INFO errorstats` on `node`: errors of that code it answered.
fn errors_answered(node: &common::RedisServer, code: &str) -> u64 {
    let info: String = node.cmd(&["INFO", "errorstats"]);
    let prefix = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Acquisitions queued together for a slot being migrated go, on a Redis < 7 cluster
/// (group commit per slot), as one `batch.lua` call declaring several keys, none of which
/// exists yet: the source answers ASK (keys it lacks), the target TRYAGAIN (a multi-key
/// request, keys missing), for as long as the migration lasts. Each attempt (no wait:
/// one attempt) keeps trying within the request's timeout, however many bounces that
/// takes, and takes its free lock once the slot is settled, instead of failing with the
/// ASK once the redirect budget (16 per request) is spent. (On Redis >= 7 the node's
/// batch answers "not here" and each goes alone, with one key: no bounce.)
#[tokio::test]
async fn batched_attempts_bounced_by_a_migration_wait_for_its_end() {
    let cluster = RedisCluster::start(3, 0);
    let config = Config::cluster(cluster.urls()).master_timeout(Duration::from_secs(20));
    let c = Client::connect(config).await.unwrap();
    let [from, to] = [cluster.primaries()[0], cluster.primaries()[1]];
    let slot = key_slot(cluster.key_on(from, "bounced-").as_bytes());
    let names: Vec<String> = (0..8)
        .map(|i| key_in_slot(slot, &format!("bounced-{i}-")))
        .collect();
    cluster.begin_migration(slot, from, to);
    let before = errors_answered(cluster.node(to), "TRYAGAIN");
    // Submitted in one poll: two fly alone, the others queue up as a batch.
    let attempts = tokio::spawn(async move {
        let locks: Vec<_> = names.iter().map(|n| c.lock(n)).collect();
        let lease = Duration::from_secs(60);
        let tries = locks
            .iter()
            .map(|l| l.try_lock_with_lease(Duration::ZERO, lease));
        let mut outcomes = Vec::new();
        for got in join_all(tries).await {
            outcomes.push(match got {
                Ok(Some(guard)) => guard.unlock().await.map(|()| "acquired"),
                Ok(None) => Ok("refused"),
                Err(e) => Err(e),
            });
        }
        outcomes
    });
    // More bounces than 8 requests (at most one per lock) could take within the redirect
    // budget (16 each), then the migration ends.
    let bounces = 8 * 16 + 8;
    let bounced = common::server_major() >= 7
        || eventually_async(Duration::from_secs(15), || {
            errors_answered(cluster.node(to), "TRYAGAIN") >= before + bounces
        })
        .await;
    cluster.move_slot_keys(slot, from, to);
    cluster.finish_migration(slot, from, to);
    let outcomes = tokio::time::timeout(Duration::from_secs(30), attempts)
        .await
        .expect("the attempts never returned")
        .unwrap();
    for (i, o) in outcomes.iter().enumerate() {
        assert!(
            matches!(o, Ok("acquired")),
            "attempt {i}: {o:?} (bounced {bounces} times: {bounced})"
        );
    }
    assert!(bounced, "the batches never bounced {bounces} times");
}

#[tokio::test]
async fn operations_resume_after_a_primary_is_killed() {
    let mut cluster = RedisCluster::start(3, 1);
    let c = Client::connect(config(&cluster)).await.unwrap();
    let primary = cluster.primaries()[1];
    let name = cluster.key_on(primary, "resume-");
    c.lock(&name).lock().await.unwrap().unlock().await.unwrap();
    cluster.kill(primary);
    // lock() retries through the failover (unavailable_timeout 20 s) and succeeds on
    // the promoted replica without any user action.
    let started = Instant::now();
    let g = c.lock(&name).lock().await.unwrap();
    eprintln!("lock() after the kill took {:?}", started.elapsed());
    g.unlock().await.unwrap();
}
