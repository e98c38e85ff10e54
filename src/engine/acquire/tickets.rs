//! Tickets: the cross-process hand-over of a plain lock as the waiting client sees it
//! (docs/design.md, "Wake one waiter, hand the lock over"; the Redis side is lua/pass_on.lua).
//!
//! A gated waiter of a plain lock on a single master registers in the lock's waiter
//! registry under a ticket `"<holder id>:<wait n>:<lease ms>"`. A release that finds
//! the ticket at the head of the registry gives the lock to that holder in its script
//! and publishes `"<ticket>|<lock name>"` on the client's wake channel; the pub/sub hub
//! passes that message to `waiter::received` (waiter/handed.rs), which hands it to the
//! ticket's wait.
//!
//! Invariants:
//! 1. A ticket is in the table from before its first attempt until its wait ends (the
//!    [`Ticket`] is dropped). `n` is unique in the process, so a message for a wait
//!    that ended never reaches a later wait of the same holder.
//! 2. A hand-over message is delivered to the live ticket it names, once. A message
//!    for a ticket that is not in the table (its wait ended just before) is disowned at
//!    once with lua/unwait.lua, which releases the lock if that hand-over is still
//!    unclaimed and passes it on: a handed lock is never left to its lease.
//! 3. A delivered hand-over is taken without a round trip only while little of the
//!    lease can have passed: the grant is dated at the ticket's first attempt
//!    ([`Ticket::since`]), which every hand-over to it follows (the ticket can only be
//!    handed the lock once an attempt registered it), so the guard's deadline is never
//!    later than the lease's real end on the server. When that leaves less than two
//!    thirds of the validity, or when acquisitions must be acknowledged by replicas
//!    (`Config::sync_replicas`: nobody waited for the release script's write), the
//!    waiter claims the lock with an attempt instead (acquire.lua), which applies the
//!    lease again from the attempt's own start and is synced like any acquisition. (A
//!    message that fresh also cannot be a stale one: the hand-over it names is still
//!    within its lease, so the lock has not been passed on since.)

use crate::engine::FastMap as HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// The live tickets of one client.
#[derive(Default)]
pub(crate) struct Tickets {
    map: parking_lot::Mutex<HashMap<Arc<str>, oneshot::Sender<()>>>,
}

/// One wait's ticket (invariant 1).
pub(crate) struct Ticket<'a> {
    tickets: &'a Tickets,
    id: Arc<str>,
    rx: oneshot::Receiver<()>,
    /// The start of the first attempt that carried the ticket (invariant 3).
    since: Option<Instant>,
    handed: bool,
}

impl Tickets {
    /// A new ticket for a wait of `holder` with `lease`, in the table until dropped.
    pub(crate) fn issue(&self, holder: &str, lease: Duration) -> Ticket<'_> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id: Arc<str> = ticket_id(holder, n, lease).into();
        let (tx, rx) = oneshot::channel();
        self.map.lock().insert(id.clone(), tx);
        Ticket {
            tickets: self,
            id,
            rx,
            since: None,
            handed: false,
        }
    }

    /// How many tickets are live.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Delivers a hand-over to the live ticket `id`; false if there is none.
    pub(crate) fn deliver(&self, id: &str) -> bool {
        self.map
            .lock()
            .remove(id)
            .is_some_and(|tx| tx.send(()).is_ok())
    }
}

/// `"<holder id>:<n>:<lease ms>"`, written without `format!` (every gated acquisition
/// issues one: `format!` with the lease's `u128` was ~1.8k instructions of a W1 pair).
fn ticket_id(holder: &str, n: u64, lease: Duration) -> String {
    let mut id = String::with_capacity(holder.len() + 2 * 21);
    id.push_str(holder);
    id.push(':');
    push_decimal(&mut id, n);
    id.push(':');
    match u64::try_from(lease.as_millis()) {
        Ok(ms) => push_decimal(&mut id, ms),
        Err(_) => id.push_str(&lease.as_millis().to_string()),
    }
    id
}

/// Appends `n` in decimal.
fn push_decimal(s: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    s.extend(digits[at..].iter().map(|&d| char::from(d)));
}

impl Ticket<'_> {
    /// The ticket as the scripts know it.
    pub(crate) fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// Notes that an attempt carrying the ticket starts now (the first one dates it).
    pub(crate) fn attempting(&mut self) {
        self.since.get_or_insert_with(Instant::now);
    }

    /// When the first attempt carrying the ticket started, if one did.
    pub(crate) fn since(&self) -> Option<Instant> {
        self.since
    }

    /// Whether a release has handed the lock to this ticket (the message arrived) since
    /// the last call; the ticket then takes another hand-over (one whose lease ran out
    /// before it was claimed leaves the ticket registered again by its next attempt).
    pub(crate) fn take_handed(&mut self) -> bool {
        if !self.handed && self.rx.try_recv().is_err() {
            return false;
        }
        self.handed = false;
        let (tx, rx) = oneshot::channel();
        self.rx = rx;
        self.tickets.map.lock().insert(self.id.clone(), tx);
        true
    }

    /// Waits until a release hands the lock to this ticket.
    pub(crate) async fn wait(&mut self) {
        if self.handed {
            return;
        }
        match (&mut self.rx).await {
            Ok(()) => self.handed = true,
            // The sender only goes with a delivery (invariant 1): never.
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.tickets.map.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_id_is_holder_number_and_lease_ms() {
        let holder = "0b1b7a5e-3a5c-4e4e-9a4b-1c2d3e4f5a6b:42";
        for (n, lease) in [
            (0, Duration::ZERO),
            (7, Duration::from_millis(30_000)),
            (u64::MAX, Duration::from_micros(1_999)),
            (1, Duration::MAX),
        ] {
            let want = format!("{holder}:{n}:{}", lease.as_millis());
            assert_eq!(ticket_id(holder, n, lease), want);
        }
    }
}
