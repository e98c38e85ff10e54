//! Non-reentrance as a wrapper over a kind (Redisson 4.4's `RedissonNonReentrantLock`
//! and `RedissonNonReentrantFairLock` are the plain and the fair lock with one change):
//! [`NonReentrant`] runs its inner kind's acquire behind `lua/reacquire_guard.lua`,
//! which refuses a holder that already holds the lock (status 4, read here as
//! [`Error::Reentry`]) instead of letting it re-enter. Everything else — layout,
//! release, queue, channels, renewal, dropping a lost hold — is the inner kind's, so
//! both interoperate with Redisson's classes and exclude its reentrant locks of the
//! same name.
//!
//! Any kind whose acquire script takes the guard (`KEYS[1]` the lock, `ARGV[2]` the holder,
//! a hash of holders) can be wrapped: it implements [`Guardable`], which gives its
//! acquire call over another script with the same keys and arguments.
//!
//! Locally the wrapper opts out of what assumes re-entry or a plain hand-over: no
//! local-hold shortcut, no plain offers, no waiter registry (a non-fair waiter
//! listens on the shared channel as Redisson's do, so a release always publishes for
//! it, pass_on.lua invariant 1). A fair inner kind keeps its queue and offers: a
//! hand-over goes to another task, never to the releasing holder.

use std::sync::Arc;
use std::sync::LazyLock;

use redis::Value;

use crate::engine::kinds::fair::{self, Fair};
use crate::engine::kinds::plain::Plain;
use crate::engine::kinds::{AcquireParams, OfferPolicy, Protocol, ScriptOrBatch, WaitPolicy};
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{int, read_acquire, Acquire, Release};
use crate::error::{Error, Result};
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static NR_ACQUIRE: LazyLock<Script> = lua!("reacquire_guard.lua", "acquire.lua");
static NR_FAIR_ACQUIRE: LazyLock<Script> =
    lua!("fair_evict.lua", "reacquire_guard.lua", "fair_acquire.lua");

/// Redisson `RedissonNonReentrantLock` (`getNonReentrantLock`): the plain lock, guarded.
pub(crate) static NON_REENTRANT: NonReentrant<Plain> = NonReentrant {
    inner: Plain,
    acquire: &NR_ACQUIRE,
    label: "non_reentrant",
};

/// Redisson `RedissonNonReentrantFairLock` (`getNonReentrantFairLock`): the fair lock,
/// guarded.
pub(crate) static NON_REENTRANT_FAIR: NonReentrant<Fair> = NonReentrant {
    inner: Fair,
    acquire: &NR_FAIR_ACQUIRE,
    label: "non_reentrant_fair",
};

/// The status `lua/reacquire_guard.lua` answers for a second acquisition.
const REACQUIRE: i64 = 4;

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 2] {
    [&NR_ACQUIRE, &NR_FAIR_ACQUIRE]
}

/// A kind whose acquire can run behind `lua/reacquire_guard.lua`.
pub(crate) trait Guardable: Protocol {
    /// The acquire call (its keys and arguments) over `script`, which is this kind's
    /// acquire script with the guard prepended.
    fn acquire_over(
        &self,
        script: &'static Script,
        call: (&str, u64, &str),
        params: &AcquireParams,
    ) -> Invocation;
}

/// `P` without re-entry: its acquire guarded, the rest its own.
pub(crate) struct NonReentrant<P> {
    inner: P,
    /// `P`'s acquire script behind the guard.
    acquire: &'static LazyLock<Script>,
    label: &'static str,
}

/// An acquire reply, the guard's refusal typed.
fn read(addr: &str, name: &str, v: Value) -> Result<Acquire> {
    if let Value::Array(items) = &v
        && items.first().and_then(int) == Some(REACQUIRE)
    {
        return Err(Error::Reentry {
            name: name.to_string(),
        });
    }
    read_acquire(addr, name, v)
}

impl<P: Guardable> Protocol for NonReentrant<P> {
    fn label(&self) -> &'static str {
        self.label
    }

    fn listed(&self) -> &'static crate::engine::kinds::listed::Listed {
        self.inner.listed()
    }

    fn channel(&self, name: &str) -> String {
        self.inner.channel(name)
    }

    fn wake_channel(&self, name: &str, holder: &str) -> String {
        self.inner.wake_channel(name, holder)
    }

    /// The inner acquire behind the guard, always a script (a plain acquire does not
    /// go through group commit here).
    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        params: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let inv = (self.inner).acquire_over(self.acquire, (name, lease_ms, holder), params);
        ScriptOrBatch::Script(inv, read)
    }

    /// The inner release: a hold count is always 1, so it frees the lock and wakes
    /// the waiters.
    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        self.inner.release(name, lease_ms, holder)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        self.inner.drop_lost(name, holder)
    }

    fn leave(&self, name: &str, holder: &str, params: &AcquireParams) -> Option<Invocation> {
        self.inner.leave(name, holder, params)
    }

    fn validate(&self, key: &str) -> Result<()> {
        self.inner.validate(key)
    }

    fn force_release(&self, name: &str, notice: Option<&str>) -> Invocation {
        self.inner.force_release(name, notice)
    }

    fn policy(&self) -> WaitPolicy {
        let inner = self.inner.policy();
        WaitPolicy {
            reentrant: false,
            local_shortcut: false,
            registers: false,
            offers: inner
                .offers
                .filter(|offer_policy| *offer_policy == OfferPolicy::Fair),
            ..inner
        }
    }
}

impl Guardable for Plain {
    fn acquire_over(
        &self,
        script: &'static Script,
        (name, lease_ms, holder): (&str, u64, &str),
        _ask: &AcquireParams,
    ) -> Invocation {
        let mut inv = script.call();
        inv.key(name).arg(lease_ms).arg(holder);
        inv
    }
}

impl Guardable for Fair {
    fn acquire_over(
        &self,
        script: &'static Script,
        (name, lease_ms, holder): (&str, u64, &str),
        params: &AcquireParams,
    ) -> Invocation {
        fair::acquire_call(script, (name, lease_ms, holder), params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::Queue;

    fn params() -> AcquireParams {
        AcquireParams {
            once: false,
            intent: false,
            redlock: false,
            stale_ms: 5000,
            wait_ms: 300_000,
        }
    }

    /// The script, keys and arguments of a described script call.
    fn parts(sent: ScriptOrBatch<Acquire>) -> (&'static Script, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        match sent {
            ScriptOrBatch::Script(inv, _) => inv.parts(),
            ScriptOrBatch::Batched(_) => panic!("a guarded acquire is a script"),
        }
    }

    /// The guarded fair acquire sends the fair acquire's keys and arguments, only its
    /// script differs (Redisson's non-reentrant fair lock shares the fair layout).
    #[test]
    fn the_guard_changes_the_script_not_the_call() {
        let call: (&Arc<str>, u64, &Arc<str>) = (&"n".into(), 30_000, &"uuid:1".into());
        let (script, keys, args) =
            parts(NON_REENTRANT_FAIR.acquire(call.0, call.1, call.2, &params(), None));
        let (fair, fair_keys, fair_args) =
            parts(Fair.acquire(call.0, call.1, call.2, &params(), None));
        assert_eq!((keys, args), (fair_keys, fair_args));
        assert!(!std::ptr::eq(script, fair));
        assert!(std::ptr::eq(script, &*NR_FAIR_ACQUIRE));
        let (script, keys, args) =
            parts(NON_REENTRANT.acquire(call.0, call.1, call.2, &params(), None));
        assert!(std::ptr::eq(script, &*NR_ACQUIRE));
        assert_eq!(keys, [b"n".to_vec()]);
        assert_eq!(args, [b"30000".to_vec(), b"uuid:1".to_vec()]);
    }

    /// Wrapped, a kind never re-enters and drops what assumes re-entry or a plain
    /// hand-over; the fair queue and its offers stay.
    #[test]
    fn the_wrapper_keeps_the_inner_wait_but_re_entry() {
        for wrapped in [NON_REENTRANT.policy(), NON_REENTRANT_FAIR.policy()] {
            assert!(!wrapped.reentrant && !wrapped.local_shortcut && !wrapped.registers);
        }
        let (plain, nr) = (Plain.policy(), NON_REENTRANT.policy());
        assert!(plain.reentrant && plain.offers.is_some());
        assert_eq!(nr.offers, None);
        assert_eq!(nr.majority_suffices, plain.majority_suffices);
        let (fair, nrf) = (Fair.policy(), NON_REENTRANT_FAIR.policy());
        assert_eq!(nrf.offers, Some(OfferPolicy::Fair));
        assert_eq!((nrf.gate, nrf.queue), (fair.gate, Queue::Waiting));
        assert_eq!(nrf.wakes_locally, fair.wakes_locally);
        assert_eq!(NON_REENTRANT_FAIR.label(), "non_reentrant_fair");
        assert_eq!(NON_REENTRANT.label(), "non_reentrant");
    }
}
