//! The Redis key and channel names of a lock, as Redisson and redlatch write them: for
//! operators, monitoring and tools that read a lock's state beside the library. The
//! lock itself is a hash under its own name.

use crate::keys;

/// The channel a full release of lock `name` publishes `"0"` on (Redisson's
/// `redisson_lock__channel:{name}`; a name with a `{hash tag}` keeps it as is).
///
/// # Examples
/// ```
/// assert_eq!(redlatch::wire::lock_channel("orders:42"), "redisson_lock__channel:{orders:42}");
/// assert_eq!(redlatch::wire::lock_channel("{tenant}:7"), "redisson_lock__channel:{tenant}:7");
/// ```
pub fn lock_channel(name: &str) -> String {
    keys::channel(name)
}

/// The waiter registry of plain lock `name` (a sorted set of waiting redlatch clients'
/// tickets; not a Redisson key), in the lock's hash slot.
///
/// # Examples
/// ```
/// assert_eq!(redlatch::wire::waiter_registry("orders:42"), "redlatch_lock_waiters:{orders:42}");
/// assert_eq!(redlatch::wire::waiter_registry("{tenant}:7"), "redlatch_lock_waiters:{tenant}:7");
/// ```
pub fn waiter_registry(name: &str) -> String {
    keys::waiters(name)
}

/// The fair queue of fair lock `name` (Redisson's `redisson_lock_queue:{name}`).
///
/// # Examples
/// ```
/// assert_eq!(redlatch::wire::fair_queue("jobs"), "redisson_lock_queue:{jobs}");
/// ```
pub fn fair_queue(name: &str) -> String {
    keys::queue(name)
}

/// The fencing counter of fenced lock `name` (Redisson's `redisson_lock_token:{name}`).
///
/// # Examples
/// ```
/// assert_eq!(redlatch::wire::fencing_counter("ledger"), "redisson_lock_token:{ledger}");
/// ```
pub fn fencing_counter(name: &str) -> String {
    keys::token(name)
}
