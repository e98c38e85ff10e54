//! Semaphores, expirable permits and count-down latches as the API layer calls them:
//! their protocols are kinds/semaphore.rs, kinds/permit.rs and kinds/latch.rs. Kept
//! as these names until the engine façade (issue 22 item 1) gives the API its calls.

pub(crate) use super::kinds::latch::set as latch_set;
pub(crate) use super::kinds::latch::{count as latch_count, count_down as latch_count_down};
pub(crate) use super::kinds::permit::{
    permit_lease, permits_state, renew_permits, return_permit, return_permits, set_permit_lease,
    set_total, take_permits,
};
pub(crate) use super::kinds::semaphore::{acquire, available, drain, release, set, Set};
