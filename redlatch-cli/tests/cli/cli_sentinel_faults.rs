//! `redlatch run` under Sentinel through repeated failovers (issue 21 item 3): runners
//! loop on a few names, each critical section outlasting a renewal; four times
//! the replica is cut off (paused, its link killed on the primary) and, 0.4 s later,
//! the primary is killed with `kill -9`; Sentinel promotes the replica, the old
//! primary comes back as its replica. With replica sync on (the default: acquisitions
//! and renewals acknowledged by the replica), no two sections of one name overlap.

use redlatch_testkit as common;

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::sentinel::SentinelSet;

const NAMES: usize = 3;
const RUNNERS_PER_NAME: usize = 3;
const FAILOVERS: usize = 4;
/// Bounds of each runner's loop.
const MAX_ROUNDS: usize = 60;
const RUN_FOR: Duration = Duration::from_secs(120);

/// Sections that started while another section of the same log was open, sections
/// being `start ID` / `end ID` lines (a section ended by its SIGTERM trap ends too).
fn overlaps(log: &str) -> usize {
    let mut open: HashSet<&str> = HashSet::new();
    let mut overlaps = 0;
    for line in log.lines() {
        if let Some(id) = line.strip_prefix("start ") {
            if !open.is_empty() {
                overlaps += 1;
            }
            open.insert(id);
        } else if let Some(id) = line.strip_prefix("end ") {
            open.remove(id);
        }
    }
    overlaps
}

/// Appends `line` to `log`.
fn mark(log: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    writeln!(f, "{line}").unwrap();
}

/// One runner: `redlatch run NAME` in a loop until `stop`, each section 5 s (its
/// watchdog lease is 4 s, longer than a failover takes: renewed once or twice per
/// section, and a lock can outlive the failover), logged to `log`; a SIGTERM from
/// redlatch (the lock lost or at risk) ends the section at once.
fn runner(
    id: String,
    name: String,
    sentinels: Vec<String>,
    master: String,
    log: PathBuf,
    stop: Arc<AtomicBool>,
) -> (usize, usize) {
    let started = Instant::now();
    let (mut ok, mut failed) = (0, 0);
    for round in 0..MAX_ROUNDS {
        if stop.load(Ordering::Relaxed) || started.elapsed() > RUN_FOR {
            break;
        }
        let l = log.display();
        let script = format!(
            "trap 'echo end {id}.{round} >> {l}; exit 143' TERM; \
             echo start {id}.{round} >> {l}; sleep 5 & wait; echo end {id}.{round} >> {l}"
        );
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_redlatch"));
        cmd.args(["run", &name, "--wait", "30s", "--kill-grace", "300ms"])
            .args(["--sentinel", &master]);
        for url in &sentinels {
            cmd.args(["--redis", url]);
        }
        let out = cmd
            .args(["--", "sh", "-c", &script])
            .env_remove("REDLATCH_REDIS")
            .env("REDLATCH_WATCHDOG_TIMEOUT", "4s")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        if out.status.success() {
            ok += 1;
        } else {
            failed += 1;
            // Why, for the report (one line per failed run).
            let why = String::from_utf8_lossy(&out.stderr).replace('\n', " | ");
            mark(
                &log.with_extension("err"),
                &format!("{id}.{round} {}: {why}", out.status),
            );
            // Connecting fails while the sentinels still name the dead primary: a
            // pause, not a burst of failures using up the rounds.
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    (ok, failed)
}

/// [`FAILOVERS`] times: the replica cut off (frozen, its link killed on the primary),
/// the primary killed 0.4 s later, the switch marked in every log, and the old primary
/// back as the new one's replica.
fn fail_over_repeatedly(set: &mut SentinelSet, logs: &[PathBuf]) {
    for f in 0..FAILOVERS {
        let p = set.primary_index();
        let r = 1 - p;
        // The replica frozen and its link killed on the primary: what the primary
        // writes from now on (grants, renewals) never reaches it.
        set.server(r).pause();
        let _: i64 = set.server(p).cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
        std::thread::sleep(Duration::from_millis(400));
        let old = set.kill_primary();
        set.server(r).resume();
        let new = set.wait_for_switch(&old);
        for log in logs {
            mark(log, &format!("failover {f} to {new}"));
        }
        // The old primary comes back empty; Sentinel makes it the new one's replica.
        set.server_mut(p).restart();
        set.wait_until_ready();
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn no_two_runners_of_a_name_overlap_through_repeated_failovers() {
    let mut set = SentinelSet::start("cli-failovers");
    let dir = std::env::temp_dir().join(format!("redlatch-cli-sentinel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let logs: Vec<PathBuf> = (0..NAMES)
        .map(|n| dir.join(format!("name{n}.log")))
        .collect();
    for log in &logs {
        std::fs::File::create(log).unwrap();
        std::fs::File::create(log.with_extension("err")).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let runners: Vec<_> = (0..NAMES * RUNNERS_PER_NAME)
        .map(|i| {
            let n = i % NAMES;
            let (sentinels, master) = (set.sentinel_urls(), set.master_name().to_string());
            let (log, stop) = (logs[n].clone(), stop.clone());
            std::thread::spawn(move || {
                runner(
                    format!("r{i}"),
                    format!("job:{n}"),
                    sentinels,
                    master,
                    log,
                    stop,
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    fail_over_repeatedly(&mut set, &logs);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let results: Vec<(usize, usize)> = runners.into_iter().map(|r| r.join().unwrap()).collect();
    let mut report = String::new();
    let mut total = 0;
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        let sections = text.lines().filter(|l| l.starts_with("start ")).count();
        let n = overlaps(&text);
        total += n;
        report.push_str(&format!(
            "{}: {sections} sections, {n} overlaps\n",
            log.display()
        ));
        if n > 0 {
            report.push_str(&text);
        }
        let errors = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
        report.push_str(&format!("failed runs:\n{errors}"));
        let last = text.rsplit("failover ").next().unwrap_or("");
        assert!(
            last.lines().any(|l| l.starts_with("start ")),
            "no section after the last failover in {}: {results:?}",
            log.display()
        );
    }
    let _ = writeln!(std::io::stderr(), "runs ok/failed {results:?}\n{report}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(total, 0, "critical sections overlapped:\n{report}");
    let ok: usize = results.iter().map(|r| r.0).sum();
    assert!(
        ok >= NAMES * RUNNERS_PER_NAME,
        "too few runs succeeded: {results:?}"
    );
}

#[test]
fn the_overlap_counter_sees_an_overlap_and_trapped_ends() {
    assert_eq!(overlaps("start a\nend a\nstart b\nend b\n"), 0);
    assert_eq!(overlaps("start a\nstart b\nend a\nend b\n"), 1);
    assert_eq!(overlaps("start a\nend a\nend a\nstart b\nend b\n"), 0);
}
