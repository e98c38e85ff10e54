//! Read-only inspection of a lock on every master, for operators (`redlatch status`):
//! the public [`MasterStatus`] and the call; what is read, and how, is the engine's
//! (each kind's part of an inspection beside its scripts, engine/kinds/inspect.rs).

use std::time::Duration;

use crate::api::lock::Lock;
use crate::engine::facade::Inspected;
use crate::error::Result;

/// What one master holds for a lock.
///
/// With the `serde` feature it implements `Serialize` as
/// `{"master", "error", "type", "holders": [{"holder", "count"}],
/// "holder_info": [{"id", "host", "pid", "app", "version", "since", "acquired"}], "ttl_ms",
/// "queue": [{"holder", "deadline_ms"}], "fencing_counter", "mode", "counter",
/// "permits": [{"holder", "deadline_ms"}], "writers_waiting": [{"holder", "deadline_ms"}],
/// "waiters", "replicas": {"connected", "eligible", "waited"}}` (the fields of
/// `redlatch status --json`).
///
/// # Examples
/// See the example on [`Lock::status`].
#[derive(Clone, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MasterStatus {
    /// `host:port` of the master.
    pub master: String,
    /// Set when the master could not be read; the other fields are then empty.
    pub error: Option<String>,
    /// Redis type of the key: `hash` for a lock, `none` when free, `string` for a
    /// simple lock ([`Client::simple_lock`](crate::Client::simple_lock): its holder is
    /// the token in it) or a counter.
    #[cfg_attr(feature = "serde", serde(rename = "type"))]
    pub key_type: String,
    /// Holder ids with their hold counts.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::holders"))]
    pub holders: Vec<(String, u64)>,
    /// Each of `holders`, in the same order, resolved to its client's record (host,
    /// pid, app, version, connected since) and when the hold was taken, as this master
    /// knows them; a Redisson holder shows its id alone.
    pub holder_info: Vec<crate::HolderInfo>,
    /// Time left on the lease; `None` when the key is absent or has no expiry.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "ttl_ms", serialize_with = "ser::millis")
    )]
    pub ttl: Option<Duration>,
    /// Fair-lock waiters in queue order, with their deadline in ms since the epoch.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::queue"))]
    pub queue: Vec<(String, Option<i64>)>,
    /// The fencing counter, if the lock was ever used as a fenced lock.
    pub fencing_counter: Option<u64>,
    /// A read-write lock's mode (`read` or `write`); its holders are in `holders`
    /// (writers end in `:write`).
    pub mode: Option<String>,
    /// The value of a string key: a semaphore's available permits or a latch's count.
    pub counter: Option<i64>,
    /// An expirable semaphore's acquired permits (id in hex) with their expiry in ms
    /// since the epoch.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::queue"))]
    pub permits: Vec<(String, Option<i64>)>,
    /// Writers waiting on a read-write lock (writer preference) and when their intent
    /// lapses, in ms since the epoch.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser::queue"))]
    pub writers_waiting: Vec<(String, Option<i64>)>,
    /// How many wait for the lock there, at least: the connections subscribed to its
    /// waiters' channel (a client with several waiting tasks counts once; a spin lock's
    /// waiters do not subscribe). A fair lock's waiters are in `queue`.
    pub waiters: u64,
    /// Each redlatch waiter, named (host, pid, app, since when it waits), resolved as
    /// holders are: this master's fair queue in order; for the other kinds the waits
    /// the clients' ledgers record (flushed at most once a second; the same on every
    /// entry). A waiter of another library (a Redisson thread) is only counted in
    /// [`waiters`](Self::waiters) (or listed by id in [`queue`](Self::queue)). Read
    /// only when some master counts a waiter, within what is left of one master
    /// timeout since `status()` began: names not read by then are left out.
    pub waiting: Vec<crate::QueuedWaiter>,
    /// The replicas of the primary serving the lock as replica sync sees them
    /// (connected, eligible, waited for by the last synced write); `None` with
    /// [`SyncReplicas::Off`](crate::SyncReplicas::Off). Known after this client's first
    /// synced write to that primary.
    pub replicas: Option<crate::ReplicaSync>,
}

impl Lock {
    /// Reads the lock's state on every master (holders, TTL, fair queue, fencing
    /// counter). Never fails because one master is down: its entry carries the error.
    ///
    /// # Errors
    /// [`Error::InvalidName`](crate::Error::InvalidName) only.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("orders:42");
    /// let guard = lock.lock().await?;
    /// let status = lock.status().await?;
    /// assert_eq!(status.len(), 1); // one entry per master
    /// let master = &status[0];
    /// assert_eq!(master.error, None);
    /// assert_eq!(master.key_type, "hash");
    /// assert_eq!(master.holders, [(guard.holder().to_string(), 1)]);
    /// let who = &master.holder_info[0]; // the holder's client record
    /// assert_eq!((who.id.as_str(), who.pid), (guard.holder(), Some(std::process::id())));
    /// assert!(master.ttl.is_some());
    /// // A server without replicas: nothing to wait for, so no acquisition was synced.
    /// let replicas = master.replicas.expect("replica sync is on by default");
    /// assert_eq!((replicas.connected, replicas.eligible, replicas.waited), (0, 0, None));
    /// guard.unlock().await?;
    /// assert_eq!(lock.status().await?[0].key_type, "none");
    /// # Ok(()) }) }
    /// ```
    pub async fn status(&self) -> Result<Vec<MasterStatus>> {
        self.check_name()?;
        let started = tokio::time::Instant::now();
        let engine = &self.client().engine;
        let answers = engine.inspect(self.name()).await;
        let mut out: Vec<MasterStatus> = answers.into_iter().map(MasterStatus::from).collect();
        let resolving = out.iter().enumerate().map(|(i, m)| {
            let ids: Vec<String> = m.holders.iter().map(|(h, _)| h.clone()).collect();
            async move { engine.resolve(i, self.name(), &ids).await }
        });
        let resolved = futures_util::future::join_all(resolving).await;
        for (m, who) in out.iter_mut().zip(resolved) {
            m.holder_info = who.into_iter().map(Into::into).collect();
        }
        // The waiters are named only where some are counted (no scan of the ledgers
        // otherwise), within what is left of one master timeout since the call began,
        // so a status keeps the bound of one read (docs/guarantees.md) even with a
        // master that hangs: names not read by then are left out, the counts stay.
        if out.iter().any(|m| m.waiters > 0 || !m.queue.is_empty()) {
            let within = (self.client().config().effective_master_timeout())
                .saturating_sub(started.elapsed());
            let queues: Vec<Vec<(String, Option<i64>)>> =
                out.iter().map(|m| m.queue.clone()).collect();
            let waiting = engine.waiting(self.name(), &queues, within).await;
            for (m, w) in out.iter_mut().zip(waiting) {
                m.waiting = w;
            }
        }
        Ok(out)
    }
}

impl From<Inspected> for MasterStatus {
    fn from(answer: Inspected) -> MasterStatus {
        let (master, replicas, waiters) = (answer.serving, answer.replicas, answer.waiters);
        let st = match answer.state {
            Ok(st) => st,
            Err(error) => {
                return MasterStatus {
                    master,
                    error: Some(error),
                    replicas,
                    ..Default::default()
                }
            }
        };
        MasterStatus {
            master,
            error: None,
            key_type: st.key_type,
            holders: st.holders,
            holder_info: Vec::new(),
            ttl: st.ttl,
            queue: st.queue,
            fencing_counter: st.fencing_counter,
            mode: st.mode,
            counter: st.counter,
            permits: st.permits,
            writers_waiting: st.writers_waiting,
            waiters,
            waiting: Vec::new(),
            replicas,
        }
    }
}

/// `Serialize` helpers for [`MasterStatus`]: durations as milliseconds, pairs as
/// objects with named fields.
#[cfg(feature = "serde")]
mod ser {
    use std::time::Duration;

    use serde::ser::{Serialize, Serializer};

    #[derive(serde::Serialize)]
    struct Holder<'a> {
        holder: &'a str,
        count: u64,
    }

    #[derive(serde::Serialize)]
    struct Waiter<'a> {
        holder: &'a str,
        deadline_ms: Option<i64>,
    }

    pub(super) fn millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .serialize(s)
    }

    pub(super) fn holders<S: Serializer>(v: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|(holder, count)| Holder {
            holder,
            count: *count,
        }))
    }

    pub(super) fn queue<S: Serializer>(
        v: &[(String, Option<i64>)],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|(holder, deadline_ms)| Waiter {
            holder,
            deadline_ms: *deadline_ms,
        }))
    }
}
