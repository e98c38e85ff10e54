//! Offers: waiting tasks asking a local releaser to hand them the lock in its release
//! script (one round trip instead of a release and an acquire).
//!
//! A plain lock has at most one offer per name (only the gate holder posts one, see
//! gate.rs); a fair lock on one master may have one per waiting task, and the release
//! script grants the lock only to the head of the Redis queue, so FIFO is unchanged.
//!
//! Invariants:
//! 1. An offer is withdrawn by its waiter or taken by a releaser, never both: a waiter
//!    whose withdrawal fails waits for the releaser's answer before asking Redis itself.
//! 2. A taken offer is answered exactly once: granted, declined (the sender is dropped),
//!    or unknown when the hand-over script failed or the releaser was cancelled (see
//!    [`Taken`]); the waiter then asks Redis on the lock connection, after the script,
//!    whether it holds the lock. A granted waiter that is gone has the lock released for
//!    it, by the releaser when the answer cannot be sent, else by the waiter's own
//!    clean-up when the answer arrived as it was dropped.
//! 3. An entry lives in the map only while it has offers.
//! 4. A waiter that leaves (cancelled, or out of time) before its taken offer was
//!    answered, or before an unknown answer was settled, hands both to a background
//!    task, which releases the lock if it was handed over. Until that task is done,
//!    the same holder's next acquisition of that lock waits ([`Offers::settled`]): its
//!    own hold must not be mistaken for the handed one, nor counted on top of it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{oneshot, Semaphore};

/// A releaser's answer to a taken offer, with the instant the hand-over script was sent.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The waiter holds the lock now.
    Granted(Instant),
    /// The script failed or was cut short: the waiter may or may not hold the lock.
    Unknown(Instant),
}

/// One waiter's request to be handed the lock.
pub(crate) struct Offer {
    pub(crate) holder: Arc<str>,
    pub(crate) lease_ms: u64,
    /// The waiter's ticket in the waiter registry (tickets.rs), if it has one.
    pub(crate) ticket: Option<Arc<str>>,
    pub(crate) tx: oneshot::Sender<Answer>,
}

impl Offer {
    /// A new offer and the receiver its waiter listens on.
    pub(crate) fn new(
        holder: Arc<str>,
        lease_ms: u64,
        ticket: Option<Arc<str>>,
    ) -> (Self, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        (
            Offer {
                holder,
                lease_ms,
                ticket,
                tx,
            },
            rx,
        )
    }
}

/// Offers a releaser took (invariant 2). Whatever is still in it when it is dropped —
/// the hand-over script failed, or the releasing future was cancelled — is answered
/// [`Answer::Unknown`]; [`Taken::decline`] answers the rest by dropping them.
pub(crate) struct Taken {
    pub(crate) offers: Vec<Offer>,
    pub(crate) started: Instant,
}

impl Taken {
    /// Takes out the offer at `i` (to be granted).
    pub(crate) fn remove(&mut self, i: usize) -> Offer {
        self.offers.swap_remove(i)
    }

    /// Declines every offer left: their waiters know they were not handed the lock.
    pub(crate) fn decline(mut self) {
        self.offers.clear();
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        for offer in self.offers.drain(..) {
            let _ = offer.tx.send(Answer::Unknown(self.started));
        }
    }
}

type Settlings = parking_lot::Mutex<HashMap<(Arc<str>, Arc<str>), Arc<Semaphore>>>;

/// The live offers of one client, by lock name.
#[derive(Default)]
pub(crate) struct Offers {
    map: parking_lot::Mutex<HashMap<Arc<str>, Vec<Offer>>>,
    settling: Arc<Settlings>,
}

/// Marks one (lock name, holder) as being settled (invariant 4) while it lives.
pub(crate) struct Settling {
    map: Arc<Settlings>,
    key: (Arc<str>, Arc<str>),
    done: Arc<Semaphore>,
}

impl Drop for Settling {
    fn drop(&mut self) {
        let mut map = self.map.lock();
        if map
            .get(&self.key)
            .is_some_and(|d| Arc::ptr_eq(d, &self.done))
        {
            map.remove(&self.key);
        }
        self.done.close();
    }
}

impl Offers {
    /// Posts `offer` for `name`, replacing an older one of the same holder.
    pub(crate) fn post(&self, name: &Arc<str>, offer: Offer) {
        let mut map = self.map.lock();
        let list = map.entry(name.clone()).or_default();
        list.retain(|o| o.holder != offer.holder);
        list.push(offer);
    }

    /// Withdraws `holder`'s offer; false if a releaser took it (invariant 1).
    pub(crate) fn withdraw(&self, name: &str, holder: &str) -> bool {
        let mut map = self.map.lock();
        let Some(list) = map.get_mut(name) else {
            return false;
        };
        let Some(i) = list.iter().position(|o| &*o.holder == holder) else {
            return false;
        };
        list.swap_remove(i);
        if list.is_empty() {
            map.remove(name);
        }
        true
    }

    /// Marks `holder`'s hand-over of `name` as being settled in the background.
    pub(crate) fn settling(&self, name: &Arc<str>, holder: &Arc<str>) -> Settling {
        let key = (name.clone(), holder.clone());
        let done = Arc::new(Semaphore::new(0));
        self.settling.lock().insert(key.clone(), done.clone());
        Settling {
            map: self.settling.clone(),
            key,
            done,
        }
    }

    /// Waits until no hand-over of `name` to `holder` is being settled (invariant 4).
    pub(crate) async fn settled(&self, name: &Arc<str>, holder: &Arc<str>) {
        let done = {
            let map = self.settling.lock();
            if map.is_empty() {
                return;
            }
            map.get(&(name.clone(), holder.clone())).cloned()
        };
        if let Some(done) = done {
            // Closed when the settling ends: the wait then returns an error, by design.
            let _ = done.acquire().await;
        }
    }

    /// Takes up to `max` live offers for `name`, oldest first.
    pub(crate) fn take(&self, name: &str, max: usize) -> Vec<Offer> {
        let mut map = self.map.lock();
        let Some(list) = map.get_mut(name) else {
            return Vec::new();
        };
        let mut taken: Vec<Offer> = if list.len() <= max {
            map.remove(name).unwrap_or_default()
        } else {
            list.drain(..max).collect()
        };
        taken.retain(|o| !o.tx.is_closed());
        taken
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn withdraw_and_take_are_exclusive_and_the_map_empties() {
        let offers = Offers::default();
        let name: Arc<str> = "n".into();
        let (a, _ra) = Offer::new("a".into(), 10, None);
        let (b, _rb) = Offer::new("b".into(), 10, None);
        offers.post(&name, a);
        offers.post(&name, b);
        assert!(offers.withdraw("n", "a"));
        assert!(!offers.withdraw("n", "a"));
        let taken = offers.take("n", 8);
        assert_eq!(taken.len(), 1);
        assert!(
            !offers.withdraw("n", "b"),
            "taken offers cannot be withdrawn"
        );
        assert_eq!(offers.len(), 0);
    }

    #[test]
    fn take_skips_dead_offers_and_keeps_the_rest_beyond_max() {
        let offers = Offers::default();
        let name: Arc<str> = "n".into();
        let (dead, rx) = Offer::new("dead".into(), 10, None);
        drop(rx);
        offers.post(&name, dead);
        let mut keep = Vec::new();
        for h in ["a", "b", "c"] {
            let (o, rx) = Offer::new(h.into(), 10, None);
            offers.post(&name, o);
            keep.push(rx);
        }
        let taken: Vec<_> = offers.take("n", 2).into_iter().map(|o| o.holder).collect();
        assert_eq!(taken, vec![Arc::<str>::from("a")]);
        assert!(offers.withdraw("n", "b") && offers.withdraw("n", "c"));
        assert_eq!(offers.len(), 0);
    }

    #[test]
    fn a_new_offer_replaces_the_holders_old_one() {
        let offers = Offers::default();
        let name: Arc<str> = "n".into();
        let (old, mut old_rx) = Offer::new("a".into(), 10, None);
        offers.post(&name, old);
        let (new, _rx) = Offer::new("a".into(), 20, None);
        offers.post(&name, new);
        assert!(matches!(
            old_rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        let taken = offers.take("n", 8);
        assert_eq!(taken.len(), 1);
        assert_eq!(taken[0].lease_ms, 20);
    }
}

#[cfg(test)]
mod taken_tests {
    use super::*;

    #[test]
    fn dropped_taken_offers_are_answered_unknown_and_declined_ones_are_dropped() {
        let started = Instant::now();
        let (a, mut ra) = Offer::new("a".into(), 10, None);
        let (b, mut rb) = Offer::new("b".into(), 10, None);
        drop(Taken {
            offers: vec![a, b],
            started,
        });
        assert!(matches!(ra.try_recv(), Ok(Answer::Unknown(t)) if t == started));
        assert!(matches!(rb.try_recv(), Ok(Answer::Unknown(_))));
        let (c, mut rc) = Offer::new("c".into(), 10, None);
        Taken {
            offers: vec![c],
            started,
        }
        .decline();
        assert!(matches!(
            rc.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }
}

#[cfg(test)]
mod settling_tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_next_acquisition_waits_for_a_settling_of_its_own_holder_only() {
        let offers = Arc::new(Offers::default());
        let (name, me, other): (Arc<str>, Arc<str>, Arc<str>) =
            ("n".into(), "a".into(), "b".into());
        let settling = offers.settling(&name, &me);
        offers.settled(&name, &other).await; // someone else: no wait
        let waiting = tokio::time::timeout(Duration::from_millis(50), offers.settled(&name, &me));
        assert!(waiting.await.is_err(), "waits while settling");
        drop(settling);
        offers.settled(&name, &me).await;
        assert!(offers.settling.lock().is_empty());
    }
}
