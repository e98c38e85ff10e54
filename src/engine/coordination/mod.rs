//! What is built on holding a lock: leader election, writes guarded by a lock, and
//! asking a lock's holders to release it.

pub(crate) mod election;
pub(crate) mod guarded;
pub(crate) mod revoke;
