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
