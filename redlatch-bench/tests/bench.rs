//! `redlatch-bench` against real redis-server processes and a Redis Cluster started by
//! the library's harness: one JSON line per workload with its fields, W7's separate
//! processes, cluster figures counted on the primaries, and nothing left behind.

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::shared_cluster;
use common::{eventually, start_many, RedisServer};
use serde_json::Value;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn with(mut base: Vec<String>, more: Vec<String>) -> Vec<String> {
    base.extend(more);
    base
}

/// `--redis URL` for each server.
fn redis_args(servers: &[&RedisServer]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| ["--redis".to_string(), s.url()])
        .collect()
}

/// Runs the bench with `args` (a clean environment, bounded), asserts its exit status
/// and returns what it printed.
fn output(args: &[String], code: i32) -> std::process::Output {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_redlatch-bench"))
        .args(args)
        .env_remove("REDLATCH_REDIS")
        .timeout(Duration::from_secs(300))
        .assert()
        .code(code)
        .get_output()
        .clone()
}

/// `redlatch-bench --json`: one JSON line per workload with the fields issue 6 names,
/// on one and on three masters, and nothing of the run left in Redis.
#[test]
fn bench_prints_one_json_line_per_workload_and_cleans_up() {
    let servers = start_many(3);
    let one = [&servers[0]];
    let all: Vec<&RedisServer> = servers.iter().collect();
    for (masters, redis) in [(1, redis_args(&one)), (3, redis_args(&all))] {
        for workload in ["floor", "W1", "W3"] {
            let cmd = args(&["--json", "--duration", "1s", "--workload", workload]);
            let out = output(&with(cmd, redis.clone()), 0).stdout;
            let text = String::from_utf8_lossy(&out);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 1, "{text}");
            let doc: Value = serde_json::from_str(lines[0]).unwrap();
            assert_eq!(doc["workload"], workload);
            assert_eq!(doc["masters"], masters);
            for field in ["lib", "ops", "seconds", "ops_per_s", "p50_us", "p99_us"] {
                assert!(!doc[field].is_null(), "{field} missing: {doc}");
            }
            assert!(doc["ops"].as_u64().unwrap() > 0, "{doc}");
            if workload == "W3" {
                for field in [
                    "cross_handoffs_per_s",
                    "cross_p50_us",
                    "cross_p99_us",
                    "acquire_wait_p99_us",
                    "per_task_min",
                    "per_task_max",
                ] {
                    assert!(!doc[field].is_null(), "{field} missing: {doc}");
                }
                assert_eq!(doc["violations"], 0, "{doc}");
            }
        }
    }
    let clean = || servers.iter().all(|s| s.dbsize() == 0);
    assert!(
        eventually(Duration::from_secs(5), clean),
        "bench keys left behind"
    );
}

/// Issue 14: `--workload W7` runs P separate processes on one name and reports
/// the merged timeline; nothing of the run is left in Redis.
#[test]
fn bench_w7_runs_separate_processes_on_one_name() {
    let server = RedisServer::start();
    let cmd = args(&[
        "--json",
        "--duration",
        "1s",
        "--workload",
        "W7",
        "--procs",
        "3",
    ]);
    let out = output(&with(cmd, redis_args(&[&server])), 0).stdout;
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let doc: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(doc["workload"], "W7");
    assert_eq!(doc["procs"], 3);
    assert!(doc["ops"].as_u64().unwrap() > 0, "{doc}");
    // Three processes shared the lock, each at least once, with no overlap.
    assert!(doc["per_proc_min"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["violations"], 0, "{doc}");
    assert!(doc["cross_handoffs"].as_u64().unwrap() > 0, "{doc}");
    // Every acquisition took at least one acquire call.
    assert!(
        doc["tries_per_acquisition"].as_f64().unwrap() >= 1.0,
        "{doc}"
    );
    let clean = || server.dbsize() == 0;
    assert!(
        eventually(Duration::from_secs(5), clean),
        "bench keys left behind"
    );
}

/// J1, short: 4 processes fire one job every 100 ms for 2 s and one is SIGKILLed in
/// the middle of a run: no tick runs twice, the killed tick is reported missed to the
/// next run, and a decision is one script call (one round trip).
#[test]
fn bench_j1_runs_each_tick_once_and_reports_the_killed_run_missed() {
    let server = RedisServer::start();
    let cmd = args(&[
        "--json",
        "--workload",
        "J1",
        "--job-procs",
        "4",
        "--duration",
        "2s",
        "--job-kill",
    ]);
    let out = output(&with(cmd, redis_args(&[&server])), 0).stdout;
    let text = String::from_utf8_lossy(&out);
    let doc: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(
        (doc["workload"].as_str(), doc["procs"].as_u64()),
        (Some("J1"), Some(4))
    );
    assert_eq!(doc["ticks"], 20, "{doc}");
    assert_eq!(doc["doubles"], 0, "{doc}");
    assert!(doc["killed_tick"].as_u64().is_some(), "{doc}");
    // The killed tick, and those its lease kept everyone from, reported to the next run.
    let after = doc["missed_after_kill"]
        .as_u64()
        .expect("a run after the kill");
    assert!(after >= 1, "{doc}");
    let (reported, misses) = (
        doc["missed_reported"].as_u64().unwrap(),
        doc["misses"].as_u64().unwrap(),
    );
    assert!(reported >= after && reported <= misses + 1, "{doc}");
    let per = doc["scripts_per_decision"].as_f64().unwrap();
    assert!(
        (1.0..=2.0).contains(&per),
        "a decision is one acquire script: {doc}"
    );
    // The bench's clean-up takes the job's record too (it holds the run's id).
    assert_eq!(server.lock_keys("*"), Vec::<String>::new());
}

#[test]
fn bench_measures_on_the_cluster_primaries() {
    let cluster = shared_cluster();
    let seed = cluster.node(cluster.primaries()[0]).url();
    let lines = |workload: &str| -> Vec<Value> {
        let out = output(
            &args(&[
                "--workload",
                workload,
                "--duration",
                "1s",
                "--json",
                "--cluster",
                "--redis",
                &seed,
            ]),
            0,
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let w1 = lines("W1");
    assert_eq!(w1.len(), 1, "{w1:?}");
    let w1 = &w1[0];
    assert_eq!(w1["workload"], "W1", "{w1}");
    assert_eq!(w1["topology"], "cluster", "{w1}");
    assert_eq!(w1["masters"], 3, "{w1}");
    assert_eq!(w1["replicas"], 3, "{w1}");
    assert_eq!(w1["sync"], "auto", "{w1}");
    assert_eq!(w1["ops"], 3000, "{w1}");
    assert!(w1["p50_us"].as_u64() > Some(0), "{w1}");

    let w2 = lines("W2");
    let w2 = &w2[0];
    assert_eq!(w2["workload"], "W2", "{w2}");
    let pairs = w2["ops"].as_f64().unwrap();
    assert!(pairs > 0.0, "{w2}");
    // Counted on the servers: at least one script per pair's worth of batches, at
    // most one per operation; every acquisition waited for its replica.
    let per_pair = w2["script_calls_per_pair"].as_f64().unwrap();
    assert!(per_pair > 0.0 && per_pair <= 2.0 + 1e-9, "{w2}");
    assert!(w2["wait_calls_per_pair"].as_f64() > Some(0.0), "{w2}");
    let per_primary = w2["script_calls_per_primary"].as_array().unwrap();
    assert_eq!(per_primary.len(), 3, "{w2}");
    assert!(per_primary.iter().all(|c| c.as_u64() > Some(0)), "{w2}");
    assert!(w2["names_distinct_slots"].as_u64() > Some(32), "{w2}");

    // The bench's keys are gone from every node (cleanup is per key: a cluster
    // refuses a multi-key UNLINK across slots).
    for i in 0..cluster.len() {
        let left: Vec<String> = cluster.node(i).lock_keys("*redlatch-bench:*");
        assert!(left.is_empty(), "node {i} kept {left:?}");
    }
}

/// Runs `--workload peers` with `more` on a fresh server and returns its JSON lines,
/// after checking that nothing of the run is left in Redis.
fn peers_run(more: &[&str]) -> Vec<Value> {
    let server = RedisServer::start();
    let mut cmd = args(&[
        "--json",
        "--duration",
        "1s",
        "--workload",
        "peers",
        "--rounds",
        "1",
    ]);
    cmd.extend(args(more));
    let out = output(&with(cmd, redis_args(&[&server])), 0).stdout;
    let text = String::from_utf8_lossy(&out);
    let docs = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let clean = || server.dbsize() == 0;
    assert!(
        eventually(Duration::from_secs(5), clean),
        "bench keys left behind"
    );
    docs
}

/// (lib, workload) of each line but the summaries.
fn runs(docs: &[Value]) -> Vec<(&str, &str)> {
    docs.iter()
        .map(|d| (d["lib"].as_str().unwrap(), d["workload"].as_str().unwrap()))
        .filter(|(lib, _)| *lib != "summary")
        .collect()
}

/// The summary line of `workload`'s `figure`.
fn summary<'a>(docs: &'a [Value], workload: &str, figure: &str) -> &'a Value {
    (docs.iter())
        .find(|d| d["lib"] == "summary" && d["workload"] == workload && d["figure"] == figure)
        .unwrap_or_else(|| panic!("no summary of {workload} {figure}"))
}

/// Issue 25: `--workload peers` runs W1 and W2 beside the reference peer's protocol in
/// one run, with the CPU per pair on both sides and redlatch's ratios; W3 and W7 for
/// redlatch, and a summary line per figure.
#[test]
fn peers_measures_w1_and_w2_beside_the_reference_protocol() {
    let docs = peers_run(&["--no-redisson"]);
    let mut want = vec![
        ("redlatch", "W1"),
        ("rslock-protocol", "W1"),
        ("script-floor", "W1"),
        ("redlatch", "W2"),
        ("rslock-protocol", "W2"),
        ("batch-floor", "W2"),
        ("redlatch", "W3"),
        ("redlatch", "W7"),
        ("python-redis-lock-protocol", "W7"),
    ];
    // python-redis-lock itself runs where python3 imports it (and redis-py).
    if python_redis_lock() {
        want.push(("python-redis-lock", "W7"));
    }
    assert_eq!(runs(&docs), want, "{docs:?}");
    // W1 and W2 of the libraries in this process run interleaved: W1 in blocks, every
    // pair counted; W2 in slices, summed.
    for d in docs.iter().filter(|d| d["lib"] != "summary") {
        assert_eq!(d["round"], 1, "{d}");
        if d["workload"] == "W1" {
            assert_eq!(d["ops"], 3000, "{d}");
            assert!(d["client_cpu_us_per_pair"].as_f64() > Some(0.0), "{d}");
        }
        if d["workload"] == "W2" {
            assert!(d["ops"].as_u64() > Some(0), "{d}");
            assert_eq!(d["slices"], 6, "{d}");
            let (ops, secs) = (d["ops"].as_f64().unwrap(), d["seconds"].as_f64().unwrap());
            assert!(
                (d["ops_per_s"].as_f64().unwrap() - ops / secs).abs() < 1e-6,
                "{d}"
            );
        }
    }
    assert!(summary(&docs, "W1", "p50_us")["vs_floor"].as_f64() > Some(0.0));
    for d in docs
        .iter()
        .filter(|d| d["workload"] == "W2" && d["lib"] != "summary")
    {
        assert!(d["client_cpu_us_per_pair"].as_f64().is_some(), "{d}");
        assert!(d["server_cpu_us_per_pair"].as_f64() > Some(0.0), "{d}");
    }
    let ours = |w: &str| (docs.iter()).find(|d| d["lib"] == "redlatch" && d["workload"] == w);
    assert!(
        ours("W1").unwrap()["p50_vs_rslock"].as_f64() > Some(0.0),
        "{docs:?}"
    );
    assert!(
        ours("W2").unwrap()["ops_per_s_vs_rslock"].as_f64() > Some(0.0),
        "{docs:?}"
    );
    let w2 = summary(&docs, "W2", "ops_per_s");
    assert_eq!(w2["rounds"], 1, "{w2}");
    assert!(w2["vs_rslock"].as_f64() > Some(0.0), "{w2}");
    assert_eq!(w2["vs_rslock_min"], w2["vs_rslock_max"], "{w2}");
    assert!(summary(&docs, "W2", "server_cpu_us_per_pair")["vs_floor"].as_f64() > Some(0.0));
    // W7 beside python-redis-lock's wire: its processes took the lock in turn (no two
    // holds overlap), counting their own SET tries, at least one per acquisition.
    let peer = (docs.iter())
        .find(|d| d["lib"] == "python-redis-lock-protocol")
        .unwrap();
    assert_eq!(peer["procs"], 8, "{peer}");
    assert_eq!(peer["violations"], 0, "{peer}");
    assert!(peer["ops"].as_u64() > Some(0), "{peer}");
    assert!(
        peer["tries_per_acquisition"].as_f64() >= Some(1.0),
        "{peer}"
    );
    assert!(peer["cross_handoffs"].as_u64().is_some(), "{peer}");
    if let Some(py) = docs.iter().find(|d| d["lib"] == "python-redis-lock") {
        assert_eq!(py["violations"], 0, "{py}");
        assert!(py["ops"].as_u64() > Some(0), "{py}");
        assert!(py["tries_per_acquisition"].as_f64() >= Some(1.0), "{py}");
    }
}

/// Whether python3 here imports python-redis-lock and redis-py.
fn python_redis_lock() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import redis, redis_lock"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Issue 36: with java and mvn on the PATH, `--workload peers` also runs the real
/// Redisson client (interop/redisson-bench, in JVMs the bench starts) on every workload,
/// and redlatch's lines and the summaries carry the ratios to it.
#[test]
fn peers_measures_redisson_beside_redlatch() {
    if !common::jvm::available() {
        return;
    }
    let docs = peers_run(&["--jvm-warmup", "500"]);
    let got = runs(&docs);
    for w in ["W1", "W2", "W3", "W7"] {
        assert!(got.contains(&("redisson", w)), "no Redisson {w}: {docs:?}");
    }
    // What a loaded machine cannot change: W1 counts its pairs, the contended runs
    // report their timelines (how many hand-overs fit in a second is the machine's),
    // and no two holds overlap.
    for d in docs.iter().filter(|d| d["lib"] == "redisson") {
        assert_eq!(d["redisson_version"], "4.7.0", "{d}");
        assert_eq!(d["round"], 1, "{d}");
        match d["workload"].as_str().unwrap() {
            "W1" => {
                assert_eq!(d["ops"], 3000, "{d}");
                // The next run started once the JVM had gone quiet (or 20 s had passed).
                assert!(d["jvm_settle_ms"].as_u64() <= Some(21_000), "{d}");
            }
            "W2" => assert!(d["server_cpu_us_per_pair"].as_f64().is_some(), "{d}"),
            _ => {
                assert_eq!(d["violations"], 0, "{d}");
                assert!(d["cross_handoffs"].as_u64().is_some(), "{d}");
            }
        }
    }
    let w7 = docs
        .iter()
        .find(|d| d["lib"] == "redisson" && d["workload"] == "W7")
        .unwrap();
    assert_eq!(w7["procs"], 8, "{w7}");
    let w1 = summary(&docs, "W1", "p50_us");
    assert!(w1["vs_redisson"].as_f64() > Some(0.0), "{w1}");
    assert!(w1["redisson"].as_f64() > Some(0.0), "{w1}");
}
