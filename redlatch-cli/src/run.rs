//! `redlatch run NAME [OPTIONS] -- CMD [ARGS...]`: flock(1) across machines.

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use redlatch::Hold;
use tokio::time::Instant;

use crate::held::{KindArgs, Wanted};
use crate::supervise::{supervise, Ended, Terms};

use crate::child::{self, Signals};
use crate::conn::{self, RedisArgs};
use crate::duration::{self, human};
use crate::exit::{self, Failure};
use crate::verbose;

/// Time allowed for the explicit release once CMD ended.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);
/// After an interrupted fair wait, time given to the background task that removes our
/// queue entry before the process exits.
const QUEUE_CLEANUP: Duration = Duration::from_millis(300);

#[derive(Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct RunArgs {
    /// Lock name: the Redis key (the same key a Redisson RLock of that name uses).
    pub name: String,

    /// Give up if the lock is still busy after DUR (exit 75, or --conflict-exit-code);
    /// `0` tries once. A bare number is seconds, as flock's: `-w 10`, `-w 0.5`.
    /// Default: wait as long as it takes. (flock -w)
    #[arg(short = 'w', long, value_name = "DUR", value_parser = duration::parse_wait)]
    pub wait: Option<Duration>,

    /// Try once and give up at once if the lock is busy: --wait 0s. (flock -n)
    #[arg(short = 'n', long, conflicts_with = "wait")]
    pub nonblock: bool,

    /// Exit status when the lock is busy past --wait / --nonblock (default 75, with a
    /// message). Given, nothing is printed then (unless -v), as flock's. (flock -E)
    #[arg(short = 'E', long, value_name = "N")]
    pub conflict_exit_code: Option<u8>,

    /// Run this shell command (`sh -c CMD`) instead of CMD after `--`. (flock -c)
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL-CMD",
        conflicts_with = "cmd"
    )]
    pub command: Option<OsString>,

    /// Say what it waits for, who holds the lock and for how long, and (on a
    /// terminal) how long it has waited so far.
    #[arg(short = 'v', long)]
    pub verbose: bool,

    /// Fixed lease instead of the watchdog. The lock expires DUR after it was taken,
    /// so CMD is terminated like on a lost lock if it still runs when the lease's
    /// validity ends (lease minus clock-drift allowance).
    #[arg(long, value_name = "DUR", value_parser = duration::parse)]
    pub lease: Option<Duration>,

    #[command(flatten)]
    pub kind: KindArgs,

    /// With --simple or --spin: how a waiter spaces its tries, `DUR` (constant) or
    /// `MIN..MAX` (exponential: x2 with jitter, from MIN up to MAX). Default 1ms..128ms.
    /// A --simple waiter is woken at once by a redlatch holder's release; the back-off
    /// is how soon it sees a redis-py, redsync, node-redlock or ShedLock holder's.
    #[arg(long, value_name = "DUR|MIN..MAX", value_parser = duration::parse_backoff)]
    pub backoff: Option<redlatch::BackOff>,

    /// After a lost lock, time between SIGTERM and SIGKILL to CMD. While renewals fail
    /// (the lock at risk), SIGTERM comes this long before the validity ends.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = duration::parse)]
    pub kill_grace: Duration,

    /// Watchdog lease: renewed every third of it while CMD runs; a crashed redlatch's
    /// lock frees after at most this long.
    #[arg(long, value_name = "DUR", default_value = "30s", value_parser = duration::parse,
          env = "REDLATCH_WATCHDOG_TIMEOUT")]
    pub watchdog: Duration,

    /// Signal sent to CMD when someone asks for the lock (`redlatch unlock --ask
    /// NAME`, `Lock::request_release`): a name (TERM, INT, USR1...), a number, or
    /// `none` to ignore requests. The lock is released when CMD ends, as always.
    #[arg(long, value_name = "SIG", default_value = "TERM",
          value_parser = crate::revoke::parse_signal)]
    pub revoke_signal: crate::revoke::RevokeSignal,

    #[command(flatten)]
    pub redis: RedisArgs,

    /// The command to run while holding the lock (after `--`). It gets redlatch's
    /// stdio and $REDLATCH_LOCK, $REDLATCH_HOLDER, $REDLATCH_FENCING_TOKEN (--fenced).
    #[arg(last = true, required_unless_present = "command", value_name = "CMD",
          value_parser = clap::value_parser!(OsString))]
    pub cmd: Vec<OsString>,
}

impl RunArgs {
    /// The command line to run: `sh -c SHELL-CMD` for -c, else CMD after `--`.
    pub fn argv(&self) -> Vec<OsString> {
        match &self.command {
            Some(line) => vec!["sh".into(), "-c".into(), line.clone()],
            None => self.cmd.clone(),
        }
    }

    /// What supervising CMD under the lock needs of these arguments.
    pub(crate) fn terms(&self) -> Terms<'_> {
        Terms {
            name: &self.name,
            lease: self.lease,
            kill_grace: self.kill_grace,
            revoke_signal: self.revoke_signal.0,
        }
    }

    /// How long to wait: --nonblock is `0s`.
    pub fn wait(&self) -> Option<Duration> {
        if self.nonblock {
            Some(Duration::ZERO)
        } else {
            self.wait
        }
    }
}

pub async fn run(args: RunArgs) -> ExitCode {
    match execute(args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

async fn execute(args: RunArgs) -> Result<u8, Failure> {
    let argv = args.argv();
    child::check_runnable(&argv[0])?;
    if args.backoff.is_some() && !(args.kind.spin || args.kind.simple) {
        return Err(Failure::usage(
            "--backoff spaces the tries of a --simple or --spin waiter; other kinds are woken by their release",
        ));
    }
    let mut signals = Signals::install()?;
    let config = conn::with_watchdog(args.redis.config()?, args.watchdog);
    // A wait that ends without the lock ends within --wait plus the library's wait
    // slack (one master timeout for --nonblock), connecting and its clean-up included
    // (docs/guarantees.md, "Bounds"): connecting takes --wait at most.
    let waiting = Instant::now();
    let bound = (args.wait()).map(|w| w + conn::wait_slack(&config, w));
    let connecting = (args.wait())
        .zip(bound)
        .map(|(w, b)| if w.is_zero() { b } else { w });
    let client = conn::connect_within(config, connecting).await?;
    let left = (args.wait()).map(|w| conn::wait_left(w, waiting.elapsed()));
    let (result, acquired) = hold_and_run(&client, &args, left, &mut signals).await;
    // Background work must land before the process exits: the slower masters' releases,
    // undoing a cancelled attempt, leaving a fair queue. After a failed acquisition
    // only within its bound: what is still unanswered then waits on a master that
    // does not answer (a request already written still runs there).
    let cleanup = match (acquired, bound) {
        (false, Some(bound)) => bound.saturating_sub(waiting.elapsed()),
        _ => RELEASE_TIMEOUT,
    };
    client.close(cleanup).await;
    result
}

/// Takes the lock (waiting `left` of --wait), runs CMD under it and releases it;
/// whether it took the lock.
async fn hold_and_run(
    client: &redlatch::Client,
    args: &RunArgs,
    left: Option<Duration>,
    signals: &mut Signals,
) -> (Result<u8, Failure>, bool) {
    let wanted = match Wanted::with_backoff(client, &args.name, &args.kind, args.backoff) {
        Ok(wanted) => wanted,
        Err(e) => {
            return (
                Err(exit::from_error(&format!("cannot use {:?}", args.name), &e)),
                false,
            )
        }
    };
    match acquire(&wanted, args, left, signals).await {
        Ok(guard) => (run_held(guard, args, signals).await, true),
        Err(failure) => (Err(failure), false),
    }
}

/// Runs CMD under `guard` and releases it.
async fn run_held(
    guard: Box<dyn Hold>,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let mut env = vec![
        ("REDLATCH_LOCK", args.name.clone()),
        ("REDLATCH_HOLDER", guard.holder().to_string()),
    ];
    if let Some(token) = guard.fencing_token() {
        env.push(("REDLATCH_FENCING_TOKEN", token.to_string()));
    }
    let ended = match child::spawn(&args.argv(), &env) {
        Ok(child) => supervise(child, &*guard, &args.terms(), signals).await,
        Err(failure) => Err(failure),
    };
    match ended {
        Ok(ended) => Ok(release(guard, ended, &args.name).await),
        Err(failure) => {
            // Never leave the lock to its lease when we can release it now.
            let _ = tokio::time::timeout(RELEASE_TIMEOUT, guard.unlock()).await;
            Err(failure)
        }
    }
}

/// Takes the lock, or fails with 75 (wait ran out), 128+sig (interrupted) or the
/// library's error.
async fn acquire(
    wanted: &Wanted,
    args: &RunArgs,
    left: Option<Duration>,
    signals: &mut Signals,
) -> Result<Box<dyn Hold>, Failure> {
    let what = wanted.what();
    let wait = args.wait();
    if args.verbose {
        verbose::before_wait(wanted, &args.name, wait).await;
    }
    let progress = verbose::progress(args.verbose, what, &args.name);
    let result = tokio::select! {
        r = wanted.take(left, args.lease) => r,
        never = progress => match never {},
        sig = signals.recv() => {
            if args.kind.fair || args.kind.write {
                tokio::time::sleep(QUEUE_CLEANUP).await;
            }
            return Err(Failure::new(
                128 + sig as i32 as u8,
                format!("{sig} while waiting for {what} {:?}; not acquired", args.name),
            ));
        }
    };
    match result {
        Ok(Some(guard)) => {
            if args.verbose {
                eprintln!(
                    "redlatch: holding {what} {:?} as {}",
                    args.name,
                    guard.holder()
                );
            }
            Ok(guard)
        }
        Ok(None) => {
            let why = format!(
                "{what} {:?} not acquired within {}: it is busy",
                args.name,
                human(wait.unwrap_or_default())
            );
            if args.verbose && args.conflict_exit_code.is_some() {
                eprintln!("redlatch: {why}");
            }
            Err(Failure::conflict(args.conflict_exit_code, why))
        }
        Err(e) => Err(exit::from_error(
            &format!("cannot take {what} {:?}", args.name),
            &e,
        )),
    }
}

/// Releases the lock explicitly (a process exit would skip a background release) and
/// decides the exit status.
pub(crate) async fn release(guard: Box<dyn Hold>, ended: Ended, name: &str) -> u8 {
    let code = child::status_code(ended.status);
    let result = tokio::time::timeout(RELEASE_TIMEOUT, guard.unlock()).await;
    if let Some((_, code)) = ended.lost {
        return code;
    }
    match result {
        Ok(Ok(())) => code,
        Ok(Err(e)) if e.is_not_held() => {
            eprintln!(
                "redlatch: lock {name:?} was lost while CMD ran (found not held at release); \
                 CMD exited with status {code}"
            );
            exit::LOST
        }
        Ok(Err(e)) => {
            eprintln!(
                "redlatch: warning: releasing lock {name:?} failed, it frees when its lease \
                 runs out: {}",
                exit::chain(&e)
            );
            code
        }
        Err(_) => {
            eprintln!(
                "redlatch: warning: releasing lock {name:?} timed out after {}; it frees \
                 when its lease runs out",
                human(RELEASE_TIMEOUT)
            );
            code
        }
    }
}
