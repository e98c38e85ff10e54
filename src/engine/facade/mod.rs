//! The engine's façade: what the API layer calls. The API sees [`Engine`] through
//! the methods listed below and the types the engine module re-exports
//! ([`LockSpec`], [`Held`], `Kind`, …), never its fields or inner modules.
//!
//! An acquisition is finished here: the hold is registered in the table and handed to
//! the watchdog before the API gets its [`Held`].
//!
//! # Every method the API calls, and where it is
//!
//! | methods of [`Engine`] | file |
//! |---|---|
//! | `connect`, `lock`, `check_name`, `backoff`, `renew_now`, `metrics_label`; `id`, `is_cluster`, `addrs`, `server`, `quorum`, `held_count`, `subscriptions`, `spawn_cleanup` | `facade/mod.rs` (this file) |
//! | `shut_down`, `stop` | `engine/mod.rs` |
//! | `is_locked`, `hold_count`, `remaining_ttl`, `force_unlock`, `inspect`, `group_status` | `facade/queries.rs` |
//! | `semaphore_acquire`, `semaphore_release`, `semaphore_check`, `semaphore_drain`, `semaphore_available`, `semaphore_set`, `latch_set`, `latch_check`, `latch_count_down`, `latch_count`, `latch_wait` | `facade/counters.rs` |
//! | `permits_check`, `take_permits`, `return_permit`, `return_permits`, `permits_state`, `permits_set`, `permits_set_total`, `set_permit_lease`, `permit_lease` | `facade/expirable_semaphore.rs` |
//! | `election_check`, `election_campaign`, `election_step_down`, `election_proclaim`, `election_resign`, `election_leader`, `election_watch`; `request_release`; `job_check`, `job_identity`, `job_begin`, `job_finish`, `job_extend`, `job_listen`, `job_state` | `facade/coordination.rs` (the work in `coordination/`) |
//! | `list`, `waiting`, `job_scan`, `deadlocks`, `resolve` | `facade/observe.rs` (the work in `observe/`) |
//!
//! | methods of [`Held`] (a guard's handle) | file |
//! |---|---|
//! | `name`, `holder`, `token`, `watchdog`, `granted_validity`, `masters`, `lost`, `lost_reason`, `at_risk`, `valid_until`, `scope_entry`, `release` | `holding/held.rs` |
//! | `guarded_write`, `guarded_script`, `decode` | `coordination/guarded.rs` |
//! | `watch_revocation` | `coordination/revoke.rs` |
//!
//! Besides them the API calls one free function, `all_or_none` (a multi-lock's
//! wait, `acquire/all_or_none.rs`).
//!
//! A new façade method goes into the file of its area and into this table
//! (scripts/check-layers.py checks that every one is listed, and that no `impl
//! Engine` block is written outside engine/mod.rs and facade/: a part's code is a
//! method of its state type, or a function given what it needs of the engine).

#[cfg(test)]
pub(crate) mod catalogue;
pub(crate) mod coordination;
pub(crate) mod counters;
pub(crate) mod expirable_semaphore;
pub(crate) mod observe;
pub(crate) mod queries;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::engine::acquire::self_wait::Watched;
use crate::engine::acquire::Contenders;
use crate::engine::holding::Holdings;
use crate::engine::kinds::call::Call;
use crate::engine::kinds::kind::Kind;
use crate::engine::masters::master::Master;
use crate::engine::masters::Masters;
use crate::engine::observe::{run_flusher, Observe};
use crate::engine::{
    acquire::attempt, acquire::spin_wait, acquire::waiter, holding::holder_id, holding::watchdog,
};
use crate::engine::{Engine, Settings};
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::connect;
use crate::transport::pubsub::PubSub;
use crate::transport::Transport;

// What the API may name besides `Engine`, `Kind` and `Settings` (engine/mod.rs): the
// call description, the handle of an acquisition, a guard's scope, the answers of an
// inspection, and what it needs of the transport (plain settings, public types).
pub(crate) use crate::engine::acquire::all_or_none::all_or_none;
pub(crate) use crate::engine::coordination::election::{
    lock_name as election_lock_name, Current, Event, Watch,
};
pub(crate) use crate::engine::coordination::guarded::{wrapped, Wrapped};
pub(crate) use crate::engine::coordination::job::{
    record_key as job_record_key, Began, Begin, Finish, JobCall, JobWake,
};
pub(crate) use crate::engine::coordination::job_state::JobState;
pub(crate) use crate::engine::facade::counters::Set;
pub(crate) use crate::engine::facade::queries::Inspected;
pub(crate) use crate::engine::holding::held::Held;
pub(crate) use crate::engine::holding::holder_id::{fresh_number, Scope};
pub(crate) use crate::engine::kinds::call::{Holding, LockSpec};
pub(crate) use crate::engine::kinds::group::{
    composite as group_name, field as group_field, Status as GroupStatus,
};
pub(crate) use crate::engine::kinds::shedlock::{
    key as job_key, parse as parse_job_value, value as job_value, DEFAULT_ENV as JOB_ENV,
    DEFAULT_PREFIX as JOB_PREFIX,
};
pub(crate) use crate::engine::observe::listing::{HolderInfo, Listing};
pub(crate) use crate::engine::observe::{Cycle as FoundCycle, Deadlocks as FoundDeadlocks, Who};
pub(crate) use crate::transport::connect::{Deployment, Shape};
pub(crate) use crate::transport::replicas::SyncReplicas;
#[cfg(feature = "tls")]
pub(crate) use crate::transport::tls::{Pem, TlsOptions};

impl Engine {
    /// Connects to `deployment` (transport/connect.rs: PING, topology discovery,
    /// duplicate masters, WAITAOF) and starts an engine over it.
    pub(crate) async fn connect(deployment: Deployment, settings: Settings) -> Result<Arc<Engine>> {
        let connected = connect::connect(deployment).await?;
        let settings = Settings {
            cluster: connected.cluster,
            ..settings
        };
        let engine = Engine::start(connected.links, settings);
        engine.observe.write_record(&engine).await;
        Ok(engine)
    }

    /// Starts an engine over `links` (already checked to answer), with its watchdog and
    /// pub/sub tasks; they stop when [`shut_down`](Self::shut_down) is called or the
    /// engine is dropped.
    pub(super) fn start(links: Vec<Arc<dyn Transport>>, settings: Settings) -> Arc<Engine> {
        let shutdown = CancellationToken::new();
        let period = settings.watchdog_timeout / 3;
        let id = Uuid::new_v4();
        let (settings_app, detection) = (settings.app.clone(), settings.deadlock_detection);
        let engine = Arc::new_cyclic(|engine: &std::sync::Weak<Engine>| {
            // Hand-overs from other clients' releases arrive as messages (tickets.rs).
            let engine = engine.clone();
            // So do the notices about this client's own holds (coordination/revoke.rs).
            let on_payload = Box::new(move |payload: &[u8]| {
                if let Some(engine) = engine.upgrade()
                    && !crate::engine::coordination::revoke::notice(&engine, payload)
                {
                    waiter::received(&engine, payload);
                }
            });
            let timeout = settings.connect_timeout;
            let masters = Masters::new(&links, &crate::engine::kinds::plain::SCRIPTS);
            let quorum = masters.quorum();
            Engine {
                id,
                holder_prefix: holder_id::prefix(&id),
                masters,
                pubsub: PubSub::start(links, quorum, timeout, &shutdown, on_payload),
                holdings: Holdings::new(settings.metrics_names.clone()),
                contenders: Contenders::default(),
                settings,
                cleanups: TaskTracker::new(),
                observe: Arc::new(Observe::new(settings_app, detection)),
                shutdown: shutdown.clone(),
                closing: Default::default(),
            }
        });
        let urgent = engine.holdings().urgent().clone();
        tokio::spawn(watchdog::run_urgent(
            Arc::downgrade(&engine),
            urgent,
            shutdown.clone(),
        ));
        let observe = engine.observe().clone();
        tokio::spawn(run_flusher(
            Arc::downgrade(&engine),
            observe,
            shutdown.clone(),
        ));
        // The fake server of the core's unit tests (engine/fake) models the waiters'
        // channels only: its engines do without the notice channel.
        if !cfg!(test) {
            let listen = crate::engine::coordination::revoke::listen;
            tokio::spawn(listen(Arc::downgrade(&engine), shutdown.clone()));
        }
        tokio::spawn(watchdog::run(Arc::downgrade(&engine), shutdown, period));
        engine
    }

    /// The deployment is a Redis Cluster (configured, or found by asking a lone seed).
    pub(crate) fn is_cluster(&self) -> bool {
        self.settings().cluster
    }

    /// This client's UUID.
    pub(crate) fn id(&self) -> Uuid {
        self.id
    }

    /// The masters' addresses, in configuration order.
    pub(crate) fn addrs(&self) -> Vec<String> {
        self.masters()
            .iter()
            .map(|m| m.addr().to_string())
            .collect()
    }

    /// `name` as the `lock` label of its metrics, if `Config::metrics_names` allows it.
    pub(crate) fn metrics_label<'a>(&self, name: &'a str) -> Option<&'a str> {
        self.settings().metrics_names.label(name)
    }

    /// The address of the only master, if there is one.
    pub(crate) fn server(&self) -> Option<&str> {
        match self.masters().all() {
            [only] => Some(only.addr()),
            _ => None,
        }
    }

    /// Runs `task` on `runtime` as a background cleanup that `close()` waits for
    /// (a guard dropped without an explicit release gives back its hold this way).
    pub(crate) fn spawn_cleanup<F>(&self, task: F, runtime: &tokio::runtime::Handle)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.cleanups().spawn_on(task, runtime);
    }

    /// Masters needed for a majority.
    pub(crate) fn quorum(&self) -> usize {
        self.masters().quorum()
    }

    /// Holds in the table (distinct name and holder pairs).
    pub(crate) fn held_count(&self) -> usize {
        self.holdings().table().len()
    }

    /// Channels subscribed for waiters.
    pub(crate) fn subscriptions(&self) -> usize {
        self.pubsub().channel_count()
    }

    /// One watchdog round now.
    pub(crate) async fn renew_now(self: &Arc<Self>) {
        watchdog::renew_all(self).await;
    }

    /// A random back-off up to the retry jitter (after a split vote).
    pub(crate) fn backoff(&self) -> Duration {
        attempt::jitter(self.settings().retry_jitter)
    }

    /// Checks `name` for a lock of `kind` on this deployment.
    pub(crate) fn check_name(&self, name: &str, kind: Kind) -> Result<()> {
        let kind = kind.protocol();
        // A faster multi-lock's engine name is composite: its key is the group.
        let name = kind.key(name);
        kind.validate(name)?;
        if self.settings().cluster {
            keys::validate_cluster(name)?;
        }
        Ok(())
    }

    /// Acquires `spec` (waiting at most `wait`; `None`: as long as it takes), leased
    /// for `lease` or, without one, kept by the watchdog. The name and the lease are
    /// checked by the caller. `Ok(None)`: the wait ran out.
    pub(crate) async fn lock(
        self: &Arc<Self>,
        spec: &LockSpec,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<Held>> {
        let call = Call {
            name: spec.name.clone(),
            holder: self.holder(spec),
            kind: spec.kind,
            lease: lease.unwrap_or(self.settings().watchdog_timeout),
            watchdog: lease.is_none(),
            wait,
            intent: spec.intent,
        };
        if let Some(lower) = spec.kind.protocol().no_upgrade_from() {
            self.refuse_upgrade(&call, lower)?;
        }
        self.refuse_reentry(&call)?;
        let acquire = async {
            match spec.kind.protocol().policy().spins() {
                true => spin_wait::acquire(self, &call, spec.backoff).await,
                false => waiter::acquire(self, &call).await,
            }
        };
        // Pinned here and awaited by reference: moved into both arms below, it would be
        // kept twice in this future's state (and every caller moves that state).
        let acquire = std::pin::pin!(self.observe.observed(self, &call, acquire));
        // A call of its own while its task holds the lock may wait for itself
        // (self_wait.rs): watched, to say so.
        let watched = match spec.holding {
            Holding::PerCall => {
                Watched::arm(self.holdings().table(), &spec.name, spec.kind, &call.holder)
            }
            _ => None,
        };
        let grant = match watched {
            Some(watched) => watched.watch(acquire).await?,
            None => acquire.await?,
        };
        let Some(grant) = grant else {
            return Ok(None);
        };
        let hold = self
            .holdings()
            .table()
            .acquired(&call, grant.fresh, grant.started);
        self.watch_new(&hold);
        let taken = (grant.token, grant.validity);
        Ok(Some(Held::new(
            self.clone(),
            hold,
            call.lease,
            call.watchdog,
            taken,
        )))
    }

    /// The holder id a new acquisition of `spec` takes (a writer's ends in `:write`):
    /// the thread's (blocking API), the owner's, the enclosing guard scope's, or a
    /// fresh one.
    pub(super) fn holder(&self, spec: &LockSpec) -> Arc<str> {
        let holder = match spec.holding {
            Holding::PerThread => holder_id::thread(self.holder_prefix()),
            Holding::Owner(n) => holder_id::owner(self.holder_prefix(), n),
            Holding::PerCall => holder_id::for_call(self.holder_prefix(), &spec.name),
        };
        spec.kind.protocol().holder_id(holder)
    }

    /// The holder id whose hold "the caller" means, if any: the thread's (blocking
    /// API) or the owner's, the enclosing guard scope's, else the hold this task (or,
    /// outside any task, this thread) took first (holding/holder_id.rs invariant 5).
    pub(super) fn callers_holder(&self, spec: &LockSpec) -> Option<Arc<str>> {
        if spec.holding != Holding::PerCall {
            return Some(self.holder(spec));
        }
        if let Some(scoped) = holder_id::scoped(self.holder_prefix(), &spec.name) {
            return Some(spec.kind.protocol().holder_id(scoped));
        }
        let hold =
            (self.holdings().table()).taken_in(&spec.name, spec.kind, holder_id::context())?;
        Some(hold.holder.clone())
    }

    /// A task holding the read lock (`lower`, under its base id) and not the write
    /// lock may not wait for the write lock: it would wait for itself.
    fn refuse_upgrade(&self, call: &Call, lower: Kind) -> Result<()> {
        let (name, writer) = (&call.name, &*call.holder);
        let reader = holder_id::base(writer);
        let reads = (self.holdings().table().get(name, reader)).is_some_and(|h| h.kind == lower);
        if reads && self.holdings().table().get(name, writer).is_none() {
            return Err(Error::Upgrade {
                name: name.to_string(),
            });
        }
        Ok(())
    }

    /// A holder that holds a non-reentrant lock may not acquire it again (Redisson's
    /// `NON_REENTRANT_REACQUIRE`): refused here when this client knows the hold, else
    /// by the kind's acquire script (lua/reacquire_guard.lua).
    fn refuse_reentry(&self, call: &Call) -> Result<()> {
        if call.kind.protocol().policy().reentrant
            || self
                .holdings()
                .table()
                .get(&call.name, &call.holder)
                .is_none()
        {
            return Ok(());
        }
        Err(Error::Reentry {
            name: call.name.to_string(),
        })
    }

    /// The only master, for a counter (semaphore, latch) named `name`: counters are
    /// not kept by majority. `what` names the counter in the error.
    pub(super) fn single_master(&self, name: &str, what: &str) -> Result<Arc<Master>> {
        keys::validate(name)?;
        match self.masters().all() {
            [only] => Ok(only.clone()),
            _ => Err(Error::Unsupported {
                what: format!(
                    "{what} {name:?} over {} Redlock masters",
                    self.masters().len()
                ),
                reason: "a counter cannot be kept by majority the way a lock is (a minority \
                         that missed a change would count it again); use one master for it"
                    .into(),
            }),
        }
    }
}
