//! W5 (100,000 locks under the watchdog) and W6 (10,000 waiters on 1,000 names).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;

use super::server::Probe;
use super::stats::{rss_bytes, Samples};
use super::{Ctx, Report};

const W5_LOCKS: usize = 100_000;
const W5_WATCHDOG: Duration = Duration::from_secs(3);
const W6_NAMES: usize = 1_000;
const W6_WAITERS: usize = 10_000;
const PARALLEL: usize = 256;

async fn probes(ctx: &Ctx) -> redlatch::Result<Vec<Probe>> {
    let mut out = Vec::new();
    for url in &ctx.urls {
        out.push(
            Probe::open(url)
                .await
                .map_err(|source| redlatch::Error::Redis {
                    addr: url.clone(),
                    source,
                })?,
        );
    }
    Ok(out)
}

async fn calls(probes: &mut [Probe], cmd: &str) -> Vec<u64> {
    let mut v = Vec::new();
    for p in probes.iter_mut() {
        v.push(p.calls(cmd).await.unwrap_or(0));
    }
    v
}

/// W5: hold 100,000 locks under a 3 s watchdog for three renewal periods.
pub async fn w5(ctx: &Ctx) -> redlatch::Result<Report> {
    let client = ctx
        .connect_with(|c| c.watchdog_timeout(W5_WATCHDOG))
        .await?;
    let mut probes = probes(ctx).await?;
    let rss_before = rss_bytes();
    let started = Instant::now();
    let batches = join_all((0..PARALLEL).map(|t| {
        let client = client.clone();
        let prefix = ctx.key("w5");
        async move {
            let mut guards = Vec::with_capacity(W5_LOCKS / PARALLEL + 1);
            for i in (t..W5_LOCKS).step_by(PARALLEL) {
                guards.push(client.lock(format!("{prefix}:{i}")).lock().await?);
            }
            Ok::<_, redlatch::Error>(guards)
        }
    }))
    .await;
    let mut guards = Vec::with_capacity(W5_LOCKS);
    for b in batches {
        guards.extend(b?);
    }
    let acquire_seconds = started.elapsed();
    let rss_held = rss_bytes();
    let calls_before = calls(&mut probes, "evalsha").await;
    let held_from = Instant::now();
    tokio::time::sleep(W5_WATCHDOG).await; // three renewal periods of timeout/3
    let held_for = held_from.elapsed().as_secs_f64();
    let calls_after = calls(&mut probes, "evalsha").await;
    let survived = guards.iter().filter(|g| !g.lost().is_cancelled()).count();
    let mut keys = Vec::new();
    for p in probes.iter_mut() {
        keys.push(p.dbsize().await.unwrap_or(0));
    }
    let renew_per_s: Vec<f64> = calls_before
        .iter()
        .zip(&calls_after)
        .map(|(b, a)| (a - b) as f64 / held_for)
        .collect();
    let per_lock = rss_held.saturating_sub(rss_before) as f64 / W5_LOCKS as f64;
    release_all(guards).await;
    let mut r = ctx.report(
        "W5",
        W5_LOCKS as u64,
        acquire_seconds,
        &mut Samples::default(),
    );
    let extra = json!({
        "locks": W5_LOCKS,
        "watchdog_ms": W5_WATCHDOG.as_millis() as u64,
        "held_seconds": held_for,
        "renew_cmds_per_s_per_master": renew_per_s,
        "max_renew_cmds_per_s": renew_per_s.iter().cloned().fold(0.0, f64::max),
        "rss_bytes_per_lock": per_lock,
        "survived": survived,
        "keys_per_master": keys,
    });
    r.extend(extra.as_object().expect("object").clone());
    Ok(r)
}

async fn release_all(guards: Vec<redlatch::LockGuard>) {
    let mut it = guards.into_iter();
    loop {
        let chunk: Vec<_> = it.by_ref().take(PARALLEL * 4).collect();
        if chunk.is_empty() {
            break;
        }
        join_all(chunk.into_iter().map(|g| g.unlock())).await;
    }
}

/// W6: 10,000 tasks wait on 1,000 names held by another client, then all are freed.
pub async fn w6(ctx: &Ctx) -> redlatch::Result<Report> {
    let mut probes = probes(ctx).await?;
    let names: Vec<String> = (0..W6_NAMES).map(|i| ctx.key(&format!("w6:{i}"))).collect();
    let held = join_all(names.iter().map(|n| {
        let lock = ctx.client.lock(n.clone());
        async move { lock.lock_with_lease(Duration::from_secs(60)).await }
    }))
    .await;
    let held = held.into_iter().collect::<redlatch::Result<Vec<_>>>()?;
    let mut clients_before = Vec::new();
    for p in probes.iter_mut() {
        clients_before.push(p.connected_clients().await.unwrap_or(0));
    }
    let waiters = ctx.connect_with(|c| c).await?;
    let rss_before = rss_bytes();
    let done_at = Arc::new(parking_lot::Mutex::new(Vec::with_capacity(W6_WAITERS)));
    let tasks: Vec<_> = (0..W6_WAITERS)
        .map(|i| {
            let (lock, done_at) = (waiters.lock(names[i % W6_NAMES].clone()), done_at.clone());
            tokio::spawn(async move {
                lock.lock().await?.unlock().await?;
                done_at.lock().push(Instant::now());
                Ok::<_, redlatch::Error>(())
            })
        })
        .collect();
    // Every name has its one local contender subscribed.
    let settle = Instant::now();
    while waiters.subscriptions() < W6_NAMES && settle.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_waiting = rss_bytes();
    let mut connections = Vec::new();
    for (p, before) in probes.iter_mut().zip(&clients_before) {
        connections.push(
            p.connected_clients()
                .await
                .unwrap_or(0)
                .saturating_sub(*before),
        );
    }
    let freed = Instant::now();
    join_all(held.into_iter().map(|g| g.unlock())).await;
    for t in tasks {
        t.await.expect("bench task panicked")?;
    }
    let all_done = done_at
        .lock()
        .iter()
        .max()
        .map(|t| t.duration_since(freed))
        .unwrap_or_default();
    let mut r = ctx.report("W6", W6_WAITERS as u64, all_done, &mut Samples::default());
    let extra = json!({
        "names": W6_NAMES,
        "waiters": W6_WAITERS,
        "connections_per_master": connections,
        "pool_size": waiters.config().connections_per_master(),
        "rss_bytes_waiting": rss_waiting.saturating_sub(rss_before),
        "rss_bytes_per_waiter": rss_waiting.saturating_sub(rss_before) as f64 / W6_WAITERS as f64,
        "all_acquired_ms": all_done.as_secs_f64() * 1000.0,
    });
    r.extend(extra.as_object().expect("object").clone());
    Ok(r)
}
