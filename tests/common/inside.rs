//! [`Inside`]: counts the critical sections inside one lock at once, for the exclusion
//! tests of every kind (futures of one task, tasks, clients).

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
