//! Group commit per cluster node (issue 25 item 2) on real Redis 7 clusters: one
//! `batch_node.lua` call carries the plain operations of every slot a primary serves,
//! each operation answered on its own (a WRONGTYPE neighbour, a re-entry), exclusion
//! holds under contention over many slots, and across a slot migration under batched
//! load (operations of the migrating slot leave the batch and follow MOVED / ASK alone).
//! The tests on this file's cluster run one at a time: one counts the script calls every
//! primary received, one fills a primary's memory.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{cluster_of, key_in_slot, key_slot, RedisCluster};
use futures_util::future::join_all;
use redlatch::{Client, Config, Error};

/// The tests sharing the cluster take turns (script calls are counted per node).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// This file's cluster: not the binary's shared one, whose other users would add script
/// calls to the counts and meet the full primary.
fn batch_cluster() -> &'static RedisCluster {
    static CLUSTER: std::sync::OnceLock<RedisCluster> = std::sync::OnceLock::new();
    cluster_of(&CLUSTER)
}

/// Every test's bound: a hang fails it instead of stalling the suite.
const BOUND: Duration = Duration::from_secs(120);

async fn client(cluster: &RedisCluster) -> Client {
    Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap()
}

/// Script calls (EVALSHA and EVAL) all primaries have answered so far.
fn script_calls(cluster: &RedisCluster) -> u64 {
    let mut total = 0;
    for p in cluster.primaries() {
        let info: String = cluster.node(p).cmd(&["INFO", "commandstats"]);
        for line in info.lines() {
            let Some(rest) = line
                .strip_prefix("cmdstat_evalsha:calls=")
                .or_else(|| line.strip_prefix("cmdstat_eval:calls="))
            else {
                continue;
            };
            let calls = rest.split(',').next().unwrap();
            total += calls.parse::<u64>().unwrap();
        }
    }
    total
}

/// Many plain acquires and releases submitted at once over names of every slot range:
/// they go out as a few calls per node, not one per slot, and each answers for itself:
/// the name holding a string fails alone with WrongType, a re-entry counts 2.
#[tokio::test]
async fn one_call_per_node_carries_many_slots_and_answers_each_operation() {
    if common::older_than(7, "group commit per node") {
        return;
    }
    tokio::time::timeout(BOUND, async {
        let _turn = TURN.lock().await;
        let cluster = batch_cluster();
        let c = client(cluster).await;
        let names: Vec<String> = (0..60).map(|i| format!("node-batch-{i}")).collect();
        let slots: std::collections::HashSet<u16> =
            names.iter().map(|n| key_slot(n.as_bytes())).collect();
        assert!(slots.len() > 30, "names spread over slots: {}", slots.len());
        // A string where name 30 is, and a lock already held by this task on name 31.
        let wrong = &names[30];
        let _: () = cluster
            .node(cluster.primary_for_key(wrong))
            .cmd(&["SET", wrong, "not a lock"]);
        let reentered = c.lock(&names[31]);
        let outer = reentered.lock().await.unwrap();
        let before = script_calls(cluster);
        let locks: Vec<_> = names.iter().map(|n| c.lock(n)).collect();
        let taken = join_all(locks.iter().enumerate().map(|(i, l)| {
            let outer = &outer;
            async move {
                match i {
                    31 => outer.scope(l.lock()).await,
                    _ => l.lock().await,
                }
            }
        }))
        .await;
        let calls = script_calls(cluster) - before;
        // 60 operations queued in one poll: two fly alone, the rest go in batches of up
        // to 32 per primary, split per node: about one call for each of the three
        // primaries, and one more for what queued after a drain. Per slot it would be
        // at least 58 calls; with batches of 32 whatever the primaries, nine.
        assert!(calls <= 6, "{calls} script calls for 60 acquisitions");
        let mut guards = Vec::new();
        for (i, r) in taken.into_iter().enumerate() {
            match (i, r) {
                (30, Err(Error::WrongType { name, .. })) => assert_eq!(&name, wrong),
                (30, other) => panic!("the string key answered {other:?}"),
                (_, Ok(g)) => guards.push((i, g)),
                (_, Err(e)) => panic!("lock {i}: {e}"),
            }
        }
        assert_eq!(reentered.hold_count().await.unwrap(), 2);
        for (i, name) in names.iter().enumerate() {
            let node = cluster.node(cluster.primary_for_key(name));
            let kind: String = node.cmd(&["TYPE", name]);
            let want = if i == 30 { "string" } else { "hash" };
            assert_eq!(kind, want, "{name}");
        }
        // The releases, also batched, each exactly once.
        let before = script_calls(cluster);
        let released = join_all(guards.into_iter().map(|(_, g)| g.unlock())).await;
        let calls = script_calls(cluster) - before;
        assert!(calls <= 6, "{calls} script calls for 59 releases");
        for r in released {
            r.unwrap();
        }
        assert_eq!(reentered.hold_count().await.unwrap(), 1);
        outer.unlock().await.unwrap();
        for (i, name) in names.iter().enumerate() {
            let node = cluster.node(cluster.primary_for_key(name));
            let exists: i64 = node.cmd(&["EXISTS", name]);
            assert_eq!(exists, i64::from(i == 30), "{name}");
        }
        let _: i64 = cluster
            .node(cluster.primary_for_key(wrong))
            .cmd(&["DEL", wrong]);
    })
    .await
    .expect("bounded");
}

/// A primary out of memory (maxmemory 1, noeviction) refuses a per-node batch before it
/// runs; its operations then go alone: every release still frees its lock, every
/// acquisition fails with OutOfMemory, as with the single scripts.
#[tokio::test]
async fn a_node_out_of_memory_still_releases_and_refuses_acquisitions() {
    if common::older_than(7, "group commit per node") {
        return;
    }
    tokio::time::timeout(BOUND, async {
        let _turn = TURN.lock().await;
        let cluster = batch_cluster();
        let c = client(cluster).await;
        let p = cluster.primaries()[0];
        let held: Vec<String> = (0..8)
            .map(|i| cluster.key_on(p, &format!("oom-held-{i}-")))
            .collect();
        let fresh: Vec<String> = (0..8)
            .map(|i| cluster.key_on(p, &format!("oom-fresh-{i}-")))
            .collect();
        let mut guards = Vec::new();
        for name in &held {
            guards.push(c.lock(name).lock().await.unwrap());
        }
        let locks: Vec<_> = fresh.iter().map(|n| c.lock(n)).collect();
        let node = cluster.node(p);
        let _: String = node.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
        let _: String = node.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
        let (released, taken) = tokio::join!(
            join_all(guards.into_iter().map(|g| g.unlock())),
            join_all(locks.iter().map(|l| l.lock())),
        );
        let _: String = node.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
        for r in released {
            r.unwrap();
        }
        for (name, r) in fresh.iter().zip(taken) {
            assert!(
                matches!(r, Err(Error::OutOfMemory { .. })),
                "{name}: {:?}",
                r.map(drop)
            );
        }
        for name in held.iter().chain(&fresh) {
            let exists: i64 = node.cmd(&["EXISTS", name]);
            assert_eq!(exists, 0, "{name}");
        }
    })
    .await
    .expect("bounded");
}

/// Tasks of two clients contend for a few locks on every primary (several slots each):
/// never two inside one lock at once, and every acquisition and release succeeds (the
/// hand-overs between the clients included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclusion_holds_under_contention_over_slots_and_nodes() {
    tokio::time::timeout(BOUND, async {
        let _turn = TURN.lock().await;
        let cluster = batch_cluster();
        let names: Arc<Vec<String>> = Arc::new(
            cluster
                .primaries()
                .into_iter()
                .flat_map(|p| (0..4).map(move |i| (p, i)))
                .map(|(p, i)| cluster.key_on(p, &format!("contended-{p}-{i}-")))
                .collect(),
        );
        let inside: Arc<Vec<AtomicBool>> =
            Arc::new(names.iter().map(|_| AtomicBool::new(false)).collect());
        let entries = Arc::new(AtomicUsize::new(0));
        let clients = [client(cluster).await, client(cluster).await];
        let mut tasks = Vec::new();
        for t in 0..32usize {
            let c = clients[t % 2].clone();
            let (names, inside, entries) = (names.clone(), inside.clone(), entries.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..15 {
                    let k = (t * 7 + round * 5) % names.len();
                    let guard = c.lock(&names[k]).lock().await?;
                    assert!(!inside[k].swap(true, Ordering::SeqCst), "two inside {k}");
                    entries.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    inside[k].store(false, Ordering::SeqCst);
                    guard.unlock().await?;
                }
                Ok::<_, Error>(())
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(entries.load(Ordering::Relaxed), 32 * 15);
        for name in names.iter() {
            let exists: i64 = cluster
                .node(cluster.primary_for_key(name))
                .cmd(&["EXISTS", name]);
            assert_eq!(exists, 0, "{name} left behind");
        }
    })
    .await
    .expect("bounded");
}

/// A slot migrates (IMPORTING / MIGRATING, keys moved, SETSLOT NODE) while tasks of two
/// clients take and release locks in it and in other slots of the same primaries:
/// exclusion holds and every operation succeeds; the migrating slot's operations leave
/// their node's batch and follow ASK / MOVED alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migration_under_batched_load_keeps_exclusion() {
    tokio::time::timeout(BOUND, async {
        let cluster = Arc::new(RedisCluster::start(3, 0));
        let [from, to] = [cluster.primaries()[0], cluster.primaries()[1]];
        let moving = key_slot(cluster.key_on(from, "moving-").as_bytes());
        // Three names in the migrating slot, three elsewhere on the same primary, three
        // on the target.
        let mut names: Vec<String> = (0..3)
            .map(|i| key_in_slot(moving, &format!("moving-{i}-")))
            .collect();
        names.extend((0..3).map(|i| cluster.key_on(from, &format!("staying-{i}-"))));
        names.extend((0..3).map(|i| cluster.key_on(to, &format!("target-{i}-"))));
        let names = Arc::new(names);
        let inside: Arc<Vec<AtomicBool>> =
            Arc::new(names.iter().map(|_| AtomicBool::new(false)).collect());
        let config = || {
            Config::cluster(cluster.urls())
                .watchdog_timeout(Duration::from_secs(5))
                .unavailable_timeout(Duration::from_secs(20))
        };
        let clients = [
            Client::connect(config()).await.unwrap(),
            Client::connect(config()).await.unwrap(),
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let entries = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for t in 0..24usize {
            let c = clients[t % 2].clone();
            let (names, inside) = (names.clone(), inside.clone());
            let (stop, entries) = (stop.clone(), entries.clone());
            tasks.push(tokio::spawn(async move {
                // Bounded: at most 400 rounds, and it stops once the migration is done.
                for round in 0..400usize {
                    if stop.load(Ordering::SeqCst) && round >= 10 {
                        break;
                    }
                    let k = (t * 5 + round * 7) % names.len();
                    let guard = c.lock(&names[k]).lock().await?;
                    assert!(!inside[k].swap(true, Ordering::SeqCst), "two inside {k}");
                    entries.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                    inside[k].store(false, Ordering::SeqCst);
                    guard.unlock().await?;
                }
                Ok::<_, Error>(())
            }));
        }
        // Let the load build up, then migrate under it.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let migrating = cluster.clone();
        tokio::task::spawn_blocking(move || {
            migrating.begin_migration(moving, from, to);
            std::thread::sleep(Duration::from_millis(200));
            migrating.move_slot_keys(moving, from, to);
            std::thread::sleep(Duration::from_millis(200));
            migrating.move_slot_keys(moving, from, to);
            migrating.finish_migration(moving, from, to);
        })
        .await
        .unwrap();
        stop.store(true, Ordering::SeqCst);
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert!(entries.load(Ordering::Relaxed) >= 24 * 10);
        assert_eq!(cluster.primary_for_slot(moving), to);
        for name in names.iter() {
            let p = cluster.primary_for_key(name);
            let exists: i64 = cluster.node(p).cmd(&["EXISTS", name]);
            assert_eq!(exists, 0, "{name} left behind on node {p}");
        }
    })
    .await
    .expect("bounded");
}
