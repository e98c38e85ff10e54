//! `--workload peers`: redlatch beside its peers in one run, in interleaved rounds.
//!
//! Each round runs W1 (redlatch, the rslock protocol, Redisson), W2 (the same and W2's
//! wire floor: batch.lua sent by bare redis-rs), W3 (redlatch, Redisson) and W7 with
//! P = 8 processes (redlatch, python-redis-lock's wire from Rust, python-redis-lock
//! itself when python3 imports it, Redisson's JVMs), one line each tagged with its
//! `round`; the order of the libraries rotates from round to round, so the machine's drift weighs
//! on all of them. redlatch's lines carry the same round's ratios (`p50_vs_rslock`,
//! `ops_per_s_vs_redisson`, ...). Then one `summary` line per figure: each library's
//! median with min and max over the rounds, and the median, min and max of the
//! per-round ratios redlatch / peer (`vs_LIB`).

use serde_json::{json, Value};

use super::redisson::{self, Jvm};
use super::{batch_floor, contended, fleet, peer, signal_peer, simple, Ctx, Report};

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
            ("W1", &[Lib::Redlatch, Lib::Rslock, Lib::Redisson]),
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
            for lib in order {
                let mut r = one(ctx, workload, lib, jvm.as_mut(), cp.as_deref(), warmup).await?;
                if lib == Lib::Redisson && workload == "W1" {
                    // The JIT is warm from here on; later rounds warm up briefly.
                    warmup = warmup.min(2_000);
                }
                r.insert("round".into(), json!(round + 1));
                got.push(r);
            }
            add_ratios(&mut got);
            lines.extend(got);
        }
    }
    lines.extend(summaries(&lines));
    Ok(lines)
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
        "batch-floor" => "floor",
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
