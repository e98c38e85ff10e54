//! The façade's permit-expirable semaphore (kinds/expirable_semaphore.rs) as the API layer calls
//! it. A permit taken is a [`Held`] like a lock's hold: registered in the hold table
//! (flag `permit`) and renewed by the watchdog when it has no lease of its own, so
//! `Permit` releases and reports loss as `LockGuard` does. Waiting is signal.rs's
//! loop; a take runs to its end even if its caller is dropped (signal.rs invariant
//! 3), so a cancelled caller takes nothing.
//!
//! The API checks ids, counts and leases; the names are checked here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::engine::acquire::signal::{completed, wait_for, Attempt};
use crate::engine::holding::held::Held;
use crate::engine::kinds::{expirable_semaphore, semaphore};
use crate::engine::Engine;
use crate::error::Result;
use crate::keys;

const WHAT: &str = "permit-expirable semaphore";

impl Engine {
    /// Checks that the permit-expirable semaphore `name` can be used here (its name,
    /// one master).
    pub(crate) fn permits_check(&self, name: &str) -> Result<()> {
        self.single_master(name, WHAT).map(drop)
    }

    /// Takes `n` (at least one) permits of `name`, all or none, waiting at most `wait`
    /// (`None`: as long as it takes), each leased for `lease` or, without one, kept by
    /// the watchdog. `Ok(None)`: the wait ran out.
    pub(crate) async fn take_permits(
        self: &Arc<Self>,
        name: &Arc<str>,
        n: usize,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<Vec<Held>>> {
        let master = self.single_master(name, WHAT)?;
        let watchdog = lease.is_none();
        let lease = lease.unwrap_or(self.settings().watchdog_timeout);
        let lease_ms = lease.as_millis() as u64;
        let ids: Arc<[Arc<str>]> = (0..n)
            .map(|_| Uuid::new_v4().simple().to_string().into())
            .collect();
        let channel = keys::sem_channel(name);
        let taken = wait_for(self, channel, wait, "permit", || {
            let (m, name, ids) = (master.clone(), name.clone(), ids.clone());
            async move {
                let started = Instant::now();
                let (undo_m, undo_name, undo_ids) = (m.clone(), name.clone(), ids.clone());
                let r =
                    completed(
                        self,
                        async move {
                            expirable_semaphore::take_permits(&m, &name, &ids, lease_ms).await
                        },
                        // Our caller went while the script ran: give back what it took.
                        move |r| async move {
                            if r.is_err() {
                                return;
                            }
                            let _ = match &*undo_ids {
                                [one] => {
                                    expirable_semaphore::return_permit(&undo_m, &undo_name, one)
                                        .await
                                        .map(drop)
                                }
                                many => {
                                    let ids: Vec<&str> = many.iter().map(|i| &**i).collect();
                                    expirable_semaphore::return_permits(&undo_m, &undo_name, &ids)
                                        .await
                                        .map(drop)
                                }
                            };
                        },
                    )
                    .await?;
                Ok(match r {
                    Ok(()) => Attempt::Done(started),
                    Err(expiring) => Attempt::Retry(expiring),
                })
            }
        })
        .await?;
        Ok(taken.map(|started| {
            (ids.iter())
                .map(|id| self.permit_held(name, id, watchdog, started, lease))
                .collect()
        }))
    }

    /// The handle of a permit just taken: registered in the hold table, watched.
    fn permit_held(
        self: &Arc<Self>,
        name: &Arc<str>,
        id: &Arc<str>,
        watchdog: bool,
        started: Instant,
        lease: Duration,
    ) -> Held {
        let hold = self
            .holdings()
            .table()
            .permit(name, id, watchdog, started, lease);
        self.watch_new(&hold);
        Held::new(self.clone(), hold, lease, watchdog, (None, Duration::ZERO))
    }

    /// Gives back the permit `id` of `name`, maybe another process's: true if it was
    /// held.
    pub(crate) async fn return_permit(&self, name: &str, id: &str) -> Result<bool> {
        expirable_semaphore::return_permit(&*self.single_master(name, WHAT)?, name, id).await
    }

    /// Gives back every permit of `ids` or none: how many were given back.
    pub(crate) async fn return_permits(&self, name: &str, ids: &[&str]) -> Result<i64> {
        expirable_semaphore::return_permits(&*self.single_master(name, WHAT)?, name, ids).await
    }

    /// The permits of `name` available and acquired now.
    pub(crate) async fn permits_state(&self, name: &str) -> Result<(i64, i64)> {
        expirable_semaphore::permits_state(&*self.single_master(name, WHAT)?, name).await
    }

    /// Sets the permits of `name` in all (available and acquired) to `total`.
    pub(crate) async fn permits_set_total(&self, name: &str, total: i64) -> Result<()> {
        expirable_semaphore::set_total(&*self.single_master(name, WHAT)?, name, total).await
    }

    /// Sets if absent, or adds to, the count of available permits of `name` (the
    /// semaphore's counter, which the permit-expirable semaphore shares).
    pub(crate) async fn permits_set(
        &self,
        name: &str,
        how: semaphore::Set,
        permits: i64,
    ) -> Result<bool> {
        let master = self.single_master(name, WHAT)?;
        semaphore::set(&master, name, how, permits, None).await
    }

    /// Makes the permit `id` of `name` expire `lease` from now; true if it was held.
    pub(crate) async fn set_permit_lease(
        &self,
        name: &str,
        id: &str,
        lease: Duration,
    ) -> Result<bool> {
        let master = self.single_master(name, WHAT)?;
        expirable_semaphore::set_permit_lease(&master, name, id, lease.as_millis() as u64).await
    }

    /// The lease left of the permit `id`: `Some(Some(d))` expires in `d`,
    /// `Some(None)` never on its own, `None` not held.
    pub(crate) async fn permit_lease(
        &self,
        name: &str,
        id: &str,
    ) -> Result<Option<Option<Duration>>> {
        expirable_semaphore::permit_lease(&*self.single_master(name, WHAT)?, name, id).await
    }
}
