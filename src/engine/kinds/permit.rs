//! The expirable permit (Redisson `RPermitExpirableSemaphore`, `lua/xsem_*.lua`), on
//! one master: a permit is taken under its own id for a lease, returned by id, renewed
//! by the watchdog like a hold (a `Hold` with flag `permit`, per-pair renewal
//! [`renew_permits`]) and reclaimed by the next script once expired. Waiters listen on
//! the semaphore's channel (`keys::sem_channel`).

use std::sync::LazyLock;
use std::time::Duration;

use super::super::master::Master;
use super::super::renew::renew_pairs;
use super::semaphore::run;
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Script};

static XSEM_ACQUIRE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_acquire.lua");
static XSEM_RELEASE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_release.lua");
static XSEM_RENEW: LazyLock<Script> = lua!("xsem_common.lua", "xsem_renew.lua");
static XSEM_AVAILABLE: LazyLock<Script> = lua!("xsem_common.lua", "xsem_available.lua");

/// These scripts, for the catalogue (catalogue.rs).
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 4] {
    [&XSEM_ACQUIRE, &XSEM_RELEASE, &XSEM_RENEW, &XSEM_AVAILABLE]
}

/// A permit id as Redisson stores it: its 16 bytes, from the 32 hex digits we show.
pub(crate) fn id_bytes(id: &str) -> Vec<u8> {
    (0..id.len() / 2)
        .filter_map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn xsem_call(script: &'static Script, name: &str) -> Invocation {
    let mut inv = script.call();
    inv.key(name)
        .key(keys::permit_timeouts(name))
        .key(keys::sem_channel(name));
    inv
}

/// Takes one permit under `id` for `lease_ms`: `Ok(Ok(()))` taken, `Ok(Err(wait))` none
/// available, `wait` = until the first acquired permit expires (`None`: none will).
pub(crate) async fn take_permit(
    m: &Master,
    name: &str,
    id: &str,
    lease_ms: u64,
) -> Result<std::result::Result<(), Option<Duration>>> {
    let mut inv = xsem_call(&XSEM_ACQUIRE, name);
    inv.arg(lease_ms).arg(id_bytes(id));
    let (taken, ms): (i64, i64) = run(m, name, &inv).await?;
    Ok(match (taken, ms) {
        (1, _) => Ok(()),
        (_, ms) if ms > 0 => Err(Some(Duration::from_millis(ms as u64))),
        _ => Err(None),
    })
}

/// Gives the permit `id` back; true if it was held (not released, not expired).
pub(crate) async fn return_permit(m: &Master, name: &str, id: &str) -> Result<bool> {
    let mut inv = xsem_call(&XSEM_RELEASE, name);
    inv.arg(id_bytes(id));
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
    run(m, name, &xsem_call(&XSEM_AVAILABLE, name)).await
}
