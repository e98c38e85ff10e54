//! The faster multi-lock over Redlock's three masters: granted when a majority grants
//! every value, exclusion per value under contention (part of `faster_multi_lock`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redlatch::{Client, Config};
use redlatch_testkit::inside::Values;
use redlatch_testkit::{self as common, RedisServer};

use super::{fields, now_ms};

fn redlock_config(servers: &[RedisServer]) -> Config {
    common::redlock::config(servers)
}

/// Waits (up to 5 s) until every master holds `count` fields of group `rl`: lock() and
/// unlock() return at a majority, and a master answering past the master timeout (a
/// loaded machine) runs the script just after.
async fn every_master_has(servers: &[RedisServer], count: usize, what: &str) {
    let on_all = || servers.iter().all(|s| fields(s, "rl").len() == count);
    assert!(
        common::eventually_async(Duration::from_secs(5), on_all).await,
        "{what}: {:?}",
        servers.iter().map(|s| fields(s, "rl")).collect::<Vec<_>>()
    );
}

/// The hash field a faster multi-lock writes for value `a` (22 characters), read from a
/// probe group that `client` locks and unlocks.
async fn field_of_value_a(client: &Client, servers: &[RedisServer]) -> String {
    let probe = client
        .faster_multi_lock("probe", ["a"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    // Granted by a majority: on one of the first two masters at least.
    let f: Vec<String> = (servers[..2].iter())
        .flat_map(|s| s.cmd::<Vec<String>>(&["HKEYS", "probe"]))
        .collect();
    probe.unlock().await.unwrap();
    f.into_iter().find(|k| k.len() == 22).unwrap()
}

/// A dead holder `ghost:1` of the value whose field is `f` in group `rl` of `server`
/// alone, its lease a minute long.
fn plant_a_ghost(server: &RedisServer, f: &str) {
    let ends = (now_ms() + 60_000).to_string();
    let _: i64 = server.cmd(&[
        "HSET",
        "rl",
        f,
        "ghost:1",
        &format!("{f}:ghost:1:expire_time"),
        &ends,
        &format!("{f}:ghost:1:lock_count"),
        "1",
    ]);
}

/// Redlock: granted when a majority grants every value (a minority's refusal is
/// outvoted, a minority's grant is undone), queries by majority, exclusion per value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_grants_all_values_by_majority() {
    let mut servers = common::start_many(3);
    let a = Client::connect(redlock_config(&servers)).await.unwrap();
    let b = Client::connect(redlock_config(&servers)).await.unwrap();
    let held = a
        .faster_multi_lock("rl", ["b"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    every_master_has(&servers, 3, "the value on every master").await;
    let batch = b.faster_multi_lock("rl", ["a", "b"]).unwrap();
    assert!(batch.try_lock(Duration::ZERO).await.unwrap().is_none());
    for s in &servers {
        assert_eq!(
            fields(s, "rl").len(),
            3,
            "nothing of the refused batch on any master"
        );
    }
    assert!(batch.is_locked().await.unwrap());
    held.unlock().await.unwrap();
    // The batch below must find `b` free on the two masters that grant it.
    every_master_has(&servers, 0, "released everywhere").await;
    // A dead holder of `a` on one master only: outvoted by the other two.
    let f = field_of_value_a(&b, &servers).await;
    plant_a_ghost(&servers[2], &f);
    let g = batch
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("a majority grants both");
    assert!(
        batch.is_held_by_current_task().await.unwrap(),
        "held on a majority"
    );
    let on_third: HashMap<String, String> = servers[2].cmd(&["HGETALL", "rl"]);
    assert_eq!(
        on_third[&f], "ghost:1",
        "the minority's holder is left alone"
    );
    // One master down (the ghost's): the other two still decide, and exclusion holds.
    servers[2].kill();
    let other = a.faster_multi_lock("rl", ["b", "c"]).unwrap();
    assert!(other
        .try_lock(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    let g = other
        .try_lock(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("free on the majority");
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_overlapping_sets_never_share_a_value() {
    let servers = common::start_many(3);
    let holders: Arc<Values> = Default::default();
    let mut tasks = Vec::new();
    for c in 0..2 {
        let client = Client::connect(redlock_config(&servers)).await.unwrap();
        for t in 0..2usize {
            let holders = holders.clone();
            let set: Vec<&'static str> = ["v0", "v1", "v2"]
                .iter()
                .copied()
                .cycle()
                .skip(c + t)
                .take(2)
                .collect();
            let lock = client
                .faster_multi_lock("rl-contended", set.clone())
                .unwrap();
            tasks.push(tokio::spawn(async move {
                for _ in 0..5 {
                    let g = lock.lock().await.unwrap();
                    holders.hold(&set).await;
                    g.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("a contender never finished")
            .unwrap();
    }
    // unlock() returns once a majority released: a minority's release may still be in
    // flight, or have timed out and left the hold to end with its lease (the watchdog's
    // 30 s). Nothing is promised about that master sooner (it failed 1 CI run in ~10
    // under a CPU hog when checked at once).
    for s in &servers {
        let gone = common::eventually_async(Duration::from_secs(35), || {
            s.cmd::<i64>(&["EXISTS", "rl-contended"]) == 0
        })
        .await;
        assert!(gone, "a hold left on {} past its lease", s.addr());
    }
}
