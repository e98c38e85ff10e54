//! What is built on holding a lock: leader election, writes guarded by a lock, scheduled
//! jobs (ShedLock's wire and a record of ticks), and
//! asking a lock's holders to release it.

pub(crate) mod election;
pub(crate) mod guarded;
pub(crate) mod job;
pub(crate) mod job_state;
pub(crate) mod revoke;
pub(crate) mod shedlock;
