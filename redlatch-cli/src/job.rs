//! `redlatch job NAME --at-most D [...] -- CMD`: a scheduled job for cron lines and
//! systemd timers, on one node of a fleet per tick (ShedLock's wire, docs/jobs.md);
//! `redlatch jobs [PATTERN]`: who runs each job, its last run, missed ticks.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use redlatch::{JobOutcome, JobState};
use serde_json::{json, Value};

use crate::child::{self, Signals};
use crate::conn::{self, RedisArgs};
use crate::duration::{self, human};
use crate::exit::{self, Failure};
use crate::stdout::out;

/// Time allowed for the background work (a cancelled run's release) before exiting.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

const JOB_HELP: &str = "\
Exit status of `redlatch job`: CMD's own status when it ran (128+S for a signal);
0 when the run was skipped (another node runs the job) or its tick is done already
(-E N: N instead; -v says why); otherwise the codes of `redlatch run` (64 usage,
65 the key holds another type, 69 Redis unavailable or read-only, ...).
CMD gets $REDLATCH_JOB (the name), $REDLATCH_JOB_TICK (the tick, RFC 3339),
$REDLATCH_JOB_MISSED (how many ticks before it no run completed) and
$REDLATCH_JOB_MISSED_TICKS (the first 100 of them, RFC 3339, space-separated).";

#[derive(Args, Debug)]
#[command(after_help = JOB_HELP)]
pub struct JobArgs {
    /// The job's name (ShedLock's @SchedulerLock name): the key is PREFIX:ENV:NAME.
    pub name: String,

    /// The run's lease (ShedLock's lockAtMostFor): how long the job stays locked if
    /// this node dies; without --keep-alive a longer run is reported (-v) as overrun.
    #[arg(long, value_name = "DUR", value_parser = duration::parse)]
    pub at_most: Duration,

    /// Keep the job locked this long after the run began however soon it ended
    /// (ShedLock's lockAtLeastFor).
    #[arg(long, value_name = "DUR", value_parser = duration::parse)]
    pub at_least: Option<Duration>,

    /// Run at most once per DUR: the tick is now rounded down to a multiple of DUR
    /// since the epoch, and a tick done already is not run again.
    #[arg(long, value_name = "DUR", value_parser = duration::parse)]
    pub once_per: Option<Duration>,

    /// Wait up to DUR for a run in progress to end instead of skipping.
    #[arg(short = 'w', long, value_name = "DUR", value_parser = duration::parse_wait)]
    pub wait: Option<Duration>,

    /// Renew the lease every third of --at-most while CMD runs.
    #[arg(long)]
    pub keep_alive: bool,

    /// Exit status when the run is skipped or its tick is done already (default 0).
    /// (flock -E)
    #[arg(short = 'E', long, value_name = "N")]
    pub skip_exit_code: Option<u8>,

    /// Say why a run was skipped (who runs it, since when) or not needed, and
    /// report missed ticks and overruns.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// The key's prefix (ShedLock's keyPrefix).
    #[arg(long, default_value = "job-lock")]
    pub prefix: String,

    /// The key's environment (ShedLock's environment).
    #[arg(long, default_value = "default")]
    pub env: String,

    /// Run this shell command (`sh -c CMD`) instead of CMD after `--`.
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL-CMD",
        conflicts_with = "cmd"
    )]
    pub command: Option<OsString>,

    #[command(flatten)]
    pub redis: RedisArgs,

    /// The command to run (after `--`).
    #[arg(last = true, required_unless_present = "command", value_name = "CMD",
          value_parser = clap::value_parser!(OsString))]
    pub cmd: Vec<OsString>,
}

pub async fn run(args: JobArgs) -> ExitCode {
    match execute(args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

async fn execute(args: JobArgs) -> Result<u8, Failure> {
    let argv = match &args.command {
        Some(line) => vec!["sh".into(), "-c".into(), line.clone()],
        None => args.cmd.clone(),
    };
    child::check_runnable(&argv[0])?;
    let mut signals = Signals::install()?;
    let client = conn::connect(args.redis.config()?).await?;
    let mut job = (client.job(&args.name))
        .prefix(&args.prefix)
        .env(&args.env)
        .at_most(args.at_most)
        .keep_alive(args.keep_alive);
    if let Some(d) = args.at_least {
        job = job.at_least(d);
    }
    if let Some(p) = args.once_per {
        job = job.once_per(p);
    }
    if let Some(w) = args.wait {
        job = job.wait(w);
    }
    let outcome = job
        .run_with(|tick, missed| cmd_under_job(&argv, &args.name, tick, missed, &mut signals))
        .await;
    client.close(CLOSE_TIMEOUT).await;
    let outcome = outcome.map_err(|e| exit::from_error(&format!("job {:?}", args.name), &e))?;
    judge(&args, outcome)
}

/// CMD under the job: its exit status (forwarding signals to it).
async fn cmd_under_job(
    argv: &[OsString],
    name: &str,
    tick: Option<SystemTime>,
    missed: redlatch::Missed,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let ticks: Vec<String> = missed.ticks.iter().take(100).map(|t| rfc3339(*t)).collect();
    let env = [
        ("REDLATCH_JOB", name.to_string()),
        ("REDLATCH_JOB_TICK", tick.map(rfc3339).unwrap_or_default()),
        ("REDLATCH_JOB_MISSED", missed.count.to_string()),
        ("REDLATCH_JOB_MISSED_TICKS", ticks.join(" ")),
    ];
    let mut cmd = child::spawn(argv, &env)?;
    loop {
        tokio::select! {
            status = cmd.wait() => {
                let status = status.map_err(|e| Failure::new(exit::INTERNAL, format!("cannot wait for CMD: {e}")))?;
                return Ok(child::status_code(status));
            }
            sig = signals.recv() => child::send(&cmd, sig),
        }
    }
}

/// The exit status an outcome makes, with -v's account of it.
fn judge(args: &JobArgs, outcome: JobOutcome<Result<u8, Failure>>) -> Result<u8, Failure> {
    let skip = args.skip_exit_code.unwrap_or(0);
    let say = |m: String| {
        if args.verbose {
            eprintln!("redlatch: job {:?}: {m}", args.name);
        }
    };
    match outcome {
        JobOutcome::Ran(run) => {
            if run.missed.count > 0 {
                say(format!(
                    "{} tick(s) missed before this one",
                    run.missed.count
                ));
            }
            if run.overrun {
                say(format!(
                    "overrun: the run took {}, longer than --at-most",
                    human(run.took)
                ));
            }
            if let Some(e) = &run.release_error {
                eprintln!(
                    "redlatch: job {:?}: release failed (its lease ends it): {e}",
                    args.name
                );
            }
            run.value
        }
        JobOutcome::Skipped { holder, until } => {
            let host = holder.host.as_deref().unwrap_or("an unknown holder");
            let app = holder.app.map(|a| format!(" ({a})")).unwrap_or_default();
            let since = holder
                .since
                .map(|s| format!(" since {}", rfc3339(s)))
                .unwrap_or_default();
            let until = until
                .map(|u| format!(", locked until {}", rfc3339(u)))
                .unwrap_or_default();
            say(format!("skipped: running on {host}{app}{since}{until}"));
            Ok(skip)
        }
        JobOutcome::AlreadyDone { tick } => {
            say(format!("tick {} already done", rfc3339(tick)));
            Ok(skip)
        }
        JobOutcome::Panicked(run) => Err(Failure::new(exit::INTERNAL, run.value)),
        _ => Err(Failure::new(exit::INTERNAL, "unknown outcome")),
    }
}

const JOBS_JSON: &str = "\
With --json, one JSON array on stdout, one object per job:
  { \"name\": \"nightly\", \"key\": \"job-lock:default:nightly\",
    \"running\": { \"host\": \"h\" | null, \"app\": \"a\" | null, \"since_ms\": ms | null,
                 \"until_ms\": ms | null, \"value\": \"ADDED:...\" } | null,
    \"last\": { \"tick_ms\": ms | null, \"start_ms\": ms, \"end_ms\": ms, \"took_ms\": 1200,
              \"host\": \"h\", \"app\": \"a\", \"outcome\": \"ran\" | \"panicked\" | \"cancelled\",
              \"missed\": 0 } | null,
    \"done_ms\": ms | null, \"period_ms\": 3600000 | null, \"runs\": 12, \"overdue\": 0 }
Times (ms) are since the epoch. ShedLock's runs show under \"running\" (it keeps no record).";

#[derive(Args, Debug)]
#[command(after_help = JOBS_JSON)]
pub struct JobsArgs {
    /// Glob of the job names, as Redis SCAN MATCH.
    #[arg(default_value = "*")]
    pub pattern: String,

    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,

    /// The key's prefix (ShedLock's keyPrefix).
    #[arg(long, default_value = "job-lock")]
    pub prefix: String,

    /// The key's environment (ShedLock's environment).
    #[arg(long, default_value = "default")]
    pub env: String,

    /// The longest the whole listing may take.
    #[arg(long, default_value = "5s", value_parser = duration::parse)]
    pub timeout: Duration,

    #[command(flatten)]
    pub redis: RedisArgs,
}

pub async fn jobs(args: JobsArgs) -> ExitCode {
    let result = async {
        let client = conn::connect(conn::for_queries(args.redis.config()?)).await?;
        let pattern = format!("{}:{}:{}", args.prefix, args.env, args.pattern);
        let jobs = (client.jobs(&pattern, args.timeout).await)
            .map_err(|e| exit::from_error("cannot list jobs", &e))?;
        if args.json {
            let doc = Value::Array(jobs.iter().map(to_json).collect());
            out(&format!("{doc}\n"));
        } else {
            out(&table(&jobs));
        }
        Ok(())
    };
    exit::finish(result.await)
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn to_json(j: &JobState) -> Value {
    let running = j.running.as_ref().map(|h| {
        json!({"host": h.host, "app": h.app, "since_ms": h.since.map(ms),
               "until_ms": j.running_until.map(ms), "value": h.value})
    });
    let last = j.last.as_ref().map(|l| {
        json!({"tick_ms": l.tick.map(ms), "start_ms": ms(l.start), "end_ms": ms(l.end),
               "took_ms": l.took().as_millis() as u64, "host": l.host, "app": l.app,
               "outcome": l.outcome, "missed": l.missed})
    });
    json!({"name": j.name, "key": j.key, "running": running, "last": last,
           "done_ms": j.done.map(ms), "period_ms": j.period.map(|p| p.as_millis() as u64),
           "runs": j.runs, "overdue": j.overdue})
}

fn table(jobs: &[JobState]) -> String {
    let mut s = format!(
        "{:<24} {:<28} {:<24} {:<10} {:>8} {:>6}\n",
        "NAME", "RUNNING", "LAST RUN", "OUTCOME", "TOOK", "MISSED"
    );
    for j in jobs {
        let running = match &j.running {
            Some(h) => format!(
                "{}{}",
                h.host.as_deref().unwrap_or("?"),
                h.app
                    .as_ref()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default()
            ),
            None => "-".into(),
        };
        let (last, outcome, took, missed) = match &j.last {
            Some(l) => (
                rfc3339(l.start),
                l.outcome.clone(),
                human(l.took()),
                l.missed + j.overdue,
            ),
            None => ("-".into(), "-".into(), "-".into(), j.overdue),
        };
        s.push_str(&format!(
            "{:<24} {running:<28} {last:<24} {outcome:<10} {took:>8} {missed:>6}\n",
            j.name
        ));
    }
    s
}
