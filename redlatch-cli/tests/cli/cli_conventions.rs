//! flock(1)'s and consul's habits (issue 26): -w/-n/-E/-c/-v, RUST_LOG, completions and
//! the manual page, and exit codes that match the help.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{exists, output, redis_args, redlatch, run_args, until_file, Bg, TempDir};
use common::{eventually, start_many, RedisServer};

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A `redlatch run` holding `name` until `$D/stop` exists.
fn hold(server: &RedisServer, name: &str, dir: &TempDir) -> Bg {
    let script = format!("touch \"$D/started\"; {}", until_file("stop", 60));
    let holder = Bg::start(&run_args(name, &[server], &[], &script), dir, "holder");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    holder
}

#[test]
fn nonblock_and_conflict_exit_code_skip_a_busy_lock_like_flock() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let holder = hold(&server, "nb", &dir);
    // -n: one try; -E: the status a busy lock exits with.
    let mut args = strings(&["run", "nb", "-n", "-E", "3"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "sh", "-c", "touch \"$D/ran\""]));
    let out = redlatch(&args)
        .env("D", dir.path())
        .assert()
        .code(3)
        .get_output()
        .clone();
    assert!(!dir.file("ran").exists(), "CMD must not run");
    // With -E the busy lock is an expected outcome: silent, as flock's.
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // -v still says it.
    let mut args = strings(&["run", "nb", "-n", "-E", "3", "-v"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    let out = output(&args, 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("busy"), "{stderr}");
    // -w is --wait; without -E the busy status is 75, said.
    let mut args = strings(&["run", "nb", "-w", "200ms"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    let out = output(&args, 75);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not acquired within 200ms: it is busy"),
        "{stderr}"
    );
    // A bare number is seconds, as flock's -w takes it.
    for (bare, said) in [("1", "1.0s"), ("0.3", "300ms")] {
        let mut args = strings(&["run", "nb", "-w", bare]);
        args.extend(redis_args(&[&server]));
        args.extend(strings(&["--", "true"]));
        let started = std::time::Instant::now();
        let out = output(&args, 75);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("within {said}")), "{stderr}");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "-w {bare} waited less"
        );
    }
    // Elsewhere a bare number is still refused (a lease of `10` could be ms or s).
    let mut args = strings(&["run", "nb", "--lease", "10"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    let out = output(&args, 64);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing unit"), "{stderr}");
    // -n and -w together are a usage error.
    let mut args = strings(&["run", "nb", "-n", "-w", "1s"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    output(&args, 64);
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
}

#[test]
fn dash_c_runs_a_shell_command_line_under_the_lock() {
    let server = RedisServer::start();
    let mut args = strings(&["run", "shell", "-c", "echo held-$REDLATCH_LOCK; exit 7"]);
    args.extend(redis_args(&[&server]));
    let out = output(&args, 7);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "held-shell");
    assert!(!exists(&server, "shell"));
    // -c and a CMD after `--` exclude each other.
    let mut args = strings(&["run", "shell", "-c", "true"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    output(&args, 64);
}

#[test]
fn verbose_says_what_it_waits_for_and_who_holds_it() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let holder = hold(&server, "seen", &dir);
    let mut args = strings(&["run", "seen", "-v", "--wait", "300ms"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    let out = output(&args, 75);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("waiting for"), "{stderr}");
    assert!(stderr.contains("held by"), "{stderr}");
    assert!(stderr.contains("lease left"), "{stderr}");
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(holder.wait(Duration::from_secs(30)).code(), Some(0));
    // Once free: it says what it holds.
    let mut args = strings(&["run", "seen", "-v"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    let out = output(&args, 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("holding lock \"seen\""), "{stderr}");
}

#[test]
fn rust_log_shows_the_librarys_events() {
    let server = RedisServer::start();
    let mut args = strings(&["run", "logged"]);
    args.extend(redis_args(&[&server]));
    args.extend(strings(&["--", "true"]));
    let out = redlatch(&args)
        .env("RUST_LOG", "redlatch=debug")
        .assert()
        .code(0)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DEBUG"), "{stderr}");
    // By default only warnings: a clean run says nothing.
    let out = output(&args, 0);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn completions_and_the_manual_page_come_from_the_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let out = output(&strings(&["completions", shell]), 0);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("nonblock"), "{shell}: {text}");
    }
    let out = output(&strings(&["man"]), 0);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH redlatch 1"), "{page}");
    output(&strings(&["completions", "tcsh"]), 64);
}

#[test]
fn an_unsupported_operation_is_78_not_internal_and_the_help_lists_every_code() {
    let servers = start_many(3);
    let all: Vec<&RedisServer> = servers.iter().collect();
    // Semaphores need one deployment; three Redlock masters cannot hold one.
    let out = output(&run_args("sem", &all, &["--permits", "2"], "true"), 78);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let help = output(&strings(&["--help"]), 0);
    let help = String::from_utf8_lossy(&help.stdout);
    let run_help = output(&strings(&["run", "--help"]), 0);
    let run_help = String::from_utf8_lossy(&run_help.stdout);
    for code in [
        "64", "65", "69", "70", "71", "75", "76", "77", "78", "126", "127",
    ] {
        assert!(help.contains(code), "top-level help lacks {code}");
        assert!(
            run_help.contains(&format!("  {code} ")),
            "run --help lacks {code}"
        );
    }
}
