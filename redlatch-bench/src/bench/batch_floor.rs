//! The floor under W2: redlatch's own wire with none of the library — `batch.lua` (the
//! group-commit script, after the classic prelude and `pass_on.lua`) sent with bare
//! redis-rs over one multiplexed connection to the first master: a few callers, each
//! acquiring 32 distinct names in one call and releasing them in the next, as the
//! library's batcher does at best. Its server CPU per pair is what the wire itself
//! costs Redis; W2's minus this is what the library's batching misses, this minus
//! rslock's is what the Redisson hash layout and wake-one bookkeeping cost (issue 25).

use std::time::Instant;

use redis::Script;
use serde_json::json;

use super::peer::{finish, process_cpu};
use super::server::{counters, Probe};
use super::stats::Samples;
use super::{Ctx, Report, BATCH_LUA};

/// Operations per call: the batcher's largest batch (transport/batch.rs MAX_BATCH).
const PER_CALL: usize = 32;
/// Callers with a call in flight: the batcher's flights per master (MAX_FLIGHTS).
const CALLERS: usize = 4;
const LEASE_MS: u64 = 10_000;

/// The floor of W2's wire: pairs per second and the server's CPU per pair.
pub async fn w2(ctx: &Ctx) -> Result<Report, String> {
    w2_for(ctx, ctx.duration).await
}

/// The floor for `duration` (the peers run interleaves slices).
pub async fn w2_for(ctx: &Ctx, duration: std::time::Duration) -> Result<Report, String> {
    ctx.require_masters("the batch floor")?;
    let url = &ctx.urls[0];
    let probe = Probe::open(url.as_str()).await;
    let conn = probe.map_err(|e| format!("{url}: {e}"))?.conn();
    let script = Script::new(BATCH_LUA);
    let mut probes = ctx.probes().await.map_err(|e| e.to_string())?;
    probes.truncate(1);
    let before = counters(&mut probes).await;
    let cpu = process_cpu();
    let started = Instant::now();
    let until = started + duration;
    let callers: Vec<_> = (0..CALLERS)
        .map(|c| {
            let (mut conn, script) = (conn.clone(), script.clone());
            let names: Vec<String> = (0..PER_CALL)
                .map(|i| ctx.key(&format!("w2-floor:{c}:{i}")))
                .collect();
            let holder = format!("{}:1", uuid::Uuid::new_v4());
            tokio::spawn(async move {
                let mut samples = Samples::with_capacity(1 << 12);
                while Instant::now() < until {
                    let t = Instant::now();
                    for op in ["a", "r"] {
                        // batch.lua's layout: the codes, the lease they share, then
                        // per operation its holder and its ticket ("") or channel.
                        let mut call = script.prepare_invoke();
                        call.arg(op.repeat(names.len())).arg(LEASE_MS);
                        for name in &names {
                            call.key(name)
                                .key(redlatch::wire::waiter_registry(name))
                                .arg(&holder);
                            match op {
                                "a" => call.arg(""),
                                _ => call.arg(redlatch::wire::lock_channel(name)),
                            };
                        }
                        let answers: String = call
                            .invoke_async(&mut conn)
                            .await
                            .map_err(|e| e.to_string())?;
                        // Two integers per operation; every status 1 (granted, released).
                        if answers.split(' ').step_by(2).any(|status| status != "1") {
                            return Err(format!("batch floor: unexpected answers {answers:?}"));
                        }
                    }
                    let took = t.elapsed();
                    for _ in 0..PER_CALL {
                        samples.push(took);
                    }
                }
                Ok::<_, String>(samples)
            })
        })
        .collect();
    let mut r = finish(
        ctx,
        "batch-floor",
        callers,
        started,
        cpu,
        &before,
        &mut probes,
    )
    .await?;
    r.insert("ops_per_script_call".into(), json!(PER_CALL));
    Ok(r)
}
