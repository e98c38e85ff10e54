//! `redlatch status` against real redis-server processes: its JSON and its table name
//! the holder on every master, answer with one master down, and show a fair lock's
//! queue in order (moved out of `cli`, whose helpers it uses).

use crate::cli::{args, with};
use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{output, read, redis_args, redlatch, run_args, until_file, Bg, TempDir};
use common::{eventually, start_many, RedisServer};
use serde_json::Value;

#[test]
fn status_json_shows_the_holder_on_every_master() {
    let servers = start_many(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let dir = TempDir::new();
    let script = format!(
        "echo \"$REDLATCH_HOLDER\" > \"$D/holder\"; {}",
        until_file("stop", 60)
    );
    let holder = Bg::start(
        &run_args("st", &refs, &["--fenced"], &script),
        &dir,
        "holder",
    );
    assert!(eventually(Duration::from_secs(20), || !read(
        &dir.file("holder")
    )
    .is_empty()));
    let id = read(&dir.file("holder")).trim().to_string();

    // Exit 0 when held, 1 when free: whichever `locked` says.
    let status = || -> Value {
        let out = redlatch(&with(args(&["status", "st", "--json"]), redis_args(&refs)))
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).expect("status --json is JSON");
        let code = if doc["locked"] == true { 0 } else { 1 };
        assert_eq!(out.status.code(), Some(code), "{doc}");
        doc
    };
    // The holder got the lock once every master answered or the master timeout (50 ms
    // under Redlock) passed: a master answering later (a loaded machine) runs the
    // acquisition and the token's write-back just after.
    let mut doc = status();
    let on_every_master = |doc: &Value| {
        let ms = doc["masters"].as_array().unwrap();
        ms.iter().all(|m| {
            m["holders"][0]["holder"] == id.as_str()
                && m["fencing_counter"] == ms[0]["fencing_counter"]
        })
    };
    assert!(
        eventually(Duration::from_secs(10), || {
            doc = status();
            on_every_master(&doc)
        }),
        "{doc}"
    );
    assert_eq!(doc["name"], "st");
    assert_eq!(doc["masters_total"], 3);
    assert_eq!(doc["quorum"], 2);
    assert_eq!(doc["answered"], 3);
    assert_eq!(doc["locked"], true);
    assert_eq!(doc["holder"], id.as_str());
    let masters = doc["masters"].as_array().unwrap();
    assert_eq!(masters.len(), 3);
    for m in masters {
        assert_eq!(m["error"], Value::Null, "{m}");
        assert_eq!(m["type"], "hash", "{m}");
        assert_eq!(m["holders"][0]["holder"], id.as_str(), "{m}");
        assert_eq!(m["holders"][0]["count"], 1, "{m}");
        let ttl = m["ttl_ms"].as_u64().unwrap();
        assert!(ttl > 0 && ttl <= 30_000, "{m}");
        // 1, unless a first attempt under load was undone (each attempt counts):
        // the write-back leaves the same value on every master.
        assert!(m["fencing_counter"].as_u64() >= Some(1), "{m}");
        assert_eq!(m["fencing_counter"], masters[0]["fencing_counter"], "{m}");
        assert_eq!(m["queue"].as_array().unwrap().len(), 0, "{m}");
    }
    let table = output(&with(args(&["status", "st"]), redis_args(&refs)), 0).stdout;
    let table = String::from_utf8_lossy(&table);
    assert!(table.contains(&format!("held by {id}")), "{table}");
    assert_eq!(table.matches("count 1").count(), 3, "{table}");
    // Masters without replicas: no replicas line.
    assert!(!table.contains("replicas:"), "{table}");

    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
    // Released at a majority before the holder exited; the last master's release
    // lands when it does (promised only eventually).
    let doc = status();
    assert_eq!(doc["locked"], false);
    let mut doc = doc;
    assert!(
        eventually(Duration::from_secs(10), || {
            doc = status();
            (doc["masters"].as_array().unwrap().iter()).all(|m| m["type"] == "none")
        }),
        "{doc}"
    );
}

#[test]
fn status_with_one_master_down_still_answers() {
    let mut servers = start_many(3);
    let redis = redis_args(&servers.iter().collect::<Vec<_>>());
    servers[2].kill();
    // Answered by a majority; free, so exit 1.
    let out = output(&with(args(&["status", "half", "--json"]), redis), 1).stdout;
    let doc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["answered"], 2);
    assert!(doc["masters"][2]["error"].is_string(), "{doc}");
}

#[test]
fn status_json_shows_the_fair_queue_in_order() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let hold = format!("touch \"$D/started\"; {}", until_file("stop", 60));
    let holder = Bg::start(
        &run_args("fq", &[&server], &["--fair"], &hold),
        &dir,
        "holder",
    );
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    let queue_len = || server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{fq}"]);
    let log = "echo \"$W\" >> \"$D/order\"";
    let mut waiters = Vec::new();
    for (i, w) in ["first", "second"].into_iter().enumerate() {
        let argv = run_args("fq", &[&server], &["--fair"], &log.replace("$W", w));
        waiters.push(Bg::start(&argv, &dir, w));
        assert!(eventually(Duration::from_secs(20), || queue_len() == i as i64 + 1));
    }
    let out = output(
        &args(&["status", "fq", "--fair", "--json", "--redis", &server.url()]),
        0,
    )
    .stdout;
    let doc: Value = serde_json::from_slice(&out).unwrap();
    let queue = doc["masters"][0]["queue"].as_array().unwrap().clone();
    assert_eq!(queue.len(), 2, "{doc}");
    for entry in &queue {
        assert!(entry["holder"].as_str().unwrap().contains(':'), "{entry}");
        assert!(
            entry["deadline_ms"].as_i64().unwrap() > 1_600_000_000_000,
            "{entry}"
        );
        // Redisson's arithmetic: the lease left (at most 30 s) plus the wait time
        // (300 s) per waiter, and a 5 s margin behind another entry.
        let due = entry["deadline_in_ms"].as_i64().unwrap();
        assert!(due > 0 && due <= 30_000 + 2 * 305_000, "{entry}");
    }
    assert_ne!(queue[0]["holder"], queue[1]["holder"]);
    let table = output(&args(&["status", "fq", "--redis", &server.url()]), 0).stdout;
    assert!(String::from_utf8_lossy(&table).contains("queue: 2 waiter(s)"));

    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
    for w in waiters {
        assert_eq!(w.wait(Duration::from_secs(30)).code(), Some(0));
    }
    assert_eq!(read(&dir.file("order")), "first\nsecond\n", "FIFO order");
}
