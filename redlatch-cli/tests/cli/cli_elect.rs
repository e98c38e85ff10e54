//! `redlatch elect`, `redlatch leader` and the election in `redlatch status` (issue
//! 27.1): several processes campaign and exactly one leads at a time with growing
//! terms; a leader killed with SIGKILL is replaced within its lease; a paused leader is
//! replaced, and on resuming is told it lost (exit 76) while its successor keeps a
//! greater term; observers print each change once.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::{Duration, Instant};

use cli_util::{output, read, redis_args, redlatch, until_file, Bg, TempDir};
use common::{eventually, RedisServer};

/// `redlatch elect NAME --value V <opts> --redis URL -- sh -c SCRIPT`.
fn elect_args(
    name: &str,
    value: &str,
    server: &RedisServer,
    opts: &[&str],
    script: &str,
) -> Vec<String> {
    let mut args = vec![
        "elect".to_string(),
        name.to_string(),
        "--value".into(),
        value.into(),
    ];
    args.extend(opts.iter().map(|s| s.to_string()));
    args.extend(redis_args(&[server]));
    args.extend(["--", "sh", "-c", script].map(String::from));
    args
}

fn leader_args(name: &str, server: &RedisServer, opts: &[&str]) -> Vec<String> {
    let mut args = vec!["leader".to_string(), name.to_string()];
    args.extend(opts.iter().map(|s| s.to_string()));
    args.extend(redis_args(&[server]));
    args
}

/// `TERM VALUE` of the current leader, or None.
fn current(server: &RedisServer, name: &str) -> Option<(u64, String)> {
    let out = redlatch(&leader_args(name, server, &[])).output().unwrap();
    match out.status.code() {
        Some(0) => {
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let (term, value) = text.trim().split_once(' ').expect("TERM VALUE");
            Some((term.parse().unwrap(), value.to_string()))
        }
        Some(1) => None,
        other => panic!(
            "leader exited {other:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
fn processes_lead_one_at_a_time_with_growing_terms_and_the_watcher_sees_each_change_once() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    // The watcher prints the start, then 2 changes per leader.
    const N: usize = 3;
    let count = (2 * N).to_string();
    let watcher = Bg::start(
        &leader_args("cron", &server, &["--watch", "--count", &count]),
        &dir,
        "watch",
    );
    assert!(eventually(Duration::from_secs(20), || read(
        &watcher.stdout_path
    )
    .starts_with("none")));
    // mkdir is atomic: a second leader at once finds the directory there.
    let script = "mkdir \"$D/leading\" || echo OVERLAP >> \"$D/log\"; \
                  echo \"$REDLATCH_TERM $REDLATCH_LEADER_VALUE\" >> \"$D/log\"; \
                  sleep 0.3; rmdir \"$D/leading\"";
    let runners: Vec<Bg> = (0..N)
        .map(|i| {
            Bg::start(
                &elect_args("cron", &format!("p{i}"), &server, &[], script),
                &dir,
                &format!("p{i}"),
            )
        })
        .collect();
    for r in runners {
        let ended = r.wait(Duration::from_secs(60));
        assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    }
    let log = read(&dir.file("log"));
    assert!(!log.contains("OVERLAP"), "two leaders at once:\n{log}");
    let terms: Vec<(u64, String)> = log
        .lines()
        .map(|l| {
            let (t, v) = l.split_once(' ').unwrap();
            (t.parse().unwrap(), v.to_string())
        })
        .collect();
    assert_eq!(terms.len(), N, "{log}");
    assert!(
        terms.windows(2).all(|w| w[0].0 < w[1].0),
        "terms must grow: {terms:?}"
    );
    // Each leader resigned when its CMD ended.
    assert_eq!(current(&server, "cron"), None);
    let seen = watcher.wait(Duration::from_secs(20));
    assert_eq!(seen.code(), Some(0), "{}", seen.stderr);
    let expected: Vec<String> = std::iter::once("none".to_string())
        .chain(
            terms
                .iter()
                .flat_map(|(t, v)| [format!("elected {t} {v}"), format!("resigned {t} {v}")]),
        )
        .collect();
    assert_eq!(seen.stdout.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn a_leader_killed_with_sigkill_is_replaced_within_its_lease() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let lease = Duration::from_secs(2);
    let idle = format!(
        "echo $REDLATCH_TERM > \"$D/term-a\"; {}",
        until_file("stop", 60)
    );
    let a = Bg::start(
        &elect_args("svc", "a", &server, &["--watchdog", "2s"], &idle),
        &dir,
        "a",
    );
    assert!(eventually(Duration::from_secs(20), || !read(
        &dir.file("term-a")
    )
    .is_empty()));
    let term_a: u64 = read(&dir.file("term-a")).trim().parse().unwrap();
    assert_eq!(current(&server, "svc"), Some((term_a, "a".into())));
    // `status` on the election's name shows its leader.
    let status = output(
        &{
            let mut s = vec!["status".to_string(), "svc".into()];
            s.extend(redis_args(&[&server]));
            s
        },
        0,
    );
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains(&format!("election \"svc\": leader \"a\", term {term_a}")),
        "{text}"
    );
    let mut json_args = vec!["status".to_string(), "svc".into(), "--json".into()];
    json_args.extend(redis_args(&[&server]));
    let json = output(&json_args, 0);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["election"]["term"], term_a);
    assert_eq!(doc["election"]["value"], "a");

    let b = Bg::start(
        &elect_args(
            "svc",
            "b",
            &server,
            &["--watchdog", "2s"],
            "echo $REDLATCH_TERM > \"$D/term-b\"",
        ),
        &dir,
        "b",
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(read(&dir.file("term-b")).is_empty(), "b led while a did");
    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    assert!(
        eventually(lease + Duration::from_secs(10), || !read(
            &dir.file("term-b")
        )
        .is_empty()),
        "b not elected after a was killed"
    );
    // The lease bounds the hand-over; the rest is this machine's scheduling.
    let took = killed.elapsed();
    assert!(
        took < lease + Duration::from_secs(5),
        "hand-over took {took:?}"
    );
    let term_b: u64 = read(&dir.file("term-b")).trim().parse().unwrap();
    assert!(term_b > term_a, "{term_b} > {term_a}");
    let ended = b.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    drop(a);
}

#[test]
fn a_paused_leader_is_replaced_and_told_it_lost_when_it_resumes() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let idle = format!(
        "echo $$ > \"$D/pid-a\"; echo $REDLATCH_TERM > \"$D/term-a\"; {}",
        until_file("stop", 60)
    );
    let a = Bg::start(
        &elect_args(
            "paused",
            "a",
            &server,
            &["--watchdog", "1s", "--kill-grace", "1s"],
            &idle,
        ),
        &dir,
        "a",
    );
    assert!(eventually(Duration::from_secs(20), || !read(
        &dir.file("term-a")
    )
    .is_empty()));
    let term_a: u64 = read(&dir.file("term-a")).trim().parse().unwrap();
    // Pause the leader (redlatch: no renewals), as a long GC pause or a stopped VM would.
    a.signal(libc::SIGSTOP);
    let b_idle = format!(
        "echo $REDLATCH_TERM > \"$D/term-b\"; {}",
        until_file("stop-b", 60)
    );
    let b = Bg::start(&elect_args("paused", "b", &server, &[], &b_idle), &dir, "b");
    assert!(
        eventually(Duration::from_secs(20), || !read(&dir.file("term-b"))
            .is_empty()),
        "b not elected while a was paused"
    );
    let term_b: u64 = read(&dir.file("term-b")).trim().parse().unwrap();
    assert!(term_b > term_a);
    // A storage that keeps the greatest term it saw now refuses a's writes.
    a.signal(libc::SIGCONT);
    let ended = a.wait(Duration::from_secs(30));
    assert_eq!(ended.code(), Some(76), "{}", ended.stderr);
    assert!(ended.stderr.contains("lost"), "{}", ended.stderr);
    // a's resignation (at its end) did not touch b's record.
    assert_eq!(current(&server, "paused"), Some((term_b, "b".into())));
    std::fs::write(dir.file("stop-b"), "").unwrap();
    let ended = b.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    assert_eq!(current(&server, "paused"), None);
}

#[test]
fn not_elected_within_wait_exits_75_and_redlock_is_refused_with_78() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let a = Bg::start(
        &elect_args(
            "busy",
            "a",
            &server,
            &[],
            &format!("touch \"$D/a\"; {}", until_file("stop", 60)),
        ),
        &dir,
        "a",
    );
    assert!(eventually(Duration::from_secs(20), || dir
        .file("a")
        .exists()));
    let out = output(
        &elect_args("busy", "b", &server, &["--wait", "0s"], "true"),
        75,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not elected"));
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(a.wait(Duration::from_secs(20)).code(), Some(0));

    let servers = common::start_many(3);
    let mut args = vec!["elect".to_string(), "r".into()];
    args.extend(redis_args(&servers.iter().collect::<Vec<_>>()));
    args.extend(["--", "true"].map(String::from));
    let out = output(&args, 78);
    assert!(String::from_utf8_lossy(&out.stderr).contains("independent masters"));
}

#[test]
fn sigterm_to_elect_is_forwarded_to_cmd_and_the_leader_resigns_after_it_ends() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let script = format!(
        "trap 'echo forwarded > \"$D/marker\"; exit 0' TERM; touch \"$D/started\"; {}",
        until_file("stop", 60)
    );
    let bg = Bg::start(&elect_args("sig", "a", &server, &[], &script), &dir, "a");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    bg.signal(libc::SIGTERM);
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    assert_eq!(read(&dir.file("marker")).trim(), "forwarded");
    assert_eq!(current(&server, "sig"), None, "not resigned");
}
