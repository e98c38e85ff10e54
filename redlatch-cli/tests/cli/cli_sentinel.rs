//! `redlatch` against a Sentinel set-up (`--sentinel NAME`, the URLs are the
//! sentinels'): run, status and unlock --force reach the primary the sentinels name.

use crate::cli_util;

use redlatch_testkit as common;

use cli_util::{output, redlatch};
use common::sentinel::SentinelSet;

fn args(set: &SentinelSet, first: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    args.extend(["--sentinel".to_string(), set.master_name().to_string()]);
    for url in set.sentinel_urls() {
        args.extend(["--redis".to_string(), url]);
    }
    args
}

#[test]
fn run_status_and_force_unlock_go_through_the_sentinels() {
    let set = SentinelSet::start("cli-sentinel");
    let mut run = args(&set, &["run", "billing"]);
    run.extend(["--", "sh", "-c", "echo held-$REDLATCH_LOCK"].map(String::from));
    let out = output(&run, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "held-billing");

    // A lock left by someone else shows in status, on the primary, and goes with --force.
    // Without expiry it never frees by itself: status says so (65, the key's master).
    let primary = set.server(set.primary_index());
    let _: i64 = primary.cmd(&["HSET", "stuck", "someone:1", "1"]);
    let status = output(&args(&set, &["status", "stuck", "--json"]), 65);
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(
        stderr.contains("no expiry") && stderr.contains(&primary.addr()),
        "{stderr}"
    );
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("someone:1"), "{text}");
    assert!(
        text.contains(&primary.addr()),
        "status should name the primary: {text}"
    );
    output(&args(&set, &["unlock", "--force", "stuck"]), 0);
    let ty: String = primary.cmd(&["TYPE", "stuck"]);
    assert_eq!(ty, "none");

    // An unknown master name is a usage error (64), not a hang.
    let mut bad = args(&set, &["status", "x"]);
    let pos = bad.iter().position(|a| a == "cli-sentinel").unwrap();
    bad[pos] = "nobody".into();
    redlatch(&bad).assert().code(64);
}

/// Issue 26: the environment alone describes a Sentinel deployment
/// (REDLATCH_REDIS = the sentinels, REDLATCH_MODE=sentinel, REDLATCH_SENTINEL_MASTER).
#[test]
fn the_environment_alone_describes_a_sentinel_deployment() {
    let set = SentinelSet::start("env-sentinel");
    let run = [
        "run",
        "from-env",
        "--",
        "sh",
        "-c",
        "echo held-$REDLATCH_LOCK",
    ];
    let out = redlatch(&run.map(String::from))
        .env("REDLATCH_REDIS", set.sentinel_urls().join(","))
        .env("REDLATCH_MODE", "sentinel")
        .env("REDLATCH_SENTINEL_MASTER", set.master_name())
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "held-from-env");
    // Without the master's name the environment is incomplete: a usage error, named.
    let out = redlatch(&run.map(String::from))
        .env("REDLATCH_REDIS", set.sentinel_urls().join(","))
        .env("REDLATCH_MODE", "sentinel")
        .assert()
        .code(64)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("REDLATCH_SENTINEL_MASTER"), "{stderr}");
}
