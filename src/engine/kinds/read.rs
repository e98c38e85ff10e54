//! The read side of a read-write lock (Redisson `RReadWriteLock.readLock()`; layout
//! and scripts in kinds/rw_layout.rs). Readers share: no gate, no offers, no local-hold shortcut
//! (waiter/mod.rs invariant 9); each read hold has its own timeout key, renewed by the
//! watchdog's per-pair renewal (kinds/rw_layout.rs `renew_reads`).

use crate::engine::kinds::listed::Listed;
use crate::engine::kinds::rw_layout;
use crate::engine::kinds::{
    read_release, AcquireParams, Gate, Probe, Protocol, Renewal, ScriptOrBatch, WaitPolicy,
};
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{read_acquire, Acquire, Release};
use crate::engine::Kind;
use crate::keys;
use crate::transport::Invocation;
use std::sync::Arc;

/// Redisson `RReadWriteLock.readLock()`.
pub(crate) struct Read;

impl Protocol for Read {
    fn label(&self) -> &'static str {
        "read"
    }

    fn listed(&self) -> &'static Listed {
        &rw_layout::LISTED
    }

    fn channel(&self, name: &str) -> String {
        keys::rw_channel(name)
    }

    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        _ask: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let inv = rw_layout::acquire_call(name, lease_ms, holder, false, 0);
        ScriptOrBatch::Script(inv, read_acquire)
    }

    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        ScriptOrBatch::Script(
            rw_layout::release_call(name, lease_ms, holder),
            read_release,
        )
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        rw_layout::drop_call(name, holder)
    }

    /// Readers share: none waits in the gate.
    fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            gate: Gate::Never,
            ..WaitPolicy::CONSERVATIVE
        }
    }

    fn siblings(&self) -> &'static [Kind] {
        &[Kind::Write]
    }

    /// Each read hold renews its own timeout key (kinds/rw_layout.rs `renew_reads`).
    fn renewal(&self) -> Renewal {
        Renewal::Read
    }

    /// Anyone reads: a hash in read mode, or in write mode with more holders than
    /// the writer (a writer's own read holds, a downgrade, are read holds too).
    fn probe(&self) -> Probe {
        Probe::Hash(|v| match rw_layout::parse_state(v) {
            (Some(mode), _) if mode == "read" => true,
            (Some(mode), holders) if mode == "write" => holders > 1,
            _ => false,
        })
    }

    /// Deletes it if in read mode.
    fn force_release(&self, name: &str, _notice: Option<&str>) -> Invocation {
        rw_layout::force_call(name, false)
    }

    fn force_may_spare(&self) -> bool {
        true
    }
}
