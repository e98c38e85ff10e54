//! The local gate: one contender per lock name inside a client.
//!
//! Tasks of one client that wait for the same (non-fair) lock line up here in FIFO
//! order (tokio's `Mutex` is fair); only the gate holder talks to Redis, subscribes and
//! waits for the unlock message. A task that releases the lock and immediately asks for
//! it again queues behind the local waiters instead of barging, and a release wakes one
//! local contender instead of all of them (no thundering herd inside a client).
//!
//! Invariants:
//! 1. An entry lives in the map exactly as long as someone holds or waits for it.
//! 2. Re-entrant acquisitions never pass through the gate (they would deadlock).
//! 3. Only the gate holder posts an offer for a plain lock (offers.rs), so a release
//!    hands the lock to the next local contender in FIFO order.

use crate::engine::FastMap as HashMap;
use std::sync::Arc;

use tokio::sync::{Mutex, OwnedMutexGuard};

/// A name's gate and how many passes (holding or waiting) exist for it.
#[derive(Default)]
struct Entry {
    gate: Arc<Mutex<()>>,
    users: usize,
}

/// All gates of a client.
#[derive(Default)]
pub(crate) struct Gates {
    map: parking_lot::Mutex<HashMap<Arc<str>, Entry>>,
}

/// Held by the one local contender of a name.
pub(crate) struct GatePass<'a> {
    gates: &'a Gates,
    name: Arc<str>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Gates {
    /// Waits for this task's turn to contend for `name` (cancel-safe).
    pub(crate) async fn enter(&self, name: &Arc<str>) -> GatePass<'_> {
        let gate = {
            let mut map = self.map.lock();
            let entry = map.entry(name.clone()).or_default();
            entry.users += 1;
            entry.gate.clone()
        };
        // The pass exists before the await, so a cancelled wait still counts down.
        let mut pass = GatePass {
            gates: self,
            name: name.clone(),
            guard: None,
        };
        pass.guard = Some(gate.lock_owned().await);
        pass
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

impl Drop for GatePass<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.gates.map.lock();
        if let Some(entry) = map.get_mut(&self.name) {
            entry.users -= 1;
            // Nobody holds or waits any more (invariant 1).
            if entry.users == 0 {
                map.remove(&self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn contenders_pass_one_at_a_time_in_order_and_the_map_empties() {
        let gates = Arc::new(Gates::default());
        let name: Arc<str> = "n".into();
        let first = gates.enter(&name).await;
        let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..4 {
            let (g, n, o) = (gates.clone(), name.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _p = g.enter(&n).await;
                o.lock().push(i);
            }));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(order.lock().is_empty());
        drop(first);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3]);
        assert_eq!(gates.len(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_no_entry() {
        let gates = Gates::default();
        let name: Arc<str> = "n".into();
        let held = gates.enter(&name).await;
        let r = tokio::time::timeout(Duration::from_millis(20), gates.enter(&name)).await;
        assert!(r.is_err());
        drop(held);
        assert_eq!(gates.len(), 0);
    }
}
