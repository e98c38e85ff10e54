//! [`FasterMultiLock`]: many values locked under one key, the group, all or none in
//! one round trip (Redisson's `getMultiLock(group, values)`,
//! `RedissonFasterMultiLock`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::api::client::Client;
use crate::api::guard::LockGuard;
use crate::api::lock::{Lock, Owner};
use crate::engine::facade::{group_field, group_name, GroupStatus};
use crate::engine::Kind;
use crate::error::{Error, Result};

/// The most values one [`FasterMultiLock`] may lock: each is checked and written by
/// one script that blocks the server while it runs, so the list stays bounded.
pub const MAX_GROUP_VALUES: usize = 4096;

/// Many values locked under one Redis key, the **group**, all or none, in one round
/// trip per attempt (Redisson's faster multi-lock: `getMultiLock(group, values)`).
///
/// Beside [`MultiLock`](crate::MultiLock), which takes separate locks one by one, this
/// keeps every value as fields of one hash: `lock()` takes all of them or, when any is
/// held by another holder, none, and waits. Two handles on overlapping values of the
/// same group exclude each other on the values they share; disjoint values of one
/// group do not. A Java client's `getMultiLock(group, values)` is the same lock (it
/// must encode values with `StringCodec` for a string to name the same field; see
/// [`Client::faster_multi_lock`]).
///
/// * **Holders and reentrancy** as [`Lock`]'s: each acquisition is its own holder and
///   re-enters inside its guard's [scope](LockGuard::scope) (or through
///   [`owned_by`](Self::owned_by)); the [blocking](crate::blocking) API holds per
///   thread, as Redisson does. A re-entry counts each value once more, per value.
/// * **Lease, watchdog, loss** as [`Lock`]'s: without a lease the watchdog renews
///   every value; a guard reports [`lost`](LockGuard::lost) when a renewal finds a
///   value gone (its lease ran out, a force-unlock). A holder that dies stops
///   renewing: its values are free once their lease ends.
/// * **Waiting** is woken by a release's message on the group's channel
///   (`redisson_lock__channel:{group}`), shared by every value set of the group.
/// * **Cluster**: all values live under the group key, one hash slot.
/// * **Redlock**: supported as for [`Lock`] (Redisson has no Redlock form of it): an
///   attempt runs the one script on every master and holds the values when a majority
///   granted all of them (the others' grants are undone); renewals, releases and the
///   queries go by majority too.
/// * The guard's [`name`](LockGuard::name) is the group, `#`, then the sorted value
///   digests (the engine's name for this hold), never a Redis key. Guarded writes and
///   release requests are for single locks: a [`guarded`](LockGuard::guarded) write
///   through this guard is refused with a typed error (nothing written) and
///   [`revoke_requested`](LockGuard::revoke_requested) never fires.
///
/// # Examples
/// See the example on [`lock`](FasterMultiLock::lock).
#[derive(Clone)]
pub struct FasterMultiLock {
    group: Arc<str>,
    values: usize,
    lock: Lock,
}

impl FasterMultiLock {
    /// Checks the values and names the hold (kinds/group.rs).
    pub(crate) fn new<V: AsRef<[u8]>>(
        client: Client,
        group: String,
        values: impl IntoIterator<Item = V>,
    ) -> Result<Self> {
        let mut fields = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, v) in values.into_iter().enumerate() {
            if i >= MAX_GROUP_VALUES {
                return Err(Error::InvalidCount(format!(
                    "more than {MAX_GROUP_VALUES} values for the faster multi-lock {group:?}"
                )));
            }
            let f = group_field(v.as_ref());
            if let Some(first) = seen.insert(f.clone(), i) {
                return Err(Error::InvalidCount(format!(
                    "value {i} of the faster multi-lock {group:?} repeats value {first}: \
                     the values must be distinct"
                )));
            }
            fields.push(f);
        }
        if fields.is_empty() {
            return Err(Error::InvalidCount(format!(
                "no values for the faster multi-lock {group:?}: give at least one"
            )));
        }
        let name = group_name(&group, &fields);
        let lock = Lock::new(client, name, Kind::Group);
        lock.check_name()?;
        Ok(FasterMultiLock {
            group: group.into(),
            values: fields.len(),
            lock,
        })
    }

    /// The same values held per OS thread (the blocking API).
    pub(crate) fn per_thread(self) -> Self {
        FasterMultiLock {
            lock: self.lock.per_thread(),
            ..self
        }
    }

    /// The handle the blocking API acquires through.
    pub(crate) fn as_lock(&self) -> &Lock {
        &self.lock
    }

    /// The group: the Redis key every value lives under.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn group(&self) -> &str {
        &self.group
    }

    /// How many values it locks.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn value_count(&self) -> usize {
        self.values
    }

    /// The same values, acquired by `owner` whatever task or thread calls (as
    /// [`Lock::owned_by`]).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub fn owned_by(&self, owner: Owner) -> FasterMultiLock {
        FasterMultiLock {
            lock: self.lock.owned_by(owner),
            ..self.clone()
        }
    }

    /// Waits as long as it takes, then holds every value, kept by the watchdog.
    ///
    /// # Errors
    /// [`Error::WrongType`] if the group's key is not a hash; otherwise as
    /// [`Lock::lock`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves nothing held: an attempt that already took the
    /// values is undone in the background, as for [`Lock::lock`].
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let class = client.faster_multi_lock("class_100", ["Jack_001", "Mary_002"])?;
    /// assert_eq!((class.group(), class.value_count()), ("class_100", 2));
    /// let guard = class.lock().await?; // both values, one round trip
    /// assert!(class.is_held_by_current_task().await?);
    /// // Mary is taken: a set that shares her waits, all or none.
    /// let mary = client.faster_multi_lock("class_100", ["Mary_002", "Tom_003"])?;
    /// assert!(mary.is_locked().await?);
    /// assert!(!client.faster_multi_lock("class_100", ["Tom_003"])?.is_locked().await?);
    /// guard.unlock().await?;
    /// assert!(!mary.is_locked().await?);
    ///
    /// // One owner re-enters, under a lease of its own.
    /// let lock = class.owned_by(client.owner());
    /// assert_eq!(lock.remaining_ttl().await?, None);
    /// let first = lock.lock_with_lease(Duration::from_secs(5)).await?;
    /// assert!(lock.remaining_ttl().await?.unwrap() <= Duration::from_secs(5));
    /// let second = lock.lock().await?; // the same holder: re-enters
    /// assert_eq!(lock.hold_count().await?, 2);
    /// second.unlock().await?;
    /// // Deleting the group's hold whoever has it: this client's guard learns it is lost.
    /// assert!(lock.force_unlock().await?);
    /// assert!(first.lost().is_cancelled());
    /// assert!(!lock.force_unlock().await?);
    /// # Ok(()) }) }
    /// ```
    pub async fn lock(&self) -> Result<LockGuard> {
        self.lock.lock().await
    }

    /// Waits as long as it takes, then holds every value for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock`](Self::lock), and [`Error::InvalidLease`] for a zero,
    /// sub-millisecond or longer-than-30-days lease.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.lock.lock_with_lease(lease).await
    }

    /// Waits at most `wait` for every value, kept by the watchdog; `Ok(None)` if some
    /// value stayed held by another holder. `Duration::ZERO`: one attempt.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.faster_multi_lock("class_100", ["Jack_001"])?;
    /// let guard = lock.try_lock(Duration::from_millis(100)).await?.expect("free");
    /// assert!(lock.try_lock(Duration::ZERO).await?.is_none()); // another holder
    /// guard.unlock().await?;
    /// // With a lease of its own (no watchdog): wait at most 5 s, hold for 5 s.
    /// let guard = lock
    ///     .try_lock_with_lease(Duration::from_secs(5), Duration::from_secs(5))
    ///     .await?
    ///     .expect("free");
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    #[doc(alias = "tryLock")]
    pub async fn try_lock(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.lock.try_lock(wait).await
    }

    /// Waits at most `wait`, then holds every value for `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Examples
    /// See the example on [`try_lock`](Self::try_lock).
    #[doc(alias = "tryLock")]
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.lock.try_lock_with_lease(wait, lease).await
    }

    /// True if any of its values is held by anyone (on a majority of masters;
    /// Redisson's `isLocked`).
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::NoQuorum`] or the master's error when a majority
    /// does not answer.
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "isLocked")]
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.status().await?.locked)
    }

    /// True if the caller holds every value (as [`Lock::is_held_by_current_task`]
    /// says who the caller is; Redisson's `isHeldByCurrentThread`).
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "isHeldByCurrentThread")]
    pub async fn is_held_by_current_task(&self) -> Result<bool> {
        Ok(self.status().await?.held)
    }

    /// The caller's reentrant count (the smallest over its values); 0 if it does not
    /// hold every value. Redisson throws `UnsupportedOperationException` here; the
    /// counts are on its wire all the same.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "getHoldCount")]
    pub async fn hold_count(&self) -> Result<u32> {
        Ok(self.status().await?.count)
    }

    /// The least lease left of the caller's values; `None` if it does not hold every
    /// value. (Redisson throws `UnsupportedOperationException` here.)
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "remainTimeToLive")]
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.status().await?.left)
    }

    /// Frees every value whoever holds it, and wakes the waiters; true if any had a
    /// holder. This client's guards of exactly these values report
    /// [`lost`](LockGuard::lost) at once, those of other value sets sharing a value at
    /// their next renewal.
    ///
    /// # Errors
    /// As [`is_locked`](Self::is_locked).
    ///
    /// # Examples
    /// See the example on [`lock`](Self::lock).
    #[doc(alias = "forceUnlock")]
    pub async fn force_unlock(&self) -> Result<bool> {
        let engine = &self.lock.client().engine;
        engine.force_unlock(self.lock.spec()).await
    }

    async fn status(&self) -> Result<GroupStatus> {
        let engine = &self.lock.client().engine;
        engine.group_status(self.lock.spec()).await
    }
}

impl std::fmt::Debug for FasterMultiLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FasterMultiLock")
            .field("group", &self.group)
            .field("values", &self.values)
            .finish()
    }
}
