//! `redlatch latch set|count-down|count|wait NAME`: a count-down latch (Redisson
//! `RCountDownLatch`, same key and channel) as a barrier between shell pipelines on
//! several machines.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::child::Signals;
use crate::conn::{self, RedisArgs};
use crate::duration::{self, human};
use crate::exit::{self, Failure};

/// How long `latch` gives the client to close (nothing is held: only connections).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

pub const HELP: &str = "\
A latch is a count set once (`set`), counted down by anyone (`count-down`); `wait` blocks
until it reaches zero, woken by pub/sub (no polling). At zero the key is deleted, so a
latch that was never set, or is done, is open, and can be set again. It is Redisson's
RCountDownLatch: Java services using getCountDownLatch(NAME) share it.

Example, a barrier for three jobs on three machines:
  redlatch latch set build-done 3 -E 0          (every machine may run it: first one wins)
  ... job ...; redlatch latch count-down build-done
  redlatch latch wait build-done --wait 30m && ./publish.sh

Exit status: 0 done (set: the count was set; wait: the count reached zero), 75 set found
the latch counting already / wait ran out (--conflict-exit-code N: N), 128+S wait got
signal S, 64 usage (bad NAME, COUNT or duration), 65 NAME holds something else,
69 Redis unavailable, 77 permission denied (ACL), 78 several masters (Redlock): a latch
lives on one master.";

#[derive(Args, Debug)]
#[command(after_help = HELP)]
pub struct LatchArgs {
    #[command(subcommand)]
    pub command: LatchCommand,
}

#[derive(Subcommand, Debug)]
pub enum LatchCommand {
    /// Set the count if the latch is not counting (Redisson trySetCount).
    Set(SetArgs),
    /// Count down by one and print the count left (Redisson countDown).
    CountDown(NameArgs),
    /// Print the count (0: open) (Redisson getCount).
    Count(NameArgs),
    /// Wait until the count reaches zero (Redisson await).
    Wait(WaitArgs),
}

#[derive(Args, Debug)]
pub struct NameArgs {
    /// Latch name: the Redis key.
    pub name: String,

    #[command(flatten)]
    pub redis: RedisArgs,
}

#[derive(Args, Debug)]
#[command(after_help = HELP)]
pub struct SetArgs {
    /// Latch name: the Redis key.
    pub name: String,

    /// The count: how many count-downs open the latch (at least 1).
    #[arg(value_parser = clap::value_parser!(i64).range(1..))]
    pub count: i64,

    /// Exit status when the latch is counting already (default 75, with a message;
    /// given, nothing is printed: `-E 0` lets every machine run the same `set`).
    #[arg(short = 'E', long, value_name = "N")]
    pub conflict_exit_code: Option<u8>,

    #[command(flatten)]
    pub redis: RedisArgs,
}

#[derive(Args, Debug)]
#[command(after_help = HELP)]
pub struct WaitArgs {
    /// Latch name: the Redis key.
    pub name: String,

    /// Give up if the count has not reached zero after DUR (exit 75, or
    /// --conflict-exit-code); a bare number is seconds (`-w 10`). Default: wait as long
    /// as it takes.
    #[arg(short = 'w', long, value_name = "DUR", value_parser = duration::parse_wait)]
    pub wait: Option<Duration>,

    /// Exit status when --wait runs out (default 75, with a message; given, nothing is
    /// printed).
    #[arg(short = 'E', long, value_name = "N")]
    pub conflict_exit_code: Option<u8>,

    #[command(flatten)]
    pub redis: RedisArgs,
}

pub async fn run(args: LatchArgs) -> ExitCode {
    exit::finish(execute(args.command).await)
}

async fn execute(command: LatchCommand) -> Result<(), Failure> {
    let redis = match &command {
        LatchCommand::Set(a) => &a.redis,
        LatchCommand::CountDown(a) | LatchCommand::Count(a) => &a.redis,
        LatchCommand::Wait(a) => &a.redis,
    };
    // Signals first: one arriving while we connect already ends the wait with 128+S.
    let mut signals = match &command {
        LatchCommand::Wait(_) => Some(Signals::install()?),
        _ => None,
    };
    let client = conn::connect(redis.config()?).await?;
    let result = match &command {
        LatchCommand::Set(a) => set(&client, a).await,
        LatchCommand::CountDown(a) => count_down(&client, a).await,
        LatchCommand::Count(a) => count(&client, a).await,
        LatchCommand::Wait(a) => wait(&client, a, signals.as_mut().expect("installed")).await,
    };
    client.close(CLOSE_TIMEOUT).await;
    result
}

fn failed(what: &str, name: &str, e: &redlatch::Error) -> Failure {
    exit::from_error(&format!("cannot {what} latch {name:?}"), e)
}

async fn set(client: &redlatch::Client, a: &SetArgs) -> Result<(), Failure> {
    let latch = client.count_down_latch(a.name.clone());
    if latch
        .try_set_count(a.count)
        .await
        .map_err(|e| failed("set", &a.name, &e))?
    {
        return Ok(());
    }
    let left = latch
        .count()
        .await
        .map_err(|e| failed("read", &a.name, &e))?;
    Err(Failure::conflict(
        a.conflict_exit_code,
        format!(
            "latch {:?} is counting already (count {left}); left as it is",
            a.name
        ),
    ))
}

async fn count_down(client: &redlatch::Client, a: &NameArgs) -> Result<(), Failure> {
    let left = client
        .count_down_latch(a.name.clone())
        .count_down()
        .await
        .map_err(|e| failed("count down", &a.name, &e))?;
    println!("{left}");
    Ok(())
}

async fn count(client: &redlatch::Client, a: &NameArgs) -> Result<(), Failure> {
    let n = client
        .count_down_latch(a.name.clone())
        .count()
        .await
        .map_err(|e| failed("read", &a.name, &e))?;
    println!("{n}");
    Ok(())
}

async fn wait(
    client: &redlatch::Client,
    a: &WaitArgs,
    signals: &mut Signals,
) -> Result<(), Failure> {
    let latch = client.count_down_latch(a.name.clone());
    let opened = async {
        match a.wait {
            None => latch.wait().await.map(|()| true),
            Some(t) => latch.wait_timeout(t).await,
        }
    };
    let opened = tokio::select! {
        r = opened => r.map_err(|e| failed("wait for", &a.name, &e))?,
        sig = signals.recv() => {
            return Err(Failure::new(
                128 + sig as i32 as u8,
                format!("{sig} while waiting for latch {:?}", a.name),
            ));
        }
    };
    if opened {
        return Ok(());
    }
    Err(Failure::conflict(
        a.conflict_exit_code,
        format!(
            "latch {:?} still counting after {}",
            a.name,
            human(a.wait.unwrap_or_default())
        ),
    ))
}
