//! What `redlatch run` holds while CMD runs: a lock (plain, fair, fenced, read or write),
//! the values of a faster multi-lock (`--values`) or a permit of an expirable semaphore
//! (`--permits N`). Both are kept by the
//! watchdog unless `--lease`, and both say when they are lost.

use std::time::Duration;

use clap::Args;

use redlatch::{Acquire, BackOff, Client, Hold, Lock, PermitExpirableSemaphore};

/// What `run` asks for: a lock (plain, fair, fenced, read or write), the values of a
/// faster multi-lock (`--values`) or a permit of an expirable semaphore (`--permits N`).
pub struct Wanted {
    /// What it is taken of.
    source: Box<dyn Acquire>,
    /// `lock`, `values of group` or `semaphore`, for messages.
    what: &'static str,
    /// The lock, for `-v`'s report of who holds it now.
    pub lock: Option<Lock>,
    /// How `-v` names it ("{kind:?} lock", "N values of group", "a permit of semaphore").
    pub label: String,
    /// An expirable semaphore set up with this many permits if it does not exist.
    set_up: Option<(PermitExpirableSemaphore, u32)>,
}

impl Wanted {
    /// The lock or semaphore `run`'s flags name; a spin or simple lock's waits are spaced by `backoff` (the default:
    /// [`BackOff::default`]).
    pub fn with_backoff(
        client: &Client,
        name: &str,
        kind: &KindArgs,
        backoff: Option<BackOff>,
    ) -> redlatch::Result<Wanted> {
        if let Some(n) = kind.permits {
            let sem = client.permit_expirable_semaphore(name);
            return Ok(Wanted {
                source: Box::new(sem.clone()),
                what: "semaphore",
                lock: None,
                label: "a permit of semaphore".into(),
                set_up: Some((sem, n)),
            });
        }
        if let Some(values) = &kind.values {
            let group = client.faster_multi_lock(name, values)?;
            return Ok(Wanted {
                label: format!("{} values of group", group.value_count()),
                source: Box::new(group),
                what: "values of group",
                lock: None,
                set_up: None,
            });
        }
        let rw = client.read_write_lock(name);
        let lock = match kind {
            k if k.read => rw.read(),
            k if k.write => rw.write(),
            k if k.fair => client.fair_lock(name),
            k if k.fenced => client.fenced_lock(name),
            k if k.non_reentrant => client.non_reentrant_lock(name),
            k if k.non_reentrant_fair => client.non_reentrant_fair_lock(name),
            k if k.spin => client.spin_lock_with(name, backoff.unwrap_or_default()),
            k if k.simple => client.simple_lock_with(name, backoff.unwrap_or_default()),
            _ => client.lock(name),
        };
        Ok(Wanted {
            label: format!("{:?} lock", lock.kind()),
            source: Box::new(lock.clone()),
            what: "lock",
            lock: Some(lock),
            set_up: None,
        })
    }

    /// Takes it: waits at most `wait` (`None`: as long as it takes), with a fixed
    /// `lease` or the watchdog. `Ok(None)`: still busy when the wait ran out.
    pub async fn take(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> redlatch::Result<Option<Box<dyn Hold>>> {
        if let Some((sem, n)) = &self.set_up {
            // The first runner sets the semaphore up; later ones use what is there.
            let _set_up = sem.try_set_permits(i64::from(*n)).await?;
        }
        self.source.acquire_hold(wait, lease).await
    }

    /// `lock`, `values of group` or `semaphore`, for messages.
    pub fn what(&self) -> &'static str {
        self.what
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

    /// Simple lock: the `SET NX PX` string key of Redis's Redlock page, not reentrant,
    /// for NAMEs that Go, Node or Python services take with redsync, node-redlock or
    /// redis-py's `Lock` (their value is a random token). Waited for by polling
    /// (--backoff), woken at once by a redlatch holder's release.
    #[arg(long)]
    pub simple: bool,

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
