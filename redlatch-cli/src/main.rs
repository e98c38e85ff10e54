//! `redlatch`: Redisson-compatible distributed locks from the shell.
//!
//! A thin layer over the library's public API: `run` (flock(1) across machines),
//! `status`, `unlock --force` and `latch` (a count-down latch as a barrier). (The benchmarks are the repository's `redlatch-bench`.)

// The one exception is `child::die_with_parent` (std's pre-exec hook is `unsafe`).
#![deny(unsafe_code)]

mod child;
mod completions;
mod deadlocks;
mod elect;
mod held;
mod job;
mod latch;
mod leader;
mod list;
mod log;
mod revoke;
mod run;
mod status;
mod stdout;
mod supervise;
mod top;
mod unlock;
mod verbose;

use std::ffi::OsString;

// Shared with the benchmark harness (lib.rs); `crate::conn` etc. resolve through these.
use redlatch_cli::{conn, duration, exit, foreign};
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  redlatch run nightly-backup --wait 10s -- ./backup.sh --full
  redlatch run -n -E 0 -c 'make deploy' deploy   (flock style: skip quietly if busy)
  redlatch run orders:42 --redis redis://a:6379 --redis redis://b:6379 --redis redis://c:6379 -- make deploy
  redlatch run --read catalog -- ./export.sh      (many readers; --write excludes them)
  redlatch run --permits 4 gpu -- ./train.sh      (at most 4 at once across machines)
  redlatch elect scheduler --value $(hostname) -- ./scheduler   (one leader at a time)
  redlatch leader scheduler --watch
  redlatch job billing --at-most 10m --at-least 1m --once-per 1h -- ./bill.sh   (cron, one node)
  redlatch jobs --json                            (scheduled jobs: running, last run, missed)
  redlatch status nightly-backup --json
  redlatch list 'orders:*' --json                 (every lock under a pattern, who holds it)
  redlatch deadlocks --json                       (exit 1: a cycle of waiting tasks)
  redlatch unlock --force nightly-backup
  redlatch latch set jobs-done 3 -E 0; redlatch latch wait jobs-done   (a barrier)
  redlatch unlock --ask nightly-backup            (ask its holder to finish and release)

Masters: --redis URL (repeat for Redlock), else $REDLATCH_REDIS (comma-separated), else
redis://127.0.0.1:6379. TLS: rediss:// URLs, --tls-ca FILE (else the webpki roots),
--tls-cert FILE --tls-key FILE for a client certificate (feature `tls`).
Durations: 500ms, 10s, 2m, 1h, 1m30s; -w/--wait also takes bare seconds, as flock (-w 10).
Exit status of `run`: CMD's, 128+signal, 64 usage, 65 not a lock, 69 Redis unavailable,
70 internal, 71 a master out of memory, 75 not acquired within --wait (-E to change),
76 lock lost, 77 permission denied (ACL), 78 not supported in this deployment,
126/127 CMD not executable / not found (details: redlatch run --help).
Logging: RUST_LOG (default redlatch=warn), e.g. RUST_LOG=redlatch=debug.
Shell completions: redlatch completions bash|zsh|fish; manual: redlatch man.";

#[derive(Parser, Debug)]
#[command(
    name = "redlatch",
    version,
    about = "Distributed locks on Redis (Redisson-compatible): flock(1) across machines",
    after_help = EXAMPLES,
    arg_required_else_help = true
)]
struct Cli {
    /// The app name this process shows to operators in its client record (status,
    /// deadlocks). Default: $REDLATCH_APP, else the executable's name.
    #[arg(long, global = true, value_name = "NAME")]
    app: Option<String>,

    /// The prefix of the client records, ledgers, release requests and notice channels
    /// (default redlatch: redlatch_client:{id}, ...), or `off` to write and read none
    /// (docs/errors.md, "Minimal ACL per feature"). status, list, top, deadlocks and
    /// unlock see only the clients that share it.
    #[arg(
        long,
        global = true,
        value_name = "PREFIX|off",
        env = "REDLATCH_BOOKKEEPING"
    )]
    bookkeeping: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Hold a lock while a command runs.
    ///
    /// Takes the lock (kept alive by the watchdog unless --lease), runs CMD with
    /// redlatch's stdio, releases the lock when CMD ends and exits with CMD's status.
    /// SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to redlatch are forwarded to CMD; the
    /// lock is released once CMD has ended. If the lock is lost while CMD runs, CMD
    /// gets SIGTERM, then SIGKILL after --kill-grace, and redlatch exits 76. If
    /// redlatch itself is killed, CMD is killed too (Linux) and the lock frees when its
    /// lease runs out. A request to release the lock (`redlatch unlock --ask NAME`)
    /// reaches CMD as --revoke-signal (default SIGTERM).
    #[command(override_usage = "redlatch run NAME [OPTIONS] -- CMD [ARGS]...")]
    Run(run::RunArgs),
    /// Run a command while this process leads an election (same rules as `run`).
    ///
    /// Campaigns in election NAME (waiting, without polling, until the current leader
    /// resigns or its lease runs out), runs CMD while leading, resigns when CMD ends and
    /// exits with CMD's status. Signals, a lost leadership and exit codes as `run`.
    #[command(override_usage = "redlatch elect NAME [--value V] [OPTIONS] -- CMD [ARGS]...")]
    Elect(elect::ElectArgs),
    /// Run a scheduled job on one node of a fleet per tick (cron lines, systemd timers).
    ///
    /// Takes the job's lock (ShedLock's key PREFIX:ENV:NAME, so Java services using
    /// @SchedulerLock on NAME exclude it) for --at-most, runs CMD, and gives the lock
    /// back when CMD ends (kept until --at-least has passed). With --once-per a tick
    /// done already (by any node) is not run again. A run skipped because another node
    /// runs the job, or not needed, exits 0 (-E N to change; -v says why).
    #[command(override_usage = "redlatch job NAME --at-most DUR [OPTIONS] -- CMD [ARGS]...")]
    Job(job::JobArgs),
    /// List scheduled jobs: who runs each now, its last run (start, outcome, how long),
    /// missed ticks.
    Jobs(job::JobsArgs),
    /// Print an election's leader (term and value); --watch prints every change.
    Leader(leader::LeaderArgs),
    /// Show holders, hold counts, TTL, fair queue and fencing counter on every master.
    Status(status::StatusArgs),
    /// List every lock, semaphore, latch and election under a pattern: kind, holders
    /// (host, pid, app, held for), TTL and waiters, on every master (SCAN, never KEYS).
    List(list::ListArgs),
    /// A live view of `list`, refreshed every second: holders (app, host), hold age,
    /// TTL, waiters, hand-overs per second; sort keys in the footer, `q` quits.
    Top(top::TopArgs),
    /// Find deadlocks: cycles of tasks each waiting for a lock the next one holds.
    ///
    /// Reads every redlatch client's ledger (SCAN on every primary / master), builds
    /// the wait-for graph over tasks and prints each cycle with its locks and holders
    /// (host, pid, app). Exit status 1 when a cycle exists, 0 when none.
    Deadlocks(deadlocks::DeadlocksArgs),
    /// Delete a lock whoever holds it (--force) and wake its waiters, or ask its holders
    /// to release it (--ask).
    Unlock(unlock::UnlockArgs),
    /// A count-down latch (Redisson RCountDownLatch): a barrier across machines.
    ///
    /// `set NAME COUNT` sets the count if the latch is not counting; `count-down NAME`
    /// counts down by one and prints what is left; `count NAME` prints the count;
    /// `wait NAME [--wait DUR]` blocks until the count is zero (a latch never set is
    /// open). Exit status as `run`'s: 0 done, 75 set found it counting / wait ran out.
    Latch(latch::LatchArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff): `redlatch man > redlatch.1`.
    Man,
}

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(e) => return parse_failure(&e, &argv),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return exit::Failure::new(exit::INTERNAL, format!("no runtime: {e}")).report(),
    };
    // A current-thread runtime: CMD is forked from the main thread, which its
    // parent-death signal is tied to (see child.rs).
    match &cli.command {
        Command::Completions(args) => return completions::completions::<Cli>(args),
        Command::Man => return completions::man::<Cli>(),
        _ => {}
    }
    log::install();
    if let Some(books) = cli.bookkeeping.clone() {
        conn::set_bookkeeping(books);
    }
    if let Some(app) = cli.app.clone() {
        conn::set_app(app);
    }
    runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Elect(args) => elect::run(args).await,
            Command::Leader(args) => leader::run(args).await,
            Command::Job(args) => job::run(args).await,
            Command::Jobs(args) => job::jobs(args).await,
            Command::Status(args) => status::run(args).await,
            Command::List(args) => list::run(args).await,
            Command::Top(args) => top::run(args).await,
            Command::Deadlocks(args) => deadlocks::run(args).await,
            Command::Unlock(args) => unlock::run(args).await,
            Command::Latch(args) => latch::run(args).await,
            Command::Completions(_) | Command::Man => unreachable!("answered above"),
        }
    })
}

/// Help and version go to stdout with status 0; every other parse error is one line
/// on stderr and exit 64.
fn parse_failure(e: &clap::Error, argv: &[OsString]) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(exit::USAGE);
        }
        _ => {}
    }
    let message = if missing_separator(e, argv) {
        let sub = argv[1].to_string_lossy();
        format!("{sub}: missing `--` before the command (usage: redlatch {sub} NAME [OPTIONS] -- CMD [ARGS]...)")
    } else {
        first_line(e)
    };
    exit::Failure::usage(message).report()
}

/// `redlatch run NAME cmd` (no `--`): clap sees an unexpected positional argument or
/// a missing CMD.
fn missing_separator(e: &clap::Error, argv: &[OsString]) -> bool {
    let is_run = argv
        .get(1)
        .is_some_and(|a| a == "run" || a == "elect" || a == "job");
    if !is_run || argv.iter().any(|a| a == "--") {
        return false;
    }
    match e.kind() {
        ErrorKind::MissingRequiredArgument => true,
        ErrorKind::UnknownArgument => match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(arg)) => !arg.starts_with('-'),
            _ => false,
        },
        _ => false,
    }
}

/// clap's message without the usage block, on one line: `error: X\n  <Y>` becomes
/// `X <Y> (see --help)`.
fn first_line(e: &clap::Error) -> String {
    let rendered = e.to_string();
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty() && !l.starts_with("Usage:"))
        .collect();
    let line = message.join(" ");
    let line = line.strip_prefix("error: ").unwrap_or(&line);
    format!("{line} (see --help)")
}
