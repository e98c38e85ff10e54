//! Issue 49 item 5: `redlatch --bookkeeping PREFIX` (or `$REDLATCH_BOOKKEEPING`) reads
//! a deployment whose clients keep their records and ledgers under PREFIX: `list` and
//! `status` name holders and waiters with it, and without it see bare ids.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{output, redis_args, run_args, Bg, TempDir};
use common::{eventually, RedisServer};
use serde_json::Value;

/// `redlatch ARGS --redis URL`, its stdout parsed as JSON.
fn json(server: &RedisServer, args: &[&str], env: Option<&str>) -> Value {
    let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    argv.extend(redis_args(&[server]));
    let out = match env {
        None => output(&argv, 0),
        Some(prefix) => (cli_util::redlatch(&argv).env("REDLATCH_BOOKKEEPING", prefix))
            .assert()
            .code(0)
            .get_output()
            .clone(),
    };
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn lock<'a>(doc: &'a Value, name: &str) -> &'a Value {
    (doc["locks"].as_array().unwrap().iter())
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {doc:#}"))
}

#[test]
fn list_and_status_read_a_deployment_under_a_bookkeeping_prefix() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let opts = ["--bookkeeping", "orders:rl"];
    let script = "touch \"$D/h\"; exec sleep 60";
    let _h = Bg::start(&run_args("orders:bk", &[&server], &opts, script), &dir, "h");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("h")
        .exists()));
    let mut waiter = opts.to_vec();
    waiter.extend(["--wait", "60s"]);
    let _w = Bg::start(
        &run_args("orders:bk", &[&server], &waiter, "true"),
        &dir,
        "w",
    );
    // The waiter's ledger entry (flushed at most once a second) under the prefix.
    let waits = || {
        let ledgers: Vec<String> = server.cmd(&["KEYS", "orders:rl_ledger:*"]);
        ledgers.iter().any(|l| {
            let fields: Vec<String> = server.cmd(&["HKEYS", l]);
            fields.iter().any(|f| f.starts_with("w|"))
        })
    };
    assert!(
        eventually(Duration::from_secs(20), waits),
        "no waiter's ledger"
    );
    let records: Vec<String> = server.cmd(&["KEYS", "orders:rl_client:*"]);
    assert_eq!(records.len(), 2, "{records:?}");
    let default: Vec<String> = server.cmd(&["KEYS", "redlatch_client*"]);
    assert!(default.is_empty(), "{default:?}");

    // With the prefix (flag, then environment): holder and waiter named.
    let flagged = json(
        &server,
        &["--bookkeeping", "orders:rl", "list", "orders:*", "--json"],
        None,
    );
    let by_env = json(&server, &["list", "orders:*", "--json"], Some("orders:rl"));
    for doc in [&flagged, &by_env] {
        let l = lock(doc, "orders:bk");
        let names: Vec<&str> = (doc["locks"].as_array().unwrap().iter())
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["orders:bk"], "no bookkeeping key listed: {doc:#}");
        assert_eq!(l["holders"][0]["record"], true, "{l:#}");
        assert!(l["holders"][0]["pid"].as_u64().is_some(), "{l:#}");
        assert_eq!(l["waiting"].as_array().unwrap().len(), 1, "{l:#}");
        assert!(l["waiting"][0]["pid"].as_u64().is_some(), "{l:#}");
    }
    let status = json(
        &server,
        &[
            "status",
            "orders:bk",
            "--json",
            "--bookkeeping",
            "orders:rl",
        ],
        None,
    );
    assert!(status.to_string().contains("\"pid\""), "{status:#}");

    // Without it: the same lock, its holder by bare id, its waiter counted only.
    let bare = json(&server, &["list", "orders:*", "--json"], None);
    let l = lock(&bare, "orders:bk");
    assert_eq!(l["holders"][0]["record"], false, "{l:#}");
    assert_eq!(l["waiting"].as_array().unwrap().len(), 0, "{l:#}");
    assert!(l["waiters"].as_u64() >= Some(1), "{l:#}");
}
