//! Cooperative revocation (docs/election.md, "Cooperative revocation"): asking a lock's
//! holders to release it (lua/revoke_request.lua); and every client's one subscription
//! for notices about its own holds: a request to release one, or a force-unlock that
//! deleted one (lua/tell_holders.lua).
//!
//! Invariants:
//! 1. A client subscribes its notice channel (`redlatch_client__channel:{<id>}`,
//!    keys/books.rs; its prefix is `Config::bookkeeping_prefix`) once, when it connects, for all its holds: never one
//!    subscription per lock or guard. The scripts publish there classic, which a
//!    Cluster's bus takes to every node, so a notice reaches the client whatever node
//!    the lock and the subscription are on.
//! 2. A request is a marker in Redis (`redlatch_revoke:{name}`, holder -> 1, expiring
//!    with the lock's lease) written before the notice is published: the notice records
//!    it on the hold at once (its revoke token fires, now or when a guard asks for it);
//!    a wake that may have missed messages (a reconnect, pubsub.rs invariant 3) makes
//!    the client read the markers of its holds, and so does a guard's first
//!    `revoke_requested()` (a request older than the hold's record of them).
//! 3. A request never releases anything by itself: the holder's code decides. Its
//!    default effect, with nobody watching the token, is a WARN log line naming the
//!    lock and the holder.
//! 4. A force-unlock's notice names the lock without a marker: the client renews its
//!    holds of that name at once (the watchdog's urgent task), which finds them gone
//!    and declares them lost, instead of at the next renewal round up to a third of the
//!    watchdog timeout later. A hold with a fixed lease, which nothing renews, is read
//!    instead (its lease left as it is) and declared lost when a majority no longer has
//!    it; before, it learned only at its unlock (`NotHeld`). A reconnect's wake renews nothing: during a failover that
//!    renewal could fail and put a sound hold at risk. A force-unlock published while
//!    the connection was down is noticed at the next round.
//! 5. The hook that reads notices runs on the pub/sub actor's task: it only flags holds
//!    and queues renewals, it never waits.
//! 6. With bookkeeping off (`Config::bookkeeping(false)`) none of this runs: no
//!    subscription, no marker read, and a request is refused with `Unsupported`.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::engine::holding::held::Held;
use crate::engine::holding::table::HoldEntry;
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::{answers, fan_out};
use crate::engine::masters::replies::typed;
use crate::engine::masters::Masters;
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::keys::books::Books;
use crate::transport::script::lua;
use crate::transport::{Lane, Script};

static REQUEST: LazyLock<Script> = lua!("revoke_request.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 1] {
    [&REQUEST]
}

/// What a request reached on one master: (listeners, holders asked).
async fn request(
    m: &Master,
    books: &Books,
    name: &str,
    lease: Duration,
) -> Result<(u64, Vec<String>)> {
    let mut inv = REQUEST.call();
    inv.key(name)
        .key(books.revoke(name))
        .arg(books.notice_prefix().unwrap_or_default())
        .arg(lease.as_millis() as u64);
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    m.decode::<(u64, Vec<String>)>(v)
}

/// Whether a request to release `name` names `holder` on `m`.
async fn requested(m: &Master, books: &Books, name: &str, holder: &str) -> Result<bool> {
    let mut cmd = redis::cmd("HEXISTS");
    cmd.arg(books.revoke(name)).arg(holder);
    m.query::<bool>(&cmd).await
}

/// The pub/sub hook's part (invariants 2, 4, 5): a notice for this client (`"!revoke|<holder>|<name>"`
/// or `"!deleted|<client>|<name>"`) is acted on; whether `payload` was one.
pub(crate) fn notice(engine: &Arc<Engine>, payload: &[u8]) -> bool {
    let Some(text) = payload
        .strip_prefix(b"!")
        .and_then(|p| std::str::from_utf8(p).ok())
    else {
        return false;
    };
    let mut parts = text.splitn(3, '|');
    let (Some(what), Some(who), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return true;
    };
    if !who.starts_with(engine.holder_prefix())
        && who != engine.holder_prefix().trim_end_matches(':')
    {
        return true;
    }
    match what {
        "revoke" => {
            if let Some(hold) = engine.holdings().table().get(name, who)
                && hold.ask_release()
            {
                tracing::warn!(lock = %name, holder = %who,
                        "release requested (redlatch unlock --params); the hold is kept: \
                         LockGuard::revoke_requested() tells the code that holds it");
            }
        }
        "deleted" => {
            for hold in engine
                .holdings()
                .table()
                .all()
                .iter()
                .filter(|h| &*h.name == name && !h.permit)
            {
                if hold.watchdog_state().0 > 0 {
                    tracing::debug!(lock = %name, holder = %hold.holder, "force-unlocked: renewing now");
                    engine.holdings().urgent().now(hold);
                } else if hold.kind != Kind::Group {
                    // A fixed lease: nothing renews it, so it is read (invariant 4).
                    let (e, hold) = (engine.clone(), hold.clone());
                    engine
                        .cleanups()
                        .spawn(async move { check_fixed(&e, hold).await });
                }
            }
        }
        _ => {}
    }
    true
}

/// A hold with a fixed lease whose lock was force-unlocked (invariant 4): read on every
/// master, its lease left alone; gone on a majority, it is declared lost. A hold the
/// client took again meanwhile is found and kept.
async fn check_fixed(engine: &Arc<Engine>, hold: Arc<HoldEntry>) {
    let (cmd, count) = hold.kind.protocol().hold_query(&hold.name, &hold.holder);
    let (cmd, holder) = (&cmd, &*hold.holder);
    let counts = fan_out(engine.masters().all(), |m| async move {
        m.query::<redis::Value>(cmd)
            .await
            .map(|v| count(&v, holder))
    })
    .await;
    let gone = counts.iter().filter(|c| matches!(c, Ok(0))).count();
    if gone >= engine.masters().quorum() {
        let lost = crate::lost::LostReason::ExpiredOrDeleted;
        engine.holdings().lose(engine, &hold, lost);
    }
}

/// Keeps this client's one notice subscription (invariant 1) until shutdown; after a
/// wake that may have missed messages, reads the markers of every hold (invariant 2).
pub(crate) async fn listen(engine: std::sync::Weak<Engine>, shutdown: CancellationToken) {
    let Some(strong) = engine.upgrade().filter(|e| e.settings.books.is_on()) else {
        return;
    };
    let channel = strong
        .settings()
        .books
        .notice_channel(&strong.id().to_string());
    let mut sub = strong.pubsub().subscribe(channel);
    let (timeout, idle) = (
        strong.settings().connect_timeout,
        strong.settings().watchdog_timeout,
    );
    drop(strong);
    // A notice sent before the confirmation is not heard, and a confirmation that rides
    // a live connection wakes nobody: one that came late is followed by a read of the
    // markers, as a reconnect is (invariant 2).
    let mut late = false;
    while !sub.is_confirmed() {
        tokio::select! {
            r = sub.ready(timeout) => if let Err((addr, why)) = r {
                // Still subscribed: the hub retries; notices then arrive once it succeeds.
                if !late {
                    tracing::warn!(master = %addr, why, "cannot listen for notices about this client's locks yet");
                }
                tokio::select! {
                    _ = tokio::time::sleep(timeout) => {}
                    _ = shutdown.cancelled() => return,
                }
            },
            _ = shutdown.cancelled() => return,
        }
        late |= !sub.is_confirmed();
    }
    if late {
        let Some(engine) = engine.upgrade() else {
            return;
        };
        look_for_requests(&engine, engine.holdings().table().all()).await;
    }
    loop {
        sub.mark_seen();
        let heard = sub.heard();
        tokio::select! {
            woken = sub.wait(idle) => if woken && sub.heard() == heard {
                let Some(engine) = engine.upgrade() else { return };
                look_for_requests(&engine, engine.holdings().table().all()).await;
            },
            _ = shutdown.cancelled() => return,
        }
    }
}

/// Reads the markers of `holds` not asked yet, and records the requests found.
async fn look_for_requests(engine: &Engine, holds: Vec<std::sync::Arc<HoldEntry>>) {
    let books = &engine.settings().books;
    if !books.is_on() {
        return;
    }
    for hold in holds
        .into_iter()
        .filter(|h| !h.release_asked() && !h.permit)
    {
        let (name, holder) = (&hold.name, &hold.holder);
        let looks = fan_out(engine.masters().all(), |m| {
            requested(m, books, name, holder)
        })
        .await;
        if looks.iter().any(|r| matches!(r, Ok(true))) && hold.ask_release() {
            tracing::warn!(lock = %name, %holder,
                "release requested (redlatch unlock --params); the hold is kept: \
                 LockGuard::revoke_requested() tells the code that holds it");
        }
    }
}

/// Subscribers of `channel` on the node that serves its slot (a Cluster's): the
/// pipeline's first command names the channel as a key, which routes it there.
async fn listeners_of(m: &Master, channel: &str) -> u64 {
    let mut pipe = redis::pipe();
    pipe.cmd("EXISTS").arg(channel).ignore();
    pipe.cmd("PUBSUB").arg("NUMSUB").arg(channel);
    let sent = m.link().send(
        Lane::Side,
        m.timeout(),
        crate::transport::Request::Pipe(&pipe),
    );
    match sent.await.and_then(|v| m.decode::<((String, u64),)>(v)) {
        Ok(((_, n),)) => n,
        Err(e) => {
            tracing::debug!(%channel, error = %e, "counting a notice channel's listeners failed");
            0
        }
    }
}

/// Sums the replies of every master: listeners reached, distinct holders asked.
fn merge(replies: Vec<(u64, Vec<String>)>) -> (u64, Vec<String>) {
    let mut listeners = 0;
    let mut holders: Vec<String> = Vec::new();
    for (n, hs) in replies {
        listeners += n;
        for h in hs {
            if !holders.contains(&h) {
                holders.push(h);
            }
        }
    }
    (listeners, holders)
}

/// Asks the holders of `name` to release it on `masters` (invariant 1: the marker,
/// then the message), on a majority: how many watches listened, and the holders asked.
/// The marker lasts `lease` (the watchdog timeout); `cluster`: a Redis Cluster.
pub(crate) async fn request_release(
    masters: &Masters,
    books: &Books,
    (lease, cluster): (Duration, bool),
    name: &str,
) -> Result<(u64, Vec<String>)> {
    if !books.is_on() {
        return Err(Error::Unsupported {
            what: format!("a request to release {name:?}"),
            reason: "this client's bookkeeping is off (Config::bookkeeping(false), \
                     REDLATCH_BOOKKEEPING=off): it writes no release request and \
                     tells no holder; give it the deployment's bookkeeping prefix"
                .into(),
        });
    }
    let replies = fan_out(masters.all(), |m| request(m, books, name, lease)).await;
    let (listeners, holders) = merge(answers(masters.all(), replies, masters.quorum())?);
    if !cluster {
        return Ok((listeners, holders));
    }
    // On a Cluster the script's PUBLISH counts the lock's node only, while each client
    // listens on the node of its own channel's slot (invariant 1): count there.
    let mut clients: Vec<&str> = holders.iter().filter_map(|h| h.split(':').next()).collect();
    clients.dedup();
    let mut listening = 0;
    for client in clients {
        listening += listeners_of(masters.first(), &books.notice_channel(client)).await;
    }
    Ok((listening, holders))
}

impl Held {
    /// A token that fires when someone requests this hold's release (invariant 2): the
    /// client's notice subscription records it; the first call also reads the marker
    /// once, in the background, for a request recorded before.
    pub(crate) fn watch_revocation(&self) -> CancellationToken {
        let Some(hold) = self.hold_weak().upgrade() else {
            return CancellationToken::new();
        };
        let token = hold.revoke_token();
        if let (false, Ok(runtime)) = (token.is_cancelled(), tokio::runtime::Handle::try_current())
        {
            let engine = self.engine().clone();
            runtime.spawn(async move { look_for_requests(&engine, vec![hold]).await });
        }
        token
    }
}
