//! `redlatch list [PATTERN]`: every lock, semaphore, latch and election under a glob
//! pattern, with its holders (who and where), lease left and waiters.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use redlatch::{Client, HolderInfo, Listing, LockListing};

use crate::conn::{self, RedisArgs};
use crate::duration::{self, human};
use crate::exit::{self, Failure};
use crate::stdout::out;

const JSON_SHAPE: &str = "\
With --json, one JSON document on stdout (the library's Listing as serde serializes it):
  { \"locks\": [ { \"name\": \"orders:42\", \"kind\": \"lock\" | \"fair\" | \"fenced\" | \"read_write\"
                 | \"faster_multi\" | \"counter\" | \"expirable_semaphore\" | \"election\",
                 \"key\": \"orders:42\",                // the Redis key (an election's differs)
                 \"holders\": [ { \"id\": \"uuid:n\", \"count\": 1,
                                \"record\": true,       // its client left a record
                                \"host\": \"h\" | null, \"pid\": 42 | null, \"app\": \"a\" | null,
                                \"version\": \"0.1.0\" | null,
                                \"since\": ms | null,    // when its client connected
                                \"acquired\": ms | null, // when it took the lock
                                \"expires_at\": ms | null } ],  // a permit's expiry
                 \"ttl_ms\": 29500 | null,
                 \"waiters\": 2,                        // at least this many wait
                 \"waiting\": [ { \"id\": \"uuid:n\", \"deadline_ms\": ms | null,
                                \"waiting_since\": ms | null, \"host\": .., \"pid\": ..,
                                \"app\": .. } ],     // each redlatch waiter, named
                 \"queue\": [ ... ],                    // a fair lock's queue, as waiting
                 \"count\": 3 | null,                   // permits left, or a latch's count
                 \"mode\": \"read\" | \"write\" | null, \"fencing_counter\": 7 | null,
                 \"masters\": 1 } ],                    // masters it was found on
    \"incomplete\": false,                              // part of the deployment unread
    \"unread\": [ { \"master\": \"host:port\", \"error\": \"why\" } ] }
Times (ms) are since the epoch. A plain, spin and non-reentrant lock list as \"lock\"; a
semaphore and a latch as \"counter\"; a multi-lock as its locks.
Exit status: 0, or 69 when part of the deployment could not be read by --timeout (what
was read is still printed).";

#[derive(Args, Debug)]
#[command(after_help = JSON_SHAPE)]
pub struct ListArgs {
    /// Glob of the names to list, as Redis SCAN MATCH (`orders:*`, `job?`, `[ab]*`).
    #[arg(default_value = "*")]
    pub pattern: String,

    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,

    /// The longest the whole listing may take (every master, every name).
    #[arg(long, default_value = "5s", value_parser = duration::parse)]
    pub timeout: Duration,

    #[command(flatten)]
    pub redis: RedisArgs,
}

pub async fn run(args: ListArgs) -> ExitCode {
    match execute(&args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

async fn execute(args: &ListArgs) -> Result<u8, Failure> {
    let client = conn::connect(conn::for_queries(args.redis.config()?)).await?;
    let listing = read(&client, &args.pattern, args.timeout).await?;
    if args.json {
        let doc = serde_json::to_string(&listing)
            .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot write JSON: {e}")))?;
        out(&format!("{doc}\n"));
    } else {
        out(&table(&listing, now_ms()));
    }
    if listing.incomplete {
        for u in &listing.unread {
            eprintln!("redlatch: list: not read: {}: {}", u.master, u.error);
        }
        return Ok(exit::UNAVAILABLE);
    }
    Ok(0)
}

/// Lists `pattern` within `timeout`.
pub async fn read(client: &Client, pattern: &str, timeout: Duration) -> Result<Listing, Failure> {
    client
        .list_within(pattern, timeout)
        .await
        .map_err(|e| exit::from_error(&format!("cannot list {pattern:?}"), &e))
}

/// Now, in ms since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The table: one line per name, one more per further holder.
pub fn table(listing: &Listing, now: i64) -> String {
    let mut out = format!(
        "{:<28} {:<12} {:<40} {:>8} {:>7}\n",
        "NAME", "KIND", "HOLDERS (host pid app, held for)", "TTL", "WAITERS"
    );
    for l in &listing.locks {
        let mut holders = l.holders.iter().map(|h| who(&h.holder, now));
        let first = holders.next().unwrap_or_else(|| state(l));
        out.push_str(&format!(
            "{:<28} {:<12} {:<40} {:>8} {:>7}\n",
            l.name,
            l.kind.as_str(),
            first,
            ttl(l),
            l.waiters
        ));
        for more in holders {
            out.push_str(&format!("{:<28} {:<12} {more:<40}\n", "", ""));
        }
        for (i, w) in l.waiting.iter().enumerate() {
            out.push_str(&format!(
                "{:<28} {:<12}   {}. {}\n",
                "",
                "",
                i + 1,
                waiting(w, now)
            ));
        }
    }
    if listing.locks.is_empty() {
        out.push_str("(none)\n");
    }
    out
}

/// A holder in one cell: where it runs, and for how long it holds.
pub fn who(h: &HolderInfo, now: i64) -> String {
    let held = h
        .acquired
        .map_or(String::new(), |s| format!(", {}", ago(now - s)));
    match (&h.host, h.pid, &h.app) {
        (Some(host), pid, app) => format!(
            "{host} {} {}{held}",
            pid.map_or("?".into(), |p| p.to_string()),
            app.as_deref().unwrap_or("?")
        ),
        _ => format!("{} (no record){held}", h.id),
    }
}

/// A waiter in one line: where it runs (or its id, without a record), and for how
/// long it has waited.
pub fn waiting(w: &redlatch::QueuedWaiter, now: i64) -> String {
    let since = w.waiting_since.map_or("?".into(), |s| ago(now - s));
    match (&w.host, w.pid, &w.app) {
        (Some(host), pid, app) => format!(
            "{host} {} {} waiting {since}",
            pid.map_or("?".into(), |p| p.to_string()),
            app.as_deref().unwrap_or("?")
        ),
        _ => format!("{} (no record) waiting {since}", w.id),
    }
}

/// What a name without holders shows: its count, else nothing held.
fn state(l: &LockListing) -> String {
    match l.count {
        Some(n) => format!("count {n}"),
        None => "-".into(),
    }
}

fn ttl(l: &LockListing) -> String {
    l.ttl.map_or("-".into(), human)
}

/// A span of ms as a short duration.
pub fn ago(ms: i64) -> String {
    human(Duration::from_millis(ms.max(0) as u64))
}
