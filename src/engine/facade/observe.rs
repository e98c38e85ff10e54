//! The façade's entry points into observe/: listing a deployment, its waiters and
//! jobs, resolving holder ids, reading every ledger for deadlocks. Each hands the part
//! the masters and the bookkeeping settings; the work is in observe/.

use std::time::Duration;

use crate::engine::observe::listing::{Listing, QueuedWaiter, Unread};
use crate::engine::observe::{deadlock, jobs, list, record, Deadlocks, Who};
use crate::engine::Engine;
use crate::error::Result;

impl Engine {
    /// Every lock, semaphore, latch and election whose name matches the glob
    /// `pattern`, on every master, read within `within`: what could not be read by
    /// then is named in [`Listing::unread`] (observe/list.rs).
    pub(crate) async fn list(&self, pattern: &str, within: Duration) -> Result<Listing> {
        list::list(self.masters.all(), &self.settings.books, pattern, within).await
    }

    /// The redlatch waiters of lock `name`, named, for each master's entry of a status
    /// (`queues[i]`: master i's fair queue), read within `within` (observe/list.rs).
    pub(crate) async fn waiting(
        &self,
        name: &str,
        queues: &[Vec<(String, Option<i64>)>],
        within: Duration,
    ) -> Vec<Vec<QueuedWaiter>> {
        let (masters, books) = (self.masters.all(), &self.settings.books);
        list::waiting(masters, books, name, queues, within).await
    }

    /// The lock keys of the jobs whose key matches the glob `pattern`, and what could
    /// not be read within `within` (observe/jobs.rs).
    pub(crate) async fn job_scan(
        &self,
        pattern: &str,
        locks: &str,
        within: Duration,
    ) -> (Vec<String>, Vec<Unread>) {
        jobs::job_scan(self.masters.all(), pattern, locks, within).await
    }

    /// Reads every ledger of the deployment within `timeout` and returns the cycles of
    /// the wait-for graph (observe/deadlock.rs).
    pub(crate) async fn deadlocks(&self, timeout: Duration) -> Deadlocks {
        deadlock::deadlocks(self, timeout).await
    }

    /// Resolves the holder ids `holders` of lock `name` as master `index` knows them:
    /// its record and the hold's acquisition time there (observe/record.rs).
    pub(crate) async fn resolve(&self, index: usize, name: &str, holders: &[String]) -> Vec<Who> {
        let Some(m) = self.masters.all().get(index) else {
            return Vec::new();
        };
        record::resolve(m, &self.settings.books, name, holders).await
    }
}
