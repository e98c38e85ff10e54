//! One acquisition attempt over all masters: the steps of Redlock (docs/design.md):
//! send the acquire to every master at once, count the grants, check the validity left,
//! and undo a failed attempt everywhere it may have landed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Instant as TokioInstant;

use crate::engine::holding::release::{release_on, release_until_answered};
use crate::engine::kinds::{self, fair_offers, Ask};
use crate::engine::masters::clock::{cut, until};
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::quorum::{addrs, count, fan_out, fan_out_until, no_quorum};
use crate::engine::masters::replies::Acquire;
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};

/// Releases a cancelled attempt on every master it may have landed on, asking a
/// master that failed for a passing reason again until it answers, the lease would
/// have ended the grant anyway, or the client shuts down: in a storm of cancelled calls
/// a release can wait in the group-commit queue past the master timeout and be dropped
/// unsent, while the acquire it undoes was sent (seen under Redlock's 50 ms master
/// timeout). The caller holds the holder's `Settling` meanwhile.
async fn undo_cancelled(
    engine: &Arc<Engine>,
    name: &Arc<str>,
    holder: &Arc<str>,
    lease_ms: u64,
    kind: Kind,
) {
    let give_up = Instant::now() + Duration::from_millis(lease_ms);
    release_until_answered(engine, name, holder, lease_ms, kind, give_up, |_| false).await;
}

/// A granted attempt.
pub(crate) struct Grant {
    pub(crate) validity: Duration,
    pub(crate) token: Option<u64>,
    pub(crate) fresh: bool,
    pub(crate) started: Instant,
    /// Granted by every master: nothing of the attempt is left anywhere (a fair waiter
    /// may still be queued on a master that refused it).
    pub(crate) everywhere: bool,
}

/// What one attempt came to.
pub(crate) enum Outcome {
    Granted(Grant),
    /// Held by someone else (or a split vote): wait for a message, at most `retry_in`.
    Busy {
        retry_in: Duration,
        split: bool,
    },
    /// No majority answered at all, or (fenced, Redlock) too few masters answered to
    /// vouch for the token (see [`confirm`]).
    Unavailable(Error),
}

/// What an attempt needs to know.
pub(crate) struct Request {
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    pub(crate) lease: Duration,
    pub(crate) kind: Kind,
    /// What the acquire asks for beyond name, lease and holder.
    pub(crate) ask: Ask,
    /// The holder already holds the lock: on failure, release only where granted.
    pub(crate) reentrant: std::sync::atomic::AtomicBool,
    /// A plain waiter that may be handed the lock by another client's release: its
    /// ticket (tickets.rs), registered in the waiter registry when refused.
    pub(crate) waiting: Option<Waiting>,
}

/// One attempt: fan out, count, check validity, clean up on failure.
///
/// Cancel safety: if the future is dropped after the acquire went out and before a
/// grant was handed over, a background task releases on all masters
/// ([`undo_cancelled`]), so a cancelled `lock()` never leaves a lock behind. (A cancelled re-entrant attempt is not undone:
/// the release could remove one of the holder's real holds instead.)
///
/// `end`: when the attempt is abandoned (waiter/mod.rs invariant 11). A master that has
/// not answered by then counts as timed out; what the attempt still had to do there
/// (the undo of a refused attempt, a fenced token's write-back) is left to the
/// background undo above.
pub(crate) async fn attempt(
    inner: &Arc<Engine>,
    req: &Request,
    end: Option<TokioInstant>,
) -> Result<Outcome> {
    let started = Instant::now();
    let lease_ms = req.lease.as_millis() as u64;
    let kind = req.kind;
    let reentrant = req.reentrant.load(std::sync::atomic::Ordering::Relaxed);
    let undo = arm_undo(inner, req, kind, !reentrant);
    let (name, holder) = (&req.name, &req.holder);
    let quorum = inner.quorum;
    // A plain lock is ours once a majority granted it; the other masters' answers
    // land in the background. Fair and fenced attempts need every answer (queues to
    // leave, the largest token), and so does a re-entry: should it fail after all (no
    // validity left), it is undone only where granted, which must be known.
    let plain = kind.protocol().policy().majority_suffices && !reentrant;
    let results = fan_out_until(
        &inner.masters,
        &inner.cleanups,
        |m| {
            let (name, holder, ask) = (name.clone(), holder.clone(), req.ask);
            let waiting = req.waiting.clone();
            async move {
                let call = (&name, lease_ms, &holder);
                let sent = kinds::acquire(&m, kind.protocol(), call, &ask, waiting);
                // A deadline the request cannot outlast needs no timer (Master::may_outlast).
                let end = end.filter(|&end| m.may_outlast(end));
                cut(end, m.addr(), sent).await
            }
        },
        |rs| plain && count(rs, |a| matches!(a, Acquire::Granted { .. })) >= quorum,
    )
    .await;
    let Tally {
        grants,
        pttls,
        unsynced,
        permanent,
    } = tally(inner, name, &results);
    // Set when a fenced attempt under Redlock cannot vouch for its token: it fails safe.
    let mut unconfirmed = None;
    if grants.len() >= quorum && permanent.is_none() {
        let token = match grants.iter().filter_map(|g| g.token).max() {
            Some(t) if inner.masters.len() > 1 => {
                // Boxed, as the undo below: rare paths kept out of the attempt's
                // future, which every caller moves (fenced locks under Redlock only).
                let vouched = Box::pin(vouch(inner, (name, holder), t, &grants, &results, end));
                let vouched = vouched.await;
                vouched.map_err(|e| unconfirmed = Some(e)).ok().flatten()
            }
            other => Some(other),
        };
        let validity = inner
            .validity_of(req.lease)
            .saturating_sub(started.elapsed());
        if let (Some(token), false) = (token, validity.is_zero()) {
            let fresh = grants.iter().filter(|g| g.fresh).count() >= quorum;
            scopeguard::ScopeGuard::into_inner(undo);
            return Ok(Outcome::Granted(Grant {
                validity,
                token,
                fresh,
                started,
                everywhere: grants.len() == results.len(),
            }));
        }
    }
    // Release everywhere the request may have landed.
    let granted: Vec<usize> = grants.iter().map(|g| g.at).chain(unsynced).collect();
    if !granted.is_empty() || pttls.len() < results.len() {
        // A master that refused a non-reentrant re-acquisition holds the holder's real
        // hold: release only where this attempt granted, as for a re-entry.
        let holds = results
            .iter()
            .any(|r| matches!(r, Some(Err(Error::Reentry { .. }))));
        let only = (reentrant || holds).then_some(granted);
        let undone = Box::pin(undo_refused(inner, req, only, end));
        undone.await;
    }
    scopeguard::ScopeGuard::into_inner(undo);
    if let Some(e) = permanent {
        return Err(e);
    }
    if let Some(e) = unconfirmed {
        return Ok(Outcome::Unavailable(e));
    }
    Ok(refused(inner, grants.len(), &pttls, results))
}

/// Undoes a refused attempt where it may have landed: on every master, or `only` on
/// those. No local wake-up: nobody local was waiting on our own attempt. Not done by
/// `end`, it is finished in the background, one more try, and the holder's next
/// acquisition of the lock waits for it (offers.rs invariant 4); a release already
/// written to a hung master still runs there after the acquire it undoes (the lock
/// lane keeps their order).
async fn undo_refused(
    inner: &Arc<Engine>,
    req: &Request,
    only: Option<Vec<usize>>,
    end: Option<TokioInstant>,
) {
    let (name, holder, kind) = (&req.name, &req.holder, req.kind);
    let lease_ms = req.lease.as_millis() as u64;
    let undo = release_on(inner, name, holder, lease_ms, kind, only.as_deref(), false);
    if until(end, undo).await.is_some() {
        return;
    }
    let settling = inner.offers(fair_offers(kind)).settling(name, holder);
    let (engine, name, holder) = (inner.clone(), name.clone(), holder.clone());
    inner.cleanups.spawn(async move {
        let _settling = settling;
        let only = only.as_deref();
        let _ = release_on(&engine, &name, &holder, lease_ms, kind, only, false).await;
    });
}

/// A refused attempt: busy (a split vote if some master granted), or unavailable when
/// fewer than a majority answered.
fn refused(
    inner: &Engine,
    granted: usize,
    pttls: &[i64],
    results: Vec<Option<Result<Acquire>>>,
) -> Outcome {
    if granted + pttls.len() < inner.quorum {
        let addrs = addrs(&inner.masters);
        return Outcome::Unavailable(no_quorum(granted, inner.quorum, &addrs, results));
    }
    Outcome::Busy {
        retry_in: retry_hint(inner, pttls),
        split: granted > 0,
    }
}

/// Arms the undo of a cancelled attempt (when `armed`: not a re-entry): dropped
/// armed, it releases on every master in the background ([`undo_cancelled`]).
fn arm_undo<'a>(
    inner: &'a Arc<Engine>,
    req: &'a Request,
    kind: Kind,
    armed: bool,
) -> scopeguard::ScopeGuard<bool, impl FnOnce(bool) + 'a> {
    let lease_ms = req.lease.as_millis() as u64;
    scopeguard::guard(armed, move |armed| {
        if armed {
            let (inner, name, holder) = (inner.clone(), req.name.clone(), req.holder.clone());
            // The holder's next acquisition of the lock waits for the undo, so a retried
            // release cannot remove that newer grant (offers.rs invariant 4).
            let settling = inner.offers(fair_offers(kind)).settling(&name, &holder);
            inner.clone().cleanups.spawn(async move {
                let _settling = settling;
                undo_cancelled(&inner, &name, &holder, lease_ms, kind).await;
            });
        }
    })
}

/// One attempt's answers, sorted.
struct Tally {
    grants: Vec<Granted>,
    pttls: Vec<i64>,
    /// Masters that granted without enough replicas acknowledging it.
    unsynced: Vec<usize>,
    /// A permanent error (a key that is not a lock or holds bad data, a missing
    /// permission, a master out of memory, a grant not replicated) fails the call at
    /// once: retrying cannot cure it, and an outage's retries would hide it.
    permanent: Option<Error>,
}

fn tally(inner: &Engine, name: &str, results: &[Option<Result<Acquire>>]) -> Tally {
    let (mut grants, mut pttls, mut permanent) = (Vec::new(), Vec::new(), None);
    let mut unsynced = Vec::new();
    for (i, r) in results.iter().enumerate() {
        match r {
            Some(Ok(Acquire::Granted {
                fresh,
                token,
                current,
            })) => grants.push(Granted {
                at: i,
                fresh: *fresh,
                token: *token,
                current: *current,
            }),
            // Held with no expiry: not a lock (wire::no_expiry), never free; retrying
            // would wait forever.
            Some(Ok(Acquire::Busy { pttl_ms: -1 })) => {
                let addr = inner.masters[i].link().serving(name.as_bytes());
                permanent = Some(crate::engine::masters::replies::no_expiry(name, addr));
            }
            Some(Ok(Acquire::Busy { pttl_ms })) => pttls.push(*pttl_ms),
            // Granted, but not on enough replicas: undone like a grant, and reported
            // at once (retrying would wait on the same replicas again).
            Some(Err(e @ Error::NotReplicated { .. })) => {
                unsynced.push(i);
                permanent = Some(e.clone());
            }
            Some(Err(e)) if e.is_permanent() => permanent = Some(e.clone()),
            _ => {}
        }
    }
    Tally {
        grants,
        pttls,
        unsynced,
        permanent,
    }
}

/// How long a waiter may sleep without a message: until the earliest lease on a
/// master that refused us runs out.
///
/// Redis keeps a key while its clock, in whole milliseconds, has not passed the
/// expiry: a PTTL of `ms` (0 included: the last millisecond) means gone within `ms + 1`
/// ms. A PTTL of 0 is a lease about to end, not a lease without end; sleeping the
/// fallback there left a waiter idle for a whole watchdog timeout after the lease
/// ran out, when its retry came in the lease's last millisecond (a fast machine).
fn retry_hint(inner: &Engine, pttls: &[i64]) -> Duration {
    let fallback = inner.settings.watchdog_timeout;
    let stale = inner.settings.fair_stale_timeout / 3;
    pttls
        .iter()
        .map(|&ms| match ms {
            ms if ms >= 0 => Duration::from_millis(ms as u64 + 1),
            -2 => stale,
            _ => fallback,
        })
        .min()
        .unwrap_or(fallback)
}

/// One master's grant in an attempt.
struct Granted {
    /// The master's index.
    at: usize,
    fresh: bool,
    token: Option<u64>,
    /// Fenced under Redlock: the master has not restarted since its counter was last
    /// written back (`lua/fenced_acquire.lua`).
    current: bool,
}

/// Fencing under Redlock (docs/deployments.md, "Fencing under Redlock"): may the largest counter
/// among `grants` be handed out? Yes when at least `quorum` of the granting masters are
/// current, or when every master granted; otherwise the attempt fails safe with
/// `NoQuorum { acquired: current grants, needed: quorum }`.
///
/// Why. Every token T handed out was first written back (`lua/fenced_sync.lua`) to a
/// majority W, which left each master of W with a counter ≥ T. A master is current
/// only by a write-back that reached it since it last started, from a holder it granted
/// the lock to since then. So a master of W that is current kept a counter ≥ T: either
/// it has not restarted since T's write-back (counters only grow), or it restarted and
/// was then written back to by an acquisition granted there after the restart, hence
/// after T's lock (restarts are delayed past the longest lease), whose token was > T by
/// this same argument one acquisition earlier.
/// * A quorum C of current grants: C and W are two majorities, so some master of C is
///   in W; its counter is ≥ T and its INCR makes the maximum > T. Nothing is assumed
///   about data loss: a restart makes a master not current, and C does without it.
/// * Every master granted: as long as fewer than half the masters lost data since T
///   was written back, some master of W kept its counter ≥ T, and it is among the
///   grants, so the maximum is > T.
/// * Otherwise (a new name, restarts, and some master did not grant): the masters that
///   kept T may be exactly those that did not answer, and the maximum could be ≤ T.
///   Handing it out could make tokens go backwards, so the attempt is undone instead.
///
/// This assumes, as mutual exclusion under Redlock does, that a master restarted empty
/// comes back only after the longest lease (docs/deployments.md, "Restarting a master").
fn confirm<T>(
    grants: &[Granted],
    addrs: &[&str],
    results: &[Option<Result<T>>],
    quorum: usize,
) -> Result<()> {
    let current = grants.iter().filter(|g| g.current).count();
    if current >= quorum || grants.len() == results.len() {
        return Ok(());
    }
    // The errors of the masters that did not grant say which ones to bring back.
    let failed = results.iter().map(|r| match r {
        Some(Err(e)) => Some(Err::<(), _>(e.clone())),
        _ => None,
    });
    Err(no_quorum(current, quorum, addrs, failed))
}

/// Fencing under Redlock: the token handed out is the maximum seen, first written back
/// to a majority so no later acquisition can see a smaller one. The masters where
/// `holder` holds the lock become current.
/// A fenced grant's token under Redlock: confirmed (a majority of masters vouch for
/// it, or it was granted everywhere) and written back by `end`; `Ok(None)` when the
/// write-back did not land in time, `Err` when the token cannot be vouched for.
async fn vouch<T>(
    inner: &Engine,
    (name, holder): (&str, &str),
    token: u64,
    grants: &[Granted],
    results: &[Option<Result<T>>],
    end: Option<TokioInstant>,
) -> Result<Option<Option<u64>>> {
    confirm(grants, &addrs(&inner.masters), results, inner.quorum)?;
    Ok(until(end, write_back(inner, name, holder, token))
        .await
        .and_then(Result::ok))
}

async fn write_back(inner: &Engine, name: &str, holder: &str, token: u64) -> Result<Option<u64>> {
    let results = fan_out(&inner.masters, |m| {
        kinds::fenced::sync(m, name, holder, token)
    })
    .await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    if ok < inner.quorum {
        let results = results.into_iter().map(Some);
        return Err(no_quorum(ok, inner.quorum, &addrs(&inner.masters), results));
    }
    Ok(Some(token))
}

/// A random delay in `[1 ms, max]` to desynchronise competing clients.
pub(crate) fn jitter(max: Duration) -> Duration {
    let max_us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX).max(1000);
    Duration::from_micros(rand::random_range(1000..=max_us))
}
