//! The workloads of BENCHMARKS.md against the masters given, one result per workload
//! (one JSON line each with `--json`).

mod batch_floor;
mod ceiling;
mod contended;
mod deployment;
mod family;
mod fleet;
mod floor;
mod grouping;
mod jobs;
mod peer;
mod peers;
mod redisson;
mod scale;
mod server;
mod signal_peer;
mod simple;
mod stats;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use redlatch::{Client, Config};
use serde_json::{json, Map, Value};

use redlatch_cli::conn::{self, RedisArgs};
use redlatch_cli::duration;
use redlatch_cli::exit::{self, Failure};

/// The library's acquire and release scripts as it runs them on a standalone master
/// (after the classic dialect's prelude), which the floor and the ceiling load by hand:
/// the very files the library embeds (this crate is not published: it reads them from
/// the repository's `lua/`).
const ACQUIRE_LUA: &str = concat!(
    include_str!("../../lua/dialect_classic.lua"),
    include_str!("../../lua/acquire.lua")
);
/// release.lua after the prelude and lua/pass_on.lua, as the library sends it; its
/// KEYS[2] is the lock's waiter registry ([`redlatch::wire::waiter_registry`]).
const RELEASE_LUA: &str = concat!(
    include_str!("../../lua/dialect_classic.lua"),
    include_str!("../../lua/pass_on.lua"),
    include_str!("../../lua/release.lua")
);

/// batch.lua after the prelude and lua/pass_on.lua, as the library's batcher sends it
/// (the W2 floor, `batch_floor.rs`).
const BATCH_LUA: &str = concat!(
    include_str!("../../lua/dialect_classic.lua"),
    include_str!("../../lua/pass_on.lua"),
    include_str!("../../lua/acquire_op.lua"),
    include_str!("../../lua/batch.lua")
);

/// One result line.
pub type Report = Map<String, Value>;

/// Which workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Uncontended latency: one task, 3,000 acquire+release pairs.
    #[value(name = "W1", alias = "w1")]
    W1,
    /// Throughput: 64 tasks, each on its own name.
    #[value(name = "W2", alias = "w2")]
    W2,
    /// Contended: 16 tasks, one name, blocking lock().
    #[value(name = "W3", alias = "w3")]
    W3,
    /// W3 with the fair lock.
    #[value(name = "W4", alias = "w4")]
    W4,
    /// W3 with the spin lock (no pub/sub: waiters retry after the default back-off).
    #[value(name = "SP", alias = "sp")]
    Sp,
    /// Scale: 100,000 locks held under the watchdog.
    #[value(name = "W5", alias = "w5")]
    W5,
    /// Waiters: 10,000 tasks waiting on 1,000 names.
    #[value(name = "W6", alias = "w6")]
    W6,
    /// Read lock: 64 tasks, one name.
    #[value(name = "R1", alias = "r1")]
    R1,
    /// Semaphore: 64 tasks, acquire+release pairs on a 64-permit semaphore.
    #[value(name = "S1", alias = "s1")]
    S1,
    /// Writer wait under 16 overlapping readers, with writer preference and without.
    #[value(name = "RW", alias = "rw")]
    Rw,
    /// Fleet: P separate processes (one client, one task each) on one name; P from
    /// --procs (8 and 32 by default), on the first master.
    #[value(name = "W7", alias = "w7")]
    W7,
    /// redis-benchmark EVALSHA figures of our own scripts (first master only).
    #[value(name = "ceiling")]
    Ceiling,
    #[value(name = "floor")]
    Floor,
    /// Cluster only: per-node vs per-slot grouping of batched calls (W5's renewals,
    /// W2's group commit), the same key sets sent both ways with bare redis-rs.
    #[value(name = "grouping")]
    Grouping,
    /// redlatch beside its peers in interleaved rounds (first master only): W1 and W2
    /// beside the rslock protocol (SET NX PX and a compare-and-delete script) and
    /// Redisson 4.7.0 (the real client in a JVM), W2's wire floor (batch.lua sent by bare
    /// redis-rs), W3 beside Redisson, W7 (P = 8) beside Redisson and python-redis-lock's
    /// wire (SET NX EX, BLPOP on a signal list); a line per run, redlatch's with the
    /// round's ratios, then a summary per figure (medians, min–max over the rounds).
    #[value(name = "peers")]
    Peers,
    /// Scheduled jobs: P processes (--job-procs) firing one job at every --job-period
    /// boundary for --duration, each tick run once; --job-kill SIGKILLs one mid-run.
    #[value(name = "J1", alias = "j1")]
    J1,
    /// W1–W7, R1, S1 and RW in turn.
    #[value(name = "all")]
    All,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workload to run.
    #[arg(long, value_enum, default_value = "all")]
    pub workload: Workload,

    /// How long the timed workloads (W2, W3, W4) run.
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = duration::parse)]
    pub duration: Duration,

    /// W7's process counts (one result each).
    #[arg(long, value_delimiter = ',', default_value = "8,32")]
    pub procs: Vec<usize>,

    /// Internal: run as one W7 process on this lock name.
    #[arg(long, value_name = "NAME", hide = true)]
    pub w7_child: Option<String>,

    /// Internal: the W7 child speaks a peer's wire instead (`signal`: python-redis-lock's).
    #[arg(long, value_name = "PEER", hide = true, requires = "w7_child")]
    pub w7_peer: Option<String>,

    /// J1: how many processes fire the job.
    #[arg(long, default_value_t = 16)]
    pub job_procs: usize,

    /// J1: the job's period (its ticks).
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = duration::parse)]
    pub job_period: Duration,

    /// J1: SIGKILL one process in the middle of a run a third of the way through.
    #[arg(long)]
    pub job_kill: bool,

    /// Internal: run as one J1 process on this job name.
    #[arg(long, value_name = "NAME", hide = true)]
    pub job_child: Option<String>,

    /// `peers`: how many interleaved rounds.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,

    /// `peers`: leave Redisson out (it needs java and mvn on the PATH).
    #[arg(long)]
    pub no_redisson: bool,

    /// `peers`: Redisson's untimed W1 pairs before the first timed W1 (its JIT).
    #[arg(long, value_name = "PAIRS", default_value_t = 20_000)]
    pub jvm_warmup: u64,

    /// Print each result as one JSON line.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub redis: RedisArgs,
}

/// What every workload gets.
pub struct Ctx {
    client: Client,
    config: Config,
    urls: Vec<String>,
    /// The servers that run the lock scripts (for server-side counters).
    dep: deployment::Deployment,
    duration: Duration,
    run_id: String,
}

impl Ctx {
    /// A key of this run (cleaned up at the end).
    fn key(&self, s: &str) -> String {
        format!("redlatch-bench:{}:{s}", self.run_id)
    }

    /// Another client on the same masters, with a tweaked configuration.
    async fn connect_with(&self, f: impl FnOnce(Config) -> Config) -> redlatch::Result<Client> {
        Client::connect(f(self.config.clone())).await
    }

    /// The fields every result has.
    fn report(&self, workload: &str, ops: u64, took: Duration, lat: &mut stats::Samples) -> Report {
        let seconds = took.as_secs_f64();
        let v = json!({
            "lib": "redlatch",
            "workload": workload,
            "topology": self.dep.kind,
            "masters": self.dep.primaries.len(),
            "replicas": self.dep.replicas,
            "sync": sync_label(self.config.replica_sync().0),
            "ops": ops,
            "seconds": seconds,
            "ops_per_s": if seconds > 0.0 { ops as f64 / seconds } else { 0.0 },
            "p50_us": lat.percentile(50.0),
            "p99_us": lat.percentile(99.0),
        });
        v.as_object().expect("object").clone()
    }

    /// Cluster only: the hash slot of each key, as the servers compute it (`None`
    /// elsewhere).
    async fn key_slots(&self, keys: &[String]) -> redlatch::Result<Option<Vec<u16>>> {
        if self.dep.slots.is_none() {
            return Ok(None);
        }
        let mut probe = self.dep.probes().await.map_err(|e| self.probe_error(e))?;
        let slots = probe[0]
            .key_slots(keys)
            .await
            .map_err(|e| self.probe_error(e))?;
        Ok(Some(slots))
    }

    /// Probes of every primary, as a library error (the workloads return those).
    async fn probes(&self) -> redlatch::Result<Vec<server::Probe>> {
        self.dep.probes().await.map_err(|e| self.probe_error(e))
    }

    fn probe_error(&self, source: redis::RedisError) -> redlatch::Error {
        redlatch::Error::Redis {
            addr: self.dep.labels.join(","),
            source,
        }
    }

    /// Standalone masters only (the floor and the ceiling send their scripts to the
    /// configured URLs themselves, with no routing).
    fn require_masters(&self, what: &str) -> Result<(), String> {
        match self.dep.kind {
            "masters" => Ok(()),
            other => Err(format!(
                "{what} measures standalone masters, not a {other}: give it --redis URL of a \
                 standalone master"
            )),
        }
    }

    /// Deletes every key of this run on every primary.
    async fn cleanup(&self) {
        let Ok(probes) = self.dep.probes().await else {
            return;
        };
        for probe in probes {
            let mut conn = probe.conn();
            let pattern = format!("*redlatch-bench:{}:*", self.run_id);
            let mut cursor = 0u64;
            loop {
                let r: redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await;
                let Ok((next, keys)) = r else { break };
                if !keys.is_empty() {
                    // One key per UNLINK: a cluster primary refuses keys of several
                    // slots in one command (CROSSSLOT).
                    let mut pipe = redis::pipe();
                    for k in &keys {
                        pipe.cmd("UNLINK").arg(k).ignore();
                    }
                    let _: redis::RedisResult<()> = pipe.query_async(&mut conn).await;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
}

pub async fn run(args: BenchArgs) -> ExitCode {
    exit::finish(bench(args).await)
}

async fn bench(args: BenchArgs) -> Result<(), Failure> {
    if let Some(name) = &args.job_child {
        return jobs::child(&args.redis, name, args.job_period).await;
    }
    if let Some(name) = &args.w7_child {
        return match args.w7_peer.as_deref() {
            None => fleet::child(&args.redis, name).await,
            Some("signal") => signal_peer::child(&args.redis, name).await,
            Some(other) => Err(Failure::usage(format!("no W7 peer {other:?}"))),
        };
    }
    let config = args.redis.config()?;
    let client = conn::connect(config.clone()).await?;
    let dep = deployment::Deployment::discover(&client)
        .await
        .map_err(|e| Failure::new(exit::UNAVAILABLE, e))?;
    let ctx = Ctx {
        urls: config.urls().to_vec(),
        // As connected: a single URL may have turned out to be a cluster node.
        config: client.config().clone(),
        dep,
        client,
        duration: args.duration,
        run_id: uuid::Uuid::new_v4().simple().to_string()[..8].to_string(),
    };
    let peers_opts = peers::Opts {
        rounds: args.rounds,
        redisson: (!args.no_redisson).then_some(args.jvm_warmup),
    };
    let mut result = Ok(());
    for (w, procs) in workloads(&args) {
        match one(&ctx, &args, &peers_opts, w, procs).await {
            Ok(report) => print(&report, args.json),
            Err(e) => {
                result = Err(Failure::new(exit::INTERNAL, format!("bench {w:?}: {e}")));
                break;
            }
        }
    }
    ctx.cleanup().await;
    result
}

/// The runs `--workload` asks for: `all` expanded, W7 once per `--procs` count.
fn workloads(args: &BenchArgs) -> Vec<(Workload, usize)> {
    let list = match args.workload {
        Workload::All => vec![
            Workload::W1,
            Workload::W2,
            Workload::W3,
            Workload::W4,
            Workload::W5,
            Workload::W6,
            Workload::R1,
            Workload::S1,
            Workload::Rw,
            Workload::W7,
        ],
        one => vec![one],
    };
    list.into_iter()
        .flat_map(|w| match w {
            Workload::W7 => args.procs.iter().map(|&p| (w, p)).collect::<Vec<_>>(),
            w => vec![(w, 0)],
        })
        .collect()
}

/// Runs one workload (W7 with `procs` processes): its report line, or why it failed.
async fn one(
    ctx: &Ctx,
    args: &BenchArgs,
    peers_opts: &peers::Opts,
    w: Workload,
    procs: usize,
) -> Result<Report, String> {
    match w {
        Workload::W1 => simple::w1(ctx).await.map_err(|e| e.to_string()),
        Workload::W2 => simple::w2(ctx).await.map_err(|e| e.to_string()),
        Workload::W3 => contended::run(ctx, redlatch::Kind::Plain)
            .await
            .map_err(|e| e.to_string()),
        Workload::W4 => contended::run(ctx, redlatch::Kind::Fair)
            .await
            .map_err(|e| e.to_string()),
        Workload::Sp => contended::run(ctx, redlatch::Kind::Spin)
            .await
            .map_err(|e| e.to_string()),
        Workload::W5 => scale::w5(ctx).await.map_err(|e| e.to_string()),
        Workload::W6 => scale::w6(ctx).await.map_err(|e| e.to_string()),
        Workload::R1 => family::r1(ctx).await.map_err(|e| e.to_string()),
        Workload::S1 => family::s1(ctx).await.map_err(|e| e.to_string()),
        Workload::Rw => {
            let with = family::rw(ctx, true).await.map_err(|e| e.to_string())?;
            print(&with, args.json);
            family::rw(ctx, false).await.map_err(|e| e.to_string())
        }
        Workload::W7 => fleet::run(ctx, procs).await,
        Workload::J1 => jobs::run(ctx, args.job_procs, args.job_period, args.job_kill).await,
        Workload::Ceiling => ctx
            .require_masters("ceiling")
            .and_then(|()| ceiling::run(ctx)),
        Workload::Floor => {
            ctx.require_masters("floor")?;
            floor::run(ctx).await
        }
        Workload::Grouping => grouping::run(ctx).await,
        Workload::Peers => {
            let lines = peers::run(ctx, peers_opts).await?;
            let (last, rest) = lines.split_last().expect("summary lines");
            rest.iter().for_each(|l| print(l, args.json));
            Ok(last.clone())
        }
        Workload::All => unreachable!("expanded by workloads()"),
    }
}

/// `auto`, `off`, `aof` or the replica count, as `--sync-replicas` takes it.
fn sync_label(mode: redlatch::SyncReplicas) -> String {
    match mode {
        redlatch::SyncReplicas::Auto => "auto".into(),
        redlatch::SyncReplicas::Off => "off".into(),
        redlatch::SyncReplicas::Count(n) => n.to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn print(report: &Report, json: bool) {
    if json {
        println!("{}", Value::Object(report.clone()));
        return;
    }
    if report.get("lib").and_then(Value::as_str) == Some("summary") {
        println!("{}", peers::summary_text(report));
        return;
    }
    let fields: Vec<String> = report
        .iter()
        .filter(|(k, _)| k.as_str() != "lib")
        .map(|(k, v)| match v {
            Value::Number(n) if n.is_f64() && k.contains("vs_") => {
                format!("{k}={:.2}", n.as_f64().unwrap_or(0.0))
            }
            Value::Number(n) if n.is_f64() => format!("{k}={:.1}", n.as_f64().unwrap_or(0.0)),
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    println!("{}", fields.join(" "));
}
