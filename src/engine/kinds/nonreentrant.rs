//! The non-reentrant locks (Redisson 4.4's `RedissonNonReentrantLock` and
//! `RedissonNonReentrantFairLock`): the plain and the fair lock with one change, made
//! in their acquire scripts by `lua/reacquire_guard.lua`: a holder that already holds
//! the lock is refused (status 4, read here as [`Error::Reentry`]) instead of
//! re-entering. Everything else — layout, release, queue, channels, renewal, dropping
//! a lost hold — is the reentrant kind's, so both interoperate with Redisson's classes
//! and exclude its reentrant locks of the same name.
//!
//! Locally they opt out of what assumes re-entry or a plain hand-over: no local-hold
//! shortcut, no offers for the non-fair one, no waiter registry (its waiters listen on
//! the shared channel as Redisson's do, so a release always publishes for them,
//! pass_on.lua invariant 1). The fair one keeps the fair lock's queue and offers: a
//! hand-over goes to another task, never to the releasing holder.

use std::sync::{Arc, LazyLock};

use redis::Value;

use super::{fair, plain, Ask, Book, Protocol, Sending};
use crate::engine::wire::{int, read_acquire, Acquire, Release};
use crate::error::{Error, Result};
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static NR_ACQUIRE: LazyLock<Script> = lua!("reacquire_guard.lua", "acquire.lua");
static NR_FAIR_ACQUIRE: LazyLock<Script> =
    lua!("fair_evict.lua", "reacquire_guard.lua", "fair_acquire.lua");

/// The status `lua/reacquire_guard.lua` answers for a second acquisition.
const REACQUIRE: i64 = 4;

/// These scripts, for the catalogue (catalogue.rs).
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 2] {
    [&NR_ACQUIRE, &NR_FAIR_ACQUIRE]
}

/// An acquire reply, the guard's refusal typed.
fn read(addr: &str, name: &str, v: Value) -> Result<Acquire> {
    if let Value::Array(items) = &v {
        if items.first().and_then(int) == Some(REACQUIRE) {
            return Err(Error::Reentry {
                name: name.to_string(),
            });
        }
    }
    read_acquire(addr, name, v)
}

/// Redisson `RedissonNonReentrantLock` (`getNonReentrantLock`).
pub(crate) struct NonReentrant;

impl Protocol for NonReentrant {
    fn label(&self) -> &'static str {
        "non_reentrant"
    }

    fn acquire(
        &self,
        name: &str,
        lease_ms: u64,
        holder: &str,
        _ask: &Ask,
        _waiting: Option<Arc<str>>,
    ) -> Sending<Acquire> {
        let mut inv = NR_ACQUIRE.call();
        inv.key(name).arg(lease_ms).arg(holder);
        Sending::Script(inv, read)
    }

    /// The plain release: its hold count is always 1, so it frees the lock and
    /// publishes for the waiters (pass_on.lua: they are not registered).
    fn release(&self, name: &str, lease_ms: u64, holder: &str) -> Sending<Release> {
        plain::Plain.release(name, lease_ms, holder)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        fair::drop_lost(name, holder)
    }

    fn majority_suffices(&self) -> bool {
        true
    }

    fn reentrant(&self) -> bool {
        false
    }
}

/// Redisson `RedissonNonReentrantFairLock` (`getNonReentrantFairLock`): the fair
/// lock's protocol but for its acquire.
pub(crate) struct NonReentrantFair;

impl Protocol for NonReentrantFair {
    fn label(&self) -> &'static str {
        "non_reentrant_fair"
    }

    fn wake_channel(&self, name: &str, holder: &str) -> String {
        fair::Fair.wake_channel(name, holder)
    }

    fn acquire(
        &self,
        name: &str,
        lease_ms: u64,
        holder: &str,
        ask: &Ask,
        _waiting: Option<Arc<str>>,
    ) -> Sending<Acquire> {
        let mut inv = fair::call(&NR_FAIR_ACQUIRE, name);
        inv.arg(lease_ms)
            .arg(holder)
            .arg(ask.stale_ms)
            .arg(if ask.once { "0" } else { "1" })
            .arg(ask.wait_ms);
        Sending::Script(inv, read)
    }

    fn release(&self, name: &str, lease_ms: u64, holder: &str) -> Sending<Release> {
        fair::Fair.release(name, lease_ms, holder)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        fair::drop_lost(name, holder)
    }

    fn leave(&self, name: &str, holder: &str, ask: &Ask) -> Option<Invocation> {
        fair::Fair.leave(name, holder, ask)
    }

    fn gated(&self, redlock: bool) -> bool {
        fair::Fair.gated(redlock)
    }

    fn queues(&self, ask: &Ask) -> bool {
        fair::Fair.queues(ask)
    }

    fn offers(&self) -> Option<Book> {
        fair::Fair.offers()
    }

    fn wakes_locally(&self) -> bool {
        fair::Fair.wakes_locally()
    }

    fn reentrant(&self) -> bool {
        false
    }
}
