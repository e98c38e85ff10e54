//! Keeping a lock and giving it back: the guard's handle, the client's hold table,
//! holder ids, the watchdog, the release and the local waiters' hand-over offers.

pub(crate) mod held;
pub(crate) mod holder_id;
pub(crate) mod lost_signal;
pub(crate) mod offers;
pub(crate) mod release;
pub(crate) mod table;
pub(crate) mod urgent;
pub(crate) mod watchdog;

use std::sync::Arc;

use offers::Offers;
use table::HoldTable;
use urgent::Urgent;

/// What this client keeps: its hold table, the holds waiting for an urgent renewal,
/// and the hand-over offers of its waiting tasks that a release may answer. The
/// holding part's own state.
pub(crate) struct Holdings {
    table: HoldTable,
    /// Holds acquired too late for the next renewal round (urgent.rs).
    urgent: Arc<Urgent>,
    /// Hand-over offers of waiting tasks: plain locks, then fair locks (offers.rs).
    offers: [Offers; 2],
}

impl Holdings {
    pub(crate) fn new(metrics_names: crate::telemetry::LockNames) -> Holdings {
        Holdings {
            table: HoldTable::new(metrics_names),
            urgent: Arc::default(),
            offers: Default::default(),
        }
    }

    /// The hold table: every hold this client has.
    pub(crate) fn table(&self) -> &HoldTable {
        &self.table
    }

    /// The holds the watchdog renews ahead of its next round (urgent.rs).
    pub(crate) fn urgent(&self) -> &Arc<Urgent> {
        &self.urgent
    }

    /// The hand-over offers of plain (`fair` false) or fair locks.
    pub(crate) fn offers(&self, fair: bool) -> &Offers {
        &self.offers[usize::from(fair)]
    }
}
