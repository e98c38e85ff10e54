//! [`Inside`]: counts the critical sections inside one lock at once, for the exclusion
//! tests of every kind (futures of one task, tasks, clients); [`Values`]: the same per
//! value, for the multi-lock kinds whose sets overlap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use redlatch::Lock;

/// Counts how many sections are inside at once, and the most ever seen.
#[derive(Default)]
pub struct Inside {
    now: AtomicUsize,
    most: AtomicUsize,
    sections: AtomicUsize,
}

impl Inside {
    /// One critical section: enter, yield to the other futures for a while (long enough
    /// for every other future of the task to be polled many times), leave.
    pub async fn section(&self, lock: &Lock) {
        let guard = lock.lock().await.unwrap();
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.sections.fetch_add(1, Ordering::SeqCst);
        guard.unlock().await.unwrap();
    }

    /// The most sections ever inside at once.
    pub fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    /// The sections completed.
    pub fn sections(&self) -> usize {
        self.sections.load(Ordering::SeqCst)
    }
}

/// Holders per value, for multi-locks over overlapping sets: no value may ever have two.
#[derive(Default)]
pub struct Values(parking_lot::Mutex<HashMap<&'static str, u32>>);

impl Values {
    /// One section over `set` (its lock already taken): every value marked held, failing
    /// if one already is, 2 ms inside, then every value freed again.
    pub async fn hold(&self, set: &[&'static str]) {
        for v in set {
            let mut held = self.0.lock();
            let e = held.entry(v).or_default();
            assert_eq!(*e, 0, "{v} held twice");
            *e += 1;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        for v in set {
            *self.0.lock().get_mut(v).unwrap() -= 1;
        }
    }
}
