//! W1 (uncontended latency) and W2 (throughput on distinct names).

use std::time::{Duration, Instant};

use serde_json::json;

use super::stats::Samples;
use super::{Ctx, Report};

const W1_PAIRS: usize = 3_000;
const W2_TASKS: usize = 64;
const LEASE: Duration = Duration::from_secs(10);

/// W1: one task, 3,000 acquire+release pairs with a 10 s lease.
pub async fn w1(ctx: &Ctx) -> redlatch::Result<Report> {
    let lock = ctx.client.lock(ctx.key("w1"));
    for _ in 0..200 {
        lock.lock_with_lease(LEASE).await?.unlock().await?;
    }
    let mut samples = Samples::with_capacity(W1_PAIRS);
    let started = Instant::now();
    for _ in 0..W1_PAIRS {
        let t = Instant::now();
        lock.lock_with_lease(LEASE).await?.unlock().await?;
        samples.push(t.elapsed());
    }
    Ok(ctx.report("W1", W1_PAIRS as u64, started.elapsed(), &mut samples))
}

/// W2: 64 tasks, each on its own name, acquire+release pairs for the run time.
pub async fn w2(ctx: &Ctx) -> redlatch::Result<Report> {
    let started = Instant::now();
    let ops = (0..W2_TASKS).map(|i| {
        let lock = ctx.client.lock(ctx.key(&format!("w2:{i}")));
        move || {
            let lock = lock.clone();
            async move { lock.lock_with_lease(LEASE).await?.unlock().await }
        }
    });
    let mut all = pairs(started + ctx.duration, ops.collect()).await?;
    let ops = all.len() as u64;
    let mut r = ctx.report("W2", ops, started.elapsed(), &mut all);
    r.insert("tasks".into(), json!(W2_TASKS));
    Ok(r)
}

/// One task per entry of `per_task`, each running its operation back to back until
/// `until`; the latency of every run.
pub async fn pairs<G, Fut>(until: Instant, per_task: Vec<G>) -> redlatch::Result<Samples>
where
    G: FnMut() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = redlatch::Result<()>> + Send,
{
    let tasks: Vec<_> = (per_task.into_iter())
        .map(|mut op| {
            tokio::spawn(async move {
                let mut samples = Samples::with_capacity(1 << 14);
                while Instant::now() < until {
                    let t = Instant::now();
                    op().await?;
                    samples.push(t.elapsed());
                }
                Ok::<_, redlatch::Error>(samples)
            })
        })
        .collect();
    let mut all = Samples::default();
    for t in tasks {
        all.extend(t.await.expect("bench task panicked")?);
    }
    Ok(all)
}
