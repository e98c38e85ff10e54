//! [`Coalesced`]: a background job (a slot-map refresh, a primary look-up) that runs
//! at most once at a time and at most once per interval, however many requests ask
//! for it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The bookkeeping of one coalesced job.
pub(crate) struct Coalesced {
    scheduled: AtomicBool,
    last: parking_lot::Mutex<Instant>,
    every: Duration,
}

impl Coalesced {
    /// A job run at most once per `every`.
    pub(crate) fn new(every: Duration) -> Self {
        Coalesced {
            scheduled: AtomicBool::new(false),
            last: parking_lot::Mutex::new(Instant::now()),
            every,
        }
    }

    /// Claims the next run; false when one is already scheduled or running.
    pub(crate) fn claim(&self) -> bool {
        !self.scheduled.swap(true, Ordering::AcqRel)
    }

    /// Gives a claim back unused.
    pub(crate) fn unclaim(&self) {
        self.scheduled.store(false, Ordering::Release);
    }

    /// Runs a claimed job: waits out the interval since the last run, runs `job`, and
    /// frees the claim.
    pub(crate) async fn run(&self, job: impl Future<Output = ()>) {
        let since = self.last.lock().elapsed();
        if since < self.every {
            tokio::time::sleep(self.every - since).await;
        }
        job.await;
        *self.last.lock() = Instant::now();
        self.unclaim();
    }
}
