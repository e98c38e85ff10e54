//! W3 (16 tasks contend for one name), W4 (the same with the fair lock) and SP (the same
//! with the spin lock: no pub/sub, waiters retry after Redisson's default back-off).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::Kind;
use serde_json::json;

use super::stats::Samples;
use super::{Ctx, Report};

const TASKS: usize = 16;

/// One acquisition: its place in the total order (the counter value), who, when.
struct Record {
    seq: u64,
    task: usize,
    called: Instant,
    acquired: Instant,
    released: Instant,
}

/// The workload's name for a lock kind: W3 (plain), W4 (fair), SP (spin).
fn label(kind: Kind) -> &'static str {
    match kind {
        Kind::Fair => "W4",
        Kind::Spin => "SP",
        _ => "W3",
    }
}

/// W3 (`Kind::Plain`), W4 (`Kind::Fair`) or SP (`Kind::Spin`).
pub async fn run(ctx: &Ctx, kind: Kind) -> redlatch::Result<Report> {
    let name = ctx.key(&label(kind).to_lowercase());
    let inside = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicU64::new(0));
    let counter = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + ctx.duration;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let lock = match kind {
                Kind::Fair => ctx.client.fair_lock(name.clone()),
                Kind::Spin => ctx.client.spin_lock(name.clone()),
                _ => ctx.client.lock(name.clone()),
            };
            let (inside, violations, counter) =
                (inside.clone(), violations.clone(), counter.clone());
            tokio::spawn(async move {
                let mut records = Vec::new();
                while Instant::now() < until {
                    let called = Instant::now();
                    let guard = lock.lock().await?;
                    let acquired = Instant::now();
                    if inside.swap(true, Ordering::SeqCst) {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    let seq = counter.fetch_add(1, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    inside.store(false, Ordering::SeqCst);
                    guard.unlock().await?;
                    let released = Instant::now();
                    records.push(Record {
                        seq,
                        task,
                        called,
                        acquired,
                        released,
                    });
                }
                Ok::<_, redlatch::Error>(records)
            })
        })
        .collect();
    let mut records = Vec::new();
    for t in tasks {
        records.extend(t.await.expect("bench task panicked")?);
    }
    let seconds = started.elapsed();
    records.sort_by_key(|r| r.seq);
    Ok(summarise(
        ctx,
        kind,
        &records,
        seconds,
        violations.load(Ordering::SeqCst),
    ))
}

fn summarise(
    ctx: &Ctx,
    kind: Kind,
    records: &[Record],
    seconds: Duration,
    violations: u64,
) -> Report {
    let (mut all, mut cross, mut waits) =
        (Samples::default(), Samples::default(), Samples::default());
    for pair in records.windows(2) {
        let handoff = pair[1].acquired.saturating_duration_since(pair[0].released);
        all.push(handoff);
        if pair[1].task != pair[0].task {
            cross.push(handoff);
        }
    }
    for r in records {
        waits.push(r.acquired - r.called);
    }
    let mut per_task = [0u64; TASKS];
    for r in records {
        per_task[r.task] += 1;
    }
    let min = per_task.iter().min().copied().unwrap_or(0);
    let max = per_task.iter().max().copied().unwrap_or(0);
    let secs = seconds.as_secs_f64();
    let mut r = ctx.report(label(kind), records.len() as u64, seconds, &mut all);
    let extra = json!({
        "tasks": TASKS,
        "cross_handoffs": cross.len(),
        "cross_handoffs_per_s": cross.len() as f64 / secs,
        "cross_p50_us": cross.percentile(50.0),
        "cross_p99_us": cross.percentile(99.0),
        "acquire_wait_p50_us": waits.percentile(50.0),
        "acquire_wait_p99_us": waits.percentile(99.0),
        "per_task_min": min,
        "per_task_max": max,
        "per_task_min_max_ratio": if max == 0 { 0.0 } else { min as f64 / max as f64 },
        "violations": violations,
    });
    r.extend(extra.as_object().expect("object").clone());
    r
}
