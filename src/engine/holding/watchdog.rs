//! The watchdog: one task per client renews every watchdog-leased hold every
//! timeout/3, batched into one script call per master per chunk of locks.
//!
//! Invariants:
//! 1. A hold counts as renewed as soon as a majority of masters renewed it; its
//!    `last_renewed` moves to the start of that round. A round waits for a silent
//!    master at most one period, so it never delays the next round.
//! 2. A hold is lost (token cancelled, renewal stops) when so many masters say "not
//!    held" that a majority can no longer renew it, or as soon as no majority renewed it
//!    for its validity (lease minus drift): a timer fires at that deadline, also in the
//!    middle of a slow round, not at the next tick (by then the lease may have run out
//!    on the masters). Other errors are retried next tick.
//! 3. The task holds only a `Weak` reference and stops when the client shuts down,
//!    declaring its holds lost (nobody renews them any more).
//! 4. A hold whose acquisition reply left it less than two periods of validity (a
//!    loaded master answered late) is renewed at once by the urgent task, not at the
//!    next round, which could come after its validity ended ([`Urgent`]).
//! 5. A hold released while its renewal was in flight is not a loss: the masters say
//!    "not held" because the holder released it.
//! 6. With replica sync on, a renewal counts (moves `last_renewed`) only once the
//!    eligible replicas acknowledged it: one `WAIT` per renewal call, pipelined with it
//!    (a call renews up to [`CHUNK`] locks of one primary). So the validity of a hold,
//!    counted from its last renewal that counted, never outlasts its key on a replica
//!    that a failover could promote.
//! 7. A hold is at risk (`HoldEntry::at_risk`, the guard's `at_risk()`) as soon as a round's
//!    renewal failed (error, refusal, timeout, not replicated) on so many masters that
//!    no majority can renew it in that round; the next renewal that counts clears it.
//! 8. A loss carries its reason (`LostReason`): gone on the masters (or, if a master
//!    that said so changed server since the grant, master data lost), not renewed in
//!    time (or permission denied, if the last renewal was refused by an ACL), and so
//!    on, set before `lost` fires.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::Instrument;

use crate::engine::holding::table::HoldEntry;
use crate::engine::holding::urgent::Urgent;
use crate::engine::holding::Holdings;
use crate::engine::kinds::{expirable_semaphore, Renewal};
use crate::engine::masters::master::Master;
use crate::engine::Engine;
use crate::engine::{kinds, kinds::renew, kinds::rw_layout, masters::quorum};
use crate::error::Result;
use crate::lost::LostReason;
use crate::telemetry;

/// Locks renewed per script call.
const CHUNK: usize = 5000;
/// Renewal calls in flight per master during a round.
const IN_FLIGHT: usize = 2;

/// Renews the [`Urgent`] holds as they come, until `shutdown` or the client is gone.
pub(crate) async fn run_urgent(
    engine: Weak<Engine>,
    urgent: Arc<Urgent>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = urgent.notified() => {}
        }
        let Some(engine) = engine.upgrade() else {
            break;
        };
        let holds = urgent.take();
        let renewed = AtomicU64::new(0);
        for chunk in holds.chunks(CHUNK) {
            renew_chunk(&engine, chunk, &renewed).await;
        }
        telemetry::renewed(renewed.into_inner());
    }
}

impl Holdings {
    /// Declares a hold lost for `reason` and wakes this client's local waiters of its lock, which
    /// may have been waiting for that holder's release (waiter/mod.rs invariant 6).
    ///
    /// Then drops what is left of it on every master, in the background: renewals
    /// queued on a paused master may have extended it after we gave up on it, and
    /// nobody would release it (its guards no longer send a release, holding/table.rs
    /// invariant 2). The holder's next acquisition of the name waits for this, so the
    /// drop cannot remove a newer grant; sent on the lock lane, it also runs before
    /// that acquisition on every master that answers late.
    ///
    /// False, and nothing done, when the hold is no longer in the table: released
    /// meanwhile (a renewal sent before the release finds it gone) or lost already.
    ///
    /// `engine` is the client of these holdings: its pub/sub hub wakes the local
    /// waiters, its masters are asked and its clean-ups run the drop.
    pub(in crate::engine) fn lose(
        &self,
        engine: &Engine,
        hold: &Arc<HoldEntry>,
        reason: crate::lost::LostReason,
    ) -> bool {
        if !self.table.lose(hold, reason) {
            return false;
        }
        if !hold.permit {
            engine.pubsub().notify_local(&hold.kind.channel(&hold.name));
        }
        let (name, holder) = (hold.name.clone(), hold.holder.clone());
        let settling = [false, true].map(|fair| self.offers(fair).settling(&name, &holder));
        let masters = engine.masters().all().to_vec();
        let (kind, permit) = (hold.kind, hold.permit);
        engine.cleanups().spawn(async move {
            let _settling = settling;
            let (n, h) = (&*name, &*holder);
            let dropped = quorum::fan_out(&masters, |m| async move {
                if permit {
                    expirable_semaphore::return_permit(m, n, h).await
                } else {
                    kinds::drop_lost(m, kind, n, h).await
                }
            })
            .await;
            for (m, r) in masters.iter().zip(dropped) {
                match r {
                    Ok(true) => tracing::info!(lock = %name, %holder, master = m.addr(),
                        "deleted a lost lock that a late renewal had kept"),
                    Ok(false) => {}
                    Err(e) => tracing::debug!(lock = %name, master = m.addr(), error = %e,
                        "could not drop a lost lock; its lease ends it"),
                }
            }
        });
        true
    }
}

/// Runs until `shutdown` is cancelled or the client is gone.
pub(crate) async fn run(engine: Weak<Engine>, shutdown: CancellationToken, period: Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut due = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
            _ = sleep_until(due) => {}
        }
        let Some(engine) = engine.upgrade() else {
            break;
        };
        // Invariant 2: a deadline passing during the round is acted on at once.
        let round = renew_all(&engine);
        tokio::pin!(round);
        due = loop {
            tokio::select! {
                next = &mut round => break next,
                _ = sleep_until(due) => due = expire(&engine),
            }
        };
    }
    if let Some(engine) = engine.upgrade() {
        engine.holdings().table().lose_all();
    }
}

/// One round: renew every watched hold on every master, then declare lost what ran
/// out of validity. Returns the next validity deadline of a watched hold.
///
/// The least recently renewed holds go first: a round slowed down by loaded masters
/// then delays the holds with the most time left, and a hold's place is about the same
/// in every round (in map order, one renewed first in one round and last in the next
/// would wait two slow rounds). Holds renewed (or acquired) less than
/// half a period ago wait for the next round: they still have more than two periods
/// left then, and skipping them spares the masters during bursts of acquisitions.
/// Chunks overlap ([`IN_FLIGHT`] calls per master), so a round costs about the
/// masters' work rather than one round trip per chunk.
pub(crate) async fn renew_all(engine: &Arc<Engine>) -> Option<Instant> {
    let young = engine.settings().watchdog_timeout / 6;
    let started = Instant::now();
    let holds = due(engine.holdings().table().watched(), started, young);
    let span = tracing::debug_span!(target: "redlatch", "renewal_round", holds = holds.len(),
        masters = engine.masters().len(), "db.system.name" = "redis", renewed = Empty,
        outcome = Empty, elapsed_ms = Empty);
    let renewed = AtomicU64::new(0);
    let renewals: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> = Box::pin(
        futures_util::stream::iter(holds.chunks(CHUNK))
            .for_each_concurrent(IN_FLIGHT, |chunk| renew_chunk(engine, chunk, &renewed))
            .instrument(span.clone()),
    );
    // The client record and the ledger live as long as the holds' leases
    // (engine/observe/record.rs), written beside the renewals.
    futures_util::future::join(renewals, engine.observe().write_record(engine)).await;
    let renewed = renewed.into_inner();
    telemetry::renewed(renewed);
    span.record("renewed", renewed);
    let outcome = if renewed == holds.len() as u64 {
        "renewed"
    } else {
        "incomplete"
    };
    telemetry::finish(&span, started, outcome, None);
    expire(engine)
}

/// The holds a round renews, least recently renewed first: those renewed at least
/// `young` before `now`.
fn due(mut holds: Vec<Arc<HoldEntry>>, now: Instant, young: Duration) -> Vec<Arc<HoldEntry>> {
    holds.retain(|h| now.saturating_duration_since(h.watchdog_state().1) >= young);
    holds.sort_by_cached_key(|h| h.watchdog_state().1);
    holds
}

/// Declares lost every watched hold that no majority renewed within its validity;
/// returns the earliest deadline among the others.
fn expire(engine: &Engine) -> Option<Instant> {
    let validity = engine.validity_of(engine.settings().watchdog_timeout);
    let now = Instant::now();
    let mut due: Option<Instant> = None;
    for hold in engine.holdings().table().watched() {
        let deadline = hold.watchdog_state().1 + validity;
        if deadline <= now {
            // Invariant 8: refused by an ACL, or simply not renewed in time.
            let reason = match hold.refusal() {
                Some(e) => LostReason::PermissionDenied(e),
                None => LostReason::NotRenewed,
            };
            // lose() warns with the reason (holding/table.rs), before the guard's token fires.
            engine.holdings().lose(engine, &hold, reason);
        } else {
            due = Some(due.map_or(deadline, |d| d.min(deadline)));
        }
    }
    due
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Which renewal script `hold` needs: a permit's, else its kind's.
fn renewal(hold: &HoldEntry) -> Renewal {
    match hold.permit {
        true => Renewal::Permit,
        false => hold.kind.protocol().renewal(),
    }
}

/// The holds of a chunk grouped by the script that renews them: their places in the
/// chunk and their (name, holder) pairs. Read holds renew their own timeout keys
/// (kinds/rw_layout.rs), permits their expiry (kinds/expirable_semaphore.rs), a kind with a renewal script of its
/// own its way ([`Renewal::Pairs`]); every other hold its field.
type Groups<'a> = Vec<(Renewal, (Vec<usize>, Vec<(&'a str, &'a str)>))>;

fn groups(chunk: &[Arc<HoldEntry>]) -> Groups<'_> {
    let mut groups: Groups<'_> = Vec::new();
    for (i, hold) in chunk.iter().enumerate() {
        let want = renewal(hold);
        let at = match groups.iter().position(|g| g.0 == want) {
            Some(at) => at,
            None => {
                groups.push((want, Default::default()));
                groups.len() - 1
            }
        };
        let (idx, pairs) = &mut groups[at].1;
        idx.push(i);
        pairs.push((&*hold.name, &*hold.holder));
    }
    groups
}

/// Renews one chunk on every master and judges the answers as they arrive (a hold
/// renewed by a majority counts at once, without waiting for the slowest master: the
/// validity deadline may fire meanwhile).
async fn renew_chunk(engine: &Engine, chunk: &[Arc<HoldEntry>], renewed_total: &AtomicU64) {
    let started = Instant::now();
    let groups = &groups(chunk);
    let mut answers: FuturesUnordered<_> = (engine.masters().iter().enumerate())
        .map(|(at, m)| async move { (at, renew_on(engine, m, chunk.len(), groups).await) })
        .collect();
    let mut judged = ChunkAnswers::new(engine, chunk, started);
    while let Some((at, answer)) = answers.next().await {
        judged.count(at, &answer, renewed_total);
    }
    for (i, hold) in chunk.iter().enumerate() {
        if judged.renewed[i] < judged.quorum && judged.n - judged.denied[i] >= judged.quorum {
            tracing::debug!(lock = %hold.name, renewed = judged.renewed[i], "renewal incomplete; retrying next tick");
        }
    }
}

/// One master's answers for a chunk of `n` holds: held (renewed) or not, per hold.
async fn renew_on(engine: &Engine, m: &Master, n: usize, groups: &Groups<'_>) -> Vec<Result<bool>> {
    let lease_ms = engine.settings().watchdog_timeout.as_millis() as u64;
    // A renewal is not latency-critical (the deadline is the validity, three periods
    // away): give a loaded master a whole period, but no more, so a master that does
    // not answer never holds up the next round (invariant 1).
    let timeout = engine.settings().watchdog_timeout / 3;
    let mut held: Vec<Result<bool>> = vec![Ok(false); n];
    for (how, (idx, pairs)) in groups {
        let r = match how {
            Renewal::Field => renew::renew(m, pairs, lease_ms, timeout).await,
            Renewal::Read => rw_layout::renew_reads(m, pairs, lease_ms, timeout).await,
            Renewal::Permit => {
                expirable_semaphore::renew_permits(m, pairs, lease_ms, timeout).await
            }
            Renewal::Group => kinds::group::renew(m, pairs, lease_ms, timeout).await,
            Renewal::Pairs(by) => {
                renew::renew_pairs(m, by.script, pairs, lease_ms, timeout, by.add).await
            }
        };
        idx.iter().zip(r).for_each(|(&i, h)| held[i] = h);
    }
    held
}

/// The answers about one chunk so far, per hold.
struct ChunkAnswers<'a> {
    engine: &'a Engine,
    chunk: &'a [Arc<HoldEntry>],
    /// When the round's renewals were sent: what a renewal that counts dates from.
    started: Instant,
    n: usize,
    quorum: usize,
    validity: Duration,
    renewed: Vec<usize>,
    denied: Vec<usize>,
    failed: Vec<usize>,
    /// Whether a master that said "not held" changed server since the grant.
    replaced: Vec<bool>,
}

impl<'a> ChunkAnswers<'a> {
    fn new(engine: &'a Engine, chunk: &'a [Arc<HoldEntry>], started: Instant) -> Self {
        let zeros = vec![0; chunk.len()];
        ChunkAnswers {
            engine,
            chunk,
            started,
            n: engine.masters().len(),
            quorum: engine.masters().quorum(),
            validity: engine.validity_of(engine.settings().watchdog_timeout),
            renewed: zeros.clone(),
            denied: zeros.clone(),
            failed: zeros,
            replaced: vec![false; chunk.len()],
        }
    }

    /// Counts the answer of master `at` (invariants 1, 2, 7, 8).
    fn count(&mut self, at: usize, answer: &[Result<bool>], renewed_total: &AtomicU64) {
        // Not an outage: nothing will renew these locks until it is fixed.
        let refused = answer.iter().filter_map(|r| r.as_ref().err());
        if let Some(e) = refused.clone().find(|e| e.is_permanent()) {
            tracing::error!(error = %e, locks = refused.count(),
                "renewal refused; the locks will be lost when their validity ends");
        }
        let (n, quorum) = (self.n, self.quorum);
        let link = self.engine.masters().all()[at].link();
        for (i, hold) in self.chunk.iter().enumerate() {
            match &answer[i] {
                Ok(true) => {
                    self.renewed[i] += 1;
                    if self.renewed[i] == quorum {
                        hold.renewed(self.started);
                        renewed_total.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(false) => {
                    self.denied[i] += 1;
                    let changed = link.changed_at(hold.name.as_bytes());
                    self.replaced[i] |= changed.is_some_and(|c| c > hold.since);
                    let reason = if self.replaced[i] {
                        LostReason::MasterDataLost
                    } else {
                        LostReason::ExpiredOrDeleted
                    };
                    // Not a loss if the holder released it meanwhile (lose() says so).
                    if self.renewed[i] < quorum && n - self.denied[i] == quorum - 1 {
                        self.engine.holdings().lose(self.engine, hold, reason);
                    }
                }
                Err(e) => {
                    self.failed[i] += 1;
                    if e.is_permanent() {
                        hold.refused(e);
                    }
                }
            }
            // Invariant 7: no majority can renew it in this round.
            if self.renewed[i] < quorum && n - self.failed[i] - self.denied[i] < quorum {
                hold.at_risk(hold.valid_until(self.validity));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::holding::table::HoldTable;

    #[test]
    fn a_round_renews_the_oldest_first_and_skips_the_young() {
        let holds = HoldTable::default();
        let now = Instant::now();
        let holder: Arc<str> = "c:1".into();
        let lease = Duration::from_secs(3);
        for (name, age_ms) in [("b", 900), ("young", 100), ("a", 2000), ("c", 600)] {
            let at = now - Duration::from_millis(age_ms);
            holds.fresh(name, &holder, true, at, lease);
        }
        let order: Vec<String> = due(holds.watched(), now, lease / 6)
            .iter()
            .map(|h| h.name.to_string())
            .collect();
        assert_eq!(order, ["a", "b", "c"]);
    }
}
