//! `redlatch status NAME`: what every master holds for a lock.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use redlatch::{Client, MasterStatus};
use serde::Serialize;
use serde_json::Value;

use crate::conn::{self, RedisArgs};
use crate::duration::human;
use crate::exit::{self, Failure};
use crate::stdout::out;

const JSON_SHAPE: &str = "\
With --json, one JSON document on stdout (each master is the library's MasterStatus as
serde serializes it, plus deadline_in_ms in the queue):
  { \"name\": \"NAME\", \"masters_total\": 3, \"quorum\": 2, \"answered\": 3,
    \"locked\": true,              // one holder holds it on a majority of masters
    \"holder\": \"uuid:n\" | null,  // that holder
    \"masters\": [ { \"master\": \"host:port\",
                   \"error\": null | \"why this master could not be read\",
                   \"type\": \"hash\" | \"none\" | other Redis type (not a lock),
                   \"holders\": [ { \"holder\": \"uuid:n\", \"count\": 1 } ],
                   \"holder_info\": [ { \"id\": \"uuid:n\", \"host\": \"h\" | null, \"pid\": 42 | null,
                                     \"app\": \"a\" | null, \"version\": \"0.1.0\" | null,
                                     \"since\": ms | null,      // the client connected
                                     \"acquired\": ms | null } ],  // null: a Redisson holder's,
                                                                 // or younger than ~1 s
                   \"ttl_ms\": 29500 | null,
                   \"queue\": [ { \"holder\": \"uuid:n\", \"deadline_ms\": 1700000000000 | null,
                                \"deadline_in_ms\": 4200 | null } ],
                   \"fencing_counter\": 7 | null,
                   \"mode\": \"read\" | \"write\" | null,      // a read-write lock
                   \"counter\": 3 | null,                      // a semaphore or latch
                   \"permits\": [ { \"holder\": \"permit id\", \"deadline_ms\": ... } ],
                   \"writers_waiting\": [ { \"holder\": \"uuid:n:write\", \"deadline_ms\": ... } ],
                   \"waiters\": 2,   // clients subscribed to its channel (at least)
                   \"waiting\": [ { \"id\": \"uuid:n\", \"deadline_ms\": ms | null,
                                  \"waiting_since\": ms | null, \"host\": .., \"pid\": ..,
                                  \"app\": .. } ],  // each redlatch waiter, named
                   \"replicas\": { \"connected\": 2, \"eligible\": 1,  // of the primary serving NAME
                                  \"waited\": 1 | null } | null } ],  // null: --sync-replicas off
    \"election\": null | { \"term\": 7, \"value\": \"V\", \"holder\": \"uuid:n\",
                          \"lease_left_ms\": 29000 | null } }  // the leader of election NAME
NAME may be a lock, a read-write lock, a semaphore (its counter and, for an expirable one,
its permits) or a count-down latch.
Exit status: 0 held (one holder on a majority of masters; a read lock: a reader; an
expirable semaphore: a permit taken; an election: a leader), 1 free (also a plain semaphore or latch, which
only count), 69 when fewer than a majority of masters answered, 65 if NAME is none of
these (another type, a hash that holds no hold counts, or a hash without expiry: a lock
always has a lease). Like `redlatch leader`: 0 leads, 1 nobody.";

#[derive(Args, Debug)]
#[command(after_help = JSON_SHAPE)]
pub struct StatusArgs {
    /// Lock name.
    pub name: String,

    /// The lock is a fair lock: always show its waiter queue, even when empty.
    #[arg(long)]
    pub fair: bool,

    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub redis: RedisArgs,
}

/// `status`'s exit status when NAME is free (0 is held), as `leader`'s when nobody leads.
pub const FREE: u8 = 1;

pub async fn run(args: StatusArgs) -> ExitCode {
    match execute(&args).await {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

async fn execute(args: &StatusArgs) -> Result<u8, Failure> {
    let client = conn::connect(conn::for_queries(args.redis.config()?)).await?;
    let masters = read(&client, &args.name, args.fair).await?;
    let leader = crate::leader::of_status(&client, &args.name).await;
    if args.json {
        let mut doc = to_json(&args.name, &client, &masters)?;
        doc["election"] = crate::leader::json(leader.as_ref());
        out(&format!("{doc}\n"));
    } else {
        out(&table(&args.name, &client, &masters, args.fair));
        out(&crate::leader::line(&args.name, leader.as_ref()));
    }
    check_type(&args.name, &masters)?;
    check_quorum(&client, &masters)?;
    Ok(if held(&client, &masters) || leader.is_some() {
        0
    } else {
        FREE
    })
}

/// Held: one holder on a majority of masters, or permits taken there.
fn held(client: &Client, masters: &[MasterStatus]) -> bool {
    let permits = masters.iter().filter(|m| !m.permits.is_empty()).count();
    majority_holder(client, masters).is_some() || permits >= client.quorum()
}

/// Reads the lock on every master.
pub async fn read(client: &Client, name: &str, fair: bool) -> Result<Vec<MasterStatus>, Failure> {
    let lock = if fair {
        client.fair_lock(name)
    } else {
        client.lock(name)
    };
    lock.status()
        .await
        .map_err(|e| exit::from_error(&format!("cannot read lock {name:?}"), &e))
}

/// Fails with 69 when fewer than a majority of masters could be read.
pub fn check_quorum(client: &Client, masters: &[MasterStatus]) -> Result<(), Failure> {
    let answered = masters.iter().filter(|m| m.error.is_none()).count();
    if answered >= client.quorum() {
        return Ok(());
    }
    Err(Failure::new(
        exit::UNAVAILABLE,
        format!(
            "only {answered} of {} masters answered, {} needed",
            masters.len(),
            client.quorum()
        ),
    ))
}

/// Fails with 65 when a master holds something else than a lock under the name, or
/// a lock key without expiry: the wording of the library's `WrongType` and `BadData`.
pub fn check_type(name: &str, masters: &[MasterStatus]) -> Result<(), Failure> {
    if let Some(m) = masters.iter().find(|m| not_a_lock(m)) {
        let what = if m.key_type == "hash" {
            "holds a hash of no hold counts, not a lock".to_string()
        } else {
            format!("holds a value of another type ({}), not a lock", m.key_type)
        };
        return Err(Failure::new(
            exit::DATA,
            format!("key {name:?} on master {} {what}", m.master),
        ));
    }
    match masters.iter().find(|m| no_expiry(m)) {
        Some(m) => Err(Failure::new(
            exit::DATA,
            format!(
                "lock {name:?} on master {}: unusable data: {NO_EXPIRY}",
                m.master
            ),
        )),
        None => Ok(()),
    }
}

/// What a lock key without expiry is (the library's `BadData` detail says the same).
const NO_EXPIRY: &str = "the key has no expiry, and a lock always has a lease: it never \
frees by itself (written by something else, or PERSISTed); `redlatch unlock --force` \
deletes it";

/// The key holds another type (`Lock::status` reports it in `key_type`), or is a hash
/// with no hold counts and no read-write mode (a foreign hash).
fn not_a_lock(m: &MasterStatus) -> bool {
    if m.error.is_some() {
        return false;
    }
    match m.key_type.as_str() {
        "none" => false,
        // A counter, or a simple lock (its token read as its holder).
        "string" => m.counter.is_none() && m.holders.is_empty(),
        "hash" => m.holders.is_empty() && m.mode.is_none(),
        _ => true,
    }
}

/// A lock hash without expiry: nothing ever frees it.
fn no_expiry(m: &MasterStatus) -> bool {
    m.error.is_none() && m.key_type == "hash" && m.ttl.is_none()
}

/// The holder present on a majority of masters, if any.
fn majority_holder(client: &Client, masters: &[MasterStatus]) -> Option<String> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for (holder, _) in masters.iter().flat_map(|m| &m.holders) {
        match seen.iter_mut().find(|(h, _)| h == holder) {
            Some((_, n)) => *n += 1,
            None => seen.push((holder, 1)),
        }
    }
    seen.into_iter()
        .find(|(_, n)| *n >= client.quorum())
        .map(|(h, _)| h.to_string())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The `--json` document.
#[derive(Serialize)]
struct Report<'a> {
    name: &'a str,
    masters_total: usize,
    quorum: usize,
    answered: usize,
    /// One holder holds it on a majority of masters.
    locked: bool,
    holder: Option<String>,
    masters: &'a [MasterStatus],
}

fn to_json(name: &str, client: &Client, masters: &[MasterStatus]) -> Result<Value, Failure> {
    let holder = majority_holder(client, masters);
    let report = Report {
        name,
        masters_total: masters.len(),
        quorum: client.quorum(),
        answered: masters.iter().filter(|m| m.error.is_none()).count(),
        locked: holder.is_some(),
        holder,
        masters,
    };
    let mut doc = serde_json::to_value(&report)
        .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot write JSON: {e}")))?;
    // What only the reader's clock knows: how far each waiter's deadline is.
    let now = now_ms();
    let waiters = doc["masters"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|m| m["queue"].as_array_mut())
        .flatten();
    for waiter in waiters {
        let due = waiter["deadline_ms"].as_i64().map(|d| d - now);
        waiter["deadline_in_ms"] = due.into();
    }
    Ok(doc)
}

/// The human-readable report.
pub fn table(name: &str, client: &Client, masters: &[MasterStatus], fair: bool) -> String {
    let now = now_ms();
    let mut out = format!(
        "lock {name:?} on {} master(s), quorum {}: {}\n",
        masters.len(),
        client.quorum(),
        match majority_holder(client, masters) {
            Some(h) => format!("held by {h}"),
            None => "not held by any holder on a majority".to_string(),
        }
    );
    for m in masters {
        out.push_str(&master_lines(m, now, fair));
    }
    out
}

fn master_lines(m: &MasterStatus, now: i64, fair: bool) -> String {
    if not_a_lock(m) {
        let what = match m.key_type.as_str() {
            "hash" => "a hash of no hold counts".to_string(),
            other => format!("a {other}"),
        };
        return format!("  {:<22} NOT A LOCK (the key holds {what})\n", m.master);
    }
    if let Some(e) = &m.error {
        return format!("  {:<22} ERROR {e}\n", m.master);
    }
    let ttl = m
        .ttl
        .map_or("none: NO EXPIRY, never frees by itself".to_string(), human);
    let state = match (m.key_type.as_str(), &m.mode, m.counter) {
        ("none", ..) => "free".to_string(),
        ("string", _, Some(n)) => {
            format!("counter {n} (semaphore permits available, or latch count)")
        }
        (_, Some(mode), _) => format!("read-write lock in {mode} mode, ttl {ttl}"),
        _ => format!("held, ttl {ttl}"),
    };
    let mut out = format!("  {:<22} {state}\n", m.master);
    for (i, (holder, count)) in m.holders.iter().enumerate() {
        out.push_str(&format!("      holder {holder}  count {count}\n"));
        if let Some(info) = m.holder_info.get(i) {
            out.push_str(&format!("        {}\n", who(info, now)));
        }
    }
    if m.waiters > 0 {
        out.push_str(&format!(
            "      waiters: {} (clients subscribed to its channel, at least)\n",
            m.waiters
        ));
    }
    if fair || !m.queue.is_empty() {
        out.push_str(&format!("      queue: {} waiter(s)\n", m.queue.len()));
    }
    for (i, (holder, deadline)) in m.queue.iter().enumerate() {
        let when = deadline.map_or("no deadline".to_string(), |d| relative(d - now));
        out.push_str(&format!("        {}. {holder}  deadline {when}\n", i + 1));
        if let Some(w) = m.waiting.iter().find(|w| &w.id == holder) {
            out.push_str(&format!("           {}\n", crate::list::waiting(w, now)));
        }
    }
    if m.queue.is_empty() {
        for (i, w) in m.waiting.iter().enumerate() {
            let line = crate::list::waiting(w, now);
            out.push_str(&format!("        {}. {}  {line}\n", i + 1, w.id));
        }
    }
    if !m.permits.is_empty() {
        out.push_str(&format!("      permits taken: {}\n", m.permits.len()));
    }
    for (id, expires) in &m.permits {
        let when = match expires {
            Some(at) if *at >= 922_337_203_685_477 => "never (no lease)".to_string(),
            Some(at) => relative(at - now),
            None => "-".to_string(),
        };
        out.push_str(&format!("        permit {id}  expires {when}\n"));
    }
    for (writer, lapses) in &m.writers_waiting {
        let when = lapses.map_or("-".to_string(), |d| relative(d - now));
        out.push_str(&format!(
            "      writer waiting {writer}  intent lapses {when}\n"
        ));
    }
    if let Some(counter) = m.fencing_counter {
        out.push_str(&format!("      fencing counter {counter}\n"));
    }
    // A master without replicas (none connected, none expected) has nothing to say.
    if let Some(r) = m.replicas.filter(|r| r.connected > 0 || r.eligible > 0) {
        out.push_str(&format!(
            "      replicas: {} connected, {} eligible (online and caught up: acquisitions \
             wait for them)\n",
            r.connected, r.eligible
        ));
    }
    out
}

/// `app myapp on host h, pid 42, acquired 3s ago (client connected 1m ago)`, or what a
/// holder without a record is: a foreign client named by its token's format
/// (foreign.rs), else a Redisson holder or a client that is gone.
fn who(info: &redlatch::HolderInfo, now: i64) -> String {
    let (Some(app), Some(host), Some(pid)) = (&info.app, &info.host, info.pid) else {
        if let (Some(host), Some(at), true) =
            (&info.host, info.acquired, info.id.starts_with("ADDED:"))
        {
            return format!(
                "a scheduled job's run (ShedLock's value) on host {host}, started {}",
                ago(now - at)
            );
        }
        return crate::foreign::describe(&info.id)
            .unwrap_or_else(|| "no record (a Redisson holder, a client that is gone, or one under another --bookkeeping)".into());
    };
    let acquired = info
        .acquired
        .map_or("acquired: not yet known".into(), |at| {
            format!("acquired {}", ago(now - at))
        });
    let since = info.since.map_or(String::new(), |at| {
        format!(" (client connected {})", ago(now - at))
    });
    format!("app {app} on host {host}, pid {pid}, {acquired}{since}")
}

fn ago(ms: i64) -> String {
    format!("{} ago", human(Duration::from_millis(ms.max(0) as u64)))
}

fn relative(delta_ms: i64) -> String {
    let d = Duration::from_millis(delta_ms.unsigned_abs());
    if delta_ms >= 0 {
        format!("in {}", human(d))
    } else {
        format!("{} ago (stale)", human(d))
    }
}
