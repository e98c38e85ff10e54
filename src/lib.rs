#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs, unsafe_code)]
#![warn(rust_2018_idioms, unreachable_pub, clippy::all)]

// Three layers, each using only those below it (ARCHITECTURE.md):
// api (what users call) → engine (how locks work) → transport (how requests travel).
// `error`, `keys`, `lost` and `telemetry` are shared by all three.
mod api;
mod engine;
mod error;
mod keys;
mod lost;
mod telemetry;
mod transport;

pub use api::blocking;
pub use api::client::Client;
pub use api::config::{Config, Topology, DEFAULT_RELEASE_TIMEOUT, ENV_VAR, MAX_LEASE};
pub use api::config_books::ENV_BOOKKEEPING;
pub use api::config_check::MIN_LEASE;
pub use api::config_observe::{ENV_APP, MAX_APP_LEN};
pub use api::config_sources::{ENV_MODE, ENV_SENTINEL_MASTER};
pub use api::election::{Change, ChangeKind, Election, Leader, Leadership, Observer};
pub use api::expirable_semaphore::many::MAX_PERMITS_PER_CALL;
pub use api::expirable_semaphore::{Permit, PermitExpirableSemaphore};
pub use api::fence;
pub use api::group::{FasterMultiLock, MAX_GROUP_VALUES};
pub use api::guard::LockGuard;
pub use api::guarded::{Guarded, GuardedScript};
pub use api::hold::{Acquire, Hold, HoldFuture};
pub use api::job::{Job, JobHolder, JobOutcome, JobRun, JobState, LastRun, Missed, MAX_PERIOD};
pub use api::latch::CountDownLatch;
pub use api::listing::LIST_TIMEOUT;
pub use api::lock::{BackOff, Delays, Kind, Lock, Owner};
pub use api::multi::{MultiGuard, MultiLock};
pub use api::observe::{DeadlockCycle, Deadlocks, WaitingTask};
pub use api::revoke::ReleaseRequested;
pub use api::rwlock::ReadWriteLock;
pub use api::semaphore::permit::SemaphorePermit;
pub use api::semaphore::Semaphore;
pub use api::status::MasterStatus;
pub use api::urls::redact_url;
pub use api::wire;
pub use engine::observe::listing::{
    HolderInfo, ListedHolder, ListedKind, Listing, LockListing, QueuedWaiter, Unread,
};
pub use engine::WAIT_SLACK;
pub use error::{Cause, Error, MasterError, MasterErrors, Result, StoreProblem};
pub use keys::MAX_NAME_LEN;
pub use lost::LostReason;
pub use transport::replicas::{ReplicaSync, SyncReplicas};
