//! Who holds what, and what is deadlocked: [`HolderInfo`] (a holder id resolved to
//! its client's record) and [`Client::deadlocks`] (the cycles among waiting tasks).

use std::time::Duration;

use crate::api::client::Client;
use crate::engine::facade::{FoundCycle, FoundDeadlocks, HolderInfo, Who};

impl From<Who> for HolderInfo {
    fn from(w: Who) -> HolderInfo {
        HolderInfo {
            id: w.id,
            host: w.host,
            pid: w.pid,
            app: w.app,
            version: w.version,
            since: w.since,
            acquired: w.acquired,
        }
    }
}

/// One task of a [`DeadlockCycle`]: it holds `holds` and waits for `waits_for`,
/// which the next task of the cycle holds (the last task's, the first).
///
/// # Examples
/// See the example on [`Client::deadlocks`].
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct WaitingTask {
    /// The task (its holder id `uuid:n`) and its client's record.
    pub holder: HolderInfo,
    /// The lock of the cycle it holds.
    pub holds: String,
    /// The lock it waits for.
    pub waits_for: String,
    /// Since when it waits, ms since the epoch.
    pub waiting_since: Option<i64>,
}

/// A cycle of tasks, each waiting for a lock the next one holds: none of them can go
/// on until one gives up.
///
/// # Examples
/// See the example on [`Client::deadlocks`].
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct DeadlockCycle {
    /// The tasks in cycle order, starting at the smallest holder id.
    pub tasks: Vec<WaitingTask>,
}

/// What [`Client::deadlocks`] found.
///
/// # Examples
/// See the example on [`Client::deadlocks`].
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Deadlocks {
    /// Every cycle, once.
    pub cycles: Vec<DeadlockCycle>,
    /// The redlatch clients whose ledgers were read.
    pub clients: usize,
    /// Primaries or masters that could not be scanned in time (and, past the
    /// deadline, how many clients' ledgers were not read): the answer is then
    /// incomplete.
    pub unread: Vec<String>,
}

impl From<FoundCycle> for DeadlockCycle {
    fn from(c: FoundCycle) -> DeadlockCycle {
        let tasks = c.tasks.into_iter().map(|t| WaitingTask {
            holder: t.who.into(),
            holds: t.holds,
            waits_for: t.waits_for,
            waiting_since: t.waiting_since,
        });
        DeadlockCycle {
            tasks: tasks.collect(),
        }
    }
}

impl From<FoundDeadlocks> for Deadlocks {
    fn from(d: FoundDeadlocks) -> Deadlocks {
        Deadlocks {
            cycles: d.cycles.into_iter().map(Into::into).collect(),
            clients: d.ledgers,
            unread: d.unread,
        }
    }
}

impl Client {
    /// Finds deadlocks among the tasks of every redlatch client of the deployment:
    /// reads every client's ledger (`SCAN` on every primary of every master, within
    /// `timeout`), builds the wait-for graph over tasks (a task waits for a lock whose
    /// holder is another task) and returns its cycles. A task is a holder id; a task
    /// of a client that holds and waits independently of the client's other tasks is
    /// not part of their cycles. Redisson holders have no ledger: a cycle through one
    /// is not seen. A wait younger than about a second may not be written yet (unless
    /// its client has [`deadlock_detection`](crate::Config::deadlock_detection) on).
    ///
    /// # Cancel safety
    /// Reads only; dropping the future leaves nothing behind.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::single(url.clone()).app("doc")).await?;
    /// let guard = client.lock("a").lock().await?;
    /// let found = client.deadlocks(Duration::from_secs(5)).await;
    /// assert!(found.cycles.is_empty()); // one holder, nobody waits
    /// assert!(found.unread.is_empty());
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn deadlocks(&self, timeout: Duration) -> Deadlocks {
        self.engine.deadlocks(timeout).await.into()
    }
}
