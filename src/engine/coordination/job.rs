//! Scheduled jobs (docs/jobs.md): a run takes ShedLock's lock for the job
//! (kinds/shedlock.rs: the string key, its value) and keeps redlatch's record
//! beside it (`redlatch_job:{<key>}`, a hash in the same hash slot): the last completed
//! tick, the run in progress, the last run. The scripts: `lua/job_acquire.lua`,
//! `lua/job_release.lua`, `lua/job_extend.lua`.
//!
//! Invariants:
//! 1. A run begins only through job_acquire.lua, which reads the record and takes the
//!    lock in one script: a tick recorded as done is never begun again on that master.
//! 2. Under Redlock a run needs a majority of the masters granted within the lease's
//!    validity; a master that says the tick is done makes the tick done (the record is
//!    written only by a run that ran to its end); a minority's grants are undone
//!    (compare-and-delete, the record's run-in-progress fields cleared).
//! 3. A release keeps the lock for what is left of `at_least` (compare-and-pexpire),
//!    else deletes it (compare-and-delete): ShedLock's safe-update release. It never
//!    touches a key that holds another value.
//! 4. These scripts are the job's own, not the simple lock's, but a release that
//!    deletes the lock publishes on the simple lock's wake channel of the key, as
//!    simple_release.lua does: a waiting run ([`JobWake`]) subscribes to it after its
//!    first refusal, tries again once a majority confirmed it, and each pause between
//!    tries ends on a message (spin_wait.rs invariant 1a). ShedLock publishes nothing:
//!    its releases are seen at the next try.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;

use crate::engine::kinds::inspect::text;
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::{addrs, fan_out, no_quorum};
use crate::engine::masters::replies::{protocol, typed};
use crate::engine::masters::Masters;
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::pubsub::{PubSub, Subscription};
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

static ACQUIRE: LazyLock<Script> = lua!("job_acquire.lua");
static RELEASE: LazyLock<Script> = lua!("job_release.lua");
static EXTEND: LazyLock<Script> = lua!("job_extend.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 3] {
    [&ACQUIRE, &RELEASE, &EXTEND]
}

/// The prefix of every job record.
pub(crate) const RECORD_PREFIX: &str = "redlatch_job";

/// The record of the job whose lock is `key`: `redlatch_job:{key}` (the key's own
/// slot; a key with a hash tag keeps it: `redlatch_job:key`).
pub(crate) fn record_key(key: &str) -> String {
    keys::derived(RECORD_PREFIX, key)
}

/// One run's keys and value.
#[derive(Clone, Debug)]
pub(crate) struct JobCall {
    pub(crate) key: String,
    pub(crate) record: String,
    /// The run's value (ShedLock's format).
    pub(crate) value: String,
}

/// What a run asks for when it begins.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Begin {
    pub(crate) lease: Duration,
    /// The tick, ms since the epoch.
    pub(crate) tick: Option<i64>,
    pub(crate) period_ms: u64,
    pub(crate) now_ms: i64,
    pub(crate) record_ttl_ms: u64,
}

/// What job_acquire.lua answered, judged over the masters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Began {
    /// The run may go: the last completed tick before it and a tick begun and never
    /// completed (both ms since the epoch), and how long the lease is valid.
    Granted {
        done: Option<i64>,
        abandoned: Option<i64>,
        validity: Duration,
    },
    /// Another run holds the lock: its value, lease left (ms, -1 none), app.
    Held {
        value: String,
        pttl_ms: i64,
        app: Option<String>,
    },
    /// The tick (or a later one) is done: the last completed tick.
    Done { tick: i64 },
}

/// How a run ended, for the release and the record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Finish {
    /// What is left of `at_least` (zero: delete the lock).
    pub(crate) keep: Duration,
    pub(crate) tick: Option<i64>,
    /// `ran`, `panicked`, `cancelled`, `failed`, or `undo`.
    pub(crate) outcome: &'static str,
    pub(crate) start_ms: i64,
    pub(crate) end_ms: i64,
    pub(crate) missed: u64,
    pub(crate) record_ttl_ms: u64,
}

/// A master's answer to job_acquire.lua.
enum Answer {
    Granted(Option<i64>, Option<i64>),
    Held(String, i64, Option<String>),
    Done(i64),
    WrongType(usize),
}

fn opt_ms(v: &Value) -> Option<i64> {
    text(v).and_then(|s| s.parse().ok())
}

fn read_answer(addr: &str, v: Value) -> Result<Answer> {
    let bad = || protocol(addr, "job_acquire", &v);
    let Value::Array(items) = &v else {
        return Err(bad());
    };
    let status = items.first().and_then(crate::engine::masters::replies::int);
    match (status, items.as_slice()) {
        (Some(1), [_, done, abandoned]) => Ok(Answer::Granted(opt_ms(done), opt_ms(abandoned))),
        (Some(0), [_, value, Value::Int(pttl), app]) => Ok(Answer::Held(
            text(value).unwrap_or_default(),
            *pttl,
            text(app).filter(|a| !a.is_empty()),
        )),
        (Some(2), [_, done]) => opt_ms(done).map(Answer::Done).ok_or_else(bad),
        (Some(3), [_, Value::Int(which)]) => Ok(Answer::WrongType(*which as usize)),
        _ => Err(bad()),
    }
}

fn begin_call(call: &JobCall, b: &Begin, host: &str, app: &str) -> Invocation {
    let mut inv = ACQUIRE.call();
    let tick = b.tick.map(|t| t.to_string()).unwrap_or_default();
    inv.key(&call.key)
        .key(&call.record)
        .arg(b.lease.as_millis().max(1) as u64)
        .arg(&call.value)
        .arg(tick)
        .arg(b.period_ms)
        .arg(b.now_ms)
        .arg(host)
        .arg(app)
        .arg(b.record_ttl_ms);
    inv
}

fn finish_call(call: &JobCall, f: &Finish, host: &str, app: &str) -> Invocation {
    let mut inv = RELEASE.call();
    let tick = f.tick.map(|t| t.to_string()).unwrap_or_default();
    inv.key(&call.key)
        .key(&call.record)
        .arg(&call.value)
        .arg(f.keep.as_millis() as u64)
        .arg(tick)
        .arg(f.outcome)
        .arg(f.start_ms)
        .arg(f.end_ms)
        .arg(host)
        .arg(app)
        .arg(f.record_ttl_ms)
        .arg(f.missed)
        .arg(keys::simple_channel(&call.key));
    inv
}

/// A script's 1 or 0 on one master.
async fn flag(m: &Master, name: &str, inv: &Invocation) -> Result<bool> {
    match m.eval(Lane::Lock, inv).await.map_err(|e| typed(name, e))? {
        Value::Int(n) => Ok(n == 1),
        other => Err(protocol(m.addr(), "job", &other)),
    }
}

/// A waiting run's subscription to its job's wake channel (invariant 4).
pub(crate) struct JobWake(Subscription);

impl JobWake {
    /// Marks every wake-up so far as seen: call before each try.
    pub(crate) fn mark_seen(&mut self) {
        self.0.mark_seen();
    }

    /// Waits for a release's message (or a reconnect), at most `max`.
    pub(crate) async fn wait(&mut self, max: Duration) {
        self.0.wait(max).await;
    }
}

/// Subscribes to the job `key`'s wake channel and waits (at most `within`) for a
/// majority to confirm it (invariant 4). A refusal (ACL) is logged: the wait goes on
/// polling.
pub(crate) async fn listen(pubsub: &PubSub, key: &str, within: Duration) -> JobWake {
    let mut sub = pubsub.subscribe(keys::simple_channel(key));
    if let Err((addr, detail)) = sub.ready(within).await {
        tracing::debug!(target: "redlatch", job = %key, master = %addr, %detail,
            "the wake channel is refused: waiting by polling alone");
    }
    JobWake(sub)
}

/// Checks a job's lock key: a lock name's rules, and on Redis Cluster (`cluster`) a
/// key whose record can share its slot (no '{' without a `{tag}`, no '}' without a
/// '{').
pub(crate) fn check(key: &str, cluster: bool) -> Result<()> {
    keys::validate(key)?;
    keys::validate(&record_key(key))?;
    if cluster {
        keys::validate_cluster(key)?;
        if key.contains('}') && !key.contains('{') {
            return Err(Error::InvalidName(format!(
                "on Redis Cluster the job key {key:?} has a '}}' without a '{{': its \
                 record could not share its hash slot"
            )));
        }
    }
    Ok(())
}

/// This process's host name, as a job records it.
pub(crate) fn host() -> &'static str {
    static HOST: LazyLock<String> = LazyLock::new(crate::engine::kinds::shedlock::host_name);
    &HOST
}

/// Who runs a job: this process's host and the client's app name.
pub(crate) type Identity<'a> = (&'a str, &'a str);

/// Begins a run on `masters` (invariants 1 and 2); `validity` is the lease's Redlock
/// validity, the time the masters took is taken from it.
pub(crate) async fn begin(
    masters: &Masters,
    call: &JobCall,
    b: &Begin,
    (host, app): Identity<'_>,
    validity: Duration,
) -> Result<Began> {
    let inv = begin_call(call, b, host, app);
    let started = tokio::time::Instant::now();
    let results = fan_out(masters.all(), |m| {
        let inv = &inv;
        async move {
            let (v, _) = m.eval_acquire(inv).await.map_err(|e| typed(&call.key, e))?;
            read_answer(m.addr(), v)
        }
    })
    .await;
    let validity = validity.saturating_sub(started.elapsed());
    let granted: Vec<usize> = (results.iter().enumerate())
        .filter(|(_, r)| matches!(r, Ok(Answer::Granted(..))))
        .map(|(i, _)| i)
        .collect();
    let verdict = judge_begin(masters, call, &results, granted.len(), validity);
    if !matches!(verdict, Ok(Began::Granted { .. })) && !granted.is_empty() {
        undo(masters, call, &granted, (host, app)).await;
    }
    verdict
}

/// What the masters' answers to a run's beginning make (invariant 2).
fn judge_begin(
    masters: &Masters,
    call: &JobCall,
    results: &[Result<Answer>],
    granted: usize,
    validity: Duration,
) -> Result<Began> {
    let mut best = Began::Granted {
        done: None,
        abandoned: None,
        validity,
    };
    let mut held = None;
    let mut done = None;
    for (m, r) in masters.iter().zip(results) {
        match r {
            Ok(Answer::WrongType(which)) => {
                let name = if *which == 2 { &call.record } else { &call.key };
                return Err(Error::WrongType {
                    name: name.clone(),
                    addr: m.addr().to_string(),
                });
            }
            Ok(Answer::Done(t)) => done = done.max(Some(*t)),
            Ok(Answer::Held(value, pttl_ms, app)) if held.is_none() => {
                held = Some(Began::Held {
                    value: value.clone(),
                    pttl_ms: *pttl_ms,
                    app: app.clone(),
                })
            }
            Ok(Answer::Granted(d, a)) => {
                if let Began::Granted {
                    done, abandoned, ..
                } = &mut best
                {
                    *done = (*done).max(*d);
                    *abandoned = (*abandoned).max(*a);
                }
            }
            _ => {}
        }
    }
    if let Some(tick) = done {
        return Ok(Began::Done { tick });
    }
    if granted >= masters.quorum() && !validity.is_zero() {
        return Ok(best);
    }
    if let Some(held) = held {
        return Ok(held);
    }
    let results = results.iter().map(|r| match r {
        Err(e) => Some(Err::<(), _>(e.clone())),
        Ok(_) => None,
    });
    Err(no_quorum(
        granted,
        masters.quorum(),
        &addrs(masters.all()),
        results,
    ))
}

/// Undoes the grants of masters `which` (a minority, or a tick done elsewhere).
async fn undo(masters: &Masters, call: &JobCall, which: &[usize], (host, app): Identity<'_>) {
    let undo = Finish {
        keep: Duration::ZERO,
        tick: None,
        outcome: "undo",
        start_ms: 0,
        end_ms: 0,
        missed: 0,
        record_ttl_ms: 1,
    };
    let inv = finish_call(call, &undo, host, app);
    let undos = which
        .iter()
        .map(|&i| flag(&masters.all()[i], &call.key, &inv));
    for r in futures_util::future::join_all(undos).await {
        if let Err(e) = r {
            tracing::debug!(job = %call.key, error = %e, "undoing a minority's grant failed; its lease ends it");
        }
    }
}

/// Ends a run (invariant 3): true when a majority still held the run's value (it was
/// deleted or kept for `at_least`), false when the run had lost the lock.
pub(crate) async fn finish(
    masters: &Masters,
    call: &JobCall,
    f: &Finish,
    (host, app): Identity<'_>,
) -> Result<bool> {
    let inv = finish_call(call, f, host, app);
    let results = fan_out(masters.all(), |m| flag(m, &call.key, &inv)).await;
    judge_flags(masters, results)
}

/// Sets a running run's lease to `lease` again (keep-alive): true when a majority
/// still held it.
pub(crate) async fn extend(masters: &Masters, call: &JobCall, lease: Duration) -> Result<bool> {
    let mut inv = EXTEND.call();
    inv.key(&call.key)
        .arg(&call.value)
        .arg(lease.as_millis().max(1) as u64);
    let results = fan_out(masters.all(), |m| flag(m, &call.key, &inv)).await;
    judge_flags(masters, results)
}

/// True when a majority answered true; an error when fewer than a majority answered.
fn judge_flags(masters: &Masters, results: Vec<Result<bool>>) -> Result<bool> {
    let answered = results.iter().filter(|r| r.is_ok()).count();
    if answered < masters.quorum() {
        let results = results.into_iter().map(Some);
        return Err(no_quorum(
            answered,
            masters.quorum(),
            &addrs(masters.all()),
            results,
        ));
    }
    let said_true = results.iter().filter(|r| matches!(r, Ok(true))).count();
    Ok(said_true >= masters.quorum())
}
