//! Taking a lock: one Redlock attempt, the wait for a busy lock (pub/sub, or a spin
//! lock's back-off), waiting for a counter, the client's local line of contenders,
//! hand-overs from other clients, and a call that may wait for its own task's hold.

pub(crate) mod all_or_none;
pub(crate) mod attempt;
pub(crate) mod gate;
pub(crate) mod self_wait;
pub(crate) mod signal;
pub(crate) mod spin_wait;
pub(crate) mod tickets;
pub(crate) mod waiter;

use gate::Gates;
use tickets::Tickets;

/// This client's contenders for locks: the local line per name (gate.rs) and the
/// waits registered for a cross-process hand-over (tickets.rs). The acquire part's
/// own state.
#[derive(Default)]
pub(crate) struct Contenders {
    gates: Gates,
    tickets: Tickets,
}

impl Contenders {
    /// The local line of contenders, per name.
    pub(crate) fn gates(&self) -> &Gates {
        &self.gates
    }

    /// The waits registered for a hand-over from another client.
    pub(crate) fn tickets(&self) -> &Tickets {
        &self.tickets
    }
}
