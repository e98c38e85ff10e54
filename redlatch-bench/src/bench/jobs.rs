//! J1: a fleet of P separate processes, each its own `Client`, all firing the same
//! scheduled job (`Client::job(..).once_per(period)`) at every period boundary for
//! `--duration`: each tick must run exactly once (0 doubles, 0 misses), and with
//! `--job-kill` one process is SIGKILLed in the middle of a run and the next run must
//! report the ticks missed since (the killed one first). The skip decision's latency
//! (a run that was skipped or found its tick done: call to answer) and the script calls
//! per decision (from the servers' `INFO commandstats`: one decision is one round trip
//! when it is one EVALSHA) are measured too.
//!
//! Line protocol of a child (`--job-child NAME --job-period MS`): it says `ready`, reads
//! `go START_MS END_MS` (wall-clock ms), then at each boundary prints `run TICK MISSED`
//! when its run begins (before its work) and `d OUTCOME TICK MICROS MISSED` after each
//! decision, then `done`.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

use super::fleet::{child_command, script_calls};
use super::stats::Samples;
use super::{Ctx, Report};
use redlatch::JobOutcome;
use redlatch_cli::conn::{self, RedisArgs};
use redlatch_cli::exit::{self, Failure};

/// How long a run works (well inside the period).
const WORK: Duration = Duration::from_millis(20);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn ms_of(t: Option<SystemTime>) -> u64 {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A J1 child: one client, one decision per boundary (see the module's protocol).
pub async fn child(redis: &RedisArgs, name: &str, period: Duration) -> Result<(), Failure> {
    let client = conn::connect(redis.config()?).await?;
    say("ready");
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let go = lines.next_line().await.ok().flatten().unwrap_or_default();
    let times: Vec<u64> = go
        .split(' ')
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    let [start, end] = times[..] else {
        return Err(Failure::usage(format!(
            "J1 child: expected \"go START END\", got {go:?}"
        )));
    };
    let p = period.as_millis() as u64;
    // ShedLock's lockAtMostFor: three periods (a dead run blocks two more ticks).
    let job = (client.job(name)).at_most(period * 3).once_per(period);
    let mut boundary = start;
    while boundary < end {
        let wait = boundary.saturating_sub(now_ms()) + 1;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let called = Instant::now();
        let began = Arc::new(AtomicU64::new(0));
        let began_at = began.clone();
        let outcome = job
            .run_with(|tick, missed| async move {
                began_at.store(called.elapsed().as_micros() as u64, Ordering::Relaxed);
                say(&format!("run {} {}", ms_of(tick), missed.count));
                tokio::time::sleep(WORK).await;
                missed.count
            })
            .await
            .map_err(|e| exit::from_error("J1 child", &e))?;
        let took = called.elapsed().as_micros() as u64;
        let line = match outcome {
            JobOutcome::Ran(run) => {
                let missed = run.missed.count;
                format!(
                    "d ran {} {} {missed}",
                    ms_of(run.tick),
                    began.load(Ordering::Relaxed)
                )
            }
            JobOutcome::AlreadyDone { tick } => {
                format!("d already_done {} {took} 0", ms_of(Some(tick)))
            }
            other => format!("d {} 0 {took} 0", other.label()),
        };
        say(&line);
        boundary = (now_ms() / p + 1) * p;
    }
    say("done");
    client.close(Duration::from_secs(5)).await;
    Ok(())
}

/// What the parent heard.
#[derive(Default)]
struct Heard {
    /// Runs begun per tick (a killed run included).
    runs: BTreeMap<u64, u32>,
    /// (tick, missed count) of each completed run.
    completed: Vec<(u64, u64)>,
    skip: Samples,
    decisions: u64,
    killed: Option<u64>,
}

/// J1 over `procs` processes of this binary; `kill`: SIGKILL one mid-run a third of
/// the way through.
pub async fn run(ctx: &Ctx, procs: usize, period: Duration, kill: bool) -> Result<Report, String> {
    let name = ctx.key("j1");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let period_ms = format!("{}ms", period.as_millis());
    let url = &ctx.urls[0];
    let mut children: Vec<Child> = Vec::new();
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, String)>();
    for i in 0..procs {
        let args = [
            "--job-child",
            name.as_str(),
            "--job-period",
            period_ms.as_str(),
            "--redis",
            url,
        ];
        let mut child = child_command(&exe, &args)
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send((i, line));
            }
            let _ = tx.send((i, "eof".into()));
        });
        children.push(child);
    }
    let mut ready = 0;
    while ready < procs {
        match rx.recv().await {
            Some((_, l)) if l == "ready" => ready += 1,
            Some((_, l)) if l == "eof" => return Err("a J1 child ended before it was ready".into()),
            Some(_) => {}
            None => return Err("the J1 children are gone".into()),
        }
    }
    let mut probes = ctx.dep.probes().await.map_err(|e| e.to_string())?;
    let scripts_before = script_calls(&mut probes).await;
    let p = period.as_millis() as u64;
    let start = (now_ms() / p + 3) * p;
    let end = start + ctx.duration.as_millis() as u64 / p * p;
    for c in &mut children {
        let go = format!("go {start} {end}\n");
        let stdin = c.stdin.as_mut().expect("piped");
        stdin
            .write_all(go.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
    }
    let kill_from = kill.then_some(start + (end - start) / 3);
    let heard = listen(&mut rx, &mut children, procs, kill_from).await;
    let scripts = script_calls(&mut probes).await - scripts_before;
    for mut c in children {
        let _ = tokio::time::timeout(Duration::from_secs(10), c.wait()).await;
    }
    Ok(summarise(ctx, procs, period, (start, end), heard, scripts))
}

/// Reads every child's lines until each is done (or gone), killing one mid-run at
/// `kill_from` or after.
async fn listen(
    rx: &mut mpsc::UnboundedReceiver<(usize, String)>,
    children: &mut [Child],
    procs: usize,
    kill_from: Option<u64>,
) -> Heard {
    let mut heard = Heard::default();
    let mut ended = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while ended < procs {
        let Ok(Some((i, line))) = tokio::time::timeout_at(deadline, rx.recv()).await else {
            break;
        };
        let w: Vec<&str> = line.split(' ').collect();
        match w[..] {
            ["run", tick, _] => {
                let tick: u64 = tick.parse().unwrap_or(0);
                *heard.runs.entry(tick).or_default() += 1;
                if kill_from.is_some_and(|k| tick >= k) && heard.killed.is_none() {
                    let _ = children[i].start_kill();
                    heard.killed = Some(tick);
                }
            }
            ["d", outcome, tick, micros, missed] => {
                heard.decisions += 1;
                let micros = Duration::from_micros(micros.parse().unwrap_or(0));
                match outcome {
                    "ran" => heard
                        .completed
                        .push((tick.parse().unwrap_or(0), missed.parse().unwrap_or(0))),
                    _ => heard.skip.push(micros),
                }
            }
            ["done"] | ["eof"] => ended += 1,
            _ => {}
        }
    }
    heard
}

fn summarise(
    ctx: &Ctx,
    procs: usize,
    period: Duration,
    (start, end): (u64, u64),
    mut heard: Heard,
    scripts: u64,
) -> Report {
    let p = period.as_millis() as u64;
    let ticks = (end - start) / p;
    let per_tick = |t: u64| heard.runs.get(&t).copied().unwrap_or(0);
    let doubles = (0..ticks).filter(|k| per_tick(start + k * p) > 1).count();
    let misses = (0..ticks).filter(|k| per_tick(start + k * p) == 0).count();
    let reported: u64 = heard.completed.iter().map(|(_, m)| m).sum();
    let after_kill = heard
        .killed
        .and_then(|k| heard.completed.iter().find(|(t, _)| *t > k));
    // Every decision is one acquire script; every completed run one release more.
    let per_decision = (scripts.saturating_sub(heard.completed.len() as u64)) as f64
        / heard.decisions.max(1) as f64;
    let v = json!({
        "lib": "redlatch",
        "workload": "J1",
        "topology": ctx.dep.kind,
        "masters": ctx.dep.primaries.len(),
        "procs": procs,
        "period_ms": p,
        "ticks": ticks,
        "runs": heard.runs.values().map(|n| u64::from(*n)).sum::<u64>(),
        "doubles": doubles,
        "misses": misses,
        "missed_reported": reported,
        "killed_tick": heard.killed,
        "missed_after_kill": after_kill.map(|(_, m)| m),
        "decisions": heard.decisions,
        "scripts_per_decision": per_decision,
        "skip_p50_us": heard.skip.percentile(50.0),
        "skip_p99_us": heard.skip.percentile(99.0),
    });
    v.as_object().expect("object").clone()
}
