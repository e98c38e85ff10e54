//! [`PermitExpirableSemaphore`]'s calls on several permits at once and on the lease of
//! a permit by id (Redisson `acquire(permits, ..)`, `release(List)`, `updateLeaseTime`,
//! `getLeaseTime`, `getPermits`).

use std::collections::HashSet;
use std::time::Duration;

use crate::api::config_check::check_lease;
use crate::api::expirable_semaphore::{check_id, Permit, PermitExpirableSemaphore};
use crate::api::semaphore::non_negative;
use crate::error::{Error, Result};

/// The most permits one call takes or gives back (their ids travel as script
/// arguments).
pub const MAX_PERMITS_PER_CALL: usize = 4096;

/// The ids of `ids`, checked: 1 to [`MAX_PERMITS_PER_CALL`] of them, each 32 hex
/// digits, no repeats.
fn checked_ids<S: AsRef<str>>(ids: &[S]) -> Result<Vec<&str>> {
    if ids.is_empty() || ids.len() > MAX_PERMITS_PER_CALL {
        return Err(Error::InvalidCount(format!(
            "{} permit ids: give 1 to {MAX_PERMITS_PER_CALL}",
            ids.len()
        )));
    }
    let mut seen = HashSet::with_capacity(ids.len());
    for id in ids {
        let id = id.as_ref();
        check_id(id)?;
        if !seen.insert(id.to_ascii_lowercase()) {
            return Err(Error::InvalidCount(format!(
                "permit id {id:?} is given twice"
            )));
        }
    }
    Ok(ids.iter().map(AsRef::as_ref).collect())
}

impl PermitExpirableSemaphore {
    /// Waits as long as it takes for `permits` permits, all at once, each with its own
    /// id and kept by the watchdog (Redisson `acquire(permits)`; 0: at once, none).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`Error::InvalidCount`] for a negative count
    /// or more than [`MAX_PERMITS_PER_CALL`].
    ///
    /// # Cancel safety
    /// Dropping the future takes no permit: permits whose acquisition had reached Redis
    /// are given back in the background.
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub async fn acquire_many(&self, permits: i64) -> Result<Vec<Permit>> {
        let taken = self.take_many(permits, None, None).await?;
        Ok(taken.expect("an unbounded wait ends with the permits"))
    }

    /// Waits as long as it takes for `permits` permits that expire after `lease`.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many), plus [`Error::InvalidLease`].
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub async fn acquire_many_with_lease(
        &self,
        permits: i64,
        lease: Duration,
    ) -> Result<Vec<Permit>> {
        let taken = self.take_many(permits, None, Some(lease)).await?;
        Ok(taken.expect("an unbounded wait ends with the permits"))
    }

    /// Waits at most `wait` for `permits` permits kept by the watchdog, all or none;
    /// `Ok(None)` if they did not come.
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    pub async fn try_acquire_many(
        &self,
        permits: i64,
        wait: Duration,
    ) -> Result<Option<Vec<Permit>>> {
        self.take_many(permits, Some(wait), None).await
    }

    /// Waits at most `wait` for `permits` permits that expire after `lease` (Redisson
    /// `tryAcquire(permits, waitTime, leaseTime, unit)`).
    ///
    /// # Errors
    /// As [`acquire_many_with_lease`](Self::acquire_many_with_lease).
    ///
    /// # Cancel safety
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Examples
    /// See the example on [`try_acquire`](Self::try_acquire).
    pub async fn try_acquire_many_with_lease(
        &self,
        permits: i64,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<Vec<Permit>>> {
        self.take_many(permits, Some(wait), Some(lease)).await
    }

    async fn take_many(
        &self,
        n: i64,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<Permit>>> {
        self.check()?;
        let n = non_negative(n, "acquiring")?;
        if n as u64 > MAX_PERMITS_PER_CALL as u64 {
            return Err(Error::InvalidCount(format!(
                "acquiring {n} permits: at most {MAX_PERMITS_PER_CALL} per call"
            )));
        }
        if let Some(lease) = lease {
            check_lease("lease", lease)?;
        }
        if n == 0 {
            return Ok(Some(Vec::new()));
        }
        let engine = &self.client.engine;
        let taken = engine
            .take_permits(&self.name, n as usize, wait, lease)
            .await?;
        Ok(taken.map(|held| held.into_iter().map(Permit::new).collect()))
    }

    /// Gives back every permit of `ids` (from [`Permit::id`], maybe of other processes)
    /// or none (Redisson `tryRelease(List)`, all or nothing since 3.24): true if all
    /// were held and are given back; false, and nothing is changed, if any was released
    /// already, never acquired or expired. The guards of permits given back this way
    /// find them gone ([`Permit::release`] fails with [`Error::NotHeld`]).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`Error::InvalidCount`] for no ids, more than
    /// [`MAX_PERMITS_PER_CALL`] or an id given twice, and [`Error::InvalidName`] for an
    /// id that is not 32 hex digits.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    #[must_use = "false means nothing was given back: some permit was not held"]
    pub async fn release_many<S: AsRef<str>>(&self, ids: &[S]) -> Result<bool> {
        self.check()?;
        let ids = checked_ids(ids)?;
        let given = self.client.engine.return_permits(&self.name, &ids).await?;
        Ok(given == ids.len() as i64)
    }

    /// Makes the permit `id` expire `lease` from now (Redisson `updateLeaseTime`): true
    /// if it was held, false if it was released or had expired. A permit kept by a
    /// watchdog is still renewed by it, never shortened; and a [`Permit`] guard's
    /// [`validity`](Permit::validity) does not see a lease changed this way.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), plus [`Error::InvalidLease`] and
    /// [`Error::InvalidName`] for an id that is not 32 hex digits.
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    #[must_use = "false means the permit was not held, so nothing was changed"]
    pub async fn update_lease_time(&self, id: &str, lease: Duration) -> Result<bool> {
        self.check()?;
        check_id(id)?;
        check_lease("lease", lease)?;
        self.client
            .engine
            .set_permit_lease(&self.name, id, lease)
            .await
    }

    /// How long the permit `id` stays taken unless renewed or released (Redisson
    /// `getLeaseTime`): `Some(left)`, or `None` for a permit that never expires on its
    /// own (a Redisson permit acquired without a lease).
    ///
    /// # Errors
    /// [`Error::NotHeld`] if the permit was released, never acquired or has expired
    /// (Redisson throws `IllegalArgumentException`); otherwise as
    /// [`update_lease_time`](Self::update_lease_time).
    ///
    /// # Examples
    /// See the example on [`release`](Self::release).
    pub async fn lease_time(&self, id: &str) -> Result<Option<Duration>> {
        self.check()?;
        check_id(id)?;
        (self.client.engine.permit_lease(&self.name, id).await?).ok_or_else(|| Error::NotHeld {
            name: self.name.to_string(),
            holder: id.to_string(),
        })
    }

    /// All the permits: available plus acquired, after taking back the expired ones
    /// (Redisson `getPermits`; 0 when the semaphore was never set up).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Examples
    /// See the example on [`acquire`](Self::acquire).
    pub async fn permits(&self) -> Result<i64> {
        let (available, acquired) = self.client.engine.permits_state(&self.name).await?;
        Ok(available + acquired)
    }
}
