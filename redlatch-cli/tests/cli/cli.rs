//! The `redlatch` command against real redis-server processes: exit codes, release,
//! status, unlock --force, and mutual exclusion between processes.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::{Duration, Instant};

use cli_util::{exists, output, read, redis_args, redlatch, run_args, until_file, Bg, TempDir};
use common::{eventually, numsub, start_many, RedisServer};

pub(crate) fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn with(mut base: Vec<String>, more: Vec<String>) -> Vec<String> {
    base.extend(more);
    base
}

#[test]
fn exits_with_cmd_status_and_releases_the_lock() {
    let server = RedisServer::start();
    redlatch(&run_args("ok", &[&server], &[], "exit 0"))
        .assert()
        .code(0);
    assert!(!exists(&server, "ok"), "lock left behind after CMD exited");
    redlatch(&run_args(
        "ok",
        &[&server],
        &[],
        "echo out; echo err >&2; exit 7",
    ))
    .assert()
    .code(7)
    .stdout("out\n")
    .stderr("err\n");
    assert!(!exists(&server, "ok"), "lock left behind after CMD failed");
    // Released means the next one gets it at once.
    redlatch(&run_args("ok", &[&server], &["--wait", "0s"], "true"))
        .assert()
        .code(0);
}

#[test]
fn cmd_gets_the_lock_name_holder_and_fencing_token() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script =
        "echo \"$REDLATCH_LOCK $REDLATCH_HOLDER ${REDLATCH_FENCING_TOKEN:-none}\" >> \"$D/env\"";
    for opts in [&[][..], &["--fenced"][..], &["--fenced"][..]] {
        redlatch(&run_args("envs", &[&server], opts, script))
            .env("D", dir.path())
            .assert()
            .code(0);
    }
    let lines: Vec<Vec<String>> = read(&dir.file("env"))
        .lines()
        .map(|l| l.split(' ').map(String::from).collect())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|l| l[0] == "envs" && l[1].contains(':')));
    assert_eq!(lines[0][2], "none");
    let (t1, t2): (u64, u64) = (lines[1][2].parse().unwrap(), lines[2][2].parse().unwrap());
    assert!(t2 > t1, "fencing tokens must grow: {t1} then {t2}");
}

#[test]
fn missing_and_unrunnable_cmd_are_127_and_126_without_a_lock() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let redis = redis_args(&[&server]);
    let missing = args(&["--", "redlatch-no-such-command-xyz"]);
    let out = output(
        &with(with(args(&["run", "nf"]), redis.clone()), missing),
        127,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not found"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let plain_file = dir.file("not-executable");
    std::fs::write(&plain_file, "#!/bin/sh\n").unwrap();
    redlatch(&with(args(&["run", "nf"]), redis))
        .arg("--")
        .arg(&plain_file)
        .assert()
        .code(126);
    assert!(!exists(&server, "nf"));
}

#[test]
fn a_busy_lock_gives_75_after_wait() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!("touch \"$D/started\"; {}", until_file("stop", 60));
    let holder = Bg::start(&run_args("busy", &[&server], &[], &script), &dir, "holder");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    let started = Instant::now();
    let out = output(
        &run_args("busy", &[&server], &["--wait", "500ms"], "true"),
        75,
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(15), "gave up after {waited:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not acquired within 500ms"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
    assert!(!exists(&server, "busy"));
}

#[test]
fn usage_errors_are_64_with_one_line() {
    let server = RedisServer::start();
    let redis = redis_args(&[&server]);
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            with(args(&["run", "u", "echo", "hi"]), redis.clone()),
            "missing `--`",
        ),
        (with(args(&["run", "u"]), redis.clone()), "missing `--`"),
        (
            with(args(&["run", "u", "--bogus", "--", "true"]), redis.clone()),
            "--bogus",
        ),
        (
            with(
                // A bare number is seconds for --wait only (flock's -w), not a lease.
                args(&["run", "u", "--lease", "10", "--", "true"]),
                redis.clone(),
            ),
            "unit",
        ),
        (
            with(
                args(&["run", "u", "--lease", "5x", "--", "true"]),
                redis.clone(),
            ),
            "5x",
        ),
        (
            with(
                args(&["run", "u", "--fair", "--fenced", "--", "true"]),
                redis.clone(),
            ),
            "--fenced",
        ),
        (with(args(&["unlock", "u"]), redis.clone()), "--force"),
        (with(args(&["status"]), redis.clone()), "NAME"),
        (
            args(&["run", "u", "--redis", "nonsense://x", "--", "true"]),
            "nonsense",
        ),
    ];
    for (argv, needle) in cases {
        let out = output(&argv, 64);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{argv:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{argv:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{argv:?}: {stderr}");
    }
    let help = stdout_of(redlatch(&args(&["run", "--help"])).assert().code(0));
    assert!(help.contains("75") && help.contains("76"), "{help}");
}

fn stdout_of(assert: assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

#[test]
fn unreachable_redis_is_69_quickly() {
    let mut server = RedisServer::start();
    let redis = redis_args(&[&server]);
    server.kill();
    let started = Instant::now();
    let argv = with(
        with(args(&["run", "down"]), redis.clone()),
        args(&["--", "true"]),
    );
    let out = output(&argv, 69);
    assert!(started.elapsed() < Duration::from_secs(15));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    redlatch(&with(args(&["status", "down"]), redis))
        .assert()
        .code(69);
}

/// Under the minimal ACL of docs/errors.md (the user tests/standalone/acl.rs runs the library's
/// scenarios under), `redlatch run` takes, holds and releases the lock and prints
/// nothing: no warning about a channel it may not subscribe to.
#[test]
fn run_under_the_minimal_acl_is_quiet() {
    let server = RedisServer::start();
    // `redlatch run` as `url`'s user, holding the lock a second: exit 0.
    let run_as = |url: &str| {
        let run = [
            "run",
            "acl:quiet",
            "--redis",
            url,
            "--",
            "sh",
            "-c",
            "sleep 1",
        ];
        output(&args(&run), 0)
    };
    let out = run_as(&common::acl::user(&server, &[]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.is_empty(), "{stderr}");
    assert!(out.stdout.is_empty());
    // Without the client's notice channel it would still work, but say why it cannot
    // listen (force-unlocks and release requests are then heard only at a renewal).
    let out = run_as(&common::acl::user(&server, &["&redlatch_client__channel*"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot listen for notices"), "{stderr}");
}

/// A user who may not run the scripts is refused at its first lock (nothing is loaded
/// at connect): exit 77, and the line names the refused command (`evalsha`), not a bare
/// "permission denied:".
#[test]
fn a_refusal_at_the_first_lock_exits_77_naming_the_command() {
    let server = RedisServer::start();
    let url = common::acl::ping_only(&server, "pw");
    let out = output(&args(&["run", "a", "--redis", &url, "--", "true"]), 77);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("permission denied: "), "{stderr}");
    assert!(stderr.contains("'evalsha'"), "{stderr}");
    // One line says it (the connect's warning that INFO is refused may precede it).
    let refusals = stderr.lines().filter(|l| l.contains("permission denied"));
    assert_eq!(refusals.count(), 1, "{stderr}");
}

#[test]
fn unlock_force_wakes_a_waiting_run() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let hold = format!(
        "trap 'exit 0' TERM; echo \"$REDLATCH_HOLDER\" > \"$D/holder\"; {}",
        until_file("stop", 90)
    );
    let holder = Bg::start(&run_args("fu", &[&server], &[], &hold), &dir, "holder");
    assert!(eventually(Duration::from_secs(20), || !read(
        &dir.file("holder")
    )
    .is_empty()));
    let id = read(&dir.file("holder")).trim().to_string();
    let waiter = Bg::start(
        &run_args("fu", &[&server], &["--wait", "60s"], "touch \"$D/got\""),
        &dir,
        "waiter",
    );
    assert!(eventually(Duration::from_secs(20), || numsub(
        &server,
        "redisson_lock__channel:{fu}"
    ) >= 1));

    let forced = Instant::now();
    let out = output(
        &args(&["unlock", "--force", "fu", "--redis", &server.url()]),
        0,
    )
    .stdout;
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("before:") && out.contains(&id), "{out}");
    assert!(
        out.contains(&format!("removed: lock \"fu\" held by {id}")),
        "{out}"
    );
    let ended = waiter.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    // The holder's lease had ~30 s left: only the unlock message explains a quick wake.
    assert!(
        forced.elapsed() < Duration::from_secs(10),
        "{:?}",
        forced.elapsed()
    );
    assert!(dir.file("got").exists());

    // The old holder finds its lock gone when it ends: exit 76, not CMD's 0.
    holder.signal(libc::SIGTERM);
    let ended = holder.wait(Duration::from_secs(30));
    assert_eq!(ended.code(), Some(76), "{}", ended.stderr);
    assert!(ended.stderr.contains("lost"), "{}", ended.stderr);

    let again = redlatch(&args(&[
        "unlock",
        "--force",
        "fu",
        "--redis",
        &server.url(),
    ]))
    .assert()
    .code(0);
    assert!(stdout_of(again).contains("removed: nothing"));
}

#[test]
fn eight_concurrent_runs_never_overlap() {
    let servers = start_many(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let dir = TempDir::new();
    std::fs::write(dir.file("counter"), "0\n").unwrap();
    const ROUNDS: usize = 3;
    let script = "echo \"enter $ID\" >> \"$D/log\"; n=$(cat \"$D/counter\"); sleep 0.02; \
                  echo $((n+1)) > \"$D/counter\"; echo \"exit $ID\" >> \"$D/log\"";
    std::thread::scope(|scope| {
        for id in 0..8 {
            let (refs, dir) = (&refs, &dir);
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    let argv = run_args("many", refs, &["--wait", "120s"], script);
                    redlatch(&argv)
                        .env("D", dir.path())
                        .env("ID", id.to_string())
                        .assert()
                        .code(0);
                }
            });
        }
    });
    let log = read(&dir.file("log"));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 8 * ROUNDS * 2, "{log}");
    for pair in lines.chunks(2) {
        let (enter, exit) = (pair[0], pair[1]);
        assert!(enter.starts_with("enter "), "overlap:\n{log}");
        assert_eq!(exit, enter.replace("enter", "exit"), "overlap:\n{log}");
    }
    assert_eq!(read(&dir.file("counter")).trim(), (8 * ROUNDS).to_string());
    assert!(refs.iter().all(|s| !exists(s, "many")));
}

#[test]
fn a_key_that_is_not_a_lock_is_65_and_left_alone() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "plain-string", "v"]);
    let url = server.url();
    for argv in [
        args(&["run", "plain-string", "--redis", &url, "--", "true"]),
        args(&["status", "plain-string", "--redis", &url]),
        args(&["unlock", "--force", "plain-string", "--redis", &url]),
    ] {
        let out = output(&argv, 65);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("not a lock"), "{argv:?}: {stderr}");
    }
    assert_eq!(server.cmd::<String>(&["GET", "plain-string"]), "v");
}

/// A key at a lock's name that no lock script wrote is reported the same way by `run`,
/// `status` (65, naming key and master) and the library: a hash of no hold counts is
/// not a lock; a hash without expiry would never free, so `run` fails at once instead
/// of waiting for it; `status` says free (1) and held (0) apart.
#[test]
fn a_foreign_hash_or_a_lock_without_expiry_is_65_not_a_wait() {
    let server = RedisServer::start();
    let url = server.url();
    let addr = server.addr();
    // A hash of someone else's (with a TTL: not about expiry).
    let _: i64 = server.cmd(&["HSET", "profile", "name", "bob"]);
    let _: i64 = server.cmd(&["PEXPIRE", "profile", "600000"]);
    let out = output(&args(&["status", "profile", "--redis", &url]), 65);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(stdout.contains("NOT A LOCK"), "{stdout}");
    assert!(!stdout.contains("held, ttl"), "{stdout}");
    assert!(
        stderr.contains("not a lock") && stderr.contains(&addr),
        "{stderr}"
    );
    // A lock-shaped hash without expiry: never frees by itself.
    let _: i64 = server.cmd(&["HSET", "stuck", "someone:1", "1"]);
    let out = output(&args(&["status", "stuck", "--redis", &url]), 65);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.contains("NO EXPIRY") && stdout.contains("someone:1"),
        "{stdout}"
    );
    assert!(
        stderr.contains("no expiry") && stderr.contains(&addr),
        "{stderr}"
    );
    let started = Instant::now();
    let out = output(&args(&["run", "stuck", "--redis", &url, "--", "true"]), 65);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no expiry") && stderr.contains(&addr),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "run waited on it"
    );
    assert_eq!(server.cmd::<i64>(&["HGET", "stuck", "someone:1"]), 1);
    // A free name: 1; `unlock --force` then `status` of a deleted lock: 1.
    output(&args(&["status", "free", "--redis", &url]), 1);
    output(&args(&["unlock", "--force", "stuck", "--redis", &url]), 0);
    output(&args(&["status", "stuck", "--redis", &url]), 1);
}

/// Issue 21.5: a lock lost because its renewals were refused (the user lacks `+hexists`,
/// which renew.lua calls) is reported as that, naming the command, with exit 77 (not 76);
/// CMD is terminated before the validity ends (it is at risk from the first refusal).
#[test]
fn a_lock_lost_to_refused_renewals_exits_77_naming_the_command() {
    let server = RedisServer::start();
    server.cmd::<String>(&[
        "ACL", "SETUSER", "norenew", "on", ">pw", "~*", "&*", "+@all", "-hexists",
    ]);
    let url = format!("redis://norenew:pw@127.0.0.1:{}", server.port());
    let args: Vec<String> = [
        "run",
        "perm:renew",
        "--watchdog",
        "1500ms",
        "--kill-grace",
        "200ms",
        "--redis",
        &url,
        "--",
        "sleep",
        "20",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = output(&args, 77);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("at risk"), "{stderr}");
    assert!(stderr.contains("hexists"), "{stderr}");
    assert!(stderr.contains("renewals refused"), "{stderr}");
    assert!(!stderr.contains(":pw@"), "{stderr}");
}

/// Issue 11.5: permission and data errors end `run` at once with their own exit codes
/// (77 NOPERM, 65 bad data), instead of 30 s of retries and 69.
#[test]
fn permission_and_data_errors_exit_at_once_with_their_codes() {
    let server = RedisServer::start();
    server.cmd::<String>(&[
        "ACL", "SETUSER", "noeval", "on", ">pw", "~*", "&*", "+@all", "-evalsha",
    ]);
    let url = format!("redis://noeval:pw@127.0.0.1:{}", server.port());
    let started = Instant::now();
    let args: Vec<String> = ["run", "perm:lock", "--redis", &url, "--", "true"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = output(&args, 77);
    assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );

    server.cmd::<String>(&["SET", "redisson_lock_token:{bad:lock}", "x"]);
    let args: Vec<String> = [
        "run",
        "bad:lock",
        "--fenced",
        "--redis",
        &server.url(),
        "--",
        "true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    output(&args, 65);
}
