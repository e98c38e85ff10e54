//! `redlatch elect NAME --value V [OPTIONS] -- CMD [ARGS...]`: run CMD while this
//! process leads the election NAME (the library's `Election::campaign`), with the
//! signal, lost-lock and exit rules of `redlatch run`.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use redlatch::Hold;
use tokio::time::Instant;

use crate::child::{self, Signals};
use crate::conn::{self, RedisArgs};
use crate::duration::{self, human};
use crate::exit::{self, Failure};
use crate::held::KindArgs;
use crate::run::{self, RunArgs};
use crate::supervise;

/// Time allowed for resigning once CMD ended.
const RESIGN_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct ElectArgs {
    /// Election name (its lock is `redlatch_election:{NAME}`).
    pub name: String,

    /// The value this process advertises while it leads (its address, say); shown by
    /// `redlatch leader` and given to CMD as $REDLATCH_LEADER_VALUE. Default:
    /// HOSTNAME:PID.
    #[arg(long, value_name = "V")]
    pub value: Option<String>,

    /// Give up if another process still leads after DUR (exit 75, or
    /// --conflict-exit-code); `0` tries once; a bare number is seconds (`-w 10`).
    /// Default: campaign as long as it takes.
    #[arg(short = 'w', long, value_name = "DUR", value_parser = duration::parse_wait)]
    pub wait: Option<Duration>,

    /// Exit status when not elected within --wait (default 75, with a message; given,
    /// nothing is printed, as flock -E).
    #[arg(short = 'E', long, value_name = "N")]
    pub conflict_exit_code: Option<u8>,

    /// Run this shell command (`sh -c CMD`) instead of CMD after `--`.
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL-CMD",
        conflicts_with = "cmd"
    )]
    pub command: Option<OsString>,

    /// After the leadership is lost, time between SIGTERM and SIGKILL to CMD.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = duration::parse)]
    pub kill_grace: Duration,

    /// Watchdog lease: a crashed leader is replaced after at most this long.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = duration::parse,
          env = "REDLATCH_WATCHDOG_TIMEOUT")]
    pub watchdog: Duration,

    /// Signal sent to CMD when someone asks this leader to step down (`redlatch unlock
    /// --ask` on the election's lock, `redlatch_election:{NAME}`); `none` to ignore.
    #[arg(long, value_name = "SIG", default_value = "TERM",
          value_parser = crate::revoke::parse_signal)]
    pub revoke_signal: crate::revoke::RevokeSignal,

    #[command(flatten)]
    pub redis: RedisArgs,

    /// The command to run while leading (after `--`). It gets redlatch's stdio and
    /// $REDLATCH_ELECTION, $REDLATCH_TERM (also $REDLATCH_FENCING_TOKEN),
    /// $REDLATCH_LEADER_VALUE and $REDLATCH_HOLDER.
    #[arg(last = true, required_unless_present = "command", value_name = "CMD",
          value_parser = clap::value_parser!(OsString))]
    pub cmd: Vec<OsString>,
}

pub async fn run(args: ElectArgs) -> ExitCode {
    match execute(args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

/// `run`'s options for the supervision of CMD (a leader is a watchdog-kept lock).
fn as_run_args(args: ElectArgs) -> RunArgs {
    RunArgs {
        name: args.name,
        wait: args.wait,
        nonblock: false,
        conflict_exit_code: args.conflict_exit_code,
        command: args.command,
        verbose: false,
        lease: None,
        kind: KindArgs {
            fenced: true,
            ..KindArgs::default()
        },
        backoff: None,
        kill_grace: args.kill_grace,
        watchdog: args.watchdog,
        revoke_signal: args.revoke_signal,
        redis: args.redis,
        cmd: args.cmd,
    }
}

async fn execute(args: ElectArgs) -> Result<u8, Failure> {
    let value = args.value.clone().unwrap_or_else(default_value);
    let args = as_run_args(args);
    let argv = args.argv();
    child::check_runnable(&argv[0])?;
    let mut signals = Signals::install()?;
    let config = conn::with_watchdog(args.redis.config()?, args.watchdog);
    // As `run`: --wait W bounds the campaign that fails plus connecting, W plus the
    // wait slack (docs/guarantees.md, "Bounds"); the campaign waits what is left.
    let waiting = Instant::now();
    let bound = (args.wait).map(|w| w + conn::wait_slack(&config, w));
    let connecting = (args.wait)
        .zip(bound)
        .map(|(w, b)| if w.is_zero() { b } else { w });
    let client = conn::connect_within(config, connecting).await?;
    let left = (args.wait).map(|w| conn::wait_left(w, waiting.elapsed()));
    let result = lead_and_run(&client, &args, (&value, left), &mut signals).await;
    let cleanup = match (&result, bound) {
        (Err(_), Some(bound)) => bound.saturating_sub(waiting.elapsed()),
        _ => RESIGN_TIMEOUT,
    };
    client.close(cleanup).await;
    result
}

fn default_value() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{host}:{}", std::process::id())
}

async fn lead_and_run(
    client: &redlatch::Client,
    args: &RunArgs,
    (value, wait): (&str, Option<Duration>),
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let election = client.election(args.name.clone());
    let campaign = async {
        match wait {
            None => election.campaign(value).await.map(Some),
            Some(w) => election.try_campaign(value, w).await,
        }
    };
    let leading = tokio::select! {
        r = campaign => r,
        sig = signals.recv() => return Err(Failure::new(
            128 + sig as i32 as u8,
            format!("{sig} while campaigning in election {:?}; not elected", args.name),
        )),
    };
    let leading = match leading {
        Ok(Some(l)) => l,
        Ok(None) => {
            return Err(Failure::conflict(
                args.conflict_exit_code,
                format!(
                    "not elected in {:?} within {}: another process leads",
                    args.name,
                    human(args.wait.unwrap_or_default())
                ),
            ))
        }
        Err(e) => {
            return Err(exit::from_error(
                &format!("cannot campaign in election {:?}", args.name),
                &e,
            ))
        }
    };
    let env = vec![
        ("REDLATCH_ELECTION", args.name.clone()),
        ("REDLATCH_TERM", leading.term().to_string()),
        ("REDLATCH_FENCING_TOKEN", leading.term().to_string()),
        ("REDLATCH_LEADER_VALUE", value.to_string()),
        ("REDLATCH_HOLDER", leading.holder().to_string()),
    ];
    let held: Box<dyn Hold> = Box::new(leading);
    let ended = match child::spawn(&args.argv(), &env) {
        Ok(child) => supervise::supervise(child, &*held, &args.terms(), signals).await,
        Err(failure) => Err(failure),
    };
    match ended {
        Ok(ended) => Ok(run::release(held, ended, &args.name).await),
        Err(failure) => {
            let _ = tokio::time::timeout(RESIGN_TIMEOUT, held.unlock()).await;
            Err(failure)
        }
    }
}
