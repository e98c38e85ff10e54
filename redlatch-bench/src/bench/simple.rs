//! W1 (uncontended latency) and W2 (throughput on distinct names).

use std::time::{Duration, Instant};

use serde_json::json;

use super::peer::process_cpu;
use super::server::{counters, deltas};
use super::stats::{Samples, Tally};
use super::{Ctx, Report};

pub const W1_PAIRS: usize = 3_000;
const W2_TASKS: usize = 64;
const LEASE: Duration = Duration::from_secs(10);

/// W1: one task, 3,000 acquire+release pairs with a 10 s lease.
pub async fn w1(ctx: &Ctx) -> redlatch::Result<Report> {
    let mut run = W1Run::warm(ctx).await?;
    run.block(W1_PAIRS).await?;
    Ok(run.report(ctx))
}

/// W1 run in blocks ([`Tally`]): one lock, warmed up by 200 untimed pairs.
pub struct W1Run {
    lock: redlatch::Lock,
    tally: Tally,
}

impl W1Run {
    pub async fn warm(ctx: &Ctx) -> redlatch::Result<Self> {
        let lock = ctx.client.lock(ctx.key("w1"));
        for _ in 0..200 {
            lock.lock_with_lease(LEASE).await?.unlock().await?;
        }
        Ok(W1Run {
            lock,
            tally: Tally::default(),
        })
    }

    /// `pairs` timed pairs.
    pub async fn block(&mut self, pairs: usize) -> redlatch::Result<()> {
        let mark = self.tally.begin();
        for _ in 0..pairs {
            let t = Instant::now();
            self.lock.lock_with_lease(LEASE).await?.unlock().await?;
            self.tally.samples.push(t.elapsed());
        }
        self.tally.end(mark);
        Ok(())
    }

    pub fn report(mut self, ctx: &Ctx) -> Report {
        let (n, took) = (self.tally.samples.len() as u64, self.tally.took);
        let mut r = ctx.report("W1", n, took, &mut self.tally.samples);
        r.insert(
            "client_cpu_us_per_pair".into(),
            json!(self.tally.cpu_us_per_pair()),
        );
        r
    }
}

/// W2: 64 tasks, each on its own name, acquire+release pairs for the run time. The
/// servers' own counters give the Redis calls per pair (EVALSHA + EVAL, and WAIT)
/// summed over the primaries. On a cluster it also reports how many calls per-slot
/// grouping would need for the same names: a batch never holds two operations of one
/// name (each task waits for its call), so with the 64 names in 64 slots per-slot
/// grouping is one call per operation, two per pair (`per_slot_calls_per_pair`, a
/// lower bound when names share slots).
pub async fn w2(ctx: &Ctx) -> redlatch::Result<Report> {
    w2_for(ctx, ctx.duration).await
}

/// W2 for `duration` (the peers run interleaves slices of the libraries' W2).
pub async fn w2_for(ctx: &Ctx, duration: Duration) -> redlatch::Result<Report> {
    let names: Vec<String> = (0..W2_TASKS).map(|i| ctx.key(&format!("w2:{i}"))).collect();
    let slots = ctx.key_slots(&names).await?;
    let mut probes = ctx.probes().await?;
    let before = counters(&mut probes).await;
    let cpu = process_cpu();
    let started = Instant::now();
    let ops = names.iter().map(|name| {
        let lock = ctx.client.lock(name.clone());
        move || {
            let lock = lock.clone();
            async move { lock.lock_with_lease(LEASE).await?.unlock().await }
        }
    });
    let mut all = pairs(started + duration, ops.collect()).await?;
    let took = started.elapsed();
    let client_cpu = process_cpu() - cpu;
    let used = deltas(&before, &counters(&mut probes).await);
    let ops = all.len() as u64;
    let pairs = ops.max(1) as f64;
    let scripts: u64 = used.iter().map(|c| c.scripts).sum();
    let mut r = ctx.report("W2", ops, took, &mut all);
    let extra = json!({
        "tasks": W2_TASKS,
        "script_calls_per_pair": scripts as f64 / pairs,
        "rejected_script_calls_per_pair": used.iter().map(|c| c.rejected).sum::<u64>() as f64 / pairs,
        "wait_calls_per_pair": used.iter().map(|c| c.waits).sum::<u64>() as f64 / pairs,
        "script_calls_per_primary": used.iter().map(|c| c.scripts).collect::<Vec<_>>(),
        "server_cpu_us_per_pair": used.iter().map(|c| c.cpu_us).sum::<u64>() as f64 / pairs,
        "client_cpu_us_per_pair": client_cpu.as_secs_f64() * 1e6 / pairs,
        "ops_per_script_call": if scripts > 0 { 2.0 * ops as f64 / scripts as f64 } else { 0.0 },
    });
    r.extend(extra.as_object().expect("object").clone());
    if let Some(slots) = slots {
        let mut distinct = slots.clone();
        distinct.sort_unstable();
        distinct.dedup();
        r.insert("names_distinct_slots".into(), json!(distinct.len()));
        r.insert(
            "per_slot_calls_per_pair".into(),
            json!(2.0 * distinct.len() as f64 / W2_TASKS as f64),
        );
    }
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
