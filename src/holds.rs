//! The client's table of held locks: one [`Hold`] per (lock name, holder), with the
//! local reentrant count. The watchdog renews what is in it; guards count down in it.
//!
//! Invariants:
//! 1. An entry exists while its holder holds the lock at least once (count > 0).
//! 2. An entry that is lost (watchdog, force-unlock, expired lease found on re-acquire)
//!    has its `lost` token cancelled and is removed; guards of a lost hold never send a
//!    release again, so they cannot release a later acquisition by the same holder.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

type Key = (Arc<str>, Arc<str>);

/// One holder's hold on one lock.
pub(crate) struct Hold {
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    pub(crate) lost: CancellationToken,
    state: parking_lot::Mutex<State>,
}

struct State {
    count: u32,
    watchdog_holds: u32,
    last_renewed: Instant,
}

impl Hold {
    /// Holds that want the watchdog, and when a majority last confirmed the lease.
    pub(crate) fn watchdog_state(&self) -> (u32, Instant) {
        let s = self.state.lock();
        (s.watchdog_holds, s.last_renewed)
    }

    pub(crate) fn renewed(&self, at: Instant) {
        self.state.lock().last_renewed = at;
    }
}

/// All holds of a client.
#[derive(Default)]
pub(crate) struct Holds {
    map: parking_lot::Mutex<HashMap<Key, Arc<Hold>>>,
}

impl Holds {
    /// The live hold of `holder` on `name`, if any.
    pub(crate) fn get(&self, name: &Arc<str>, holder: &Arc<str>) -> Option<Arc<Hold>> {
        self.map
            .lock()
            .get(&(name.clone(), holder.clone()))
            .cloned()
    }

    /// Records an acquisition. `fresh`: the lock was created rather than re-entered; a
    /// fresh acquisition while we still had an entry means the old one silently
    /// expired, so the old entry is declared lost (invariant 2).
    pub(crate) fn acquired(
        &self,
        name: &Arc<str>,
        holder: &Arc<str>,
        fresh: bool,
        watchdog: bool,
        at: Instant,
    ) -> Arc<Hold> {
        let mut map = self.map.lock();
        let key = (name.clone(), holder.clone());
        if let Some(old) = map.get(&key) {
            if !fresh {
                let mut s = old.state.lock();
                s.count += 1;
                s.watchdog_holds += u32::from(watchdog);
                // The re-entrant grant set the lease back to full on a majority.
                s.last_renewed = s.last_renewed.max(at);
                return old.clone();
            }
            old.lost.cancel();
        }
        let hold = Arc::new(Hold {
            name: name.clone(),
            holder: holder.clone(),
            lost: CancellationToken::new(),
            state: parking_lot::Mutex::new(State {
                count: 1,
                watchdog_holds: u32::from(watchdog),
                last_renewed: at,
            }),
        });
        map.insert(key, hold.clone());
        hold
    }

    /// Counts one hold down; the entry goes when the count reaches 0. Returns false if
    /// the hold was already lost (nothing to release in Redis).
    pub(crate) fn released(&self, hold: &Arc<Hold>, watchdog: bool) -> bool {
        if hold.lost.is_cancelled() {
            return false;
        }
        let mut map = self.map.lock();
        let mut s = hold.state.lock();
        s.count = s.count.saturating_sub(1);
        if watchdog {
            s.watchdog_holds = s.watchdog_holds.saturating_sub(1);
        }
        if s.count == 0 {
            let key = (hold.name.clone(), hold.holder.clone());
            if map.get(&key).is_some_and(|h| Arc::ptr_eq(h, hold)) {
                map.remove(&key);
            }
        }
        true
    }

    /// Declares a hold lost: cancels its token and removes it.
    pub(crate) fn lose(&self, hold: &Arc<Hold>) {
        hold.lost.cancel();
        let key = (hold.name.clone(), hold.holder.clone());
        let mut map = self.map.lock();
        if map.get(&key).is_some_and(|h| Arc::ptr_eq(h, hold)) {
            map.remove(&key);
        }
    }

    /// Declares every hold on `name` lost (after a force-unlock).
    pub(crate) fn lose_name(&self, name: &str) {
        self.map.lock().retain(|(n, _), hold| {
            let keep = &**n != name;
            if !keep {
                hold.lost.cancel();
            }
            keep
        });
    }

    /// Declares every hold lost (the client shut down: nobody renews any more).
    pub(crate) fn lose_all(&self) {
        for (_, hold) in self.map.lock().drain() {
            hold.lost.cancel();
        }
    }

    /// The holds the watchdog must renew.
    pub(crate) fn watched(&self) -> Vec<Arc<Hold>> {
        self.map
            .lock()
            .values()
            .filter(|h| h.state.lock().watchdog_holds > 0)
            .cloned()
            .collect()
    }

    /// Number of held locks.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}
