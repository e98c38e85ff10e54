//! A kind is one type (Redisson gives each kind a class that overrides acquire,
//! unlock, renewal, force-unlock and is-locked, and nothing else asks which kind it
//! has). Each lock kind's file here holds a unit struct implementing [`Protocol`]:
//! what it sends to acquire, release, drop a lost hold, force-release and leave a
//! wait; its channels; its key, name check and holder id; how the watchdog renews it
//! and how `is_locked` reads it; and how its waiters behave, in one [`WaitPolicy`]
//! value. Its part of an operator's inspection is a [`inspect::Section`] beside it.
//! The engine's generic parts (waiter/, attempt.rs, release.rs, the watchdog,
//! queries.rs, the façade) ask [`Kind::protocol`], the one place that matches on a
//! kind, instead of the kind.
//!
//! * [`plain`]: Redisson `RLock`; [`fenced`]: `RFencedLock` (the plain release);
//!   [`fair`]: `RFairLock`; [`read`], [`write`](mod@write): the sides of `RReadWriteLock`
//!   (their shared layout in kinds/rw_layout.rs); [`nonreentrant`]: a wrapper that makes any
//!   [`Guardable`](nonreentrant::Guardable) kind non-reentrant
//!   (`RedissonNonReentrantLock` over the plain lock, `RedissonNonReentrantFairLock`
//!   over the fair one); [`spin`]: `RedissonSpinLock` (waited for by engine/acquire/spin_wait.rs,
//!   without pub/sub); [`group`]: `RedissonFasterMultiLock` (many values under one
//!   hash); [`simple`]: the Redlock reference clients' `SET NX PX` lock (redsync,
//!   node-redlock, redis-py), a string key, spun for.
//! * The counters, with no holder and no majority protocol: [`semaphore`]
//!   (`RSemaphore`), [`expirable_semaphore`] (`RPermitExpirableSemaphore`, renewed as holds) and
//!   [`latch`] (`RCountDownLatch`); their waits are signal.rs's.
//! * [`inspect`]: every layout read at once for `Lock::status`, each kind's
//!   [`Section`](inspect::Section) composed ([`SECTIONS`]).
//! * [`listed`]: the one list of what a listing finds ([`LISTED`]): each kind's
//!   [`Listed`](listed::Listed) entry, declared in its file, names it and tells how to
//!   recognise and read it; observe/ lists from it. [`shedlock`]: ShedLock's wire (a
//!   scheduled job's lock, coordination/job.rs).
//!
//! Adding a kind: its Lua in `lua/`, one file here implementing [`Protocol`] (its
//! scripts declared beside their calls and listed in facade/catalogue.rs), its `Kind` variant
//! and its arm in [`Kind::protocol`], its listing (an existing [`listed::Listed`]
//! entry, or a new one in its file, in [`LISTED`] and in `ListedKind`), and its getter
//! in api/handles.rs (with its per-thread twin in api/blocking/client.rs)
//! (docs/kinds.md, "How a kind is added").

pub(crate) mod backoff;
pub(crate) mod call;
pub(crate) mod expirable_semaphore;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod group;
pub(crate) mod inspect;
pub(crate) mod kind;
pub(crate) mod latch;
pub(crate) mod listed;
pub(crate) mod nonreentrant;
pub(crate) mod plain;
pub(crate) mod read;
pub(crate) mod renew;
pub(crate) mod rw_layout;
pub(crate) mod semaphore;
pub(crate) mod shedlock;
pub(crate) mod simple;
pub(crate) mod spin;
pub(crate) mod write;

use std::sync::{Arc, LazyLock};

use redis::Value;

use crate::engine::masters::master::Master;
use crate::engine::masters::plain_ops::{PlainOp, Waiting};
use crate::engine::masters::replies::{
    acquire_status, protocol, typed, wrong_type, Acquire, Release, WRONG_TYPE,
};
use crate::engine::Kind;
use crate::error::Result;
use crate::keys;
use crate::transport::{Invocation, Lane, Script};

/// What an acquisition asks for beyond name, lease and holder, fixed for one call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AcquireParams {
    /// `try_lock(ZERO)`: one attempt, never queued.
    pub(crate) once: bool,
    /// A writer records its intent while it waits (writer preference).
    pub(crate) intent: bool,
    /// More than one master (Redlock).
    pub(crate) redlock: bool,
    /// A fair waiter's liveness, also the margin behind another entry; a writer's
    /// intent lasts as long (`lua/fair_evict.lua`, `lua/rw_write_acquire.lua`).
    pub(crate) stale_ms: u64,
    /// A fair waiter's wait time on Redisson's wire (its threadWaitTime).
    pub(crate) wait_ms: u64,
}

/// How one operation travels.
pub(crate) enum ScriptOrBatch<T> {
    /// Through the master's group commit (plain acquires and releases, masters/plain_ops.rs).
    Batched(PlainOp),
    /// A script on the lock lane, its reply read by the function (address, lock name,
    /// reply).
    Script(Invocation, fn(&str, &str, Value) -> Result<T>),
}

/// Which offers a kind's waiters post for a local releaser (offers.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfferPolicy {
    /// One per name: the gate holder's (release.lua hands over).
    Plain,
    /// One per waiting task: the queue head is handed the lock (fair_release.lua).
    Fair,
}

/// A lock kind: everything the engine does differently per kind. Required: its
/// label, its entry in the listing's one list and its four calls (acquire, release,
/// drop a lost hold, force-release); the
/// defaults of the rest are the plain lock's (its channel, its name as key and
/// holder id, the field renewal, the exists probe) with a [`WaitPolicy::CONSERVATIVE`]
/// wait.
pub(crate) trait Protocol: Sync + 'static {
    /// The `kind` of spans and metrics.
    fn label(&self) -> &'static str;

    /// Its entry in [`LISTED`]: what a listing calls a name of this kind and how it
    /// reads one (listed.rs). Required, so that a new kind says how it lists; a
    /// listing tells kinds apart by their layouts, so only listed.rs's test asks it.
    #[cfg_attr(not(test), allow(dead_code))]
    fn listed(&self) -> &'static listed::Listed;

    /// The channel its releases publish on.
    fn channel(&self, name: &str) -> String {
        keys::channel(name)
    }

    /// The channel a waiter of `holder` listens on (a fair waiter: its own).
    fn wake_channel(&self, name: &str, _holder: &str) -> String {
        self.channel(name)
    }

    /// The acquire call. `waiting`: the ticket of a registering waiter (plain only).
    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        params: &AcquireParams,
        waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire>;

    /// The release of one hold of `holder`.
    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release>;

    /// Deletes `name` if `holder` still holds it (a hold declared lost) and wakes the
    /// next waiter; answers 1 if it was deleted.
    fn drop_lost(&self, name: &str, holder: &str) -> Invocation;

    /// What a wait that ends leaves behind on each master (a fair queue entry, a
    /// writer's intent); answers 1 if there was one. `None`: nothing to leave.
    fn leave(&self, _name: &str, _holder: &str, _ask: &AcquireParams) -> Option<Invocation> {
        None
    }

    /// How its waiters wait and what this client may do for them.
    fn policy(&self) -> WaitPolicy {
        WaitPolicy::CONSERVATIVE
    }

    /// The Redis key an engine name of this kind is kept under (a faster multi-lock's
    /// name is composite: its key is the group).
    fn key<'a>(&self, name: &'a str) -> &'a str {
        name
    }

    /// Checks the key for this kind's layout (a fair lock's names its queue keys too).
    fn validate(&self, key: &str) -> Result<()> {
        keys::validate(key)
    }

    /// The holder id an acquisition of it takes, from the caller's (a writer's ends
    /// in `:write`).
    fn holder_id(&self, holder: Arc<str>) -> Arc<str> {
        holder
    }

    /// The kind of a hold on the same name that the caller may not wait from for this
    /// one: it would wait for itself (a read hold, for the write side).
    fn no_upgrade_from(&self) -> Option<Kind> {
        None
    }

    /// The other kinds one caller's holds of this name may be (a read-write lock's
    /// other side), for the self-wait watch (self_wait.rs).
    fn siblings(&self) -> &'static [Kind] {
        &[]
    }

    /// Which script the watchdog renews its holds with.
    fn renewal(&self) -> Renewal {
        Renewal::Field
    }

    /// How `is_locked` reads it on one master.
    fn probe(&self) -> Probe {
        Probe::Exists
    }

    /// How `hold_count` reads `holder`'s count on one master: the read, and what its
    /// reply says (the field of the lock hash by default).
    fn hold_query(&self, name: &str, holder: &str) -> (redis::Cmd, fn(&Value, &str) -> u32) {
        let mut cmd = redis::cmd("HGET");
        cmd.arg(name).arg(holder);
        (cmd, |v, _| inspect::int(v).unwrap_or(0).max(0) as u32)
    }

    /// Deletes the lock whoever holds it and wakes its waiters: answers how many holds
    /// (or values) it removed, 0 if none. A kind whose holders hear of it at once tells
    /// them on the notice channels under `notice` (keys/books.rs; `None`: bookkeeping
    /// is off, nobody is told).
    fn force_release(&self, name: &str, notice: Option<&str>) -> Invocation;

    /// A force-release may leave the lock alone although it is held (a read-write
    /// lock in the other mode): then this client's holds of it stay.
    fn force_may_spare(&self) -> bool {
        false
    }
}

/// Which renewal script a hold needs (the watchdog's batched round).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// renew.lua: the holder's field of a lock hash (plain, fair, fenced, write).
    Field,
    /// rw_renew.lua: a reader's own hold keys.
    Read,
    /// expirable_semaphore_renew.lua: a permit's expiry.
    Permit,
    /// group_renew.lua: a faster multi-lock's values (kinds/group.rs).
    Group,
    /// A kind's own script over `(name, holder)` pairs (renew.rs's `renew_pairs`).
    Pairs(&'static PairRenewal),
}

/// A renewal script of a kind's own: `ARGV[1]` the lease in ms, then what `add` appends
/// per `(name, holder)` pair; it answers an array with 1 per pair still held (and
/// renewed), else 0. Declared as a `static` beside the kind; equal only to itself.
pub(crate) struct PairRenewal {
    pub(crate) script: &'static LazyLock<Script>,
    pub(crate) add: fn(&mut Invocation, &str, &str),
}

impl PartialEq for PairRenewal {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for PairRenewal {}

impl std::fmt::Debug for PairRenewal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PairRenewal")
    }
}

/// How `is_locked` reads a lock on one master.
#[derive(Clone, Copy)]
pub(crate) enum Probe {
    /// The lock hash exists, with a lease (another type is `WrongType`, no lease
    /// `BadData`).
    Exists,
    /// A key of this Redis type exists, with a lease (as [`Probe::Exists`] for a lock
    /// kept in another type than a hash).
    Key(&'static str),
    /// HGETALL of the name, the reply judged by the function (a read-write lock's
    /// mode and holders).
    Hash(fn(&Value) -> bool),
}

/// Which of one client's waiters pass the local gate (gate.rs; waiter/mod.rs invariants
/// 8, 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Every waiter lines up.
    Always,
    /// Only under Redlock (a fair lock: on one master its Redis queue orders them).
    Redlock,
    /// None (readers share).
    Never,
}

/// When a refused attempt queues its waiter: to be refreshed while it waits and left
/// however the wait ends (waiter/mod.rs invariants 4, 5, 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Queue {
    /// Never.
    Never,
    /// Unless it is a single try (a fair waiter).
    Waiting,
    /// When it waits with an intent (a writer that prefers writers).
    Intent,
}

/// How a refused waiter waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Subscribed to its wake channel (waiter/).
    Subscribe,
    /// Single tries spaced by a back-off, no pub/sub (engine/acquire/spin_wait.rs).
    Spin,
    /// Single tries spaced by a back-off, a sleep cut short by a message on the wake
    /// channel (the simple lock: its redlatch releases publish, foreign ones do not).
    SpinWoken,
}

/// How one kind's waiters behave, in one value (a `const` per kind): how they wait,
/// gate and queue, the local hand-overs this client may make them, and whether the
/// holder may re-enter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WaitPolicy {
    /// How a refused waiter waits.
    pub(crate) wait: Wait,
    /// Which waiters pass the local gate.
    pub(crate) gate: Gate,
    /// When an attempt queues the waiter.
    pub(crate) queue: Queue,
    /// Local releasers may hand it to waiting tasks of this client, on one master
    /// (waiter/mod.rs invariant 7): the offers its waiters post.
    pub(crate) offers: Option<OfferPolicy>,
    /// Waiters skip Redis while another task of this client holds it (waiter/mod.rs
    /// invariant 6).
    pub(crate) local_shortcut: bool,
    /// Waiters register for a cross-process hand-over (waiter/mod.rs invariant 10).
    pub(crate) registers: bool,
    /// A release wakes this client's waiters at once (they listen on
    /// [`Protocol::channel`]).
    pub(crate) wakes_locally: bool,
    /// A lock is ours once a majority granted it: the other masters' answers land in
    /// the background. Otherwise every answer is awaited (queues to leave, the largest
    /// token).
    pub(crate) majority_suffices: bool,
    /// A holder may acquire it again (the hold count grows). A non-reentrant kind
    /// refuses that with [`Error::Reentry`](crate::error::Error::Reentry), at once when
    /// this client knows the hold, else from its acquire script.
    pub(crate) reentrant: bool,
}

impl WaitPolicy {
    /// The plain lock's behaviour minus offers, shortcut and registry, and without
    /// the majority shortcut: where a new kind starts (no local hand-over) and opts in.
    pub(crate) const CONSERVATIVE: WaitPolicy = WaitPolicy {
        wait: Wait::Subscribe,
        gate: Gate::Always,
        queue: Queue::Never,
        offers: None,
        local_shortcut: false,
        registers: false,
        wakes_locally: true,
        majority_suffices: false,
        reentrant: true,
    };

    /// Whether waiters of one client line up in the local gate.
    pub(crate) fn gated(&self, redlock: bool) -> bool {
        match self.gate {
            Gate::Always => true,
            Gate::Redlock => redlock,
            Gate::Never => false,
        }
    }

    /// Whether a refused attempt of `params` queues the waiter.
    pub(crate) fn queues(&self, params: &AcquireParams) -> bool {
        match self.queue {
            Queue::Never => false,
            Queue::Waiting => !params.once,
            Queue::Intent => params.intent && !params.once,
        }
    }

    /// Its waiters do not subscribe: they retry after a back-off (engine/acquire/spin_wait.rs).
    pub(crate) fn spins(&self) -> bool {
        matches!(self.wait, Wait::Spin | Wait::SpinWoken)
    }
}

/// The one list of what a listing finds (listed.rs), in the order a key's inspection is
/// asked (the first entry that says yes names it): an election's lock before any
/// hash, the layouts with a mark of their own (a mode, a group's expiry fields, a
/// queue, a fencing counter) before the plain hash, strings with permits or a
/// ShedLock value before a simple lock's token, a counter's number last.
pub(crate) static LISTED: [&listed::Listed; 10] = [
    &fenced::LISTED_ELECTION,
    &rw_layout::LISTED,
    &group::LISTED,
    &fair::LISTED,
    &fenced::LISTED,
    &plain::LISTED,
    &expirable_semaphore::LISTED,
    &shedlock::LISTED,
    &simple::LISTED,
    &semaphore::LISTED,
];

/// Every layout's part of an inspection (inspect.rs), in pipeline order: the plain
/// lock's first (the others' reads use its key type).
pub(crate) static SECTIONS: [&inspect::Section; 7] = [
    &plain::INSPECT,
    &fair::INSPECT,
    &fenced::INSPECT,
    &write::INSPECT,
    &semaphore::INSPECT,
    &expirable_semaphore::INSPECT,
    &simple::INSPECT,
];

impl Kind {
    /// This kind's protocol: the one place the engine matches on a lock kind.
    pub(crate) fn protocol(self) -> &'static dyn Protocol {
        match self {
            Kind::Plain => &plain::Plain,
            Kind::Fair => &fair::Fair,
            Kind::Fenced => &fenced::Fenced,
            Kind::Read => &read::Read,
            Kind::Write => &write::Write,
            Kind::NonReentrant => &nonreentrant::NON_REENTRANT,
            Kind::NonReentrantFair => &nonreentrant::NON_REENTRANT_FAIR,
            Kind::Spin => &spin::Spin,
            Kind::Group => &group::Group,
            Kind::Simple => &simple::Simple,
        }
    }
}

/// Whether `kind`'s waiters post fair offers (else plain ones, or none): which offers
/// table holds its hand-overs and their settling (offers.rs).
pub(crate) fn fair_offers(kind: Kind) -> bool {
    kind.protocol().policy().offers == Some(OfferPolicy::Fair)
}

/// Acquires on one master, as `kind` does it; a grant the replicas did not
/// acknowledge in time is [`Error::NotReplicated`](crate::error::Error::NotReplicated).
pub(crate) async fn acquire(
    m: &Master,
    kind: &dyn Protocol,
    (name, lease_ms, holder): (&Arc<str>, u64, &Arc<str>),
    params: &AcquireParams,
    waiting: Option<Waiting>,
) -> Result<Acquire> {
    match kind.acquire(name, lease_ms, holder, params, waiting) {
        ScriptOrBatch::Batched(op) => {
            let reply = m.plain.submit(op).await?;
            acquire_status(m.addr(), name, reply, (None, false), false)
        }
        ScriptOrBatch::Script(inv, read) => {
            // Boxed: the plain lock's batched path (W1, W2) carries no script's future.
            let sent = Box::pin(m.eval_acquire(&inv));
            let (v, short) = sent.await.map_err(|e| typed(name, e))?;
            match (read(m.addr(), name, v)?, short) {
                (Acquire::Granted { .. }, Some(e)) => Err(e),
                (reply, _) => Ok(reply),
            }
        }
    }
}

/// Releases one hold on one master, as `kind` does it.
pub(crate) async fn release(
    m: &Master,
    kind: &dyn Protocol,
    name: &Arc<str>,
    lease_ms: u64,
    holder: &Arc<str>,
) -> Result<Release> {
    match kind.release(name, lease_ms, holder) {
        ScriptOrBatch::Batched(op) => match m.plain.submit(op).await?.0 {
            -1 => Ok(Release::NotHeld),
            0 => Ok(Release::StillHeld),
            1 => Ok(Release::Released),
            WRONG_TYPE => Err(wrong_type(m.addr(), name)),
            other => Err(protocol(m.addr(), "release", &Value::Int(other))),
        },
        ScriptOrBatch::Script(inv, read) => {
            let sent = Box::pin(m.eval(Lane::Lock, &inv));
            let v = sent.await.map_err(|e| typed(name, e))?;
            read(m.addr(), name, v)
        }
    }
}

/// Runs a script answering 1 or 0 on the lock lane: true for 1.
pub(crate) async fn eval_is_one(m: &Master, name: &str, inv: &Invocation) -> Result<bool> {
    let v = m.eval(Lane::Lock, inv).await.map_err(|e| typed(name, e))?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// Force-releases `name` of `kind` on one master; true if it removed something.
pub(crate) async fn force_release(
    m: &Master,
    kind: Kind,
    name: &str,
    notice: Option<&str>,
) -> Result<bool> {
    let kind = kind.protocol();
    let inv = kind.force_release(name, notice);
    let v = m.eval(Lane::Lock, &inv).await;
    Ok(m.decode::<i64>(v.map_err(|e| typed(kind.key(name), e))?)? > 0)
}

/// Drops a lost hold of `holder` on one master; true if there was one.
pub(crate) async fn drop_lost(m: &Master, kind: Kind, name: &str, holder: &str) -> Result<bool> {
    eval_is_one(m, name, &kind.protocol().drop_lost(name, holder)).await
}

/// Leaves what a wait of `holder` left on one master; true if there was something.
pub(crate) async fn leave(
    m: &Master,
    kind: Kind,
    (name, holder): (&str, &str),
    params: &AcquireParams,
) -> Result<bool> {
    match kind.protocol().leave(name, holder, params) {
        None => Ok(false),
        Some(inv) => eval_is_one(m, name, &inv).await,
    }
}

/// A release script's `nil` / 0 / anything else: not held / still held / released.
pub(crate) fn read_release(addr: &str, _name: &str, v: Value) -> Result<Release> {
    let n: Option<i64> = redis::from_redis_value(v)
        .map_err(|e| crate::transport::server_errors::from_master(addr, e.into()))?;
    Ok(match n {
        None => Release::NotHeld,
        Some(0) => Release::StillHeld,
        Some(_) => Release::Released,
    })
}
