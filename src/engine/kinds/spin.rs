//! The spin lock (Redisson `RedissonSpinLock`, `getSpinLock`): the reentrant lock's
//! layout and acquire (acquire.lua through group commit, never registering a waiter),
//! a release that publishes nothing (`lua/spin_release.lua`). Its waiters do not
//! subscribe: they try once, sleep a back-off and try again (engine/acquire/spin_wait.rs), so the
//! kind's local waiter behaviour below is never used for a wait.

use std::sync::Arc;
use std::sync::LazyLock;

use crate::engine::kinds::listed::Listed;
use crate::engine::kinds::{
    fair, plain, read_release, AcquireParams, Protocol, ScriptOrBatch, Wait, WaitPolicy,
};
use crate::engine::masters::plain_ops::{PlainOp, Waiting};
use crate::engine::masters::replies::{Acquire, Release};
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static SPIN_RELEASE: LazyLock<Script> = lua!("spin_release.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 1] {
    [&SPIN_RELEASE]
}

/// Redisson `RedissonSpinLock`.
pub(crate) struct Spin;

impl Protocol for Spin {
    fn label(&self) -> &'static str {
        "spin"
    }

    fn listed(&self) -> &'static Listed {
        &super::plain::LISTED
    }

    /// Redisson's spin acquire is the reentrant lock's: create, re-enter or answer
    /// the TTL. No ticket: spin waiters are not in the waiter registry.
    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        _ask: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        ScriptOrBatch::Batched(PlainOp {
            release: false,
            name: name.clone(),
            holder: holder.clone(),
            lease_ms,
            waiting: None,
        })
    }

    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        let mut inv = SPIN_RELEASE.call();
        inv.key(&**name).arg(lease_ms).arg(&**holder);
        ScriptOrBatch::Script(inv, read_release)
    }

    /// A lost hold is dropped as any other (drop.lua publishes "0": harmless, nobody
    /// of a spin lock listens, and a lost hold is rare).
    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        fair::drop_lost(name, holder)
    }

    /// Spins; a majority suffices; nobody listens, so a release wakes no waiter of
    /// this client either.
    fn policy(&self) -> WaitPolicy {
        WaitPolicy {
            wait: Wait::Spin,
            majority_suffices: true,
            wakes_locally: false,
            ..WaitPolicy::CONSERVATIVE
        }
    }

    /// The plain force-release (its publication wakes nobody).
    fn force_release(&self, name: &str, notice: Option<&str>) -> Invocation {
        plain::force_release(name, notice)
    }
}
