//! Cooperative revocation (docs/election.md, "Cooperative revocation"): asking a lock's
//! holders to release it (lua/revoke_request.lua), and a holder's watch for such a
//! request.
//!
//! Invariants:
//! 1. A request is a marker in Redis (`redlatch_revoke:{name}`, holder -> 1, expiring
//!    with the lock's lease) written before the wake-up is published, so a message only
//!    makes the holder look: a watch that subscribed late, or woke for another reason (a
//!    reconnect wakes every subscription, pubsub.rs invariant 3), decides by the marker.
//! 2. A watch marks the wake counter seen before every look, so a request published
//!    after a look wakes it again (pubsub.rs invariant 2).
//! 3. A watch ends when its hold is gone (the hold's risk sender dropped: released and
//!    its last guard dropped), lost, or the request is seen; its subscription goes with
//!    it. It never keeps the hold alive.
//! 4. A force-unlock tells the holders' clients on the same channel
//!    (lua/force_release.lua) without a marker: a message that finds no request renews
//!    the hold at once (the watchdog's urgent task), which finds it gone and declares it
//!    lost, instead of at the next renewal round up to a third of the watchdog timeout
//!    later. A reconnect's wake is not a message (pubsub.rs invariant 3) and renews
//!    nothing: during a failover that renewal could fail and put a sound hold at risk.
//!    A force-unlock published while the connection was down is noticed at the next
//!    round.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::engine::holding::held::Held;
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::{answers, fan_out};
use crate::engine::masters::replies::typed;
use crate::engine::Engine;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Lane, Script};

static REQUEST: LazyLock<Script> = lua!("revoke_request.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 1] {
    [&REQUEST]
}

/// The marker of requests to release lock `name`.
pub(crate) fn marker_key(name: &str) -> String {
    keys::derived("redlatch_revoke", name)
}

/// The revoke channel of client `id` for lock `name`.
pub(crate) fn channel(name: &str, client: &str) -> String {
    format!(
        "{}:{client}",
        keys::derived("redlatch_revoke__channel", name)
    )
}

/// What a request reached on one master: (listeners, holders asked).
async fn request(m: &Master, name: &str, lease: Duration) -> Result<(u64, Vec<String>)> {
    let mut inv = REQUEST.call();
    inv.key(name)
        .key(marker_key(name))
        .arg(keys::derived("redlatch_revoke__channel", name))
        .arg(lease.as_millis() as u64);
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    m.decode::<(u64, Vec<String>)>(v)
}

/// Whether a request to release `name` names `holder` on `m`.
async fn requested(m: &Master, name: &str, holder: &str) -> Result<bool> {
    let mut cmd = redis::cmd("HEXISTS");
    cmd.arg(marker_key(name)).arg(holder);
    m.query::<bool>(&cmd).await
}

/// Watches for a request to release `name` held by `holder` (invariants 1-3); cancels
/// `fired` when one is seen. `risk` is the hold's risk receiver (closed when the hold
/// is gone), `lost` its lost token.
async fn watch(
    engine: std::sync::Arc<Engine>,
    (name, holder): (String, String),
    hold: std::sync::Weak<crate::engine::holding::table::Hold>,
    mut risk: watch::Receiver<Option<std::time::Instant>>,
    lost: CancellationToken,
    fired: CancellationToken,
) {
    let client = engine.id.to_string();
    let mut sub = engine.pubsub.subscribe(channel(&name, &client));
    let gone = async { while risk.changed().await.is_ok() {} };
    tokio::pin!(gone);
    let timeout = engine.settings.connect_timeout;
    tokio::select! {
        r = sub.ready(timeout) => if let Err((addr, why)) = r {
            tracing::warn!(lock = %name, master = %addr, why, "cannot listen for release requests");
            return;
        },
        _ = &mut gone => return,
        _ = lost.cancelled() => return,
    }
    let mut woken = false;
    loop {
        sub.mark_seen();
        let heard = sub.heard();
        let looks = fan_out(&engine.masters, |m| requested(m, &name, &holder)).await;
        if looks.iter().any(|r| matches!(r, Ok(true))) {
            tracing::info!(lock = %name, %holder, "release requested");
            fired.cancel();
            return;
        }
        if let Some(Err(e)) = looks.iter().find(|r| r.is_err()) {
            tracing::debug!(lock = %name, error = %e, "reading release requests failed");
        }
        // Invariant 4: a message without a request, perhaps a force-unlock: renew now.
        if let (true, Some(hold)) = (woken, hold.upgrade()) {
            engine.urgent.now(&hold);
        }
        tokio::select! {
            w = sub.wait(engine.settings.watchdog_timeout) => woken = w && sub.heard() != heard,
            _ = &mut gone => return,
            _ = lost.cancelled() => return,
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

impl Engine {
    /// Asks the holders of `name` to release it (invariant 1: the marker, then the
    /// message), on a majority: how many watches listened, and the holders asked.
    pub(crate) async fn request_release(&self, name: &str) -> Result<(u64, Vec<String>)> {
        let lease = self.settings.watchdog_timeout;
        let replies = fan_out(&self.masters, |m| request(m, name, lease)).await;
        Ok(merge(answers(&self.masters, replies, self.quorum)?))
    }
}

impl Held {
    /// A token that fires when someone requests this hold's release; the watch runs
    /// in the background until then, or until the hold is gone or lost (invariant 3).
    /// Outside a tokio runtime it never fires.
    pub(crate) fn watch_revocation(&self) -> CancellationToken {
        let fired = CancellationToken::new();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return fired;
        };
        runtime.spawn(watch(
            self.engine().clone(),
            (self.name().to_string(), self.holder().to_string()),
            self.hold_weak(),
            self.at_risk(),
            self.lost(),
            fired.clone(),
        ));
        fired
    }
}
