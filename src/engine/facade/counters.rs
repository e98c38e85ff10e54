//! The façade's counters: the semaphore (kinds/semaphore.rs) and the count-down latch
//! (kinds/latch.rs) as the API layer calls them. A counter has no holder and lives on
//! the only master ([`Engine::single_master`]); a wait for one is signal.rs's
//! subscribe-before-retry loop, and a semaphore acquisition runs to its end even if
//! its caller is dropped (signal.rs invariant 3), so a cancelled caller takes nothing.
//!
//! The API checks the counts it is given (negative counts, time to live); the names
//! are checked here.

use std::time::Duration;

use crate::engine::acquire::signal::{completed, wait_for, Attempt};
use crate::engine::kinds::{latch, semaphore};
use crate::engine::Engine;
use crate::error::Result;
use crate::keys;

pub(crate) use crate::engine::kinds::semaphore::Set;

const SEMAPHORE: &str = "semaphore";
const LATCH: &str = "count-down latch";

impl Engine {
    /// Takes `permits` (more than 0) of the semaphore `name`, waiting at most `wait`
    /// (`None`: as long as it takes) for a release; false if the wait ran out.
    pub(crate) async fn semaphore_acquire(
        &self,
        name: &str,
        permits: i64,
        wait: Option<Duration>,
    ) -> Result<bool> {
        let master = self.single_master(name, SEMAPHORE)?;
        let channel = keys::sem_channel(name);
        let taken = wait_for(self, channel, wait, SEMAPHORE, || {
            let (m, name) = (master.clone(), name.to_string());
            async move {
                let (undo_m, undo_name) = (m.clone(), name.clone());
                let taken = completed(
                    self,
                    async move { semaphore::acquire(&m, &name, permits).await },
                    // Our caller went while the script ran: give back what it took.
                    move |taken| async move {
                        if taken {
                            let _ = semaphore::release(&undo_m, &undo_name, permits, false).await;
                        }
                    },
                )
                .await?;
                Ok(if taken {
                    Attempt::Done(())
                } else {
                    Attempt::Retry(None)
                })
            }
        })
        .await?;
        Ok(taken.is_some())
    }

    /// Gives `permits` (more than 0) back to the semaphore `name` and wakes its
    /// waiters; with `if_exists`, only if it exists. False if it did not (and
    /// `if_exists`).
    pub(crate) async fn semaphore_release(
        &self,
        name: &str,
        permits: i64,
        if_exists: bool,
    ) -> Result<bool> {
        let master = self.single_master(name, SEMAPHORE)?;
        let given = semaphore::release(&master, name, permits, if_exists).await?;
        Ok(given.is_some())
    }

    /// Checks that the semaphore `name` can be used here (its name, one master).
    pub(crate) fn semaphore_check(&self, name: &str) -> Result<()> {
        self.single_master(name, SEMAPHORE).map(drop)
    }

    /// Takes every available permit of `name`; how many there were.
    pub(crate) async fn semaphore_drain(&self, name: &str) -> Result<i64> {
        semaphore::drain(&*self.single_master(name, SEMAPHORE)?, name).await
    }

    /// The permits of `name` available now (0 when it does not exist).
    pub(crate) async fn semaphore_available(&self, name: &str) -> Result<i64> {
        semaphore::available(&*self.single_master(name, SEMAPHORE)?, name).await
    }

    /// Sets, sets if absent (then with a time to live of `ttl_ms` if given), or adds
    /// to the permits of `name`, waking its waiters; true if the counter was written.
    pub(crate) async fn semaphore_set(
        &self,
        name: &str,
        how: Set,
        permits: i64,
        ttl_ms: Option<u64>,
    ) -> Result<bool> {
        let master = self.single_master(name, SEMAPHORE)?;
        semaphore::set(&master, name, how, permits, ttl_ms).await
    }

    /// Sets the latch `name` to `count` if it is not set; true if it was.
    pub(crate) async fn latch_set(&self, name: &str, count: i64) -> Result<bool> {
        latch::set(&*self.single_master(name, LATCH)?, name, count).await
    }

    /// Checks that the latch `name` can be used here (its name, one master).
    pub(crate) fn latch_check(&self, name: &str) -> Result<()> {
        self.single_master(name, LATCH).map(drop)
    }

    /// Counts the latch `name` down; the count left.
    pub(crate) async fn latch_count_down(&self, name: &str) -> Result<i64> {
        latch::count_down(&*self.single_master(name, LATCH)?, name).await
    }

    /// The count of the latch `name` (0 when not set).
    pub(crate) async fn latch_count(&self, name: &str) -> Result<i64> {
        latch::count(&*self.single_master(name, LATCH)?, name).await
    }

    /// Waits at most `wait` (`None`: as long as it takes) for the latch `name` to
    /// reach zero; false if the wait ran out first.
    pub(crate) async fn latch_wait(&self, name: &str, wait: Option<Duration>) -> Result<bool> {
        let master = self.single_master(name, LATCH)?;
        let done = wait_for(self, keys::latch_channel(name), wait, "latch", || {
            let m = master.clone();
            async move {
                Ok(match latch::count(&m, name).await? {
                    0 => Attempt::Done(()),
                    _ => Attempt::Retry(None),
                })
            }
        })
        .await?;
        Ok(done.is_some())
    }
}
