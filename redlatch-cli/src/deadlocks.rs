//! `redlatch deadlocks`: cycles of tasks each waiting for a lock the next one holds,
//! across every redlatch client of the deployment.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use redlatch::{Deadlocks, HolderInfo};

use crate::conn::{self, RedisArgs};
use crate::duration;
use crate::exit::{self, Failure};
use crate::stdout::out;

const JSON_SHAPE: &str = "\
With --json, one JSON document on stdout:
  { \"clients\": 3,                 // redlatch clients whose ledgers were read
    \"unread\": [\"host:port\"],      // primaries/masters not scanned in time (incomplete)
    \"cycles\": [ { \"tasks\": [ { \"holder\": { \"id\": \"uuid:n\", \"host\": \"h\" | null,
        \"pid\": 42 | null, \"app\": \"a\" | null, \"version\": \"0.1.0\" | null,
        \"since\": ms | null, \"acquired\": null },
        \"holds\": \"L1\", \"waits_for\": \"L2\", \"waiting_since\": ms | null } ] } ] }
Each task holds `holds` and waits for `waits_for`, held by the next task (the last
task's by the first). A task is a holder id: two tasks of one client that hold and
wait independently are not a cycle. Redisson (Java) holders keep no ledger: a cycle
through one is not seen. Exit status: 1 a cycle exists, 0 none, 69 unreachable.";

#[derive(Args, Debug)]
#[command(after_help = JSON_SHAPE)]
pub struct DeadlocksArgs {
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,

    /// How long to read the ledgers for at most (then the answer names what it
    /// could not read).
    #[arg(long, value_name = "DUR", default_value = "5s", value_parser = duration::parse)]
    pub timeout: Duration,

    #[command(flatten)]
    pub redis: RedisArgs,
}

/// The exit status when a cycle exists.
pub const FOUND: u8 = 1;

pub async fn run(args: DeadlocksArgs) -> ExitCode {
    match execute(&args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

async fn execute(args: &DeadlocksArgs) -> Result<u8, Failure> {
    let client = conn::connect(conn::for_queries(args.redis.config()?)).await?;
    let found = client.deadlocks(args.timeout).await;
    client.close(Duration::from_secs(1)).await;
    if args.json {
        let doc = serde_json::to_string(&found)
            .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot write JSON: {e}")))?;
        out(&format!("{doc}\n"));
    } else {
        out(&text(&found));
    }
    if !found.unread.is_empty() {
        eprintln!(
            "redlatch: incomplete: could not read {} in time",
            found.unread.join(", ")
        );
    }
    Ok(if found.cycles.is_empty() { 0 } else { FOUND })
}

/// `uuid:n (app on host, pid p)`, or `uuid:n (no record)`.
pub fn holder_line(h: &HolderInfo) -> String {
    match (&h.app, &h.host, h.pid) {
        (Some(app), Some(host), Some(pid)) => format!("{} ({app} on {host}, pid {pid})", h.id),
        _ => format!("{} (no record)", h.id),
    }
}

fn text(found: &Deadlocks) -> String {
    if found.cycles.is_empty() {
        return format!("no deadlock among {} redlatch client(s)\n", found.clients);
    }
    let mut s = format!("{} deadlock(s):\n", found.cycles.len());
    for (i, cycle) in found.cycles.iter().enumerate() {
        s.push_str(&format!("  cycle {}:\n", i + 1));
        for t in &cycle.tasks {
            s.push_str(&format!(
                "    {} holds {:?}, waits for {:?}\n",
                holder_line(&t.holder),
                t.holds,
                t.waits_for
            ));
        }
    }
    s
}
