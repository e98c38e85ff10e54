//! The façade's entry points into coordination/: leader election, release requests and
//! scheduled jobs. Each hands the part what it needs of the engine (the masters, the
//! settings, the pub/sub hub); the work is in coordination/.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::coordination::election::{self, Current, Event, Watch};
use crate::engine::coordination::job::{self, Began, Begin, Finish, JobCall, JobWake};
use crate::engine::coordination::{job_state, job_state::JobState, revoke};
use crate::engine::holding::held::Held;
use crate::engine::kinds::call::LockSpec;
use crate::engine::masters::clock::deadline_after;
use crate::engine::Engine;
use crate::error::Result;

/// Leader election (coordination/election.rs).
impl Engine {
    /// Checks that the election `name` can be held here: its name, and one
    /// deployment (a server, Sentinel or Redis Cluster), not Redlock masters.
    pub(crate) fn election_check(&self, name: &str) -> Result<()> {
        election::check(name, self.settings.cluster, self.masters.len())
    }

    /// Records `value` for `holder`'s `term` of the election `name` and logs `event`
    /// (election.rs invariant 1); false if `holder` does not hold the election's lock.
    pub(crate) async fn election_proclaim(
        &self,
        name: &str,
        (holder, term): (&str, u64),
        value: &str,
        event: Event,
    ) -> Result<bool> {
        election::proclaim(self.masters.first(), name, holder, term, value, event).await
    }

    /// Clears the record of `holder`'s `term` of the election `name` and logs the
    /// resignation (election.rs invariant 1); false if another term is recorded.
    pub(crate) async fn election_resign(
        &self,
        name: &str,
        holder: &str,
        term: u64,
    ) -> Result<bool> {
        election::resign(self.masters.first(), name, holder, term).await
    }

    /// Campaigns for the election `name` (election.rs invariant 4) with `lock`, the
    /// election's fenced lock as the API names it: leads with `value` within `wait`
    /// (`None`: as long as it takes) and returns the lock's hold and the term, or
    /// `None` when another still led as `wait` ran out.
    pub(crate) async fn election_campaign(
        self: &Arc<Self>,
        name: &str,
        lock: &LockSpec,
        value: &str,
        wait: Option<Duration>,
    ) -> Result<Option<(Held, u64)>> {
        self.election_check(name)?;
        let deadline = wait.and_then(deadline_after);
        let now = tokio::time::Instant::now;
        loop {
            // No deadline although a wait was given: it is beyond what an Instant holds.
            // A wait that was given stays one (not a single try with a whole
            // request's bound) when it has run out: 1 ms at least.
            let left = deadline
                .map(|d| {
                    d.saturating_duration_since(now())
                        .max(Duration::from_millis(1))
                })
                .or(wait)
                .map(|l| {
                    if wait == Some(Duration::ZERO) {
                        Duration::ZERO
                    } else {
                        l
                    }
                });
            let Some(held) = self.lock(lock, left, None).await? else {
                return Ok(None);
            };
            let term = held.token().expect("a fenced lock's hold has a token");
            let leader = (held.holder(), term);
            match self
                .election_proclaim(name, leader, value, Event::Elected)
                .await
            {
                Ok(true) => return Ok(Some((held, term))),
                // Lost between the grant and the record (a lease that ran out).
                Ok(false) => {}
                Err(e) => {
                    let _ = held.release().await;
                    return Err(e);
                }
            }
            if deadline.is_some_and(|d| now() >= d) {
                return Ok(None);
            }
        }
    }

    /// Steps down from `term` of the election `name` (election.rs invariant 4): the
    /// record goes, then `held` is given back. The record's error is reported first.
    pub(crate) async fn election_step_down(&self, name: &str, held: Held, term: u64) -> Result<()> {
        let resigned = self.election_resign(name, held.holder(), term).await;
        let released = held.release().await;
        resigned?;
        released
    }

    /// The leader of the election `name`, while its holder holds the lock (election.rs
    /// invariant 2).
    pub(crate) async fn election_leader(&self, name: &str) -> Result<Option<Current>> {
        Ok(election::read(self.masters.first(), name, None)
            .await?
            .leader)
    }

    /// Starts watching the election `name` for changes (election.rs invariant 3): the
    /// watch, and the leader when it started.
    pub(crate) async fn election_watch(&self, name: &str) -> Result<(Watch, Option<Current>)> {
        Watch::start(self, name).await
    }
}

/// Release requests (coordination/revoke.rs).
impl Engine {
    /// Asks the holders of `name` to release it (revoke.rs invariant 1: the marker,
    /// then the message), on a majority: how many watches listened, and the holders
    /// asked.
    pub(crate) async fn request_release(&self, name: &str) -> Result<(u64, Vec<String>)> {
        let s = &self.settings;
        let around = (s.watchdog_timeout, s.cluster);
        revoke::request_release(&self.masters, &s.books, around, name).await
    }
}

/// Scheduled jobs (coordination/job.rs, job_state.rs).
impl Engine {
    /// Subscribes to the job `key`'s wake channel and waits (at most the connect
    /// timeout, and `within`) for a majority to confirm it (job.rs invariant 4).
    pub(crate) async fn job_listen(&self, key: &str, within: Duration) -> JobWake {
        let within = within.min(self.settings.connect_timeout);
        job::listen(&self.pubsub, key, within).await
    }

    /// Checks a job's lock key: a lock name's rules, and on Redis Cluster a key whose
    /// record can share its slot.
    pub(crate) fn job_check(&self, key: &str) -> Result<()> {
        job::check(key, self.settings.cluster)
    }

    /// This process's host name and the client's app name, as a job records them.
    pub(crate) fn job_identity(&self) -> (&'static str, Arc<str>) {
        (job::host(), self.settings.app.clone())
    }

    /// Begins a run (job.rs invariants 1 and 2).
    pub(crate) async fn job_begin(&self, call: &JobCall, b: &Begin) -> Result<Began> {
        let (host, app) = self.job_identity();
        let validity = self.validity_of(b.lease);
        job::begin(&self.masters, call, b, (host, &app), validity).await
    }

    /// Ends a run (job.rs invariant 3): true when a majority still held the run's
    /// value (it was deleted or kept for `at_least`), false when the run had lost the
    /// lock.
    pub(crate) async fn job_finish(&self, call: &JobCall, f: &Finish) -> Result<bool> {
        let (host, app) = self.job_identity();
        job::finish(&self.masters, call, f, (host, &app)).await
    }

    /// Sets a running run's lease to `lease` again (keep-alive): true when a majority
    /// still held it.
    pub(crate) async fn job_extend(&self, call: &JobCall, lease: Duration) -> Result<bool> {
        job::extend(&self.masters, call, lease).await
    }

    /// The job `key`'s state (record `record`): a majority must answer; the record
    /// with the most runs and the first value found count.
    pub(crate) async fn job_state(&self, key: &str, record: &str) -> Result<JobState> {
        job_state::state(&self.masters, key, record).await
    }
}
