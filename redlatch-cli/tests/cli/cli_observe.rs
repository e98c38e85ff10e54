//! Who holds what, and deadlocks, from the shell: `status` resolves holders in other
//! processes to their client records (standalone, Redlock, a 3+3 cluster), and
//! `deadlocks` finds cycles of tasks (exit 1) and nothing among tasks that wait
//! independently (exit 0). Holders are `redlatch run` processes and clients of this
//! test process; the reader is always another `redlatch` process.

use crate::cli_util;
use redlatch_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Barrier;

use cli_util::{output, read, redis_args, redlatch, until_file, Bg, TempDir};
use common::cluster::shared_cluster;
use common::{eventually, start_many, RedisServer};
use redlatch::{Client, Config};
use serde_json::Value;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn with(mut base: Vec<String>, more: Vec<String>) -> Vec<String> {
    base.extend(more);
    base
}

fn json(args: &[String], code: i32) -> Value {
    let out = output(args, code);
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

/// Starts `redlatch --app APP run NAME` holding until `$D/stop`; returns its holder id.
fn hold(redis: &[String], name: &str, app: &str, dir: &TempDir, tag: &str) -> (Bg, String) {
    let script = format!(
        "echo \"$REDLATCH_HOLDER\" > \"$D/{tag}.id\"; {}",
        until_file("stop", 90)
    );
    let mut a = args(&["--app", app, "run", name]);
    a.extend(redis.iter().cloned());
    a.extend(["--", "sh", "-c", &script].map(String::from));
    let bg = Bg::start(&a, dir, tag);
    let file = dir.file(&format!("{tag}.id"));
    assert!(
        eventually(Duration::from_secs(20), || !read(&file).is_empty()),
        "holder {tag} did not start: {}",
        read(&bg.stderr_path)
    );
    (bg, read(&file).trim().to_string())
}

/// `status NAME --json` until the holder shows its acquisition time on every master
/// that granted it (the ledger is written within about a second), a majority at least,
/// checking the record on the way. (A Redlock grant needs a majority only: on a loaded
/// machine one master of three answered the acquire too late and holds nothing.)
fn status_resolved(redis: &[String], name: &str, id: &str, app: &str, pid: u32) -> Value {
    let mut doc = Value::Null;
    let granted = |doc: &Value| -> Vec<Value> {
        let masters = doc["masters"].as_array().unwrap();
        let holding = masters
            .iter()
            .filter(|m| !m["holders"].as_array().unwrap().is_empty());
        holding.cloned().collect()
    };
    let resolved = eventually(Duration::from_secs(15), || {
        doc = json(&with(args(&["status", name, "--json"]), redis.to_vec()), 0);
        let holding = granted(&doc);
        holding.len() as u64 >= doc["quorum"].as_u64().unwrap()
            && holding
                .iter()
                .all(|m| !m["holder_info"][0]["acquired"].is_null())
    });
    assert!(resolved, "no acquisition time: {doc}");
    for m in granted(&doc) {
        let who = &m["holder_info"][0];
        assert_eq!(who["id"], id, "{doc}");
        assert_eq!(who["app"], app, "{doc}");
        assert_eq!(who["pid"], pid, "the redlatch process: {doc}");
        assert!(who["host"].as_str().is_some_and(|h| !h.is_empty()), "{doc}");
        assert_eq!(who["version"], env!("CARGO_PKG_VERSION"), "{doc}");
        let (since, acquired) = (
            who["since"].as_i64().unwrap(),
            who["acquired"].as_i64().unwrap(),
        );
        assert!(since <= acquired, "connected before it acquired: {doc}");
    }
    doc
}

fn record_exists(server: &RedisServer, uuid: &str) -> bool {
    server.cmd::<i64>(&["EXISTS", &format!("redlatch_client:{{{uuid}}}")]) == 1
}

#[test]
fn status_resolves_holders_in_other_processes_and_close_removes_the_record() {
    let server = RedisServer::start();
    let redis = redis_args(&[&server]);
    let dir = TempDir::new();
    let (holder, id) = hold(&redis, "billing:nightly", "billing", &dir, "h");
    status_resolved(&redis, "billing:nightly", &id, "billing", holder.pid());
    let table = output(
        &with(args(&["status", "billing:nightly"]), redis.clone()),
        0,
    )
    .stdout;
    let table = String::from_utf8_lossy(&table);
    assert!(table.contains("app billing on host"), "{table}");
    assert!(table.contains(&format!("pid {}", holder.pid())), "{table}");

    // A holder without a record (as a Redisson client's): its id and "no record".
    let java = "6c0e8f6e-7a41-4a9c-9d8e-3f2b1a0c9d8e:1";
    server.cmd::<i64>(&["HSET", "java-held", java, "1"]);
    server.cmd::<i64>(&["PEXPIRE", "java-held", "60000"]);
    let doc = json(
        &with(args(&["status", "java-held", "--json"]), redis.clone()),
        0,
    );
    let who = &doc["masters"][0]["holder_info"][0];
    assert_eq!(who["id"], java, "{doc}");
    assert!(
        who["app"].is_null() && who["host"].is_null() && who["pid"].is_null(),
        "{doc}"
    );
    let table = output(&with(args(&["status", "java-held"]), redis.clone()), 0).stdout;
    assert!(String::from_utf8_lossy(&table).contains("no record"));

    // The holder ends: close() deletes its record and ledger.
    let uuid = id.split(':').next().unwrap().to_string();
    assert!(record_exists(&server, &uuid));
    std::fs::write(dir.file("stop"), "").unwrap();
    let ended = holder.wait(Duration::from_secs(30));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    assert!(!record_exists(&server, &uuid), "close() left the record");
    let ledger = format!("redlatch_ledger:{{{uuid}}}");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", &ledger]),
        0,
        "close() left the ledger"
    );
}

#[test]
fn status_resolves_a_holder_on_every_redlock_master_and_on_a_cluster() {
    let servers = start_many(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let redis = redis_args(&refs);
    let dir = TempDir::new();
    let (holder, id) = hold(&redis, "rl:job", "redlock-app", &dir, "rl");
    let doc = status_resolved(&redis, "rl:job", &id, "redlock-app", holder.pid());
    assert_eq!(doc["masters"].as_array().unwrap().len(), 3);

    let cluster = shared_cluster();
    let seed = vec![
        "--redis".to_string(),
        cluster.node(cluster.primaries()[0]).url(),
    ];
    // A name whose slot is not the record's: the record is read where it lives.
    let name = cluster.key_on(cluster.primaries()[2], "cl:job:");
    let (cl_holder, cl_id) = hold(&seed, &name, "cluster-app", &dir, "cl");
    status_resolved(&seed, &name, &cl_id, "cluster-app", cl_holder.pid());
    std::fs::write(dir.file("stop"), "").unwrap();
    for h in [holder, cl_holder] {
        let ended = h.wait(Duration::from_secs(30));
        assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Two clients of this process in a cycle: a task of `alpha` holds L1 and waits for
/// L2, a task of `beta` holds L2 and waits for L1.
struct Cycle {
    clients: Vec<Client>,
    waits: Vec<tokio::task::JoinHandle<()>>,
}

/// A task of `client` that takes `first`, meets `barrier`, then waits for `second`.
fn hold_then_wait(
    client: &Client,
    first: &str,
    second: &str,
    barrier: &Arc<Barrier>,
) -> tokio::task::JoinHandle<()> {
    let (client, first, second) = (client.clone(), first.to_string(), second.to_string());
    let barrier = barrier.clone();
    tokio::spawn(async move {
        let _held = client.lock(&first).lock().await.unwrap();
        barrier.wait().await;
        let _ = client.lock(&second).lock().await;
    })
}

async fn cycle(config: impl Fn(&str) -> Config, l1: &str, l2: &str) -> Cycle {
    let a = Client::connect(config("alpha")).await.unwrap();
    let b = Client::connect(config("beta")).await.unwrap();
    let barrier = Arc::new(Barrier::new(3));
    let waits = vec![
        hold_then_wait(&a, l1, l2, &barrier),
        hold_then_wait(&b, l2, l1, &barrier),
    ];
    barrier.wait().await;
    Cycle {
        clients: vec![a, b],
        waits,
    }
}

/// `deadlocks --json` until it exits `code` (ledgers are written within about a
/// second); its last document.
fn deadlocks_until(redis: &[String], code: i32) -> Value {
    let mut doc = Value::Null;
    let found = eventually(Duration::from_secs(20), || {
        let out = redlatch(&with(args(&["deadlocks", "--json"]), redis.to_vec()))
            .output()
            .unwrap();
        doc = serde_json::from_slice(&out.stdout).expect("deadlocks --json is JSON");
        out.status.code() == Some(code)
    });
    assert!(found, "deadlocks never exited {code}: {doc}");
    doc
}

fn check_cycle(doc: &Value, l1: &str, l2: &str) {
    let cycles = doc["cycles"].as_array().unwrap();
    assert_eq!(cycles.len(), 1, "{doc}");
    let tasks = cycles[0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2, "{doc}");
    let mut apps: Vec<&str> = tasks
        .iter()
        .map(|t| t["holder"]["app"].as_str().unwrap())
        .collect();
    apps.sort();
    assert_eq!(apps, ["alpha", "beta"], "{doc}");
    for t in tasks {
        let pair = (
            t["holds"].as_str().unwrap(),
            t["waits_for"].as_str().unwrap(),
        );
        assert!(pair == (l1, l2) || pair == (l2, l1), "{doc}");
        assert_eq!(t["holder"]["pid"], std::process::id(), "{doc}");
        assert!(t["waiting_since"].is_i64(), "{doc}");
    }
}

#[test]
fn deadlocks_finds_a_cycle_of_two_clients_and_exits_1_then_0() {
    let server = RedisServer::start();
    let redis = redis_args(&[&server]);
    let rt = runtime();
    let url = server.url();
    let cyc = rt.block_on(cycle(
        |app| Config::single(url.clone()).app(app),
        "dl:1",
        "dl:2",
    ));
    let doc = deadlocks_until(&redis, 1);
    check_cycle(&doc, "dl:1", "dl:2");
    let text = redlatch(&with(args(&["deadlocks"]), redis.clone()))
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("\"dl:1\"") && text.contains("\"dl:2\"") && text.contains("alpha on"),
        "{text}"
    );
    // Broken: the waits end, the cycle is gone.
    rt.block_on(async {
        for w in &cyc.waits {
            w.abort();
        }
    });
    deadlocks_until(&redis, 0);
    drop(cyc);
}

#[test]
fn tasks_of_one_client_waiting_independently_are_no_cycle() {
    let server = RedisServer::start();
    let redis = redis_args(&[&server]);
    let rt = runtime();
    let url = server.url();
    let (x_uuid, keep) = rt.block_on(async {
        let x = Client::connect(Config::single(url.clone()).app("x"))
            .await
            .unwrap();
        let y = Client::connect(Config::single(url.clone()).app("y"))
            .await
            .unwrap();
        // X's task A holds I1 and waits for I2; Y's task holds I2 and waits for I3; X's
        // task B holds I3 and waits for nothing. Clients: X -> Y -> X; tasks: A -> Y's
        // task -> B, no cycle.
        let xb = x.clone();
        let b = tokio::spawn(async move {
            let _held = xb.lock("ind:3").lock().await.unwrap();
            std::future::pending::<()>().await;
        });
        while !x.lock("ind:3").is_locked().await.unwrap() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let barrier = Arc::new(Barrier::new(3));
        let a = hold_then_wait(&x, "ind:1", "ind:2", &barrier);
        let wy = hold_then_wait(&y, "ind:2", "ind:3", &barrier);
        barrier.wait().await;
        let ids = (x.id().to_string(), y.id().to_string());
        (ids, (x, y, vec![a, b, wy]))
    });
    // Both waits are in their clients' ledgers before asking (each client flushes its
    // own, at most once a second: on a loaded machine Y's came after X's, and the
    // answer counted one client).
    let (x_uuid, y_uuid) = x_uuid;
    for (uuid, name) in [(x_uuid, "ind:2"), (y_uuid, "ind:3")] {
        let ledger = format!("redlatch_ledger:{{{uuid}}}");
        let suffix = format!("|{name}");
        assert!(
            eventually(Duration::from_secs(15), || {
                let fields: Vec<String> = server.cmd(&["HKEYS", &ledger]);
                fields
                    .iter()
                    .any(|f| f.starts_with("w|") && f.ends_with(&suffix))
            }),
            "the wait on {name} never reached {ledger}"
        );
    }
    let doc = json(&with(args(&["deadlocks", "--json"]), redis), 0);
    assert!(doc["cycles"].as_array().unwrap().is_empty(), "{doc}");
    assert!(doc["clients"].as_u64().unwrap() >= 2, "{doc}");
    rt.block_on(async move {
        for t in &keep.2 {
            t.abort();
        }
    });
}

#[test]
fn deadlocks_reads_every_primary_of_a_cluster_and_every_redlock_master() {
    let cluster = shared_cluster();
    let seed = vec![
        "--redis".to_string(),
        cluster.node(cluster.primaries()[1]).url(),
    ];
    let (l1, l2) = (
        cluster.key_on(cluster.primaries()[0], "dlc:"),
        cluster.key_on(cluster.primaries()[2], "dlc:"),
    );
    let rt = runtime();
    let urls = cluster.urls();
    let cyc = rt.block_on(cycle(
        |app| Config::cluster(urls.clone()).app(app),
        &l1,
        &l2,
    ));
    check_cycle(&deadlocks_until(&seed, 1), &l1, &l2);
    rt.block_on(async {
        for w in &cyc.waits {
            w.abort();
        }
    });
    drop(cyc);

    let servers = start_many(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let cyc = rt.block_on(cycle(
        |app| Config::redlock(urls.clone()).app(app),
        "dlr:1",
        "dlr:2",
    ));
    check_cycle(&deadlocks_until(&redis_args(&refs), 1), "dlr:1", "dlr:2");
    let _ = cyc.clients.len();
}

/// Under Redlock a waiter's attempt may take the lock on a minority of the masters (a
/// split vote, undone at once; it recurs while the holder's own grant there was beaten
/// by it). `deadlocks` counts a holder only on a majority: such a grant, made here by
/// hand on one master (the holder's hold there replaced by the waiting call's), closes
/// no second cycle through the waiting task's own call. Before, it was counted and
/// `deadlocks` reported two cycles (as the test above once did under load).
#[test]
fn deadlocks_counts_a_redlock_holder_on_a_majority_only() {
    let servers = start_many(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let rt = runtime();
    let cyc = rt.block_on(cycle(
        |app| Config::redlock(urls.clone()).app(app),
        "dls:1",
        "dls:2",
    ));
    let redis = redis_args(&refs);
    check_cycle(&deadlocks_until(&redis, 1), "dls:1", "dls:2");
    // alpha's call that waits for dls:2: its ledger's wait entry under an id that
    // holds nothing (the task's hold of dls:1 is listed too).
    let alpha = cyc.clients[0].id().to_string();
    let ledger: Vec<String> = servers[0].cmd(&["HKEYS", &format!("redlatch_ledger:{{{alpha}}}")]);
    let ids = |tag: &str| -> Vec<String> {
        (ledger.iter())
            .filter_map(|f| f.strip_prefix(tag)?.split('|').next().map(str::to_string))
            .collect()
    };
    let held = ids("h|");
    let call = (ids("w|").into_iter())
        .find(|n| !held.contains(n))
        .unwrap_or_else(|| panic!("alpha's waiting call in {ledger:?}"));
    let third = &servers[2];
    third.cmd::<()>(&["DEL", "dls:2"]);
    third.cmd::<()>(&["HSET", "dls:2", &format!("{alpha}:{call}"), "1"]);
    third.cmd::<()>(&["PEXPIRE", "dls:2", "30000"]);
    let doc = json(&with(args(&["deadlocks", "--json"]), redis), 1);
    check_cycle(&doc, "dls:1", "dls:2");
    rt.block_on(async {
        for w in &cyc.waits {
            w.abort();
        }
    });
}

/// The app name without `--app`: `$REDLATCH_APP`, else the executable's name; a bad
/// `--app` is a configuration error naming it (exit 64).
#[test]
fn the_app_name_comes_from_the_environment_else_the_executable() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // CMD asks for the status of the lock its redlatch holds (the record is written
    // at connect, before CMD starts).
    let app_of = |env: Option<&str>| -> Value {
        let script = format!(
            "\"{}\" status me --json --redis {} > \"$D/status\"",
            cli_util::bin().display(),
            server.url()
        );
        let mut cmd = redlatch(&args(&[
            "run",
            "me",
            "--redis",
            &server.url(),
            "--",
            "sh",
            "-c",
            &script,
        ]));
        cmd.env("D", dir.path()).env_remove("REDLATCH_APP");
        if let Some(app) = env {
            cmd.env("REDLATCH_APP", app);
        }
        cmd.assert().code(0);
        let doc: Value = serde_json::from_str(&read(&dir.file("status"))).unwrap();
        doc["masters"][0]["holder_info"][0]["app"].clone()
    };
    assert_eq!(app_of(Some("from-env")), "from-env");
    assert_eq!(app_of(None), "redlatch");
    let bad = "x".repeat(200);
    let out = output(
        &with(
            args(&["--app", &bad, "status", "me"]),
            redis_args(&[&server]),
        ),
        64,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("app name must be at most 128 bytes"), "{err}");
}
