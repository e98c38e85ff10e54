//! `redlatch latch set|count-down|count|wait`: the count-down latch as a barrier
//! between processes, its exit codes and bad input, against real redis-server
//! processes.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{output, redis_args, Bg, TempDir};
use common::RedisServer;

fn latch(cmd: &str, name: &str, server: &RedisServer, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["latch".to_string(), cmd.to_string(), name.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(redis_args(&[server]));
    args
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn set_count_down_count_and_their_exit_codes() {
    let server = RedisServer::start();
    // Never set: open, count 0.
    output(&latch("wait", "g", &server, &["--wait", "1s"]), 0);
    assert_eq!(stdout(&output(&latch("count", "g", &server, &[]), 0)), "0");
    output(&latch("set", "g", &server, &["2"]), 0);
    assert_eq!(server.cmd::<String>(&["GET", "g"]), "2");
    // Counting already: 75 (or -E), and the count is left as it is.
    let busy = output(&latch("set", "g", &server, &["5"]), 75);
    assert!(
        stderr(&busy).contains("counting already (count 2)"),
        "{}",
        stderr(&busy)
    );
    // -E given: the expected outcome, said by the exit status alone (flock's -E).
    let again = output(&latch("set", "g", &server, &["5", "-E", "0"]), 0);
    assert_eq!(stderr(&again), "");
    assert_eq!(server.cmd::<String>(&["GET", "g"]), "2");
    // A bounded wait runs out: 75, or -E.
    let late = output(&latch("wait", "g", &server, &["--wait", "100ms"]), 75);
    assert!(
        stderr(&late).contains("still counting after 100ms"),
        "{}",
        stderr(&late)
    );
    assert_eq!(
        stderr(&output(
            &latch("wait", "g", &server, &["-w", "50ms", "-E", "3"]),
            3
        )),
        ""
    );
    // A bare -w is seconds, as flock's.
    let late = output(&latch("wait", "g", &server, &["-w", "0.1"]), 75);
    assert!(
        stderr(&late).contains("still counting after 100ms"),
        "{}",
        stderr(&late)
    );
    assert_eq!(
        stdout(&output(&latch("count-down", "g", &server, &[]), 0)),
        "1"
    );
    assert_eq!(stdout(&output(&latch("count", "g", &server, &[]), 0)), "1");
    assert_eq!(
        stdout(&output(&latch("count-down", "g", &server, &[]), 0)),
        "0"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "g"]), 0, "deleted at zero");
    output(&latch("wait", "g", &server, &[]), 0);
    // Bad input: 64, nothing written.
    output(&latch("set", "g", &server, &["0"]), 64);
    output(&latch("set", "g", &server, &["-1"]), 64);
    output(&latch("set", "g", &server, &["x"]), 64);
    output(&latch("wait", "g", &server, &["--wait", "10x"]), 64);
    output(&latch("set", "", &server, &["1"]), 64);
    assert_eq!(server.dbsize(), 0);
    // Not a latch: 65.
    let _: i64 = server.cmd(&["HSET", "h", "f", "1"]);
    output(&latch("count-down", "h", &server, &[]), 65);
    output(&latch("wait", "h", &server, &[]), 65);
}

#[test]
fn waiting_processes_pass_the_barrier_only_after_the_last_count_down() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    output(&latch("set", "barrier", &server, &["3"]), 0);
    let mut waiters: Vec<Bg> = (0..3)
        .map(|i| {
            Bg::start(
                &latch("wait", "barrier", &server, &[]),
                &dir,
                &format!("w{i}"),
            )
        })
        .collect();
    // Every waiter subscribed (else a count-down could come before it listens: it
    // would still see zero on its next read, but then this test would not show the
    // wake-up).
    let channel = "redisson_countdownlatch__channel__{barrier}";
    assert!(common::eventually(
        Duration::from_secs(20),
        || common::numsub(&server, channel) == 3
    ));
    output(&latch("count-down", "barrier", &server, &[]), 0);
    output(&latch("count-down", "barrier", &server, &[]), 0);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        waiters.iter_mut().all(|w| w.running()),
        "passed with 1 left"
    );
    output(&latch("count-down", "barrier", &server, &[]), 0);
    for w in waiters {
        let ended = w.wait(Duration::from_secs(20));
        assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    }
}

#[test]
fn a_signal_ends_a_wait_with_128_plus_its_number() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    output(&latch("set", "sig", &server, &["1"]), 0);
    let waiter = Bg::start(&latch("wait", "sig", &server, &[]), &dir, "w");
    let channel = "redisson_countdownlatch__channel__{sig}";
    assert!(common::eventually(
        Duration::from_secs(20),
        || common::numsub(&server, channel) == 1
    ));
    waiter.signal(libc::SIGTERM);
    let ended = waiter.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(128 + libc::SIGTERM), "{}", ended.stderr);
    assert!(
        ended.stderr.contains("while waiting for latch"),
        "{}",
        ended.stderr
    );
    assert_eq!(
        server.cmd::<String>(&["GET", "sig"]),
        "1",
        "the count is untouched"
    );
}

#[test]
fn a_latch_over_redlock_masters_is_refused_with_78() {
    let servers = common::start_many(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let mut args = vec!["latch".to_string(), "set".into(), "r".into(), "1".into()];
    args.extend(redis_args(&refs));
    let out = output(&args, 78);
    assert!(stderr(&out).contains("Redlock"), "{}", stderr(&out));
}
