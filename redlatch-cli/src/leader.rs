//! `redlatch leader NAME [--watch [--count N]]`: who leads election NAME, and (with
//! --watch) every change as it happens.

use std::process::ExitCode;

use clap::Args;

use crate::child::Signals;
use crate::conn::{self, RedisArgs};
use crate::exit::{self, Failure};
use crate::stdout::out;

#[derive(Args, Debug)]
#[command(after_help = "\
Prints `TERM VALUE` of the current leader (exit 0), or nothing when nobody leads (exit 1).
With --watch, first `leader TERM VALUE` or `none`, then one line per change, each once,
in order: `elected TERM VALUE`, `proclaimed TERM VALUE` or `resigned TERM VALUE`, until
SIGINT/SIGTERM (exit 0) or --count changes. A leader whose process died logs nothing:
the next `elected` (with a greater term) follows when its lease has run out.
Other exit status: 64 usage, 69 Redis unavailable, 78 not supported (Redlock).")]
pub struct LeaderArgs {
    /// Election name.
    pub name: String,

    /// Keep printing changes as they happen.
    #[arg(long)]
    pub watch: bool,

    /// With --watch: exit after N changes.
    #[arg(long, value_name = "N", requires = "watch")]
    pub count: Option<u64>,

    #[command(flatten)]
    pub redis: RedisArgs,
}

pub async fn run(args: LeaderArgs) -> ExitCode {
    match execute(&args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

async fn execute(args: &LeaderArgs) -> Result<u8, Failure> {
    let client = conn::connect(args.redis.config()?).await?;
    let election = client.election(args.name.clone());
    let fail =
        |e: redlatch::Error| exit::from_error(&format!("cannot read election {:?}", args.name), &e);
    if !args.watch {
        return match election.leader().await.map_err(fail)? {
            Some(l) => {
                out(&format!("{} {}\n", l.term, l.value));
                Ok(0)
            }
            None => Ok(1),
        };
    }
    let mut signals = Signals::install()?;
    let mut observer = election.observe().await.map_err(fail)?;
    match observer.leader() {
        Some(l) => out(&format!("leader {} {}\n", l.term, l.value)),
        None => out("none\n"),
    }
    let mut seen = 0u64;
    while args.count.is_none_or(|n| seen < n) {
        let change = tokio::select! {
            c = observer.next() => c.map_err(fail)?,
            _ = signals.recv() => return Ok(0),
        };
        let kind = match change.kind {
            redlatch::ChangeKind::Elected => "elected",
            redlatch::ChangeKind::Proclaimed => "proclaimed",
            redlatch::ChangeKind::Resigned => "resigned",
            _ => "changed",
        };
        out(&format!("{kind} {} {}\n", change.term, change.value));
        seen += 1;
    }
    Ok(0)
}

/// The leader of election `name` for `status` (none under Redlock, or unreadable: the
/// lock's own report says what is wrong).
pub async fn of_status(client: &redlatch::Client, name: &str) -> Option<redlatch::Leader> {
    if client.masters().len() > 1 {
        return None;
    }
    client.election(name).leader().await.ok().flatten()
}

/// `status`'s line for the leader of election `name`, empty when nobody leads.
pub fn line(name: &str, leader: Option<&redlatch::Leader>) -> String {
    match leader {
        Some(l) => format!(
            "election {name:?}: leader {:?}, term {}, holder {}{}\n",
            l.value,
            l.term,
            l.holder,
            l.lease_left
                .map(|d| format!(", lease {}", crate::duration::human(d)))
                .unwrap_or_default()
        ),
        None => String::new(),
    }
}

/// `status --json`'s `election` field.
pub fn json(leader: Option<&redlatch::Leader>) -> serde_json::Value {
    match leader {
        Some(l) => serde_json::json!({
            "term": l.term,
            "value": l.value,
            "holder": l.holder,
            "lease_left_ms": l.lease_left.map(|d| d.as_millis() as u64),
        }),
        None => serde_json::Value::Null,
    }
}
