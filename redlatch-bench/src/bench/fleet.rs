//! W7: a fleet of P separate processes, each its own `Client` with one task, looping
//! lock → tiny critical section → unlock on ONE name on the first master.
//!
//! The parent starts P copies of this binary (`--w7-child NAME`), waits until
//! every one is connected ("ready"), then sends them all the same end time (the start
//! barrier). Each child stamps its acquisitions with CLOCK_MONOTONIC, which every
//! process on the machine shares, so the parent can merge them into one timeline:
//! handoffs between different processes, acquire waits, and violations (two holds
//! whose stamped intervals overlap: the stamps lie inside the real holds, so an overlap
//! is a real one). Acquire tries come from the master's own `INFO commandstats`: every
//! script call of the run is an acquire try or a release.

use std::process::Stdio;
use std::time::Duration;

use nix::time::{clock_gettime, ClockId};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::server::{self, Probe};
use super::stats::Samples;
use super::{Ctx, Report};
use redlatch_cli::conn::{self, RedisArgs};
use redlatch_cli::exit::{self, Failure};

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the machine.
fn mono_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// One acquisition of one process, in CLOCK_MONOTONIC nanoseconds.
struct Record {
    proc: usize,
    /// `lock()` called.
    called: u64,
    /// `lock()` returned.
    acquired: u64,
    /// About to call `unlock()`.
    released: u64,
    /// The acquire's tries, from a child that counts them itself.
    tries: Option<u64>,
}

/// A started child: its stdin (the barrier) and its stdout (ready, records, done).
struct Member {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
}

/// W7 with `procs` processes of this binary (redlatch).
pub async fn run(ctx: &Ctx, procs: usize) -> Result<Report, String> {
    let name = ctx.key(&format!("w7-{procs}"));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let url = &ctx.urls[0];
    let launch = |name: &str| child_command(&exe, &["--w7-child", name, "--redis", url]);
    run_with(ctx, procs, &name, launch).await
}

/// `program ARGS...` as a W7 child: its stdin and stdout piped, killed if dropped.
pub fn child_command(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// W7 with `procs` processes started by `launch(NAME)`, each speaking the child's line
/// protocol ([`child`]): Redisson's JVMs (`redisson.rs`) as well as this binary.
pub async fn run_with(
    ctx: &Ctx,
    procs: usize,
    name: &str,
    launch: impl Fn(&str) -> Command,
) -> Result<Report, String> {
    let mut members = Vec::with_capacity(procs);
    for _ in 0..procs {
        let mut child = launch(name)
            .spawn()
            .map_err(|e| format!("starting a W7 child: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped");
        members.push(Member {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
        });
    }
    for m in &mut members {
        expect_line(m, "ready").await?;
    }
    let mut probes = ctx.dep.probes().await.map_err(|e| e.to_string())?;
    let scripts_before = script_calls(&mut probes).await;
    // The barrier: everyone gets the same start and end.
    let start = mono_ns();
    let end = start + ctx.duration.as_nanos() as u64;
    for m in &mut members {
        let stdin = m.stdin.as_mut().expect("open");
        let go = format!("go {end}\n");
        stdin
            .write_all(go.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
    }
    let mut records = Vec::new();
    for (proc, m) in members.iter_mut().enumerate() {
        loop {
            let line = next_line(m).await?;
            if line == "done" {
                break;
            }
            let v: Vec<u64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            let tries = v.get(3).copied();
            if let [called, acquired, released, ..] = v[..] {
                records.push(Record {
                    proc,
                    called,
                    acquired,
                    released,
                    tries,
                });
            }
        }
    }
    // Every child has released its last hold and is idle: count before they go.
    let scripts = script_calls(&mut probes).await - scripts_before;
    for mut m in members {
        drop(m.stdin.take());
        let _ = tokio::time::timeout(Duration::from_secs(10), m.child.wait()).await;
    }
    Ok(summarise(ctx, procs, records, start, end, scripts))
}

/// Script calls so far (EVALSHA and EVAL) on the servers that run lock scripts.
pub(super) async fn script_calls(probes: &mut [Probe]) -> u64 {
    server::counters(probes)
        .await
        .iter()
        .map(|c| c.scripts)
        .sum()
}

async fn next_line(m: &mut Member) -> Result<String, String> {
    match tokio::time::timeout(Duration::from_secs(120), m.lines.next_line()).await {
        Ok(Ok(Some(line))) => Ok(line),
        Ok(Ok(None)) => Err("a W7 child ended early".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("a W7 child stopped answering".into()),
    }
}

async fn expect_line(m: &mut Member, want: &str) -> Result<(), String> {
    let line = next_line(m).await?;
    if line == want {
        Ok(())
    } else {
        Err(format!("a W7 child said {line:?}, expected {want:?}"))
    }
}

fn summarise(
    ctx: &Ctx,
    procs: usize,
    mut records: Vec<Record>,
    start: u64,
    end: u64,
    scripts: u64,
) -> Report {
    let mut violations = 0u64;
    records.sort_by_key(|r| r.acquired);
    let (mut all, mut cross, mut waits) =
        (Samples::default(), Samples::default(), Samples::default());
    let ns = |d: u64| Duration::from_nanos(d);
    for pair in records.windows(2) {
        // The stamps lie inside the real holds: an overlap is a real double hold.
        if pair[1].acquired < pair[0].released {
            violations += 1;
        }
        let handoff = ns(pair[1].acquired.saturating_sub(pair[0].released));
        all.push(handoff);
        if pair[1].proc != pair[0].proc {
            cross.push(handoff);
        }
    }
    for r in &records {
        waits.push(ns(r.acquired - r.called));
    }
    let mut per_proc = vec![0u64; procs];
    for r in &records {
        per_proc[r.proc] += 1;
    }
    let min = per_proc.iter().min().copied().unwrap_or(0);
    let max = per_proc.iter().max().copied().unwrap_or(0);
    let last = records.iter().map(|r| r.released).max().unwrap_or(end);
    let took = ns(last.max(end) - start);
    let acquisitions = records.len() as u64;
    // Every script call is an acquire try or one of the `acquisitions` releases, unless
    // the children counted their tries themselves.
    let counted: Option<u64> = records.iter().map(|r| r.tries).sum();
    let tries = match (acquisitions, counted) {
        (0, _) => 0.0,
        (n, Some(t)) => t as f64 / n as f64,
        (n, None) => scripts.saturating_sub(n) as f64 / n as f64,
    };
    let secs = took.as_secs_f64();
    let mut r = ctx.report("W7", acquisitions, took, &mut all);
    let extra = json!({
        "masters": 1,
        "procs": procs,
        "cross_handoffs": cross.len(),
        "cross_handoffs_per_s": cross.len() as f64 / secs,
        "cross_p50_us": cross.percentile(50.0),
        "cross_p99_us": cross.percentile(99.0),
        "tries_per_acquisition": tries,
        "acquire_wait_p50_us": waits.percentile(50.0),
        "acquire_wait_p99_us": waits.percentile(99.0),
        "per_proc_min": min,
        "per_proc_max": max,
        "violations": violations,
    });
    r.extend(extra.as_object().expect("object").clone());
    r
}

/// What a W7 child takes and gives back: one acquisition (the number of tries it
/// took, when the library counts them itself) and its release.
pub trait FleetLock {
    /// Blocks until acquired; `Some(tries)` for a peer whose tries the master's script
    /// counters cannot see (its acquire is not a script).
    async fn acquire(&mut self) -> Result<Option<u64>, Failure>;
    async fn release(&mut self) -> Result<(), Failure>;
}

/// redlatch's lock as a W7 child takes it.
struct Redlatch {
    lock: redlatch::Lock,
    guard: Option<redlatch::LockGuard>,
}

impl FleetLock for Redlatch {
    async fn acquire(&mut self) -> Result<Option<u64>, Failure> {
        let guard = (self.lock.lock().await).map_err(|e| exit::from_error("W7 lock", &e))?;
        self.guard = Some(guard);
        Ok(None)
    }

    async fn release(&mut self) -> Result<(), Failure> {
        if let Some(guard) = self.guard.take() {
            guard
                .unlock()
                .await
                .map_err(|e| exit::from_error("W7 unlock", &e))?;
        }
        Ok(())
    }
}

/// A W7 child of redlatch (`--w7-child NAME`).
pub async fn child(redis: &RedisArgs, name: &str) -> Result<(), Failure> {
    let client = conn::connect(redis.config()?).await?;
    let lock = client.lock(name);
    child_with(Redlatch { lock, guard: None }).await
}

/// A W7 child: says "ready", waits for "go END", loops lock → `yield_now` → unlock
/// until END, prints one "called acquired released [tries]" line per acquisition, then
/// "done", and exits when its stdin closes.
pub async fn child_with(mut lock: impl FleetLock) -> Result<(), Failure> {
    let internal = |e: std::io::Error| Failure::new(exit::INTERNAL, e.to_string());
    let mut out = tokio::io::stdout();
    out.write_all(b"ready\n").await.map_err(internal)?;
    out.flush().await.map_err(internal)?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let go = lines
        .next_line()
        .await
        .map_err(internal)?
        .unwrap_or_default();
    let end: u64 = go
        .strip_prefix("go ")
        .and_then(|e| e.parse().ok())
        .ok_or_else(|| Failure::usage(format!("W7 child: expected \"go END\", got {go:?}")))?;
    let mut records = Vec::new();
    while mono_ns() < end {
        let called = mono_ns();
        let tries = lock.acquire().await?;
        let acquired = mono_ns();
        tokio::task::yield_now().await;
        let released = mono_ns();
        lock.release().await?;
        records.push((called, acquired, released, tries));
    }
    let mut text = String::with_capacity(records.len() * 64);
    for (c, a, r, t) in records {
        match t {
            Some(t) => text.push_str(&format!("{c} {a} {r} {t}\n")),
            None => text.push_str(&format!("{c} {a} {r}\n")),
        }
    }
    text.push_str("done\n");
    out.write_all(text.as_bytes()).await.map_err(internal)?;
    out.flush().await.map_err(internal)?;
    // Stay connected (and idle) until the parent has read the master's counters.
    while let Ok(Some(_)) = lines.next_line().await {}
    Ok(())
}
