//! `redlatch run` on a Redis Cluster while the primary serving the lock is killed:
//! several runner loops on one name, each critical section logging its start and end
//! to a shared file; overlaps are counted after the failover. With replica sync on
//! (the default), there must be none.

use redlatch_testkit as common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::RedisCluster;

const RUNNERS: usize = 4;
/// The runners stop once sections ran after the failover (however long the machine
/// took to get there), at the latest after this long or `MAX_ROUNDS` runs each.
const RUN_FOR: Duration = Duration::from_secs(60);
const MAX_ROUNDS: usize = 300;
/// Sections after the failover before the runners are stopped.
const AFTER_FAILOVER: usize = 4;

/// Overlapping critical sections in a log of `start ID` / `end ID` lines.
fn overlaps(log: &str) -> usize {
    let mut open: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut overlaps = 0;
    for line in log.lines() {
        if let Some(id) = line.strip_prefix("start ") {
            if !open.is_empty() {
                overlaps += 1;
            }
            open.insert(id);
        } else if let Some(id) = line.strip_prefix("end ") {
            // A section's end may be logged twice (its TERM trap right after its last
            // line): a set, not a count.
            open.remove(id);
        }
    }
    overlaps
}

/// Runner `i`: `redlatch run NAME` through `seed` in a loop until `stop` (or
/// [`RUN_FOR`] after `started`, or [`MAX_ROUNDS`]), each section logged to `log`;
/// returns its runs that succeeded and failed.
fn runner(
    i: usize,
    name: &str,
    seed: &str,
    log: &Path,
    stop: &AtomicBool,
    started: Instant,
) -> (usize, usize) {
    let (mut ok, mut failed) = (0, 0);
    for round in 0..MAX_ROUNDS {
        if stop.load(Ordering::Relaxed) || started.elapsed() > RUN_FOR {
            break;
        }
        // A SIGTERM from redlatch (the lock lost, or at risk with less
        // than --kill-grace left, as an early renewal failing during the
        // failover makes it) ends the section at once, logged.
        let script = format!(
            "trap 'echo end {i}.{round} >> {l}; exit 143' TERM; \
             echo start {i}.{round} >> {l}; sleep 0.02 & wait; \
             echo end {i}.{round} >> {l}",
            l = log.display()
        );
        let status = Command::new(env!("CARGO_BIN_EXE_redlatch"))
            .args(["run", name, "--wait", "20s", "--redis", seed])
            .args(["--", "sh", "-c", &script])
            .env_remove("REDLATCH_REDIS")
            // A release sent to the dying primary is lost with it: the
            // lock then waits out its lease on the promoted replica.
            .env("REDLATCH_WATCHDOG_TIMEOUT", "3s")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if status.success() {
            ok += 1;
        } else {
            failed += 1;
        }
    }
    (ok, failed)
}

#[test]
fn no_two_runners_overlap_while_the_primary_fails_over() {
    let mut cluster = RedisCluster::start(3, 1);
    let primary = cluster.primaries()[0];
    let name = cluster.key_on(primary, "cli-failover-");
    let seed = cluster.node(cluster.primaries()[1]).url();
    let dir = std::env::temp_dir().join(format!("redlatch-cli-failover-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sections.log");
    std::fs::File::create(&log).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let runners: Vec<_> = (0..RUNNERS)
        .map(|i| {
            let (name, seed, log, stop) = (name.clone(), seed.clone(), log.clone(), stop.clone());
            std::thread::spawn(move || runner(i, &name, &seed, &log, &stop, started))
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    cluster.kill(primary);
    let promoted = cluster.wait_for_failover(primary);
    let failover_done = started.elapsed();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"failover\n")
        .unwrap();
    // Work goes on after the failover: wait for it (bounded by the runners' own limit)
    // instead of stopping at a fixed time that a slow failover may come close to.
    let after_failover = || {
        let text = std::fs::read_to_string(&log).unwrap();
        let after = text.split("failover\n").nth(1).unwrap_or("");
        after.lines().filter(|l| l.starts_with("start ")).count() >= AFTER_FAILOVER
    };
    common::eventually_every(RUN_FOR, Duration::from_millis(100), || {
        after_failover() || started.elapsed() > RUN_FOR
    });
    stop.store(true, Ordering::Relaxed);
    let results: Vec<(usize, usize)> = runners.into_iter().map(|r| r.join().unwrap()).collect();
    let text = std::fs::read_to_string(&log).unwrap();
    let sections = text.lines().filter(|l| l.starts_with("start ")).count();
    let n = overlaps(&text);
    let _ = writeln!(
        std::io::stderr(),
        "runs ok/failed per runner {results:?}; {sections} critical sections, {n} overlaps; \
         failover to node {promoted} done at {failover_done:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(n, 0, "critical sections overlapped:\n{text}");
    let ok: usize = results.iter().map(|r| r.0).sum();
    assert!(ok >= RUNNERS, "too few runs succeeded: {results:?}");
    // Work went on after the failover, not only before it.
    let after = text.split("failover\n").nth(1).unwrap_or("");
    assert!(
        after.lines().any(|l| l.starts_with("start ")),
        "no critical section after the failover: {results:?}"
    );
}

#[test]
fn the_overlap_counter_sees_an_overlap() {
    assert_eq!(overlaps("start a\nend a\nstart b\nend b\n"), 0);
    assert_eq!(overlaps("start a\nstart b\nend a\nend b\n"), 1);
}

/// Slack over a bound for scheduling on a loaded machine (2 cores, other builds) and
/// the process's start.
const SLACK: Duration = Duration::from_millis(1500);

/// Every node answers `CLUSTERDOWN` (a primary and its replica killed): `redlatch run
/// --wait 3s` exits 69 within the wait plus one master timeout (1 s, the CLI's for a
/// cluster) plus slack, and says CLUSTERDOWN and the node, not "timed out".
#[test]
fn a_cluster_that_is_down_exits_69_saying_clusterdown_within_the_wait() {
    let mut cluster = RedisCluster::start(3, 1);
    let primaries = cluster.primaries();
    let (gone, up) = (primaries[0], primaries[1]);
    let name = cluster.key_on(up, "cli-down-");
    let seed = cluster.node(up).url();
    cluster.take_down_shard(gone);
    let wait = Duration::from_secs(3);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_redlatch"))
        .args(["run", &name, "--wait", "3s", "--redis", &seed, "--", "true"])
        .env_remove("REDLATCH_REDIS")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("redlatch run --wait 3s took {took:?}: {stderr}");
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(
        took <= wait + Duration::from_secs(1) + SLACK,
        "took {took:?}: {stderr}"
    );
    assert!(stderr.contains("CLUSTERDOWN"), "{stderr}");
    assert!(stderr.contains("127.0.0.1:"), "{stderr}");
}
