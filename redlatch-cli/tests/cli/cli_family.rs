//! `redlatch run --read/--write/--permits N` and `status` on read-write locks and
//! semaphores, against real redis-server processes.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::{Duration, Instant};

use cli_util::{output, redlatch, run_args, until_file, Bg, TempDir};
use common::{eventually, RedisServer};
use serde_json::Value;

#[test]
fn permits_n_lets_at_most_n_cmds_run_at_once() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // Each CMD marks itself inside, counts who is inside, and leaves.
    let script = "touch \"$D/in.$ID\"; ls \"$D\" | grep -c '^in\\.' >> \"$D/counts\"; \
                  sleep 0.1; rm \"$D/in.$ID\"";
    std::thread::scope(|scope| {
        for id in 0..6 {
            let (server, dir) = (&server, &dir);
            scope.spawn(move || {
                for _ in 0..2 {
                    let argv = run_args(
                        "gpu",
                        &[server],
                        &["--permits", "2", "--wait", "120s"],
                        script,
                    );
                    redlatch(&argv)
                        .env("D", dir.path())
                        .env("ID", id.to_string())
                        .assert()
                        .code(0);
                }
            });
        }
    });
    let counts = std::fs::read_to_string(dir.file("counts")).unwrap();
    let counts: Vec<u32> = counts.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(counts.len(), 12);
    assert!(
        counts.iter().all(|&n| n <= 2),
        "more than 2 CMDs at once: {counts:?}"
    );
    assert!(counts.contains(&2), "never 2 at once: {counts:?}");
    assert_eq!(
        server.cmd::<String>(&["GET", "gpu"]),
        "2",
        "permits not all given back"
    );
}

#[test]
fn a_killed_runner_frees_its_permit_after_the_watchdog_lease() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let hold = run_args(
        "one",
        &[&server],
        // Renewed every 2/3 s: held while `busy` runs, on a loaded machine too.
        &["--permits", "1", "--watchdog", "2s"],
        &format!("touch \"$D/started\"; {}", until_file("stop", 60)),
    );
    let bg = Bg::start(&hold, &dir, "holder");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    let busy = run_args(
        "one",
        &[&server],
        &["--permits", "1", "--wait", "0s"],
        "true",
    );
    output(&busy, 75);
    bg.signal(libc::SIGKILL);
    drop(bg);
    let started = Instant::now();
    let next = run_args(
        "one",
        &[&server],
        &["--permits", "1", "--wait", "20s"],
        "true",
    );
    output(&next, 0);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn readers_share_and_a_writer_waits_for_them() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let reader = run_args(
        "cat",
        &[&server],
        &["--read"],
        &format!("touch \"$D/reading\"; {}", until_file("stop", 60)),
    );
    let bg = Bg::start(&reader, &dir, "reader");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("reading")
        .exists()));
    output(
        &run_args("cat", &[&server], &["--read", "--wait", "0s"], "true"),
        0,
    );
    output(
        &run_args("cat", &[&server], &["--write", "--wait", "0s"], "true"),
        75,
    );
    output(
        &run_args("cat", &[&server], &["--read", "--write"], "true"),
        64,
    );

    let status = output(
        &[
            "status".into(),
            "cat".into(),
            "--redis".into(),
            server.url(),
        ],
        0,
    );
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("read-write lock in read mode"), "{text}");

    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(bg.wait(Duration::from_secs(20)).code(), Some(0));
    output(
        &run_args("cat", &[&server], &["--write", "--wait", "5s"], "true"),
        0,
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "cat"]), 0);
}

#[test]
fn status_shows_a_semaphores_counter_and_permits() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let holder = run_args(
        "slots",
        &[&server],
        &["--permits", "3"],
        &format!("touch \"$D/in\"; {}", until_file("stop", 60)),
    );
    let bg = Bg::start(&holder, &dir, "holder");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("in")
        .exists()));
    let args: Vec<String> = ["status", "slots", "--json", "--redis", &server.url()]
        .map(String::from)
        .into();
    let doc: Value = serde_json::from_slice(&output(&args, 0).stdout).unwrap();
    let m = &doc["masters"][0];
    assert_eq!(m["type"], "string");
    assert_eq!(m["counter"], 2);
    assert_eq!(m["permits"].as_array().unwrap().len(), 1);
    assert_eq!(m["permits"][0]["holder"].as_str().unwrap().len(), 32);
    let args: Vec<String> = ["status", "slots", "--redis", &server.url()]
        .map(String::from)
        .into();
    let text = String::from_utf8_lossy(&output(&args, 0).stdout).into_owned();
    assert!(
        text.contains("counter 2") && text.contains("permits taken: 1"),
        "{text}"
    );
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(bg.wait(Duration::from_secs(20)).code(), Some(0));
    assert_eq!(server.cmd::<String>(&["GET", "slots"]), "3");
}

/// A simple lock (the Redlock reference clients' `SET NX PX` string, here written as
/// redsync writes it) is a lock to `status`: held by its token, exit 0; a string
/// holding a number is still a counter.
#[test]
fn status_reads_a_simple_lock_as_held_by_its_token() {
    let server = RedisServer::start();
    let _: String = server.cmd(&["SET", "report", "Zm9vYmFyYmF6cXV4", "NX", "PX", "30000"]);
    let args: Vec<String> = ["status", "report", "--json", "--redis", &server.url()]
        .map(String::from)
        .into();
    let doc: Value = serde_json::from_slice(&output(&args, 0).stdout).unwrap();
    let m = &doc["masters"][0];
    assert_eq!(m["type"], "string", "{doc}");
    assert_eq!(m["holders"][0]["holder"], "Zm9vYmFyYmF6cXV4", "{doc}");
    assert_eq!(doc["locked"], true, "{doc}");
    let args: Vec<String> = ["status", "report", "--redis", &server.url()]
        .map(String::from)
        .into();
    let text = String::from_utf8_lossy(&output(&args, 0).stdout).into_owned();
    assert!(text.contains("holder Zm9vYmFyYmF6cXV4"), "{text}");
}
