//! The write side of a read-write lock (Redisson `RReadWriteLock.writeLock()`; layout
//! and scripts in kinds/rw_layout.rs). Held under the writer id `<holder>:write`; a writer that
//! prefers writers records an intent while it waits, which keeps new readers out, is
//! refreshed like a fair queue entry and removed however the wait ends (waiter/mod.rs
//! invariant 9). Never handed over locally (its waiters post no offers).

use std::sync::Arc;

use crate::engine::kinds::inspect::{scored, scores, text, Section};
use crate::engine::kinds::listed::Listed;
use crate::engine::kinds::rw_layout;
use crate::engine::kinds::{
    read_release, AcquireParams, Probe, Protocol, Queue, ScriptOrBatch, WaitPolicy,
};
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{read_acquire, Acquire, Release};
use crate::engine::Kind;
use crate::keys;
use crate::transport::Invocation;

/// Redisson `RReadWriteLock.writeLock()`.
pub(crate) struct Write;

impl Protocol for Write {
    fn label(&self) -> &'static str {
        "write"
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
        params: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let intent_ms = if self.policy().queues(params) {
            params.stale_ms
        } else {
            0
        };
        let inv = rw_layout::acquire_call(name, lease_ms, holder, true, intent_ms);
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

    /// Removes the writer's intent.
    fn leave(&self, name: &str, holder: &str, _ask: &AcquireParams) -> Option<Invocation> {
        Some(rw_layout::leave_call(name, holder))
    }

    /// A waiting writer with an intent is queued by it.
    fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            queue: Queue::Intent,
            ..WaitPolicy::CONSERVATIVE
        }
    }

    /// The reader id with `:write`.
    fn holder_id(&self, holder: Arc<str>) -> Arc<str> {
        rw_layout::writer(&holder)
    }

    /// A reader waiting to write would wait for its own read hold.
    fn no_upgrade_from(&self) -> Option<Kind> {
        Some(Kind::Read)
    }

    fn siblings(&self) -> &'static [Kind] {
        &[Kind::Read]
    }

    /// Anyone writes: a hash in write mode.
    fn probe(&self) -> Probe {
        Probe::Hash(|v| rw_layout::parse_state(v).0.as_deref() == Some("write"))
    }

    /// Deletes it if in write mode.
    fn force_release(&self, name: &str, _notice: Option<&str>) -> Invocation {
        rw_layout::force_call(name, true)
    }

    fn force_may_spare(&self) -> bool {
        true
    }
}

/// The read-write layout's part of an inspection (kinds/inspect.rs; both sides share
/// it, its holders are the hash's): the mode, and the writers waiting with when their
/// intent lapses.
pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| {
        pipe.cmd("HGET").arg(name).arg("mode");
        scores(pipe, keys::rw_writers(name));
    },
    replies: 2,
    read: |v, st| {
        st.mode = text(&v[0]);
        st.writers_waiting = (scored(&v[1], text).into_iter())
            .map(|(w, at)| (w, Some(at)))
            .collect();
    },
};
