//! `--workload peers`: redlatch beside its peers in one run, in interleaved rounds.
//!
//! Each round runs W1 (redlatch, the rslock protocol, Redisson, and W1's wire floor:
//! redlatch's own acquire and release scripts sent by bare redis-rs), W2 (redlatch, the
//! rslock protocol, Redisson and W2's wire floor: batch.lua in perfect batches sent by
//! bare redis-rs), W3 (redlatch, Redisson) and W7 with P = 8 processes (redlatch,
//! python-redis-lock's wire from Rust, python-redis-lock itself when python3 imports it,
//! Redisson's JVMs), one line each tagged with its `round`. The order of the libraries
//! rotates from round to round, and the runs in this process of W1 and W2 are cut into
//! small interleaved pieces ([`interleaved`]), so the machine's drift weighs on all of
//! them alike. redlatch's lines carry the same round's ratios (`p50_vs_rslock`,
//! `ops_per_s_vs_redisson`, ...). Then one `summary` line per figure: each library's
//! median with min and max over the rounds, and the median, min and max of the
//! per-round ratios redlatch / peer (`vs_LIB`).

use serde_json::{json, Value};

use super::redisson::{self, Jvm};
use super::{batch_floor, contended, fleet, floor, peer, signal_peer, simple, Ctx, Report};

/// W7's process count beside Redisson (one JVM each).
pub const W7_PROCS: usize = 8;

/// Who runs a workload in a round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lib {
    Redlatch,
    Rslock,
    Redisson,
    Floor,
    /// python-redis-lock's wire (W7).
    Signal,
    /// python-redis-lock itself (W7), when python3 imports it.
    Python,
}

/// What the peers run takes beyond the context.
pub struct Opts {
    pub rounds: usize,
    /// `None`: no Redisson (`--no-redisson`).
    pub redisson: Option<u64>,
}

/// Every line of the run: the rounds' lines, then the summaries.
pub async fn run(ctx: &Ctx, opts: &Opts) -> Result<Vec<Report>, String> {
    let (cp, mut jvm) = match opts.redisson {
        Some(_) => {
            let cp = redisson::classpath()?;
            let jvm = Jvm::start(ctx, &cp).await?;
            (Some(cp), Some(jvm))
        }
        None => (None, None),
    };
    let python = signal_peer::python_available();
    let mut warmup = opts.redisson.unwrap_or(0);
    let mut lines = Vec::new();
    for round in 0..opts.rounds.max(1) {
        let plan: [(&str, &[Lib]); 4] = [
            (
                "W1",
                &[Lib::Redlatch, Lib::Rslock, Lib::Redisson, Lib::Floor],
            ),
            (
                "W2",
                &[Lib::Redlatch, Lib::Rslock, Lib::Redisson, Lib::Floor],
            ),
            ("W3", &[Lib::Redlatch, Lib::Redisson]),
            (
                "W7",
                &[Lib::Redlatch, Lib::Signal, Lib::Python, Lib::Redisson],
            ),
        ];
        for (workload, libs) in plan {
            let mut order: Vec<Lib> = libs
                .iter()
                .copied()
                .filter(|l| *l != Lib::Redisson || jvm.is_some())
                .filter(|l| *l != Lib::Python || python)
                .collect();
            let n = order.len();
            order.rotate_left(round % n);
            let mut got = Vec::new();
            let shared = interleaved(workload);
            for lib in order {
                if shared.contains(&lib) {
                    // The first of them runs them all, interleaved.
                    if !got.iter().any(|r: &Report| shared.iter().any(|l| l.is(r))) {
                        got.extend(interleave(ctx, workload, round).await?);
                    }
                    continue;
                }
                got.push(one(ctx, workload, lib, jvm.as_mut(), cp.as_deref(), warmup).await?);
                if lib == Lib::Redisson && workload == "W1" {
                    // The JIT is warm from here on; later rounds warm up briefly.
                    warmup = warmup.min(2_000);
                }
            }
            for r in &mut got {
                r.insert("round".into(), json!(round + 1));
            }
            add_ratios(&mut got);
            lines.extend(got);
        }
    }
    lines.extend(summaries(&lines));
    Ok(lines)
}

/// W1's timed pairs per block when interleaved: 30 blocks of each library a round.
const W1_BLOCK: usize = 100;

/// W2's slices per library a round when interleaved (each `--duration` / 6 long).
const W2_SLICES: u32 = 6;

/// The libraries whose runs of `workload` are interleaved in small pieces within a
/// round rather than run one after the other: redlatch and the peers in this process
/// (the rslock protocol, W2's wire floor). This VM's speed drifts by up to 2x within
/// seconds; a run of 0.3 s (W1) or 5 s (W2) after another's measured the drift as much
/// as the libraries. Redisson's JVM and the W3 and W7 runs are not split.
fn interleaved(workload: &str) -> &'static [Lib] {
    match workload {
        "W1" => &[Lib::Redlatch, Lib::Rslock, Lib::Floor],
        "W2" => &[Lib::Redlatch, Lib::Rslock, Lib::Floor],
        _ => &[],
    }
}

impl Lib {
    /// Whether `r` is this library's line.
    fn is(self, r: &Report) -> bool {
        let name = match self {
            Lib::Redlatch => "redlatch",
            Lib::Rslock => "rslock-protocol",
            Lib::Floor if lib_name(r) == floor::LIB => floor::LIB,
            Lib::Floor => "batch-floor",
            Lib::Redisson => "redisson",
            Lib::Signal => signal_peer::LIB,
            Lib::Python => signal_peer::PYTHON_LIB,
        };
        lib_name(r) == name
    }
}

/// The [`interleaved`] libraries' runs of `workload` in one round: W1 in blocks of
/// [`W1_BLOCK`] pairs, W2 in [`W2_SLICES`] slices, the order within each piece rotating,
/// so that every library meets the machine's drift alike. One line per library: W1's
/// from all its pairs' latencies; W2's pairs/s and CPU per pair over all its slices, its
/// p50 and p99 the slices' means weighted by their pairs.
async fn interleave(ctx: &Ctx, workload: &str, round: usize) -> Result<Vec<Report>, String> {
    let e = |e: redlatch::Error| e.to_string();
    if workload == "W1" {
        let mut ours = simple::W1Run::warm(ctx).await.map_err(e)?;
        let mut rslock = peer::W1Run::warm(ctx).await?;
        let mut bare = floor::W1Run::warm(ctx, &ctx.urls[..1]).await?;
        for b in 0..simple::W1_PAIRS / W1_BLOCK {
            for k in 0..3 {
                match (k + b + round) % 3 {
                    0 => ours.block(W1_BLOCK).await.map_err(e)?,
                    1 => rslock.block(W1_BLOCK).await?,
                    _ => bare.block(W1_BLOCK).await?,
                }
            }
        }
        return Ok(vec![ours.report(ctx), rslock.report(ctx), bare.report(ctx)]);
    }
    let slice = ctx.duration / W2_SLICES;
    let mut pieces: [Vec<Report>; 3] = Default::default();
    for s in 0..W2_SLICES as usize {
        for k in 0..3 {
            let lib = (k + s + round) % 3;
            let r = match lib {
                0 => simple::w2_for(ctx, slice).await.map_err(e)?,
                1 => peer::w2_for(ctx, slice).await?,
                _ => batch_floor::w2_for(ctx, slice).await?,
            };
            pieces[lib].push(r);
        }
    }
    Ok(pieces.into_iter().map(merge_slices).collect())
}

/// One line from a library's W2 slices: pairs and seconds summed, pairs/s over them,
/// every other figure the slices' mean weighted by their pairs (an array of counts,
/// such as script calls per primary, summed).
fn merge_slices(parts: Vec<Report>) -> Report {
    let total = |k: &str| parts.iter().filter_map(|r| r.get(k)?.as_f64()).sum::<f64>();
    let (ops, seconds) = (total("ops"), total("seconds"));
    let mut out = parts.first().cloned().unwrap_or_default();
    let keep = [
        "ops",
        "seconds",
        "ops_per_s",
        "masters",
        "replicas",
        "tasks",
    ];
    for (k, v) in out.iter_mut() {
        if keep.contains(&k.as_str()) {
            continue;
        }
        if v.is_f64() || v.is_u64() || v.is_i64() {
            let weighted: f64 = (parts.iter())
                .filter_map(|r| Some(r.get(k)?.as_f64()? * r.get("ops")?.as_f64()?))
                .sum();
            *v = json!(weighted / ops.max(1.0));
        } else if let Value::Array(xs) = v {
            let sums: Vec<f64> = (0..xs.len())
                .map(|i| {
                    (parts.iter())
                        .filter_map(|r| r.get(k)?.get(i)?.as_f64())
                        .sum()
                })
                .collect();
            *v = json!(sums);
        }
    }
    out.insert("ops".into(), json!(ops as u64));
    out.insert("seconds".into(), json!(seconds));
    let rate = if seconds > 0.0 { ops / seconds } else { 0.0 };
    out.insert("ops_per_s".into(), json!(rate));
    out.insert("slices".into(), json!(parts.len()));
    out
}

async fn one(
    ctx: &Ctx,
    workload: &str,
    lib: Lib,
    jvm: Option<&mut Jvm>,
    cp: Option<&str>,
    warmup: u64,
) -> Result<Report, String> {
    let e = |e: redlatch::Error| e.to_string();
    match (workload, lib) {
        ("W1", Lib::Redlatch) => simple::w1(ctx).await.map_err(e),
        ("W2", Lib::Redlatch) => simple::w2(ctx).await.map_err(e),
        ("W3", Lib::Redlatch) => contended::run(ctx, redlatch::Kind::Plain).await.map_err(e),
        ("W7", Lib::Redlatch) => fleet::run(ctx, W7_PROCS).await,
        ("W1", Lib::Rslock) => peer::w1(ctx).await,
        ("W2", Lib::Rslock) => peer::w2(ctx).await,
        ("W2", Lib::Floor) => batch_floor::w2(ctx).await,
        ("W7", Lib::Signal) => signal_peer::run(ctx, W7_PROCS).await,
        ("W7", Lib::Python) => signal_peer::run_python(ctx, W7_PROCS).await,
        (w, Lib::Redisson) => {
            let jvm = jvm.expect("the JVM runs when Redisson is measured");
            match w {
                "W1" => jvm.w1(ctx, warmup).await,
                "W2" => jvm.w2(ctx).await,
                "W3" => jvm.w3(ctx).await,
                _ => w7(ctx, cp.expect("built"), warmup).await,
            }
        }
        (w, _) => unreachable!("no {w} for this library"),
    }
}

/// W7 with P = 8 Redisson JVMs; each warms up on a name of its own before `ready`.
async fn w7(ctx: &Ctx, cp: &str, warmup: u64) -> Result<Report, String> {
    let addr = redisson::address(ctx)?;
    let child_warmup = (warmup / 4).clamp(500, 5_000).to_string();
    let name = ctx.key(&format!("w7-redisson-{W7_PROCS}"));
    let launch = |name: &str| redisson::command(cp, &["w7", &addr, name, &child_warmup]);
    let mut r = fleet::run_with(ctx, W7_PROCS, &name, launch).await?;
    r.insert("lib".into(), json!("redisson"));
    r.insert("redisson_version".into(), json!(redisson::VERSION));
    Ok(r)
}

fn lib_name(r: &Report) -> &str {
    r.get("lib").and_then(Value::as_str).unwrap_or("")
}

fn num(r: &Report, field: &str) -> Option<f64> {
    r.get(field).and_then(Value::as_f64).filter(|v| *v > 0.0)
}

/// The figures compared: workload, field.
const FIGURES: [(&str, &str); 10] = [
    ("W1", "p50_us"),
    ("W1", "p99_us"),
    ("W2", "ops_per_s"),
    ("W2", "server_cpu_us_per_pair"),
    ("W2", "client_cpu_us_per_pair"),
    ("W3", "cross_handoffs_per_s"),
    ("W3", "cross_p99_us"),
    ("W3", "acquire_wait_p99_us"),
    ("W7", "cross_handoffs_per_s"),
    ("W7", "cross_p99_us"),
];

/// redlatch's line of one workload and round gets `FIELD_vs_LIB` for each peer.
fn add_ratios(got: &mut [Report]) {
    let Some(ours) = got.iter().position(|r| lib_name(r) == "redlatch") else {
        return;
    };
    let workload = got[ours]["workload"].as_str().unwrap_or("").to_string();
    let mut extra = Vec::new();
    for peer in got.iter().filter(|r| lib_name(r) != "redlatch") {
        let short = short(lib_name(peer));
        for (_, field) in FIGURES.iter().filter(|(w, _)| *w == workload) {
            if let (Some(a), Some(b)) = (num(&got[ours], field), num(peer, field)) {
                extra.push((ratio_key(field, short), a / b));
            }
        }
    }
    for (k, v) in extra {
        got[ours].insert(k, json!(v));
    }
}

/// `p50_vs_rslock`, `ops_per_s_vs_redisson`, ...: redlatch's figure over the peer's.
fn ratio_key(field: &str, peer: &str) -> String {
    format!("{}_vs_{peer}", field.trim_end_matches("_us"))
}

/// `rslock` for the rslock protocol, `floor` for W2's wire floor.
fn short(lib: &str) -> &str {
    match lib {
        "rslock-protocol" => "rslock",
        "batch-floor" | floor::LIB => "floor",
        signal_peer::LIB => "signal",
        signal_peer::PYTHON_LIB => "python",
        other => other,
    }
}

/// The peers' short names, in the order lines and summaries show them.
const PEERS: [&str; 5] = ["rslock", "redisson", "floor", "signal", "python"];

/// Median, min and max (the median of an even count is the lower middle one).
fn spread(mut xs: Vec<f64>) -> Option<(f64, f64, f64)> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some((xs[(xs.len() - 1) / 2], xs[0], xs[xs.len() - 1]))
}

/// One `summary` line per figure over every round.
fn summaries(lines: &[Report]) -> Vec<Report> {
    let mut out = Vec::new();
    for (workload, field) in FIGURES {
        let of = |lib: &str| -> Vec<&Report> {
            (lines.iter())
                .filter(|r| r["workload"] == workload && lib_name(r) == lib)
                .collect()
        };
        let mut s = Report::new();
        s.insert("lib".into(), json!("summary"));
        s.insert("workload".into(), json!(workload));
        s.insert("figure".into(), json!(field));
        let ours = of("redlatch");
        s.insert("rounds".into(), json!(ours.len()));
        for lib in [
            "redlatch",
            "rslock-protocol",
            "redisson",
            "batch-floor",
            floor::LIB,
            signal_peer::LIB,
            signal_peer::PYTHON_LIB,
        ] {
            let vals = of(lib).iter().filter_map(|r| num(r, field)).collect();
            if let Some((med, min, max)) = spread(vals) {
                let short = short(lib);
                s.insert(short.into(), json!(med));
                s.insert(format!("{short}_min"), json!(min));
                s.insert(format!("{short}_max"), json!(max));
            }
        }
        for peer in PEERS {
            let key = ratio_key(field, peer);
            let vals = ours.iter().filter_map(|r| num(r, &key)).collect();
            if let Some((med, min, max)) = spread(vals) {
                s.insert(format!("vs_{peer}"), json!(med));
                s.insert(format!("vs_{peer}_min"), json!(min));
                s.insert(format!("vs_{peer}_max"), json!(max));
            }
        }
        if s.len() > 4 {
            out.push(s);
        }
    }
    out
}

/// A summary line as text: `W2 ops_per_s: redlatch 118846 (110000–120000) | ... |
/// vs rslock 1.02× (0.95–1.10) | ...`.
pub fn summary_text(s: &Report) -> String {
    let f = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let mut parts = Vec::new();
    for lib in ["redlatch"].into_iter().chain(PEERS) {
        if s.contains_key(lib) {
            let (med, min, max) = (f(lib), f(&format!("{lib}_min")), f(&format!("{lib}_max")));
            parts.push(format!("{lib} {med:.1} ({min:.1}–{max:.1})"));
        }
    }
    for peer in PEERS {
        let key = format!("vs_{peer}");
        if s.contains_key(&key) {
            let (med, min, max) = (f(&key), f(&format!("{key}_min")), f(&format!("{key}_max")));
            parts.push(format!("vs {peer} {med:.2}× ({min:.2}–{max:.2})"));
        }
    }
    let name = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    format!(
        "summary {} {} over {} rounds: {}",
        name("workload"),
        name("figure"),
        s.get("rounds").and_then(Value::as_u64).unwrap_or(0),
        parts.join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(ops: u64, seconds: f64, p50: u64, cpu: f64, calls: [u64; 2]) -> Report {
        let v = json!({
            "lib": "redlatch", "workload": "W2", "tasks": 64, "ops": ops,
            "seconds": seconds, "ops_per_s": ops as f64 / seconds, "p50_us": p50,
            "server_cpu_us_per_pair": cpu, "script_calls_per_primary": calls,
        });
        v.as_object().unwrap().clone()
    }

    #[test]
    fn slices_merge_into_totals_and_pair_weighted_means() {
        let m = merge_slices(vec![
            slice(300, 1.0, 100, 10.0, [5, 1]),
            slice(100, 1.0, 200, 20.0, [3, 2]),
        ]);
        assert_eq!(m["ops"], 400);
        assert_eq!(m["seconds"], 2.0);
        assert_eq!(m["ops_per_s"], 200.0);
        assert_eq!(m["tasks"], 64);
        assert_eq!(m["p50_us"], 125.0);
        assert_eq!(m["server_cpu_us_per_pair"], 12.5);
        assert_eq!(m["script_calls_per_primary"], json!([8.0, 3.0]));
        assert_eq!(m["slices"], 2);
        assert_eq!(m["lib"], "redlatch");
    }

    #[test]
    fn every_library_of_an_interleaved_workload_is_recognised_by_its_line() {
        let line = |lib: &str| json!({ "lib": lib }).as_object().unwrap().clone();
        assert!(Lib::Floor.is(&line("script-floor")));
        assert!(Lib::Floor.is(&line("batch-floor")));
        assert!(Lib::Rslock.is(&line("rslock-protocol")));
        assert!(!Lib::Redlatch.is(&line("rslock-protocol")));
        assert_eq!(short("script-floor"), "floor");
    }
}
