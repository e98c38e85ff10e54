//! The read side of a read-write lock (Redisson `RReadWriteLock.readLock()`; layout
//! and scripts in rw.rs). Readers share: no gate, no offers, no local-hold shortcut
//! (waiter.rs invariant 9); each read hold has its own timeout key, renewed by the
//! watchdog's per-pair renewal (rw.rs `renew_reads`).

use std::sync::Arc;

use super::{read_release, Ask, Gate, Protocol, Sending, WaitPolicy};
use crate::engine::rw;
use crate::engine::wire::{read_acquire, Acquire, Release};
use crate::keys;
use crate::transport::Invocation;

/// Redisson `RReadWriteLock.readLock()`.
pub(crate) struct Read;

impl Protocol for Read {
    fn label(&self) -> &'static str {
        "read"
    }

    fn channel(&self, name: &str) -> String {
        keys::rw_channel(name)
    }

    fn acquire(
        &self,
        name: &str,
        lease_ms: u64,
        holder: &str,
        _ask: &Ask,
        _waiting: Option<Arc<str>>,
    ) -> Sending<Acquire> {
        let inv = rw::acquire_call(name, lease_ms, holder, false, 0);
        Sending::Script(inv, read_acquire)
    }

    fn release(&self, name: &str, lease_ms: u64, holder: &str) -> Sending<Release> {
        Sending::Script(rw::release_call(name, lease_ms, holder), read_release)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        rw::drop_call(name, holder)
    }

    /// Readers share: none waits in the gate.
    fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            gate: Gate::Never,
            ..WaitPolicy::CONSERVATIVE
        }
    }
}
