//! Observing a deployment for operators: what locks exist, who holds them, who waits
//! (`Client::list`, `redlatch list` and `top`).
//!
//! * [`scan`]: every master's (every cluster primary's) keys under a pattern, by
//!   `SCAN`, within the listing's one deadline.
//! * [`classify`]: which keys are names of their own (not part of another name's
//!   layout) and what kind each is, from its inspection (kinds/inspect.rs).
//! * [`waiters`]: a name's listeners, counted by pub/sub.
//! * [`records`]: the clients' records and ledgers: who a holder is, since when it
//!   holds, who waits.
//! * [`assemble`]: one name's listing from all of it; [`listing`]: the public types;
//!   [`list`]: `Engine::list`, all of it within one deadline.

pub(crate) mod assemble;
pub(crate) mod classify;
pub(crate) mod list;
pub(crate) mod listing;
pub(crate) mod records;
pub(crate) mod scan;
pub(crate) mod waiters;
