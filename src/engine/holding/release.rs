//! Giving a hold back: on every master ([`release_on`]), or, for the last local hold
//! on a single master, straight to a waiting task of this client ([`release`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::field::Empty;
use tracing::Instrument;

use crate::engine::holding::offers::{Answer, Offer, Taken};
use crate::engine::holding::table::Hold;
use crate::engine::kinds::{self, fair, plain, Book};
use crate::engine::masters::clock::cut;
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::{addrs, count, fan_out_until, no_quorum};
use crate::engine::masters::replies::{HandOver, Release};
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::telemetry;

/// The most offers one fair release considers: the queue head is nearly always one of
/// the oldest local waiters, and a head not offered is woken by its message as usual.
const MAX_FAIR_OFFERS: usize = 32;

/// Releases one hold. When it is the last local hold on a single master and other tasks
/// of this client wait with offers (offers.rs), the lock is handed over in the same
/// script: one round trip instead of a release and an acquire. A plain lock goes to the
/// gate holder unless another client waits (release.lua); a fair lock goes to the
/// queue head if it is one of the offered waiters (fair_release.lua).
pub(crate) async fn release(
    engine: &Arc<Engine>,
    hold: &Hold,
    lease_ms: u64,
    last: bool,
) -> Result<()> {
    let kind = hold.kind;
    let book = kind.protocol().policy().offers;
    let fair = book == Some(Book::Fair);
    // Kinds whose waiters post no offers (read and write locks) are never handed over.
    if last && engine.masters.len() == 1 && book.is_some() {
        let offers = engine
            .offers(fair)
            .take(&hold.name, if fair { MAX_FAIR_OFFERS } else { 1 });
        if !offers.is_empty() {
            // Boxed, as the re-entrant release below: the last release's future (moved
            // by every caller) carries neither.
            let handed = Box::pin(hand_over(engine, hold, lease_ms, fair, offers));
            return handed.await;
        }
    }
    let (name, holder) = (&hold.name, &hold.holder);
    if !last {
        // A re-entrant hold's release is one request, abandoned at its bound (the
        // reconnect a broken connection needs included): the outer hold still keeps
        // the lock, and its lease expires if it is never released either.
        let end = Some(crate::engine::masters::clock::later(engine.request_bound()));
        let sent = release_results(engine, name, holder, lease_ms, kind, None, end);
        let results = Box::pin(sent).await;
        return judge(engine, name, holder, kind, &results, None, true).map(drop);
    }
    // The last hold: masters that did not answer are asked again until a majority
    // answered, for at most the release timeout (Config::release_timeout, 3 s by
    // default: a shutdown's unlock need not wait out an outage; the lease expires).
    // Safe to repeat: a release that did land finds the hold gone and changes nothing,
    // and the holder cannot take the lock again meanwhile (it is waiting for this call).
    // The timeout may be `Duration::MAX`: saturated, never an overflow.
    let give_up = crate::engine::masters::clock::later(engine.settings.release_after).into_std();
    let decided = |rs: &[Option<Result<Release>>]| {
        let verdict = judge(engine, name, holder, kind, rs, None, false);
        !matches!(&verdict, Err(e) if !e.is_permanent() && !e.is_not_held())
    };
    let results =
        release_until_answered(engine, name, holder, lease_ms, kind, give_up, decided).await;
    judge(engine, name, holder, kind, &results, None, true).map(drop)
}

/// Releases on every master, each asked again after a failure that may pass (a
/// timeout, a request dropped unsent from a busy group-commit queue, a dropped
/// connection), with backoff, until it answers, `give_up` comes or the client shuts
/// down ([`reach`]); returns once `decided` says the answers suffice or a majority
/// released. A master that answers "not held" to a repeated release counts as
/// released: its first release may have landed unanswered. One answer per master,
/// `None` for one still being asked: it goes on in the background (fan_out_until), so
/// a master that the release did not reach while the majority answered is asked again
/// instead of keeping its grant until the lease ends (a storm of cancelled Redlock
/// calls under load left such grants after close(), issue 48). A request still
/// unanswered at `give_up` (or one request's bound after the first was sent, if that
/// is later) is abandoned there: it counts as timed out (waiter/mod.rs invariant 11).
/// Once the client is closing, `give_up` is the release timeout after `close()` began
/// at the latest.
pub(crate) async fn release_until_answered(
    engine: &Arc<Engine>,
    name: &Arc<str>,
    holder: &Arc<str>,
    lease_ms: u64,
    kind: Kind,
    give_up: Instant,
    decided: impl Fn(&[Option<Result<Release>>]) -> bool,
) -> Vec<Option<Result<Release>>> {
    let floor = Instant::now().checked_add(engine.request_bound());
    let end = floor.map(|f| tokio::time::Instant::from_std(f.max(give_up)));
    let done = |r: &Release| *r != Release::NotHeld;
    fan_out_until(
        &engine.masters,
        &engine.cleanups,
        |m| {
            let call = (name.clone(), holder.clone(), lease_ms, kind);
            reach(engine.clone(), m, call, end, give_up)
        },
        |rs| count(rs, done) >= engine.quorum || decided(rs),
    )
    .await
}

/// One master's part of [`release_until_answered`]: its release, asked again while it
/// fails for a passing reason, until `give_up` (the release timeout after `close()`
/// began, at the latest) or the shutdown.
async fn reach(
    engine: Arc<Engine>,
    m: Arc<Master>,
    (name, holder, lease_ms, kind): (Arc<str>, Arc<str>, u64, Kind),
    end: Option<tokio::time::Instant>,
    give_up: Instant,
) -> Result<Release> {
    let mut pause = Duration::from_millis(5);
    let mut again = false;
    loop {
        let sent = kinds::release(&m, kind.protocol(), &name, lease_ms, &holder);
        // A deadline the request cannot outlast needs no timer (Master::may_outlast).
        let r = match cut(end.filter(|&end| m.may_outlast(end)), m.addr(), sent).await {
            Ok(Release::NotHeld) if again => Ok(Release::Released),
            other => other,
        };
        let closing =
            (engine.closing.get()).and_then(|t| t.checked_add(engine.settings.release_after));
        let give_up = closing.map_or(give_up, |c| c.min(give_up));
        let passing = matches!(&r, Err(e) if !e.is_permanent());
        if !passing || Instant::now() + pause >= give_up {
            return r;
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = engine.shutdown.cancelled() => return r,
        }
        pause = (pause * 2).min(Duration::from_millis(250));
        again = true;
    }
}

/// Runs the hand-over script and answers every taken offer (offers.rs invariant 2):
/// the granted one with the instant the script was sent, the others declined; if the
/// script fails or this future is dropped, `Taken` answers them "unknown", and each
/// waiter asks Redis whether the script gave it the lock.
async fn hand_over(
    engine: &Arc<Engine>,
    hold: &Hold,
    lease_ms: u64,
    fair: bool,
    offers: Vec<Offer>,
) -> Result<()> {
    let span = tracing::debug_span!(target: "redlatch", "hand_over", lock = %hold.name,
        kind = if fair { "fair" } else { "plain" }, masters = 1, offers = offers.len(),
        "db.system.name" = "redis", "error.type" = Empty, outcome = Empty, elapsed_ms = Empty);
    let started = std::time::Instant::now();
    let result = hand_over_in_span(engine, hold, lease_ms, fair, offers, started)
        .instrument(span.clone())
        .await;
    match &result {
        Ok(outcome) => telemetry::finish(&span, started, outcome, None),
        Err(e) => telemetry::finish(&span, started, "error", Some(e)),
    }
    result.map(drop)
}

/// [`hand_over`]'s work; the outcome is `handed_over`, `released`, `still_held`,
/// `declined` (the waiter gave up; released again) or an error.
async fn hand_over_in_span(
    engine: &Arc<Engine>,
    hold: &Hold,
    lease_ms: u64,
    fair: bool,
    offers: Vec<Offer>,
    started: std::time::Instant,
) -> Result<&'static str> {
    let mut taken = Taken { offers, started };
    let from = (&*hold.holder, lease_ms);
    let master = &engine.masters[0];
    let outcome = if fair {
        let offered: Vec<(&str, u64)> = (taken.offers.iter())
            .map(|o| (&*o.holder, o.lease_ms))
            .collect();
        let wait_ms = engine.settings.fair_wait_time.as_millis() as u64;
        fair::hand_over(master, &hold.name, from, wait_ms, &offered).await?
    } else {
        let offer = &taken.offers[0];
        let to = (&*offer.holder, offer.lease_ms, offer.ticket.as_deref());
        plain::hand_over(master, &hold.name, from, to).await?
    };
    let granted = match outcome {
        HandOver::To(i) => Some(taken.remove(i)),
        _ => None,
    };
    // The others were not handed the lock: they wait or compete as usual.
    taken.decline();
    if let Some(offer) = granted {
        if offer.tx.send(Answer::Granted(started)).is_err() {
            // The waiter gave up meanwhile: release what it was handed.
            let (name, lease_ms) = (&hold.name, offer.lease_ms);
            release_on(engine, name, &offer.holder, lease_ms, hold.kind, None, true).await?;
            return Ok("declined");
        }
        return Ok("handed_over");
    }
    match outcome {
        // Another client waits (plain) or is next (fair): released and published.
        HandOver::Released => {
            if !fair {
                engine
                    .pubsub
                    .notify_local(&crate::keys::channel(&hold.name));
            }
            Ok("released")
        }
        HandOver::StillHeld | HandOver::To(_) => Ok("still_held"),
        HandOver::NotHeld => Err(Error::NotHeld {
            name: hold.name.to_string(),
            holder: hold.holder.to_string(),
        }),
    }
}

/// Releases one hold on every master (or only on `only`). Ok when a majority
/// released, with `Released` meaning the lock is now free.
pub(crate) async fn release_on(
    engine: &Engine,
    name: &Arc<str>,
    holder: &Arc<str>,
    lease_ms: u64,
    kind: Kind,
    only: Option<&[usize]>,
    wake_local: bool,
) -> Result<Release> {
    let results = release_results(engine, name, holder, lease_ms, kind, only, None).await;
    judge(engine, name, holder, kind, &results, only, wake_local)
}

/// The release answers of every master (or of `only`, in that order): `None` for
/// one still in flight once a majority released (it lands in the background, never
/// dropped: see fan_out_until).
async fn release_results(
    engine: &Engine,
    name: &Arc<str>,
    holder: &Arc<str>,
    lease_ms: u64,
    kind: Kind,
    only: Option<&[usize]>,
    end: Option<tokio::time::Instant>,
) -> Vec<Option<Result<Release>>> {
    let subset: Vec<Arc<Master>>;
    let masters = match only {
        Some(only) => {
            subset = only.iter().map(|&i| engine.masters[i].clone()).collect();
            &subset
        }
        None => &engine.masters,
    };
    let done = |r: &Release| *r != Release::NotHeld;
    fan_out_until(
        masters,
        &engine.cleanups,
        |m| {
            let (name, holder) = (name.clone(), holder.clone());
            async move {
                let sent = kinds::release(&m, kind.protocol(), &name, lease_ms, &holder);
                // A deadline the request cannot outlast needs no timer (Master::may_outlast).
                let end = end.filter(|&end| m.may_outlast(end));
                cut(end, m.addr(), sent).await
            }
        },
        |rs| count(rs, done) >= engine.quorum,
    )
    .await
}

/// What release answers come to: released (or still held by a re-entry) on a
/// majority, not held, a permanent error, or no quorum. `results` are every master's,
/// or those of `only`, in its order.
fn judge(
    engine: &Engine,
    name: &Arc<str>,
    holder: &Arc<str>,
    kind: Kind,
    results: &[Option<Result<Release>>],
    only: Option<&[usize]>,
    wake_local: bool,
) -> Result<Release> {
    let quorum = engine.quorum;
    let (released, still, not_held) = (
        count(results, |r| *r == Release::Released),
        count(results, |r| *r == Release::StillHeld),
        count(results, |r| *r == Release::NotHeld),
    );
    if released > 0
        && kind.protocol().policy().wakes_locally
        && wake_local
        && engine.pubsub.has_channels()
    {
        engine.pubsub.notify_local(&kind.channel(name));
    }
    if released + still >= quorum {
        return Ok(if released >= still {
            Release::Released
        } else {
            Release::StillHeld
        });
    }
    if not_held >= quorum || (not_held > 0 && engine.masters.len() - not_held < quorum) {
        return Err(Error::NotHeld {
            name: name.to_string(),
            holder: holder.to_string(),
        });
    }
    if let Some(e) =
        (results.iter().flatten()).find_map(|r| r.as_ref().err().filter(|e| e.is_permanent()))
    {
        return Err(e.clone());
    }
    let addrs: Vec<&str> = match only {
        Some(only) => only.iter().map(|&i| engine.masters[i].addr()).collect(),
        None => addrs(&engine.masters),
    };
    Err(no_quorum(
        released + still,
        quorum,
        &addrs,
        results.to_vec(),
    ))
}
