//! The watchdog: one task per client renews every watchdog-leased hold every
//! timeout/3, batched into one script call per master per chunk of locks.
//!
//! Invariants:
//! 1. A hold counts as renewed when a majority of masters renewed it; its
//!    `last_renewed` moves to the start of that round.
//! 2. A hold is lost (token cancelled, renewal stops) when so many masters say "not
//!    held" that a majority can no longer renew it, or when no majority renewed it for
//!    longer than its validity (lease minus drift). Other errors are retried next tick.
//! 3. The task holds only a `Weak` reference and stops when the client shuts down,
//!    declaring its holds lost (nobody renews them any more).

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::client::Inner;
use crate::holds::Hold;
use crate::quorum::fan_out;
use crate::scripts;

/// Locks renewed per script call.
const CHUNK: usize = 2000;

/// Runs until `shutdown` is cancelled or the client is gone.
pub(crate) async fn run(inner: Weak<Inner>, shutdown: CancellationToken, period: Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let Some(inner) = inner.upgrade() else { break };
        renew_all(&inner).await;
    }
    if let Some(inner) = inner.upgrade() {
        inner.holds.lose_all();
    }
}

/// One round: renew every watched hold on every master.
pub(crate) async fn renew_all(inner: &Arc<Inner>) {
    let holds = inner.holds.watched();
    for chunk in holds.chunks(CHUNK) {
        renew_chunk(inner, chunk).await;
    }
}

async fn renew_chunk(inner: &Inner, chunk: &[Arc<Hold>]) {
    let started = Instant::now();
    let lease = inner.config.watchdog_timeout;
    let lease_ms = lease.as_millis() as u64;
    let pairs: Vec<(&str, &str)> = chunk.iter().map(|h| (&*h.name, &*h.holder)).collect();
    let pairs = &pairs;
    let results = fan_out(&inner.masters, |m| async move {
        // A large batch legitimately takes longer than one acquire; a late renewal
        // is still useful, so give it at least half a second.
        let timeout = m.timeout().max(Duration::from_millis(500));
        scripts::renew(m, pairs, lease_ms, timeout).await
    })
    .await;
    let n = inner.masters.len();
    let quorum = inner.quorum;
    for (i, hold) in chunk.iter().enumerate() {
        let (mut renewed, mut denied) = (0, 0);
        for r in &results {
            match r {
                Ok(v) if v[i] => renewed += 1,
                Ok(_) => denied += 1,
                Err(_) => {}
            }
        }
        let (_, last) = hold.watchdog_state();
        if renewed >= quorum {
            hold.renewed(started);
        } else if n - denied < quorum || started.duration_since(last) >= inner.validity_of(lease) {
            tracing::warn!(lock = %hold.name, holder = %hold.holder, renewed, denied, "lock lost");
            inner.holds.lose(hold);
        } else {
            tracing::debug!(lock = %hold.name, renewed, "renewal incomplete; retrying next tick");
        }
    }
}
