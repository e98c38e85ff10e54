//! `redlatch run` and signals: forwarding, a lost lock terminating CMD, CMD killed by
//! a signal, redlatch itself interrupted or killed.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::{Duration, Instant};

use cli_util::{alive, exists, read, redlatch, run_args, until_file, Bg, TempDir};
use common::{eventually, RedisServer};

/// CMD: record its PID, say it started, then idle (bounded) until `$D/stop` exists.
fn idle(trap: &str) -> String {
    format!(
        "{trap} echo $$ > \"$D/pid\"; touch \"$D/started\"; {}",
        until_file("stop", 60)
    )
}

fn wait_started(dir: &TempDir) -> u32 {
    assert!(
        eventually(Duration::from_secs(20), || dir.file("started").exists()),
        "CMD did not start"
    );
    read(&dir.file("pid")).trim().parse().expect("CMD pid")
}

#[test]
fn cmd_killed_by_a_signal_gives_128_plus_signal_and_releases() {
    let server = RedisServer::start();
    redlatch(&run_args("sig", &[&server], &[], "kill -KILL $$"))
        .assert()
        .code(128 + libc::SIGKILL);
    assert!(
        !exists(&server, "sig"),
        "lock left behind after CMD was killed"
    );
    redlatch(&run_args("sig", &[&server], &[], "kill -TERM $$"))
        .assert()
        .code(128 + libc::SIGTERM);
    assert!(!exists(&server, "sig"));
}

#[test]
fn sigterm_to_redlatch_is_forwarded_and_the_lock_released_after_cmd_ends() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // CMD takes its time after the signal: the lock must stay held until it ends.
    let trap = "trap 'echo forwarded > \"$D/marker\"; sleep 0.3; exit 0' TERM;";
    let bg = Bg::start(&run_args("fwd", &[&server], &[], &idle(trap)), &dir, "run");
    wait_started(&dir);
    bg.signal(libc::SIGTERM);
    assert!(eventually(Duration::from_secs(10), || dir
        .file("marker")
        .exists()));
    assert!(exists(&server, "fwd"), "released before CMD ended");
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    assert_eq!(read(&dir.file("marker")), "forwarded\n");
    assert!(!exists(&server, "fwd"), "lock left behind");
}

#[test]
fn sigint_to_redlatch_kills_a_default_cmd_with_130() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = "echo $$ > \"$D/pid\"; touch \"$D/started\"; exec sleep 60";
    let bg = Bg::start(&run_args("int", &[&server], &[], script), &dir, "run");
    let pid = wait_started(&dir);
    bg.signal(libc::SIGINT);
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(128 + libc::SIGINT), "{}", ended.stderr);
    assert!(!alive(pid));
    assert!(!exists(&server, "int"));
}

#[test]
fn a_lost_lock_sends_sigterm_to_cmd_and_exits_76() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let trap = "trap 'echo terminated > \"$D/marker\"; exit 0' TERM;";
    // Renewed every 0.5 s: the lock is still there to delete on a loaded machine.
    let opts = ["--watchdog", "1500ms", "--kill-grace", "20s"];
    let bg = Bg::start(
        &run_args("lost", &[&server], &opts, &idle(trap)),
        &dir,
        "run",
    );
    wait_started(&dir);
    assert_eq!(server.cmd::<i64>(&["DEL", "lost"]), 1);
    let deleted = Instant::now();
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(76), "{}", ended.stderr);
    assert!(
        deleted.elapsed() < Duration::from_secs(10),
        "{:?}",
        deleted.elapsed()
    );
    assert_eq!(read(&dir.file("marker")), "terminated\n");
    assert!(
        ended.stderr.contains("lock \"lost\" lost"),
        "{}",
        ended.stderr
    );
}

#[test]
fn a_cmd_ignoring_sigterm_gets_sigkill_after_the_grace() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // exec keeps SIGTERM ignored in `sleep`, which then only dies by SIGKILL.
    let script = "trap '' TERM; echo $$ > \"$D/pid\"; touch \"$D/started\"; exec sleep 60";
    let opts = ["--watchdog", "1500ms", "--kill-grace", "500ms"];
    let bg = Bg::start(
        &run_args("stubborn", &[&server], &opts, script),
        &dir,
        "run",
    );
    let pid = wait_started(&dir);
    assert_eq!(server.cmd::<i64>(&["DEL", "stubborn"]), 1);
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(76), "{}", ended.stderr);
    assert!(ended.stderr.contains("SIGKILL"), "{}", ended.stderr);
    assert!(!alive(pid), "CMD {pid} survived");
}

#[test]
fn a_fixed_lease_that_runs_out_terminates_cmd() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let started = Instant::now();
    let opts = ["--lease", "1s", "--kill-grace", "5s"];
    let ended = Bg::start(
        &run_args("lease", &[&server], &opts, &idle("")),
        &dir,
        "run",
    )
    .wait(Duration::from_secs(30));
    assert_eq!(ended.code(), Some(76), "{}", ended.stderr);
    assert!(
        ended.stderr.contains("--lease of 1.0s ran out"),
        "{}",
        ended.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn interrupting_a_wait_leaves_nothing_behind() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let holder = Bg::start(
        &run_args("iw", &[&server], &["--fair"], &idle("")),
        &dir,
        "holder",
    );
    wait_started(&dir);
    let waiter = Bg::start(
        &run_args("iw", &[&server], &["--fair"], "touch \"$D/ran\""),
        &dir,
        "waiter",
    );
    let queue_len = || server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{iw}"]);
    assert!(eventually(Duration::from_secs(20), || queue_len() == 1));
    waiter.signal(libc::SIGINT);
    let ended = waiter.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(128 + libc::SIGINT), "{}", ended.stderr);
    assert!(ended.stderr.contains("while waiting"), "{}", ended.stderr);
    assert!(!dir.file("ran").exists(), "CMD ran without the lock");
    assert!(
        eventually(Duration::from_secs(2), || queue_len() == 0),
        "queue entry left behind"
    );
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
}

#[test]
fn a_killed_redlatch_takes_cmd_with_it_and_the_lease_frees_the_lock() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let opts = ["--watchdog", "1s"];
    let bg = Bg::start(
        &run_args("crash", &[&server], &opts, &idle("")),
        &dir,
        "run",
    );
    let pid = wait_started(&dir);
    bg.signal(libc::SIGKILL);
    drop(bg.wait(Duration::from_secs(10)));
    assert!(
        eventually(Duration::from_secs(10), || !alive(pid)),
        "CMD {pid} outlived redlatch"
    );
    // Nobody released it: the 1 s lease runs out.
    assert!(eventually(Duration::from_secs(10), || !exists(
        &server, "crash"
    )));
    redlatch(&run_args("crash", &[&server], &["--wait", "0s"], "true"))
        .assert()
        .code(0);
}
