//! `redlatch job` and `redlatch jobs` against a real redis-server, the runs in separate
//! `redlatch` processes: once per tick, skipped runs exit 0 (or -E's code) and say why
//! with -v, CMD's status and environment, the JSON of `jobs` parsed, `list` and `top`
//! showing a job, and bad durations as usage errors.

use crate::cli_list::top_until;
use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{output, redis_args, Bg, TempDir};
use common::{eventually, RedisServer};
use serde_json::Value;

/// `redlatch job NAME OPTS --redis .. -- sh -c SCRIPT`.
fn job_args(server: &RedisServer, name: &str, opts: &[&str], script: &str) -> Vec<String> {
    let mut args = vec!["job".to_string(), name.to_string()];
    args.extend(opts.iter().map(|s| s.to_string()));
    args.extend(redis_args(&[server]));
    args.extend(["--", "sh", "-c", script].map(String::from));
    args
}

fn jobs_json(server: &RedisServer) -> Value {
    let mut args: Vec<String> = ["jobs", "--json"].map(String::from).into();
    args.extend(redis_args(&[server]));
    serde_json::from_slice(&output(&args, 0).stdout).expect("one JSON document")
}

#[test]
fn a_tick_runs_once_and_a_repeat_exits_0_saying_why_with_v() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let log = dir.file("log");
    let script = format!(
        "echo \"$REDLATCH_JOB $REDLATCH_JOB_MISSED\" >> {}; exit 7",
        log.display()
    );
    let opts = ["--at-most", "1m", "--once-per", "1h"];
    let first = output(&job_args(&server, "cj:hourly", &opts, &script), 7);
    assert!(first.stderr.is_empty(), "{first:?}");
    let again = output(&job_args(&server, "cj:hourly", &opts, &script), 0);
    assert!(again.stderr.is_empty(), "quiet without -v: {again:?}");
    let mut verbose = opts.to_vec();
    verbose.push("-v");
    let told = output(&job_args(&server, "cj:hourly", &verbose, &script), 0);
    let told = String::from_utf8_lossy(&told.stderr).into_owned();
    assert!(told.contains("already done"), "{told}");
    verbose.extend(["-E", "3"]);
    output(&job_args(&server, "cj:hourly", &verbose, &script), 3);
    assert_eq!(
        cli_util::read(&log),
        "cj:hourly 0\n",
        "CMD ran once, with its env"
    );
    let doc = jobs_json(&server);
    let job = &doc[0];
    assert_eq!(job["name"], "cj:hourly", "{doc:#}");
    assert_eq!(job["last"]["outcome"], "ran");
    assert_eq!(job["period_ms"], 3_600_000);
    assert_eq!(job["runs"], 1);
    assert!(job["done_ms"].as_i64().unwrap() > 0);
    assert_eq!(job["running"], Value::Null);
}

#[test]
fn a_running_job_is_skipped_naming_its_host_and_shows_in_jobs_list_and_top() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = "touch \"$D/started\"; exec sleep 60";
    let _running = Bg::start(
        &job_args(&server, "cj:long", &["--at-most", "2m"], script),
        &dir,
        "a",
    );
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let skipped = output(
        &job_args(&server, "cj:long", &["--at-most", "1m", "-v"], "exit 9"),
        0,
    );
    let said = String::from_utf8_lossy(&skipped.stderr).into_owned();
    assert!(
        said.contains(&format!("skipped: running on {}", host.trim())),
        "{said}"
    );
    output(
        &job_args(
            &server,
            "cj:long",
            &["--at-most", "1m", "-E", "5"],
            "exit 9",
        ),
        5,
    );
    let doc = jobs_json(&server);
    assert_eq!(doc[0]["running"]["host"], host.trim(), "{doc:#}");
    assert!(doc[0]["running"]["since_ms"].as_i64().unwrap() > 0);
    let mut args: Vec<String> = ["list", "job-lock:*", "--json"].map(String::from).into();
    args.extend(redis_args(&[&server]));
    let list: Value = serde_json::from_slice(&output(&args, 0).stdout).unwrap();
    let listed = &list["locks"][0];
    assert_eq!(listed["kind"], "job", "{list:#}");
    assert_eq!(listed["holders"][0]["host"], host.trim());
    // The name is cut to its column; the APP column says `job`, HOST the host.
    let screen = top_until(&server, "job-lock:*", "job-lock:default:cj:lo");
    assert!(screen.contains("Hjob\u{1b}"), "{screen:?}");
    assert!(screen.contains(host.trim()), "{screen:?}");
}

#[test]
fn bad_durations_are_usage_errors() {
    let server = RedisServer::start();
    for opts in [
        &["--at-most", "0s"][..],
        &["--at-most", "1m", "--at-least", "2m"],
        &["--at-most", "1m", "--once-per", "0s"],
        &["--at-most", "1m", "--once-per", "1000d"],
    ] {
        let out = output(&job_args(&server, "cj:bad", opts, "true"), 64);
        assert!(!out.stderr.is_empty(), "{opts:?}");
    }
    let out = output(&job_args(&server, "", &["--at-most", "1m"], "true"), 64);
    assert!(String::from_utf8_lossy(&out.stderr).contains("empty"));
    let mut no_lease = vec!["job".to_string(), "cj:bad".into()];
    no_lease.extend(["--", "true"].map(String::from));
    output(&no_lease, 64);
    assert_eq!(server.dbsize(), 0, "nothing written");
}

#[test]
fn status_names_a_shedlock_holder_by_host_and_start() {
    let server = RedisServer::start();
    let value = "ADDED:2026-12-02T00:41:07.250Z@java-node-3:0c1d7a4e-8f9b-4a1e-9a51-2b8e2c7d4f10";
    let _: () = server.cmd(&["SET", "job-lock:default:exp", value, "PX", "60000"]);
    let mut args: Vec<String> = ["status", "job-lock:default:exp"].map(String::from).into();
    args.extend(redis_args(&[&server]));
    let out = output(&args, 0);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("a scheduled job's run (ShedLock's value) on host java-node-3, started"),
        "{text}"
    );
}
