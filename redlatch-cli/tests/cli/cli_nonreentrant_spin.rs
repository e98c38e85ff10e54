//! `redlatch run --non-reentrant`, `--non-reentrant-fair`, `--spin` and `--simple` against
//! real redis-server processes: concurrent runners never overlap, a busy lock gives 75
//! after --wait (the exit codes of `run`), the flags exclude each other and the other
//! kinds (64), a `--spin` runner waits without subscribing to anything, and a `--simple`
//! runner holds the plain string key a redsync or redis-py client takes.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{output, redlatch, run_args, until_file, Bg, TempDir};
use common::{eventually, RedisServer};

/// Six runners, two rounds each, of a CMD that counts who is inside.
fn never_overlap(flag: &str) {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = "touch \"$D/in.$ID\"; ls \"$D\" | grep -c '^in\\.' >> \"$D/counts\"; \
                  sleep 0.05; rm \"$D/in.$ID\"";
    std::thread::scope(|scope| {
        for id in 0..6 {
            let (server, dir) = (&server, &dir);
            scope.spawn(move || {
                for _ in 0..2 {
                    let argv = run_args("job", &[server], &[flag, "--wait", "120s"], script);
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
    assert_eq!(counts.len(), 12, "{flag}");
    assert!(
        counts.iter().all(|&n| n == 1),
        "{flag}: two CMDs at once: {counts:?}"
    );
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "job"]),
        0,
        "{flag}: lock left"
    );
}

#[test]
fn non_reentrant_runners_never_overlap() {
    never_overlap("--non-reentrant");
}

#[test]
fn spin_runners_never_overlap() {
    never_overlap("--spin");
}

#[test]
fn simple_runners_never_overlap() {
    never_overlap("--simple");
}

#[test]
fn non_reentrant_fair_runners_never_overlap() {
    never_overlap("--non-reentrant-fair");
}

#[test]
fn a_busy_lock_gives_75_and_a_spin_waiter_subscribes_to_nothing() {
    for flag in ["--non-reentrant", "--spin", "--simple"] {
        let server = RedisServer::start();
        let dir = TempDir::new();
        let script = format!("touch \"$D/started\"; {}", until_file("stop", 60));
        let holder = Bg::start(
            &run_args("busy", &[&server], &[flag], &script),
            &dir,
            "holder",
        );
        assert!(eventually(Duration::from_secs(20), || dir
            .file("started")
            .exists()));
        if flag == "--simple" {
            // The string key of `SET NX PX`: a redsync or redis-py client sees it taken
            // and cannot take it (SET NX refused).
            assert_eq!(server.cmd::<String>(&["TYPE", "busy"]), "string");
            let taken: Option<String> = server.cmd(&["SET", "busy", "theirs", "NX", "PX", "10000"]);
            assert_eq!(taken, None);
        }
        if flag == "--spin" {
            let waiter = Bg::start(
                &run_args("busy", &[&server], &[flag, "--wait", "60s"], "true"),
                &dir,
                "waiter",
            );
            // It retries (its attempts reach the server) and listens to nothing.
            let tries = common::calls(&server, "evalsha");
            assert!(eventually(Duration::from_secs(20), || {
                common::calls(&server, "evalsha") >= tries + 3
            }));
            // The only channels are each client's notice channel (it listens there for
            // force-unlocks and `unlock --ask`, one subscription per client).
            let mut channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", "*"]);
            channels.retain(|c| !c.starts_with("redlatch_client__channel:"));
            assert_eq!(channels, Vec::<String>::new());
            assert_eq!(common::numsub(&server, "redisson_lock__channel:{busy}"), 0);
            let list: String = server.cmd(&["CLIENT", "LIST"]);
            let subscribed = list.lines().filter(|l| l.contains(" sub=1 ")).count();
            let more = list
                .lines()
                .filter(|l| !l.contains(" sub=0 ") && !l.contains(" sub=1 "));
            assert!(
                more.count() == 0 && subscribed <= 2,
                "more than notices subscribed: {list}"
            );
            drop(waiter);
        }
        let out = output(
            &run_args("busy", &[&server], &[flag, "--wait", "300ms"], "true"),
            75,
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("not acquired within 300ms"),
            "{flag}: {stderr}"
        );
        std::fs::write(dir.file("stop"), "").unwrap();
        assert_eq!(
            holder.wait(Duration::from_secs(30)).code(),
            Some(0),
            "{flag}"
        );
        assert_eq!(server.cmd::<i64>(&["EXISTS", "busy"]), 0, "{flag}");
    }
}

#[test]
fn the_kind_flags_exclude_each_other() {
    let server = RedisServer::start();
    for pair in [
        ["--non-reentrant", "--spin"],
        ["--spin", "--fair"],
        ["--non-reentrant-fair", "--non-reentrant"],
        ["--non-reentrant", "--read"],
        ["--simple", "--fair"],
        ["--simple", "--spin"],
    ] {
        let out = output(&run_args("x", &[&server], &pair, "true"), 64);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot be used with"), "{pair:?}: {stderr}");
    }
}

/// Issue 46.7: `--backoff` spaces a `--simple` (or `--spin`) waiter's tries; a bad value
/// or another kind is a usage error (64); and a `--simple` waiter whose back-off is far
/// longer than the test is woken by a redlatch holder's release at once.
#[test]
fn backoff_is_checked_and_a_simple_waiter_is_woken_by_a_redlatch_release() {
    let server = RedisServer::start();
    for (opts, says) in [
        (&["--simple", "--backoff", "0ms"][..], "positive"),
        (&["--simple", "--backoff", "50ms..2ms"][..], "max"),
        (&["--fair", "--backoff", "5ms"][..], "--backoff"),
        (&["--backoff", "5ms"][..], "--backoff"),
    ] {
        let out = output(&run_args("bo", &[&server], opts, "true"), 64);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{opts:?}: {stderr}");
    }
    let dir = TempDir::new();
    let script = format!("touch \"$D/started\"; {}", until_file("stop", 60));
    let holder = Bg::start(
        &run_args("woken", &[&server], &["--simple"], &script),
        &dir,
        "holder",
    );
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    let waiter = Bg::start(
        &run_args(
            "woken",
            &[&server],
            &["--simple", "--backoff", "60s", "--wait", "50s"],
            "touch \"$D/in\"",
        ),
        &dir,
        "waiter",
    );
    let channel = "redisson_lock__channel:{woken}:redlatch-simple";
    assert!(eventually(Duration::from_secs(20), || common::numsub(
        &server, channel
    ) == 1));
    // Its try after subscribing has landed (no script call for 500 ms).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(common::settled_calls(&server, &["evalsha", "eval"]));
    let released = std::time::Instant::now();
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
    assert_eq!(waiter.wait(Duration::from_secs(30)).code(), Some(0));
    assert!(dir.file("in").exists());
    // Its next poll was 60 s away (and its wait 50 s): woken by the release.
    assert!(
        released.elapsed() < Duration::from_secs(30),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "woken"]), 0);
}

/// Issue 46.8: `status` names a holder that is not redlatch's by its value's format:
/// ShedLock's `ADDED:<instant>@<host>` (and `:<uuid>` in its safe-update mode), go-redsync's
/// 16 bytes in base64, redis-py's UUID v1 in hex, node-redlock's 16 bytes in hex; a
/// redlatch or Redisson holder id without a record keeps the old words.
#[test]
fn status_names_a_foreign_holder_by_its_value() {
    let server = RedisServer::start();
    for (value, says) in [
        (
            "ADDED:2026-12-02T01:22:33.456Z@build-7",
            "(ShedLock's value) on host build-7, started",
        ),
        (
            "ADDED:2026-12-02T01:22:33.456Z@build-7:5b3f1c2e-8a1d-4a6e-9f0b-2c4d6e8f0a1b",
            "(ShedLock's value) on host build-7, started",
        ),
        ("q7Jd0v3FkQ9m1nT2rX8yLg==", "a go-redsync holder"),
        ("6e9a3a5ab05f11efb8a10242ac120002", "a redis-py Lock holder"),
        ("3f2a9c71d04e8b5f6a1c2e3d4b5a6978", "a node-redlock holder"),
        (
            "5b3f1c2e-8a1d-4a6e-9f0b-2c4d6e8f0a1b:1",
            "no record (a Redisson holder, a client that is gone, or one under another --bookkeeping)",
        ),
    ] {
        let _: () = server.cmd(&["SET", "foreign", value, "PX", "60000"]);
        let mut argv = vec!["status".to_string(), "foreign".to_string()];
        argv.extend(["--redis".to_string(), server.url()]);
        let out = output(&argv, 0);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(says), "{value}: {stdout}");
        assert!(stdout.contains(value), "{value}: {stdout}");
    }
}
