//! [`Urgent`]: holds acquired with too little validity left for the next renewal
//! round (watchdog.rs invariant 4), renewed at once by the watchdog's urgent task.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::holding::table::HoldEntry;

/// Holds acquired with less than two periods of validity left: the next round
/// starts up to a period later and may take another, so they are renewed at once
/// (invariant 4), batched like a round's chunks. Empty unless masters answer late.
#[derive(Default)]
pub(crate) struct Urgent {
    queue: parking_lot::Mutex<Vec<Arc<HoldEntry>>>,
    wake: tokio::sync::Notify,
}

impl Urgent {
    /// Queues `hold` if it is watched and has less than two `period`s of `validity`
    /// left since a majority last confirmed its lease.
    pub(crate) fn offer(&self, hold: &Arc<HoldEntry>, validity: Duration, period: Duration) {
        let (watched, confirmed) = hold.watchdog_state();
        let left = (confirmed + validity).saturating_duration_since(Instant::now());
        if watched > 0 && left < 2 * period {
            self.queue.lock().push(hold.clone());
            self.wake.notify_one();
        }
    }
}

impl Urgent {
    /// Queues `hold` if it is watched, whatever its validity: something says it may be
    /// gone (a force-unlock told its client, revoke.rs), and a renewal finds out.
    pub(crate) fn now(&self, hold: &Arc<HoldEntry>) {
        if hold.watchdog_state().0 > 0 {
            self.queue.lock().push(hold.clone());
            self.wake.notify_one();
        }
    }

    /// Waits until a hold is queued.
    pub(in crate::engine) async fn notified(&self) {
        self.wake.notified().await;
    }

    /// The queued holds, taken out of the queue.
    pub(in crate::engine) fn take(&self) -> Vec<Arc<HoldEntry>> {
        std::mem::take(&mut *self.queue.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::holding::table::HoldTable;

    #[test]
    fn only_a_watched_hold_with_under_two_periods_left_is_urgent() {
        let holds = HoldTable::default();
        let now = Instant::now();
        let (lease, validity, period) = (
            Duration::from_secs(3),
            Duration::from_millis(2968),
            Duration::from_secs(1),
        );
        let urgent = Urgent::default();
        for (name, age_ms, watched) in [
            ("fresh", 0, true),
            ("late", 1200, true),
            ("very-late", 2900, true),
            ("leased", 2900, false),
        ] {
            let holder: Arc<str> = format!("c:{name}").into();
            let at = now - Duration::from_millis(age_ms);
            let h = holds.fresh(name, &holder, watched, at, lease);
            urgent.offer(&h, validity, period);
        }
        let queued: Vec<String> = (urgent.queue.lock().iter())
            .map(|h| h.name.to_string())
            .collect();
        assert_eq!(queued, ["late", "very-late"]);
    }
}
