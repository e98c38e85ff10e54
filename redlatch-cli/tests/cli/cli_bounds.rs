//! `redlatch run --wait W` (and `elect --wait W`) keeps its bound when the master fails (docs/guarantees.md,
//! "Bounds"): `W` plus the library's wait slack (`redlatch::WAIT_SLACK`, 250 ms),
//! connecting and the clean-up it waits for before exiting included, whatever the
//! master does before or while the command waits: killed, hung (SIGSTOP) or
//! unreachable (a cut route: new connections hang in `connect()`). These fail on a
//! build whose wait is not end to end (`--wait 300ms` on a master hung while it
//! waited: 2.4 s), or that gives a request in flight at the deadline a whole master
//! timeout (1.3 s to 1.4 s).

use crate::cli_util;
use redlatch_testkit as common;

use std::time::{Duration, Instant};

use cli_util::{run_args, Bg, TempDir};
use common::unreachable::Route;
use common::{eventually, numsub, RedisServer};

/// What a wait may take past its end: the library's wait slack.
const WAIT_SLACK: Duration = redlatch::WAIT_SLACK;
/// Starting the process, and a loaded machine's timer and scheduling lateness.
const SLACK: Duration = Duration::from_millis(500);

/// Holds `name` as another client would (a plain lock: a hash with a holder field).
fn hold(server: &RedisServer, name: &str) {
    let _: i64 = server.cmd(&["HSET", name, "someone-else:1", "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", name, "60000"]);
}

#[test]
fn a_master_that_hangs_while_run_waits_ends_the_wait_in_time() {
    for wait in [Duration::from_millis(300), Duration::from_secs(1)] {
        let server = RedisServer::start();
        hold(&server, "cb");
        let dir = TempDir::new();
        let w = format!("{}ms", wait.as_millis());
        let started = Instant::now();
        let run = Bg::start(
            &run_args("cb", &[&server], &["--wait", &w], "true"),
            &dir,
            "run",
        );
        // It connected, tried, and listens for the release: the next request it sends
        // goes to a hung master.
        let channel = "redisson_lock__channel:{cb}";
        assert!(eventually(Duration::from_secs(20), || numsub(
            &server, channel
        ) == 1));
        server.pause();
        let ended = run.wait(Duration::from_secs(30));
        let took = started.elapsed();
        server.resume();
        eprintln!(
            "--wait {w}: exit {:?} after {took:?}: {}",
            ended.code(),
            ended.stderr.trim()
        );
        // Still busy at the deadline (75), or the last attempt unanswered (69).
        assert!(matches!(ended.code(), Some(75 | 69)), "{ended:?}");
        let bound = wait + WAIT_SLACK + SLACK;
        assert!(
            took <= bound,
            "--wait {w} took {took:?}, bound {bound:?}: {ended:?}"
        );
    }
}

#[test]
fn a_master_hung_or_killed_before_run_fails_within_the_wait() {
    let mut server = RedisServer::start();
    let dir = TempDir::new();
    server.pause();
    // --wait covers connecting too: 300 ms + the wait slack, not the 2 s connect
    // timeout; for `elect` as for `run`.
    let bound = Duration::from_millis(300) + WAIT_SLACK + SLACK;
    for command in ["run", "elect"] {
        let mut args = run_args("cb", &[&server], &["--wait", "300ms"], "true");
        args[0] = command.to_string();
        let started = Instant::now();
        let hung = Bg::start(&args, &dir, &format!("hung-{command}"));
        let ended = hung.wait(Duration::from_secs(30));
        let took = started.elapsed();
        assert_eq!(ended.code(), Some(69), "{command}: {ended:?}");
        assert!(
            took <= bound,
            "{command}, a hung master: {took:?}: {ended:?}"
        );
    }
    server.resume();
    server.kill();
    let started = Instant::now();
    let killed = Bg::start(
        &run_args("cb", &[&server], &["--wait", "300ms"], "true"),
        &dir,
        "killed",
    );
    let ended = killed.wait(Duration::from_secs(30));
    let took = started.elapsed();
    assert_eq!(ended.code(), Some(69), "{ended:?}");
    assert!(took <= bound, "a killed master: {took:?}: {ended:?}");
}

#[test]
fn an_unreachable_master_fails_run_and_elect_within_the_wait() {
    let server = RedisServer::start();
    let route = Route::to(server.port());
    route.cut();
    let dir = TempDir::new();
    let bound = Duration::from_millis(300) + WAIT_SLACK + SLACK;
    for command in ["run", "elect"] {
        let url = route.url();
        let mut args = vec![command.to_string(), "cb".into(), "--redis".into(), url];
        args.extend(["--wait", "300ms", "--", "true"].map(String::from));
        let started = Instant::now();
        let cut = Bg::start(&args, &dir, &format!("unreachable-{command}"));
        let ended = cut.wait(Duration::from_secs(30));
        let took = started.elapsed();
        eprintln!(
            "{command}: exit {:?} after {took:?}: {}",
            ended.code(),
            ended.stderr.trim()
        );
        assert_eq!(ended.code(), Some(69), "{command}: {ended:?}");
        assert!(
            took <= bound,
            "{command}, an unreachable master: {took:?}: {ended:?}"
        );
    }
}
