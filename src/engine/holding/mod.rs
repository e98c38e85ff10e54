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
