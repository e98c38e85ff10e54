//! W5 (100,000 locks under the watchdog) and W6 (10,000 waiters on 1,000 names).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;

use super::server::{counters, deltas};
use super::stats::{rss_bytes, Samples};
use super::{Ctx, Report};

const W5_LOCKS: usize = 100_000;
const W5_WATCHDOG: Duration = Duration::from_secs(3);
const W6_NAMES: usize = 1_000;
const W6_WAITERS: usize = 10_000;
const PARALLEL: usize = 256;
/// Locks per renewal call before the split by node: the watchdog's chunk
/// (`CHUNK` in src/engine/holding/watchdog.rs), for the per-slot estimate.
pub const WATCHDOG_CHUNK: usize = 5000;

/// W5: hold 100,000 locks under a 3 s watchdog for three renewal periods. Renewal
/// calls are counted on the servers (EVALSHA + EVAL per primary while only the
/// watchdog runs). On a cluster it also reports how many calls a full round takes
/// grouped per node (the chunks with a lock on the primary: the library's way) and
/// would take grouped per slot (the distinct slots of each primary in each chunk).
pub async fn w5(ctx: &Ctx) -> redlatch::Result<Report> {
    let client = ctx
        .connect_with(|c| c.watchdog_timeout(W5_WATCHDOG))
        .await?;
    let mut probes = ctx.probes().await?;
    let prefix = ctx.key("w5");
    let names: Vec<String> = (0..W5_LOCKS).map(|i| format!("{prefix}:{i}")).collect();
    let per_slot = (ctx.key_slots(&names).await?).map(|slots| per_slot_round(ctx, &slots));
    let rss_before = rss_bytes();
    let started = Instant::now();
    let batches = join_all((0..PARALLEL).map(|t| {
        let (client, names) = (client.clone(), &names);
        async move {
            let mut guards = Vec::with_capacity(W5_LOCKS / PARALLEL + 1);
            for i in (t..W5_LOCKS).step_by(PARALLEL) {
                guards.push(client.lock(names[i].clone()).lock().await?);
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
    let before = counters(&mut probes).await;
    let held_from = Instant::now();
    tokio::time::sleep(W5_WATCHDOG).await; // three renewal periods of timeout/3
    let held_for = held_from.elapsed().as_secs_f64();
    let used = deltas(&before, &counters(&mut probes).await);
    let survived = guards.iter().filter(|g| !g.lost().is_cancelled()).count();
    let mut keys = Vec::new();
    for p in probes.iter_mut() {
        keys.push(p.dbsize().await.unwrap_or(0));
    }
    let renew_per_s: Vec<f64> = used.iter().map(|c| c.scripts as f64 / held_for).collect();
    let rounds = held_for / (W5_WATCHDOG / 3).as_secs_f64();
    let per_round: Vec<f64> = used.iter().map(|c| c.scripts as f64 / rounds).collect();
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
        "renew_calls_per_round_per_master": per_round,
        "rejected_renew_calls_per_round_per_master": used.iter().map(|c| c.rejected as f64 / rounds).collect::<Vec<_>>(),
        "renew_server_cpu_ms_per_s_per_master": used.iter().map(|c| c.cpu_us as f64 / 1000.0 / held_for).collect::<Vec<_>>(),
        "rss_bytes_per_lock": per_lock,
        "survived": survived,
        "keys_per_master": keys,
    });
    r.extend(extra.as_object().expect("object").clone());
    if let Some((node, slot)) = per_slot {
        r.insert("per_node_calls_per_full_round".into(), json!(node));
        r.insert("per_slot_calls_per_full_round".into(), json!(slot));
    }
    Ok(r)
}

/// Calls per primary of one full round over `slots` (the locks' slots, in acquisition
/// order) cut into watchdog chunks: grouped per node (one call per chunk that has a
/// lock on the primary) and per slot (one call per distinct slot of the chunk there).
pub fn per_slot_round(ctx: &Ctx, slots: &[u16]) -> (Vec<u64>, Vec<u64>) {
    let n = ctx.dep.primaries.len();
    let (mut node, mut slot) = (vec![0u64; n], vec![0u64; n]);
    for chunk in slots.chunks(WATCHDOG_CHUNK) {
        let mut distinct = chunk.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let mut touched = vec![false; n];
        for &s in &distinct {
            let p = ctx.dep.owner(s).unwrap_or(0);
            slot[p] += 1;
            touched[p] = true;
        }
        for (p, t) in touched.into_iter().enumerate() {
            node[p] += u64::from(t);
        }
    }
    (node, slot)
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
    let mut probes = ctx.probes().await?;
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
    // Every name has its one local contender subscribed: to the lock's channel and, on a
    // single master, to the client's wake channel and the waiters' marker too.
    let per_name = if ctx.urls.len() == 1 { 3 } else { 1 };
    let settle = Instant::now();
    while waiters.subscriptions() < per_name * W6_NAMES
        && settle.elapsed() < Duration::from_secs(30)
    {
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
