//! What is built on holding a lock: leader election, writes guarded by a lock, scheduled
//! jobs (a record of ticks beside ShedLock's lock, whose wire is kinds/shedlock.rs), and
//! asking a lock's holders to release it.

pub(crate) mod election;
pub(crate) mod guarded;
pub(crate) mod job;
pub(crate) mod job_state;
pub(crate) mod revoke;
