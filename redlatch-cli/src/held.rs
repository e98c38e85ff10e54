//! What `redlatch run` holds while CMD runs: a lock (plain, fair, fenced, read or write),
//! the values of a faster multi-lock (`--values`) or a permit of an expirable semaphore
//! (`--permits N`). Both are kept by the
//! watchdog unless `--lease`, and both say when they are lost.

use std::time::Duration;

use clap::Args;

use redlatch::{
    Client, FasterMultiLock, Leadership, Lock, LockGuard, Permit, PermitExpirableSemaphore,
};
use tokio_util::sync::CancellationToken;

/// What `run` asks for.
pub enum Wanted {
    Lock(Lock),
    /// The faster multi-lock of a group over values (`--values`).
    Values(FasterMultiLock),
    /// An expirable semaphore set up with this many permits if it does not exist.
    Permit(PermitExpirableSemaphore, u32),
}

impl Wanted {
    /// The lock or semaphore `run`'s flags name.
    pub fn new(client: &Client, name: &str, kind: &KindArgs) -> redlatch::Result<Wanted> {
        if let Some(n) = kind.permits {
            return Ok(Wanted::Permit(client.permit_expirable_semaphore(name), n));
        }
        if let Some(values) = &kind.values {
            return Ok(Wanted::Values(client.faster_multi_lock(name, values)?));
        }
        let rw = client.read_write_lock(name);
        Ok(Wanted::Lock(match kind {
            k if k.read => rw.read(),
            k if k.write => rw.write(),
            k if k.fair => client.fair_lock(name),
            k if k.fenced => client.fenced_lock(name),
            k if k.non_reentrant => client.non_reentrant_lock(name),
            k if k.non_reentrant_fair => client.non_reentrant_fair_lock(name),
            k if k.spin => client.spin_lock(name),
            _ => client.lock(name),
        }))
    }

    /// Takes it: waits at most `wait` (`None`: as long as it takes), with a fixed
    /// `lease` or the watchdog. `Ok(None)`: still busy when the wait ran out.
    pub async fn take(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> redlatch::Result<Option<Held>> {
        match self {
            Wanted::Lock(lock) => {
                let guard = match (wait, lease) {
                    (None, None) => lock.lock().await.map(Some),
                    (None, Some(l)) => lock.lock_with_lease(l).await.map(Some),
                    (Some(w), None) => lock.try_lock(w).await,
                    (Some(w), Some(l)) => lock.try_lock_with_lease(w, l).await,
                }?;
                Ok(guard.map(Held::Lock))
            }
            Wanted::Values(lock) => {
                let guard = match (wait, lease) {
                    (None, None) => lock.lock().await.map(Some),
                    (None, Some(l)) => lock.lock_with_lease(l).await.map(Some),
                    (Some(w), None) => lock.try_lock(w).await,
                    (Some(w), Some(l)) => lock.try_lock_with_lease(w, l).await,
                }?;
                Ok(guard.map(Held::Lock))
            }
            Wanted::Permit(sem, n) => {
                // The first runner sets the semaphore up; later ones use what is there.
                let _set_up = sem.try_set_permits(i64::from(*n)).await?;
                let permit = match (wait, lease) {
                    (None, None) => sem.acquire().await.map(Some),
                    (None, Some(l)) => sem.acquire_with_lease(l).await.map(Some),
                    (Some(w), None) => sem.try_acquire(w).await,
                    (Some(w), Some(l)) => sem.try_acquire_with_lease(w, l).await,
                }?;
                Ok(permit.map(Held::Permit))
            }
        }
    }

    /// `lock` or `semaphore`, for messages.
    pub fn what(&self) -> &'static str {
        match self {
            Wanted::Lock(_) => "lock",
            Wanted::Values(_) => "values of group",
            Wanted::Permit(..) => "semaphore",
        }
    }
}

/// A held lock or permit.
pub enum Held {
    Lock(LockGuard),
    Permit(Permit),
    /// `redlatch elect`: the leadership of an election (its lock's guard).
    Leader(Leadership),
}

impl Held {
    /// The holder id (lock) or permit id.
    pub fn holder(&self) -> &str {
        match self {
            Held::Lock(g) => g.holder(),
            Held::Permit(p) => p.id(),
            Held::Leader(l) => l.holder(),
        }
    }

    pub fn fencing_token(&self) -> Option<u64> {
        match self {
            Held::Lock(g) => g.fencing_token(),
            Held::Permit(_) => None,
            Held::Leader(l) => Some(l.term()),
        }
    }

    pub fn lost(&self) -> CancellationToken {
        match self {
            Held::Lock(g) => g.lost(),
            Held::Permit(p) => p.lost(),
            Held::Leader(l) => l.lost(),
        }
    }

    /// Why it was lost, once `lost()` fired.
    pub fn lost_reason(&self) -> Option<redlatch::LostReason> {
        match self {
            Held::Lock(g) => g.lost_reason(),
            Held::Permit(p) => p.lost_reason(),
            Held::Leader(l) => l.lost_reason(),
        }
    }

    /// `Some(end of validity)` while renewals fail on a majority.
    pub fn at_risk(&self) -> tokio::sync::watch::Receiver<Option<std::time::Instant>> {
        match self {
            Held::Lock(g) => g.at_risk(),
            Held::Permit(p) => p.at_risk(),
            Held::Leader(l) => l.at_risk(),
        }
    }

    pub fn validity(&self) -> Duration {
        match self {
            Held::Lock(g) => g.validity(),
            Held::Permit(p) => p.validity(),
            Held::Leader(l) => l.guard().validity(),
        }
    }

    /// Cancelled when someone asks for the lock (`unlock --ask`); never for a permit.
    pub fn revoke_requested(&self) -> CancellationToken {
        match self {
            Held::Lock(g) => g.revoke_requested(),
            Held::Permit(_) => CancellationToken::new(),
            Held::Leader(l) => l.guard().revoke_requested(),
        }
    }

    pub async fn release(self) -> redlatch::Result<()> {
        match self {
            Held::Lock(g) => g.unlock().await,
            Held::Permit(p) => p.release().await,
            Held::Leader(l) => l.resign().await,
        }
    }
}

/// Which kind of lock (or semaphore) `run` holds; at most one of these.
#[derive(Args, Debug, Default)]
#[group(multiple = false)]
pub struct KindArgs {
    /// Fair lock: waiters get the lock in arrival order (Redisson RFairLock).
    #[arg(long)]
    pub fair: bool,

    /// Fenced lock: CMD gets a fencing token in $REDLATCH_FENCING_TOKEN that grows
    /// with every acquisition (Redisson RFencedLock).
    #[arg(long)]
    pub fenced: bool,

    /// The read lock of the read-write lock NAME (Redisson RReadWriteLock): any number
    /// of `--read` runners at once, none while a `--write` runner holds it.
    #[arg(long)]
    pub read: bool,

    /// The write lock of the read-write lock NAME: alone, no `--read` runner meanwhile.
    /// Waiting writers keep new readers out.
    #[arg(long)]
    pub write: bool,

    /// Non-reentrant lock (Redisson getNonReentrantLock): the same wire as the plain
    /// lock, for NAMEs that Java code takes with getNonReentrantLock.
    #[arg(long)]
    pub non_reentrant: bool,

    /// Non-reentrant fair lock (Redisson getNonReentrantFairLock): the fair lock's
    /// arrival order, and a holder's second acquisition refused.
    #[arg(long)]
    pub non_reentrant_fair: bool,

    /// Spin lock (Redisson getSpinLock): waits by retrying after an exponential
    /// back-off (1ms, x2, at most 128ms, with jitter) instead of subscribing to
    /// pub/sub; its release publishes nothing.
    #[arg(long)]
    pub spin: bool,

    /// A permit of the expirable semaphore NAME (Redisson RPermitExpirableSemaphore),
    /// set up with N permits if it does not exist: at most N CMDs at once across
    /// machines (`sem`). A killed runner's permit expires after --watchdog.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub permits: Option<u32>,

    /// The faster multi-lock of group NAME over these values (comma-separated), all or
    /// none (Redisson `getMultiLock(NAME, values)`; a Java client must use StringCodec
    /// for its string values to be the same): runners exclude each other on the values
    /// they share.
    #[arg(long, value_name = "V1,V2,...", value_delimiter = ',', num_args = 1)]
    pub values: Option<Vec<String>>,
}
