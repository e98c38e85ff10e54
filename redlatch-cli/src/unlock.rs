//! `redlatch unlock --force NAME`: delete a lock whoever holds it, and wake its waiters.

use std::process::ExitCode;

use clap::Args;

use crate::conn::{self, RedisArgs};
use crate::exit::{self, Failure};
use crate::status;
use crate::stdout::out;

const WHY_FORCE: &str = "refusing to unlock without --force (or --ask to ask the holder \
to release it): this deletes the lock \
whoever holds it; a redlatch holder (a `redlatch run`, which stops CMD, or a library \
guard) is told at once, a Redisson holder keeps running until its watchdog notices, and \
a holder with a fixed lease until the lease ends. To release your own lock, let `redlatch run` end";

#[derive(Args, Debug)]
#[command(after_help = "Prints the lock's state before, then what was removed. \
Exit status: 0 (also when there was nothing to remove), 64 without --force or --ask, \
65 if NAME is not a lock, 69 if no majority of masters answered. With --ask: 0 when a \
listening holder was told, 1 when the lock is free or no holder listens.")]
pub struct UnlockArgs {
    /// Lock name.
    pub name: String,

    /// Delete the lock on every master whoever holds it.
    #[arg(long)]
    pub force: bool,

    /// Instead of deleting it, ask its holders to release it (cooperative revocation):
    /// a redlatch holder listening for requests (`redlatch run` forwards it to CMD as
    /// --revoke-signal) finishes and releases. Exit 0 when a listening holder was told,
    /// 1 when the lock is free or nobody listens (Redisson holders never do).
    #[arg(long, conflicts_with = "force")]
    pub ask: bool,

    /// The lock is a fair lock: wake the head of its queue. Implied when a master
    /// shows a non-empty queue.
    #[arg(long)]
    pub fair: bool,

    #[command(flatten)]
    pub redis: RedisArgs,
}

pub async fn run(args: UnlockArgs) -> ExitCode {
    if args.ask {
        return match ask(&args).await {
            Ok(code) => ExitCode::from(code),
            Err(failure) => failure.report(),
        };
    }
    exit::finish(execute(&args).await)
}

async fn ask(args: &UnlockArgs) -> Result<u8, Failure> {
    let client = conn::connect(args.redis.config()?).await?;
    let lock = if args.fair {
        client.fair_lock(args.name.clone())
    } else {
        client.lock(args.name.clone())
    };
    let code = crate::revoke::ask(&lock).await;
    client.close(std::time::Duration::from_secs(5)).await;
    code
}

async fn execute(args: &UnlockArgs) -> Result<(), Failure> {
    if !args.force {
        return Err(Failure::usage(WHY_FORCE));
    }
    let client = conn::connect(args.redis.config()?).await?;
    let before = status::read(&client, &args.name, args.fair).await?;
    let fair = args.fair || before.iter().any(|m| !m.queue.is_empty());
    out("before:\n");
    out(&status::table(&args.name, &client, &before, fair));
    let lock = if fair {
        client.fair_lock(args.name.clone())
    } else {
        client.lock(args.name.clone())
    };
    let deleted = lock
        .force_unlock()
        .await
        .map_err(|e| exit::from_error(&format!("cannot force-unlock {:?}", args.name), &e))?;
    out(&format!(
        "{}\n",
        summary(&args.name, &before, deleted, fair)
    ));
    Ok(())
}

fn summary(name: &str, before: &[redlatch::MasterStatus], deleted: bool, fair: bool) -> String {
    if !deleted {
        return format!("removed: nothing, lock {name:?} was not held");
    }
    let mut holders: Vec<String> = Vec::new();
    for (holder, count) in before.iter().flat_map(|m| &m.holders) {
        let entry = format!("{holder} (count {count})");
        if !holders.contains(&entry) {
            holders.push(entry);
        }
    }
    let woke = if fair {
        "woke the head of the queue"
    } else {
        "woke its waiters"
    };
    format!(
        "removed: lock {name:?} held by {}; {woke}",
        if holders.is_empty() {
            "nobody known".to_string()
        } else {
            holders.join(", ")
        }
    )
}
