//! The expirable permit (Redisson `RPermitExpirableSemaphore`, `lua/expirable_semaphore_*.lua`), on
//! one master: a permit is taken under its own id for a lease, returned by id, renewed
//! by the watchdog like a hold (a `HoldEntry` with flag `permit`, per-pair renewal
//! [`renew_permits`]) and reclaimed by the next script once expired. Waiters listen on
//! the semaphore's channel (`keys::sem_channel`).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::engine::kinds::inspect::{hex, scored, scores, Section};
use crate::engine::kinds::listed::{self, Listed, ListedKind};
use crate::engine::kinds::renew::renew_pairs;
use crate::engine::kinds::semaphore::run;
use crate::engine::masters::master::Master;
use crate::engine::Kind;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static XSEM_ACQUIRE: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_acquire.lua"
);
static XSEM_RELEASE: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_release.lua"
);
static XSEM_RENEW: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_renew.lua"
);
static XSEM_AVAILABLE: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_available.lua"
);
static XSEM_RELEASE_MANY: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_release_many.lua"
);
static XSEM_LEASE: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_lease.lua"
);
static XSEM_SET: LazyLock<Script> = lua!(
    "expirable_semaphore_common.lua",
    "expirable_semaphore_set.lua"
);

/// The kind a permit's hold is kept under in the hold table (marked `permit`: the
/// watchdog renews its expiry, its release returns the permit; holding/table.rs).
pub(crate) const HOLD_KIND: Kind = Kind::Plain;

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 7] {
    [
        &XSEM_ACQUIRE,
        &XSEM_RELEASE,
        &XSEM_RENEW,
        &XSEM_AVAILABLE,
        &XSEM_RELEASE_MANY,
        &XSEM_LEASE,
        &XSEM_SET,
    ]
}

/// A permit id as Redisson stores it: its 16 bytes, from the 32 hex digits we show.
pub(crate) fn id_bytes(id: &str) -> Vec<u8> {
    (0..id.len() / 2)
        .filter_map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn expirable_semaphore_call(script: &'static Script, name: &str) -> Invocation {
    let mut inv = script.call();
    inv.key(name)
        .key(keys::permit_timeouts(name))
        .key(keys::sem_channel(name));
    inv
}

/// Takes one permit per id (distinct, at least one), all or none, for `lease_ms`:
/// `Ok(Ok(()))` taken, `Ok(Err(wait))` too few available, `wait` = until the first
/// acquired permit expires (`None`: none will).
pub(crate) async fn take_permits(
    m: &Master,
    name: &str,
    ids: &[Arc<str>],
    lease_ms: u64,
) -> Result<std::result::Result<(), Option<Duration>>> {
    let mut inv = expirable_semaphore_call(&XSEM_ACQUIRE, name);
    inv.arg(lease_ms);
    for id in ids {
        inv.arg(id_bytes(id));
    }
    let (taken, ms): (i64, i64) = run(m, name, &inv).await?;
    Ok(match (taken, ms) {
        (1, _) => Ok(()),
        (_, ms) if ms > 0 => Err(Some(Duration::from_millis(ms as u64))),
        _ => Err(None),
    })
}

/// Gives the permit `id` back; true if it was held (not released, not expired).
pub(crate) async fn return_permit(m: &Master, name: &str, id: &str) -> Result<bool> {
    let mut inv = expirable_semaphore_call(&XSEM_RELEASE, name);
    inv.arg(id_bytes(id));
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Gives back every permit of `ids` (distinct, at least one) or none: the number
/// given back, `ids.len()` or 0 when any of them was not held.
pub(crate) async fn return_permits(m: &Master, name: &str, ids: &[&str]) -> Result<i64> {
    let mut inv = expirable_semaphore_call(&XSEM_RELEASE_MANY, name);
    for id in ids {
        inv.arg(id_bytes(id));
    }
    run(m, name, &inv).await
}

/// A permit's lease left: `Ok(Some(Some(d)))` expires in `d`, `Ok(Some(None))` never
/// expires on its own (a Redisson permit without lease), `Ok(None)` not held.
pub(crate) async fn permit_lease(
    m: &Master,
    name: &str,
    id: &str,
) -> Result<Option<Option<Duration>>> {
    let mut inv = expirable_semaphore_call(&XSEM_LEASE, name);
    inv.arg(id_bytes(id)).arg("get");
    Ok(match run::<i64>(m, name, &inv).await? {
        -1 => Some(None),
        ms if ms > 0 => Some(Some(Duration::from_millis(ms as u64))),
        _ => None,
    })
}

/// Sets an expirable semaphore's permits in all (available and acquired) to `total`.
pub(crate) async fn set_total(m: &Master, name: &str, total: i64) -> Result<()> {
    let mut inv = expirable_semaphore_call(&XSEM_SET, name);
    inv.arg(total);
    run::<i64>(m, name, &inv).await.map(drop)
}

/// Makes the permit `id` expire `lease_ms` from now; true if it was held.
pub(crate) async fn set_permit_lease(
    m: &Master,
    name: &str,
    id: &str,
    lease_ms: u64,
) -> Result<bool> {
    let mut inv = expirable_semaphore_call(&XSEM_LEASE, name);
    inv.arg(id_bytes(id)).arg("set").arg(lease_ms);
    Ok(run::<i64>(m, name, &inv).await? == 1)
}

/// Renews `(semaphore, permit id)` pairs to `lease_ms`; one result per pair (true =
/// still held), one script call per hash slot on a cluster ([`renew_pairs`]).
pub(crate) async fn renew_permits(
    m: &Master,
    pairs: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Vec<Result<bool>> {
    renew_pairs(m, &XSEM_RENEW, pairs, lease_ms, timeout, |inv, name, id| {
        inv.key(keys::permit_timeouts(name)).arg(id_bytes(id));
    })
    .await
}

/// `(available, acquired)` permits of an expirable semaphore, expired ones reclaimed.
pub(crate) async fn permits_state(m: &Master, name: &str) -> Result<(i64, i64)> {
    run(m, name, &expirable_semaphore_call(&XSEM_AVAILABLE, name)).await
}

/// Its part of an inspection (kinds/inspect.rs): the acquired permits (id in hex) with
/// their expiry.
/// An expirable semaphore's listing: a string of permits left beside its permits'
/// sorted set; each permit taken is a holder, with its expiry.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::ExpirableSemaphore,
    name: "expirable_semaphore",
    is: |st, _| st.key_type == "string" && !st.permits.is_empty(),
    part: listed::no_part,
    channels: |name, _| vec![keys::sem_channel(name)],
    holders: |st| {
        (st.permits.iter())
            .map(|(id, at)| (id.as_str(), 1, *at))
            .collect()
    },
    queued: false,
};

pub(crate) static INSPECT: Section = Section {
    reads: |name, pipe| scores(pipe, keys::permit_timeouts(name)),
    replies: 1,
    read: |v, st| {
        st.permits = (scored(&v[0], hex).into_iter())
            .map(|(id, at)| (id, Some(at)))
            .collect();
    },
};
