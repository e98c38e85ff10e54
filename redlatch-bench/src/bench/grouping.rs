//! Per-node vs per-slot grouping of batched calls on a Redis Cluster (issue 12: group
//! commit and renewals must not send a cross-slot script; group per node with the
//! `allow-cross-slot-keys` script flag, or per slot, "measure which is cheaper").
//!
//! On Redis 7.0 the flag does not let a call declare KEYS of several slots: the node
//! refuses it with CROSSSLOT before the script runs; it only lets the script touch
//! keys of other slots (served by the node) that it was not given as KEYS. So
//! `renew.lua` names its locks in ARGV (one declared key routes the call) and the
//! library renews per node; group commit does the same on a Redis 7 cluster with
//! `batch_node.lua` (its locks named in ARGV, each operation's commands within its own
//! slot), sent here as the library sends it.
//!
//! This workload sends the same key sets each way with bare redis-rs (the project's
//! own scripts, by EVALSHA; all calls of one primary in a chunk pipelined, the best
//! case for the many-call ways) and reads the cost from the primaries themselves:
//! calls (`INFO commandstats`), server CPU (`INFO cpu`, user + system: all of the
//! servers' work, not only the scripts) and wall time. Two shapes:
//! - **renew**: W5's, 100,000 held locks renewed in one round, cut into the watchdog's
//!   chunks of 5,000 locks, with `renew.lua` as the library sends it; per node (the
//!   library's way) one call per chunk and primary, per slot one call per distinct slot
//!   of the chunk, per key one call per lock.
//! - **batch**: W2's group commit, batches of B acquires then B releases on B names in B
//!   distinct slots of each primary (W2's names do lie in distinct slots, so per slot
//!   is per key); per node one `batch_node.lua` call per batch, per slot B `acquire.lua` /
//!   `release.lua` calls.
//!
//! The ways run [`ROUNDS`] times, interleaved; each figure is the median.

use std::time::Instant;

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::Value;
use serde_json::json;

use super::scale::WATCHDOG_CHUNK;
use super::server::{counters, deltas, Counters, Probe};
use super::stats::Samples;
use super::{Ctx, Report};

const RENEW_LOCKS: usize = 100_000;
const LEASE_MS: u64 = 60_000;
const ROUNDS: usize = 3;
const BATCH_SIZES: [usize; 2] = [8, 32];
/// Pairs per primary in one batch measurement.
const BATCH_PAIRS: usize = 4_096;
const HOLDER: &str = "bench-grouping:1";

/// The sources, and what the library puts before them on a Redis 7 cluster: the
/// cross-slot flags (renewals) and the sharded dialect's prelude.
const ACQUIRE: &str = include_str!("../../../lua/acquire.lua");
/// release.lua and batch_node.lua free plain locks: the library puts lua/pass_on.lua
/// before them (their waiter registries are KEYS too, [`redlatch::wire::waiter_registry`]).
const RELEASE: &str = concat!(
    include_str!("../../../lua/pass_on.lua"),
    include_str!("../../../lua/release.lua")
);
const RENEW: &str = include_str!("../../../lua/renew.lua");
const BATCH_NODE: &str = concat!(
    include_str!("../../../lua/cross_slot_write_flags.lua"),
    include_str!("../../../lua/dialect_sharded.lua"),
    include_str!("../../../lua/pass_on.lua"),
    include_str!("../../../lua/acquire_op.lua"),
    include_str!("../../../lua/batch_node.lua")
);
const CROSS_SLOT_FLAGS: &str = include_str!("../../../lua/cross_slot_flags.lua");
const SHARDED: &str = include_str!("../../../lua/dialect_sharded.lua");

/// The cluster dialect of a script, as the library builds it.
fn sharded(source: &str) -> String {
    format!("{SHARDED}{source}")
}

/// SCRIPT LOAD on every primary; returns the SHA1.
async fn load(conns: &mut [MultiplexedConnection], source: &str) -> Result<String, String> {
    let mut sha = String::new();
    for c in conns.iter_mut() {
        sha = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query_async(c)
            .await
            .map_err(|e| format!("SCRIPT LOAD: {e}"))?;
    }
    Ok(sha)
}

/// How a chunk's calls are grouped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// One call per primary (the library's way on a Redis 7 cluster).
    Node,
    /// One call per slot (batch: the library's way before Redis 7).
    Slot,
    /// One call per lock (no grouping).
    Key,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Node => "node",
            Way::Slot => "slot",
            Way::Key => "key",
        }
    }
}

struct Shas {
    renew: String,
    batch_node: String,
    acquire: String,
    release: String,
}

/// One measurement: its wall time and what the primaries did meanwhile.
struct Measured {
    ms: f64,
    used: Counters,
}

fn sum(per_primary: &[Counters]) -> Counters {
    per_primary
        .iter()
        .fold(Counters::default(), |a, c| Counters {
            scripts: a.scripts + c.scripts,
            script_usec: a.script_usec + c.script_usec,
            rejected: a.rejected + c.rejected,
            waits: a.waits + c.waits,
            cpu_us: a.cpu_us + c.cpu_us,
        })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub async fn run(ctx: &Ctx) -> Result<Report, String> {
    if ctx.dep.slots.is_none() {
        return Err(format!(
            "grouping compares per-node and per-slot calls on a Redis Cluster, not on {}",
            ctx.dep.kind
        ));
    }
    let mut probes = ctx.dep.probes().await.map_err(|e| e.to_string())?;
    let mut conns: Vec<MultiplexedConnection> = probes.iter().map(Probe::conn).collect();
    let shas = Shas {
        renew: load(&mut conns, &format!("{CROSS_SLOT_FLAGS}{}", sharded(RENEW))).await?,
        batch_node: load(&mut conns, BATCH_NODE).await?,
        acquire: load(&mut conns, &sharded(ACQUIRE)).await?,
        release: load(&mut conns, &sharded(RELEASE)).await?,
    };
    let started = Instant::now();
    let mut r = Report::new();
    renew_shape(ctx, &conns, &shas, &mut probes, &mut r).await?;
    batch_shape(ctx, &conns, &shas, &mut probes, &mut r).await?;
    // The common fields last: `ops` is the renew shape's locks, `seconds` the whole run.
    let common = ctx.report(
        "grouping",
        RENEW_LOCKS as u64,
        started.elapsed(),
        &mut Samples::default(),
    );
    r.extend(common);
    r.insert("rounds".into(), json!(ROUNDS));
    r.insert("watchdog_chunk".into(), json!(WATCHDOG_CHUNK));
    r.insert("batch_pairs_per_primary".into(), json!(BATCH_PAIRS));
    r.insert("primaries".into(), json!(ctx.dep.labels));
    Ok(r)
}

/// The renewal shape: one round of renewals of RENEW_LOCKS locks grouped per node, per
/// slot or per key, ROUNDS times each; medians into `r`.
async fn renew_shape(
    ctx: &Ctx,
    conns: &[MultiplexedConnection],
    shas: &Shas,
    probes: &mut [Probe],
    r: &mut Report,
) -> Result<(), String> {
    let names: Vec<String> = (0..RENEW_LOCKS)
        .map(|i| ctx.key(&format!("grp:r:{i}")))
        .collect();
    let slots = slots_of(ctx, &names).await?;
    let owners: Vec<usize> = slots
        .iter()
        .map(|&s| ctx.dep.owner(s).unwrap_or(0))
        .collect();
    hold_all(conns, &names, &owners).await?;
    let ways = [Way::Node, Way::Slot, Way::Key];
    let mut measured: Vec<Vec<Measured>> = ways.iter().map(|_| Vec::new()).collect();
    for _ in 0..ROUNDS {
        for (way, m) in ways.iter().zip(measured.iter_mut()) {
            let work = renew_round(conns, shas, &names, &slots, &owners, *way);
            m.push(measure(probes, work).await?);
        }
    }
    for (way, m) in ways.iter().map(|w| w.name()).zip(&measured) {
        let get = |f: fn(&Measured) -> f64| median(m.iter().map(f).collect());
        r.insert(
            format!("renew_{way}_calls_per_round"),
            json!(get(|m| m.used.scripts as f64)),
        );
        r.insert(format!("renew_{way}_ms_per_round"), json!(get(|m| m.ms)));
        r.insert(
            format!("renew_{way}_server_cpu_ms_per_round"),
            json!(get(|m| m.used.cpu_us as f64 / 1000.0)),
        );
        r.insert(
            format!("renew_{way}_script_ms_per_round"),
            json!(get(|m| m.used.script_usec as f64 / 1000.0)),
        );
    }
    Ok(())
}

/// The group-commit shape: batches of each size in BATCH_SIZES grouped per node or per
/// slot, ROUNDS times each; medians into `r`.
async fn batch_shape(
    ctx: &Ctx,
    conns: &[MultiplexedConnection],
    shas: &Shas,
    probes: &mut [Probe],
    r: &mut Report,
) -> Result<(), String> {
    for b in BATCH_SIZES {
        let groups = distinct_slot_names(ctx, b).await?;
        let iters = BATCH_PAIRS / b;
        let (mut node, mut slot) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            node.push(measure(probes, batch_rounds(conns, shas, &groups, iters, Way::Node)).await?);
            slot.push(measure(probes, batch_rounds(conns, shas, &groups, iters, Way::Slot)).await?);
        }
        let pairs = (iters * b * conns.len()) as f64;
        for (way, m) in [("node", &node), ("slot", &slot)] {
            let get = |f: &dyn Fn(&Measured) -> f64| median(m.iter().map(f).collect());
            r.insert(
                format!("batch{b}_{way}_pairs_per_s"),
                json!(get(&|m| pairs / (m.ms / 1000.0))),
            );
            r.insert(
                format!("batch{b}_{way}_calls_per_pair"),
                json!(get(&|m| m.used.scripts as f64 / pairs)),
            );
            r.insert(
                format!("batch{b}_{way}_server_cpu_us_per_pair"),
                json!(get(&|m| m.used.cpu_us as f64 / pairs)),
            );
        }
    }
    Ok(())
}

/// The hash slot of each of `names` (the workload runs on clusters only).
async fn slots_of(ctx: &Ctx, names: &[String]) -> Result<Vec<u16>, String> {
    let slots = ctx.key_slots(names).await.map_err(|e| e.to_string())?;
    slots.ok_or_else(|| "not a cluster".to_string())
}

/// Runs `work`, returning its wall time and the primaries' counters around it.
async fn measure(
    probes: &mut [Probe],
    work: impl std::future::Future<Output = Result<(), String>>,
) -> Result<Measured, String> {
    let before = counters(probes).await;
    let t = Instant::now();
    work.await?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let used = sum(&deltas(&before, &counters(probes).await));
    Ok(Measured { ms, used })
}

/// Makes `HOLDER` hold every name (a lock hash with a long lease), as W5's locks are.
async fn hold_all(
    conns: &[MultiplexedConnection],
    names: &[String],
    owners: &[usize],
) -> Result<(), String> {
    for (p, conn) in conns.iter().enumerate() {
        let mine: Vec<&String> = names
            .iter()
            .zip(owners)
            .filter(|(_, &o)| o == p)
            .map(|(n, _)| n)
            .collect();
        for chunk in mine.chunks(5_000) {
            let mut pipe = redis::pipe();
            for n in chunk {
                pipe.cmd("HSET").arg(*n).arg(HOLDER).arg(1).ignore();
                pipe.cmd("PEXPIRE").arg(*n).arg(LEASE_MS).ignore();
            }
            let () = pipe
                .query_async(&mut conn.clone())
                .await
                .map_err(|e| format!("setup: {e}"))?;
        }
    }
    Ok(())
}

/// One full renewal round over `names`, chunk by chunk, grouped `way` (the calls of
/// one primary in a chunk pipelined). Every lock must come back renewed.
async fn renew_round(
    conns: &[MultiplexedConnection],
    shas: &Shas,
    names: &[String],
    slots: &[u16],
    owners: &[usize],
    way: Way,
) -> Result<(), String> {
    let idx: Vec<usize> = (0..names.len()).collect();
    for chunk in idx.chunks(WATCHDOG_CHUNK) {
        let calls = conns.iter().enumerate().map(|(p, conn)| {
            let mut mine: Vec<usize> = chunk.iter().copied().filter(|&i| owners[i] == p).collect();
            let mut pipe = redis::pipe();
            let groups: Vec<&[usize]> = match way {
                Way::Node => vec![&mine[..]],
                Way::Slot => {
                    mine.sort_by_key(|&i| slots[i]);
                    mine.chunk_by(|&a, &b| slots[a] == slots[b]).collect()
                }
                Way::Key => mine.chunks(1).collect(),
            };
            // renew.lua's own interface: the first name routes (KEYS[1]), the locks
            // are (name, holder) pairs in ARGV after the lease.
            for g in groups.iter().filter(|g| !g.is_empty()) {
                let cmd = pipe
                    .cmd("EVALSHA")
                    .arg(&shas.renew)
                    .arg(1)
                    .arg(&names[g[0]]);
                cmd.arg(LEASE_MS);
                for &i in g.iter() {
                    cmd.arg(&names[i]).arg(HOLDER);
                }
            }
            let expected = mine.len();
            let mut conn = conn.clone();
            async move {
                if expected == 0 {
                    return Ok(());
                }
                let replies: Vec<Vec<i64>> = pipe
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| format!("renew: {e}"))?;
                let renewed = replies.iter().flatten().filter(|&&x| x == 1).count();
                match renewed == expected {
                    true => Ok(()),
                    false => Err(format!("renew: {renewed} of {expected} locks renewed")),
                }
            }
        });
        for r in join_all(calls).await {
            r?;
        }
    }
    Ok(())
}

/// For each primary, `b` names it serves in `b` distinct slots.
async fn distinct_slot_names(ctx: &Ctx, b: usize) -> Result<Vec<Vec<String>>, String> {
    let n = ctx.dep.primaries.len();
    let pool: Vec<String> = (0..b * n * 4 + 64)
        .map(|i| ctx.key(&format!("grp:b{b}:{i}")))
        .collect();
    let slots = slots_of(ctx, &pool).await?;
    let mut groups: Vec<Vec<(String, u16)>> = vec![Vec::new(); n];
    for (name, &s) in pool.iter().zip(&slots) {
        let g = &mut groups[ctx.dep.owner(s).unwrap_or(0)];
        if g.len() < b && g.iter().all(|(_, t)| *t != s) {
            g.push((name.clone(), s));
        }
    }
    match groups.iter().all(|g| g.len() == b) {
        true => Ok(groups
            .into_iter()
            .map(|g| g.into_iter().map(|(n, _)| n).collect())
            .collect()),
        false => Err(format!(
            "could not find {b} names in distinct slots on every primary"
        )),
    }
}

/// `iters` batches of acquires then releases of each primary's names, all primaries at
/// once, grouped per node (one batch_node.lua call each) or per slot (one acquire.lua /
/// release.lua call per name, pipelined: the names lie in distinct slots). Every
/// acquire must be fresh and every release the last hold.
async fn batch_rounds(
    conns: &[MultiplexedConnection],
    shas: &Shas,
    groups: &[Vec<String>],
    iters: usize,
    way: Way,
) -> Result<(), String> {
    let per_slot = way != Way::Node;
    let work = conns.iter().zip(groups).map(|(conn, names)| {
        let mut conn = conn.clone();
        let channels: Vec<String> = names
            .iter()
            .map(|n| format!("redisson_lock__channel:{{{n}}}"))
            .collect();
        async move {
            for _ in 0..iters {
                for release in [false, true] {
                    match per_slot {
                        true => per_slot_batch(&mut conn, shas, names, &channels, release).await?,
                        false => per_node_batch(&mut conn, shas, names, &channels, release).await?,
                    }
                }
            }
            Ok::<_, String>(())
        }
    });
    for r in join_all(work).await {
        r?;
    }
    Ok(())
}

/// Acquires (or releases) each of `names` with its own acquire.lua (release.lua) call,
/// pipelined; every acquire must be fresh and every release the last hold.
async fn per_slot_batch(
    conn: &mut MultiplexedConnection,
    shas: &Shas,
    names: &[String],
    channels: &[String],
    release: bool,
) -> Result<(), String> {
    let mut pipe = redis::pipe();
    for (n, ch) in names.iter().zip(channels) {
        match release {
            false => pipe
                .cmd("EVALSHA")
                .arg(&shas.acquire)
                .arg(1)
                .arg(n)
                .arg(LEASE_MS)
                .arg(HOLDER),
            true => pipe
                .cmd("EVALSHA")
                .arg(&shas.release)
                .arg(2)
                .arg(n)
                .arg(redlatch::wire::waiter_registry(n))
                .arg(ch)
                .arg("0")
                .arg(LEASE_MS)
                .arg(HOLDER),
        };
    }
    let replies: Vec<Value> = pipe
        .query_async(conn)
        .await
        .map_err(|e| format!("per-slot batch: {e}"))?;
    let ok = replies.iter().all(|v| match (release, v) {
        // acquire.lua answers "<status> <value>"; 1 is a grant.
        (false, Value::BulkString(a)) => a.starts_with(b"1 "),
        (true, v) => *v == Value::Int(1),
        _ => false,
    });
    match ok {
        true => Ok(()),
        false => Err(format!("per-slot batch: unexpected replies {replies:?}")),
    }
}

/// Acquires (or releases) all of `names` in one batch_node.lua call.
async fn per_node_batch(
    conn: &mut MultiplexedConnection,
    shas: &Shas,
    names: &[String],
    channels: &[String],
    release: bool,
) -> Result<(), String> {
    let mut pipe = redis::pipe();
    let cmd = pipe
        .cmd("EVALSHA")
        .arg(&shas.batch_node)
        .arg(1)
        .arg(&names[0])
        // batch_node.lua's layout: the codes, the lease they share, then per operation
        // its holder, name, registry and channel (release) or ticket ("").
        .arg(if release { "r" } else { "a" }.repeat(names.len()))
        .arg(LEASE_MS);
    for (n, ch) in names.iter().zip(channels) {
        cmd.arg(HOLDER)
            .arg(n)
            .arg(redlatch::wire::waiter_registry(n))
            .arg(if release { ch.as_str() } else { "" });
    }
    // One string of integers, two per operation (batch_node.lua).
    let (reply,): (String,) = pipe
        .query_async(conn)
        .await
        .map_err(|e| format!("per-node batch: {e}"))?;
    let statuses: Vec<&str> = reply.split(' ').step_by(2).collect();
    if statuses.len() != names.len() || statuses.iter().any(|s| *s != "1") {
        return Err(format!("per-node batch: unexpected replies {reply:?}"));
    }
    Ok(())
}
