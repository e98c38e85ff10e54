//! The `redlatch` command on a Redis Cluster (3 primaries + 3 replicas, started by the
//! harness): `run` given one node that does not serve the name (issue 12's opening bug:
//! it waited 30 s and exited 69 with MOVED), `status` and `unlock --force` on a
//! cluster name. (The bench on a cluster: redlatch-bench/tests/bench.rs.)

use crate::cli_util;
use redlatch_testkit as common;

use std::time::{Duration, Instant};

use cli_util::{output, read, redlatch, until_file, Bg, TempDir};
use common::cluster::{shared_cluster, RedisCluster};
use common::eventually;
use serde_json::Value;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A name served by some primary, and the URL of another primary (so the first
/// request for the name is answered MOVED unless the slot map is used).
fn name_elsewhere(cluster: &RedisCluster, prefix: &str) -> (String, String) {
    let primaries = cluster.primaries();
    let (owner, other) = (primaries[0], primaries[1]);
    (cluster.key_on(owner, prefix), cluster.node(other).url())
}

/// EXISTS on the primary serving `key`.
fn exists(cluster: &RedisCluster, key: &str) -> bool {
    cluster
        .node(cluster.primary_for_key(key))
        .cmd::<i64>(&["EXISTS", key])
        == 1
}

#[test]
fn run_given_one_node_that_does_not_serve_the_name() {
    let cluster = shared_cluster();
    let (name, seed) = name_elsewhere(cluster, "orders:");
    let began = Instant::now();
    // Detected as a cluster from the seed alone (no --cluster).
    let out = output(
        &args(&["run", "--redis", &seed, &name, "--", "echo", "hi"]),
        0,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    // The bug waited out the 30 s default --wait; a lock nobody holds is immediate
    // (the bound is loose for a loaded machine).
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    assert!(!exists(cluster, &name), "lock left behind after CMD exited");
    // With --cluster and a replica as the seed as well.
    let replica = cluster
        .node(cluster.replica_of(cluster.primaries()[2]))
        .url();
    redlatch(&args(&[
        "run",
        "--cluster",
        "--redis",
        &replica,
        &name,
        "--wait",
        "0s",
        "--",
        "true",
    ]))
    .assert()
    .code(0);
}

#[test]
fn status_and_unlock_force_on_a_cluster_name() {
    let cluster = shared_cluster();
    let (name, seed) = name_elsewhere(cluster, "st:");
    let dir = TempDir::new();
    let hold = format!(
        "trap 'exit 0' TERM; echo \"$REDLATCH_HOLDER\" > \"$D/holder\"; {}",
        until_file("stop", 90)
    );
    let holder = Bg::start(
        &args(&["run", "--redis", &seed, &name, "--", "sh", "-c", &hold]),
        &dir,
        "holder",
    );
    assert!(
        eventually(Duration::from_secs(20), || !read(&dir.file("holder"))
            .is_empty()),
        "the holder did not start: {}",
        read(&holder.stderr_path)
    );
    let id = read(&dir.file("holder")).trim().to_string();
    assert!(exists(cluster, &name));

    let status = |code| {
        let out = output(&args(&["status", &name, "--json", "--redis", &seed]), code);
        serde_json::from_slice::<Value>(&out.stdout).expect("status --json is JSON")
    };
    let doc = status(0);
    assert_eq!(doc["locked"], true, "{doc}");
    assert_eq!(doc["holder"], id.as_str(), "{doc}");
    let m = &doc["masters"][0];
    assert_eq!(m["error"], Value::Null, "{doc}");
    assert_eq!(m["holders"][0]["count"], 1, "{doc}");
    // The primary has a replica: the table says how many (a standalone master's has
    // no such line, cli.rs).
    let table = output(&args(&["status", &name, "--redis", &seed]), 0).stdout;
    let table = String::from_utf8_lossy(&table);
    assert!(table.contains("replicas: 1 connected"), "{table}");

    let out = output(&args(&["unlock", "--force", &name, "--redis", &seed]), 0).stdout;
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.contains(&format!("removed: lock {name:?} held by {id}")),
        "{out}"
    );
    assert!(!exists(cluster, &name), "unlock --force left the lock");
    let doc = status(1); // free

    assert_eq!(doc["locked"], false, "{doc}");

    // The holder finds its lock gone when CMD ends: 76, not CMD's 0.
    holder.signal(libc::SIGTERM);
    let ended = holder.wait(Duration::from_secs(30));
    assert_eq!(ended.code(), Some(76), "{}", ended.stderr);
}
