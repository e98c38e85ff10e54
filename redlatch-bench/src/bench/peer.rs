//! The reference peer of W1 and W2: rslock's protocol (`SET key value NX PX lease` to
//! acquire, a compare-and-delete script to release) sent with bare redis-rs over one
//! multiplexed connection to the first master, in the same run and on the same
//! runtime as redlatch's workloads. Both report the server's CPU and the client's CPU
//! per acquire+release pair, so the ratio and where the time goes are plain
//! (issue 25).

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Script;
use serde_json::json;

use super::server::{counters, deltas, Counters, Probe};
pub use super::stats::process_cpu;
use super::stats::{Samples, Tally};
use super::{Ctx, Report};

const W1_PAIRS: usize = 3_000;
const W2_TASKS: usize = 64;
const LEASE_MS: u64 = 10_000;
const RELEASE: &str = include_str!("../../../lua/bench_rslock_release.lua");

/// One rslock pair on `name`: acquire with a fresh value, release with it.
async fn pair(
    conn: &mut MultiplexedConnection,
    release: &Script,
    name: &str,
) -> Result<(), String> {
    let value = uuid::Uuid::new_v4().to_string();
    let set: Option<String> = redis::cmd("SET")
        .arg(name)
        .arg(&value)
        .arg("NX")
        .arg("PX")
        .arg(LEASE_MS)
        .query_async(conn)
        .await
        .map_err(|e| e.to_string())?;
    if set.is_none() {
        return Err(format!("{name}: rslock reference found its own name taken"));
    }
    let deleted: i64 = release
        .key(name)
        .arg(&value)
        .invoke_async(conn)
        .await
        .map_err(|e| e.to_string())?;
    if deleted != 1 {
        return Err(format!("{name}: rslock reference release deleted nothing"));
    }
    Ok(())
}

async fn connect(ctx: &Ctx) -> Result<MultiplexedConnection, String> {
    ctx.require_masters("the rslock reference")?;
    let url = &ctx.urls[0];
    let probe = Probe::open(url.as_str()).await;
    Ok(probe.map_err(|e| format!("{url}: {e}"))?.conn())
}

/// W1 the rslock way: one task, 3,000 pairs.
pub async fn w1(ctx: &Ctx) -> Result<Report, String> {
    let mut run = W1Run::warm(ctx).await?;
    run.block(W1_PAIRS).await?;
    Ok(run.report(ctx))
}

/// rslock's W1 run in blocks ([`Tally`]): one connection, warmed up by 200 pairs.
pub struct W1Run {
    conn: MultiplexedConnection,
    release: Script,
    name: String,
    tally: Tally,
}

impl W1Run {
    pub async fn warm(ctx: &Ctx) -> Result<Self, String> {
        let mut conn = connect(ctx).await?;
        let release = Script::new(RELEASE);
        let name = ctx.key("w1-rslock");
        for _ in 0..200 {
            pair(&mut conn, &release, &name).await?;
        }
        Ok(W1Run {
            conn,
            release,
            name,
            tally: Tally::default(),
        })
    }

    /// `pairs` timed pairs.
    pub async fn block(&mut self, pairs: usize) -> Result<(), String> {
        let mark = self.tally.begin();
        for _ in 0..pairs {
            let t = Instant::now();
            pair(&mut self.conn, &self.release, &self.name).await?;
            self.tally.samples.push(t.elapsed());
        }
        self.tally.end(mark);
        Ok(())
    }

    pub fn report(mut self, ctx: &Ctx) -> Report {
        let (n, took) = (self.tally.samples.len() as u64, self.tally.took);
        let mut r = ctx.report("W1", n, took, &mut self.tally.samples);
        r.insert("lib".into(), json!("rslock-protocol"));
        r.insert(
            "client_cpu_us_per_pair".into(),
            json!(self.tally.cpu_us_per_pair()),
        );
        r
    }
}

/// W2 the rslock way: 64 tasks on distinct names over one multiplexed connection.
pub async fn w2(ctx: &Ctx) -> Result<Report, String> {
    w2_for(ctx, ctx.duration).await
}

/// rslock's W2 for `duration` (the peers run interleaves slices).
pub async fn w2_for(ctx: &Ctx, duration: Duration) -> Result<Report, String> {
    let conn = connect(ctx).await?;
    let release = Script::new(RELEASE);
    let mut probes = ctx.probes().await.map_err(|e| e.to_string())?;
    probes.truncate(1);
    let before = counters(&mut probes).await;
    let cpu = process_cpu();
    let started = Instant::now();
    let until = started + duration;
    let tasks: Vec<_> = (0..W2_TASKS)
        .map(|i| {
            let (mut conn, release) = (conn.clone(), release.clone());
            let name = ctx.key(&format!("w2-rslock:{i}"));
            tokio::spawn(async move {
                let mut samples = Samples::with_capacity(1 << 14);
                while Instant::now() < until {
                    let t = Instant::now();
                    pair(&mut conn, &release, &name).await?;
                    samples.push(t.elapsed());
                }
                Ok::<_, String>(samples)
            })
        })
        .collect();
    let mut r = finish(
        ctx,
        "rslock-protocol",
        tasks,
        started,
        cpu,
        &before,
        &mut probes,
    )
    .await?;
    r.insert("tasks".into(), json!(W2_TASKS));
    Ok(r)
}

/// Joins a W2-shaped run's tasks and reports it as `lib`, with the server's CPU (the
/// first master's, from `before`) and this process's CPU per acquire+release pair.
pub async fn finish(
    ctx: &Ctx,
    lib: &str,
    tasks: Vec<tokio::task::JoinHandle<Result<Samples, String>>>,
    started: Instant,
    cpu: Duration,
    before: &[Counters],
    probes: &mut [Probe],
) -> Result<Report, String> {
    let mut all = Samples::default();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    let took = started.elapsed();
    let client_cpu = process_cpu() - cpu;
    let used = deltas(before, &counters(probes).await);
    let ops = all.len() as u64;
    let pairs = ops.max(1) as f64;
    let mut r = ctx.report("W2", ops, took, &mut all);
    r.insert("lib".into(), json!(lib));
    let server_cpu = used.iter().map(|c| c.cpu_us).sum::<u64>() as f64 / pairs;
    r.insert("server_cpu_us_per_pair".into(), json!(server_cpu));
    let client_cpu = client_cpu.as_secs_f64() * 1e6 / pairs;
    r.insert("client_cpu_us_per_pair".into(), json!(client_cpu));
    Ok(r)
}
