//! Leader election ([`Election`], [`Leadership`], [`Observer`]) on top of the fenced
//! lock: the lock's holder leads, its fencing token is the term (docs/election.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::api::client::Client;
use crate::api::guard::LockGuard;
use crate::api::lock::Lock;
use crate::engine::facade::{election_lock_name, Current, Event, Watch};
use crate::error::{Error, Result};
use crate::lost::LostReason;

/// A leader election on one name: at most one [`Leadership`] at a time across all
/// processes that campaign on it, each with a **term** greater than every earlier
/// leader's. Made by [`Client::election`]; cheap to clone.
///
/// The election is the fenced lock `redlatch_election:{name}` (kept by the watchdog
/// while a leadership lives) with a leader record and a change log beside it, in the
/// same hash slot: it works on a single server, Sentinel and Redis Cluster. Under
/// Redlock (several independent masters) the calls fail with [`Error::Unsupported`].
///
/// # Examples
/// See the example on [`campaign`](Election::campaign).
#[derive(Clone)]
pub struct Election {
    client: Client,
    name: Arc<str>,
}

/// The leader of an election as [`Election::leader`] reads it.
///
/// # Examples
/// See the example on [`Election::campaign`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// Its term: the fencing token it was elected with.
    pub term: u64,
    /// The value it advertises (its address, say).
    pub value: String,
    /// Its holder id (`"{client_uuid}:{n}"`).
    pub holder: String,
    /// How long its lease still runs unless renewed (`None`: no expiry).
    pub lease_left: Option<Duration>,
}

/// What happened in an election, as an [`Observer`] sees it.
///
/// # Examples
/// See the example on [`Election::observe`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A new leader was elected (a new term).
    Elected,
    /// The leader advertises a new value ([`Leadership::proclaim`]), same term.
    Proclaimed,
    /// The leader stepped down ([`Leadership::resign`], or its leadership was dropped).
    Resigned,
}

/// One change of an election: seen once by each [`Observer`], in order.
///
/// # Examples
/// See the example on [`Election::observe`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change {
    /// What happened.
    pub kind: ChangeKind,
    /// The term it happened in.
    pub term: u64,
    /// The leader's value (for `Resigned`, the value it had).
    pub value: String,
    /// The change's id in the election's log (a Redis stream id): ids grow.
    pub id: String,
}

impl Election {
    pub(crate) fn new(client: Client, name: String) -> Self {
        Election {
            client,
            name: name.into(),
        }
    }

    /// The election's name.
    ///
    /// # Examples
    /// See the example on [`campaign`](Self::campaign).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of the fenced lock whose holder leads: `redlatch_election:{name}`
    /// (`redlatch_election:name` when the name has a hash tag already). `redlatch
    /// status` on it shows the holder and its lease.
    ///
    /// # Examples
    /// See the example on [`campaign`](Self::campaign).
    pub fn lock_name(&self) -> String {
        election_lock_name(&self.name)
    }

    fn check(&self) -> Result<()> {
        self.client.engine.election_check(&self.name)
    }

    fn lock(&self) -> Lock {
        self.client.fenced_lock(self.lock_name())
    }

    /// Waits (with pub/sub, no polling) until this caller leads, then records `value`
    /// as the leader's and returns the [`Leadership`]. Its term is greater than every
    /// earlier leader's. The leadership is kept by the watchdog until it is resigned or
    /// dropped, or lost ([`Leadership::lost`]).
    ///
    /// # Errors
    /// [`Error::Unsupported`] under Redlock; the lock's errors (an unreachable master,
    /// [`Error::InvalidName`], ...).
    ///
    /// # Cancel safety
    /// As [`Lock::lock`]: a campaign dropped while waiting leaves nothing behind.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let election = client.election("scheduler");
    /// assert_eq!(election.name(), "scheduler");
    /// assert!(election.leader().await?.is_none()); // nobody campaigned yet
    /// let first = election.campaign("10.0.0.1:80").await?; // waits until it leads
    /// assert_eq!((first.name(), first.value()), ("scheduler", "10.0.0.1:80"));
    /// let now = election.leader().await?.expect("someone leads");
    /// assert_eq!((now.value.as_str(), now.term), ("10.0.0.1:80", first.term()));
    /// assert_eq!(now.holder, first.holder());
    /// // The term is the fencing token of the election's lock, which `redlatch status` shows.
    /// assert_eq!(election.lock_name(), "redlatch_election:{scheduler}");
    /// assert!(client.fenced_lock(election.lock_name()).is_locked().await?);
    /// assert_eq!(first.guard().fencing_token(), Some(first.term()));
    /// // A write applied only while this process still leads (keys in the `{scheduler}` slot):
    /// assert_eq!(first.guard().guarded().incr_by("{scheduler}:runs", 1).await?, 1);
    ///
    /// // A second campaign waits until the first leader steps down.
    /// let second = tokio::spawn({
    ///     let election = election.clone();
    ///     async move { election.campaign("b").await }
    /// });
    /// tokio::time::sleep(Duration::from_millis(50)).await;
    /// assert!(!second.is_finished());
    /// let t1 = first.term();
    /// first.resign().await?; // or drop it: it resigns in the background
    /// let second = second.await.unwrap()?;
    /// assert!(second.term() > t1);
    /// second.resign().await?;
    /// assert!(election.leader().await?.is_none());
    /// # Ok(()) }) }
    /// ```
    pub async fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        let led = self.run_campaign(value.into(), None).await?;
        Ok(led.expect("a campaign without a deadline leads"))
    }

    /// As [`campaign`](Self::campaign), but gives up after `wait`: `Ok(None)` if another
    /// still leads then (`Duration::ZERO`: try once).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::time::Duration;
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let election = client.election("scheduler");
    /// let leading = election.try_campaign("a", Duration::ZERO).await?.expect("nobody led");
    /// assert!(election.try_campaign("b", Duration::from_millis(100)).await?.is_none());
    /// leading.resign().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn try_campaign(
        &self,
        value: impl Into<String>,
        wait: Duration,
    ) -> Result<Option<Leadership>> {
        self.run_campaign(value.into(), Some(wait)).await
    }

    /// The engine's campaign (`Engine::election_campaign`) over this election's lock.
    async fn run_campaign(
        &self,
        value: String,
        wait: Option<Duration>,
    ) -> Result<Option<Leadership>> {
        let engine = &self.client.engine;
        let lock = self.lock();
        let led = engine
            .election_campaign(&self.name, lock.spec(), &value, wait)
            .await?;
        Ok(led.map(|(held, term)| Leadership {
            election: self.clone(),
            guard: Some(LockGuard::new(held)),
            term,
            value,
        }))
    }

    /// The current leader, or `None` when nobody leads (nobody campaigned, the leader
    /// resigned, or its lease ran out: a crashed leader stops being reported when its
    /// lease ends).
    ///
    /// # Examples
    /// See the example on [`campaign`](Self::campaign).
    pub async fn leader(&self) -> Result<Option<Leader>> {
        self.check()?;
        let leader = self.client.engine.election_leader(&self.name).await?;
        Ok(leader.map(leader_of))
    }

    /// Watches the election: the [`Observer`] returns every change made after this call
    /// returns, each once and in order (see [`Observer::next`]), and
    /// [`Observer::leader`] tells who led when it started. It waits for changes with
    /// pub/sub, without polling.
    ///
    /// A leader whose lease runs out (its process died) logs nothing: the next
    /// leader's [`ChangeKind::Elected`] follows, with a greater term.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{ChangeKind, Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let election = client.election("scheduler");
    /// let mut observer = election.observe().await?;
    /// assert!(observer.leader().is_none()); // who led when it started: nobody
    /// let mut leading = election.campaign("a").await?;
    /// leading.proclaim("b").await?; // a new value, same term
    /// assert_eq!(leading.value(), "b");
    /// let term = leading.term();
    /// leading.resign().await?;
    /// let seen: Vec<_> = [
    ///     observer.next().await?, observer.next().await?, observer.next().await?,
    /// ].into_iter().map(|c| (c.kind, c.term, c.value)).collect();
    /// assert_eq!(seen, [
    ///     (ChangeKind::Elected, term, "a".to_string()),
    ///     (ChangeKind::Proclaimed, term, "b".to_string()),
    ///     (ChangeKind::Resigned, term, "b".to_string()),
    /// ]);
    ///
    /// // The same changes as a Stream, for StreamExt's combinators.
    /// use futures_util::StreamExt;
    /// let changes = election.observe().await?.into_stream();
    /// election.campaign("c").await?.resign().await?;
    /// let kinds: Vec<ChangeKind> = changes.take(2).map(|c| c.unwrap().kind).collect().await;
    /// assert_eq!(kinds, [ChangeKind::Elected, ChangeKind::Resigned]);
    /// # Ok(()) }) }
    /// ```
    pub async fn observe(&self) -> Result<Observer> {
        self.check()?;
        let (watch, leader) = self.client.engine.election_watch(&self.name).await?;
        Ok(Observer {
            election: self.clone(),
            watch,
            leader: leader.map(leader_of),
        })
    }
}

fn leader_of(c: Current) -> Leader {
    Leader {
        term: c.term,
        value: c.value,
        holder: c.holder,
        lease_left: u64::try_from(c.pttl_ms).ok().map(Duration::from_millis),
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name)
            .finish()
    }
}

/// This process leads an election, in one term. Dropping it resigns (in the
/// background); [`resign`](Self::resign) does it now and reports errors.
///
/// The term is a fencing token: pass it with every write the leader makes, and let the
/// storage refuse terms older than the newest it saw, so a leader that was paused
/// past its lease (and replaced) cannot overwrite its successor's work. Data in the
/// same Redis can be guarded without that: see [`guard`](Self::guard).
///
/// # Examples
/// See the examples on [`Election::campaign`] and [`Leadership::lost`].
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    election: Election,
    guard: Option<LockGuard>,
    term: u64,
    value: String,
}

impl Leadership {
    fn guard_ref(&self) -> &LockGuard {
        self.guard.as_ref().expect("present until resigned")
    }

    /// The term: the fencing token of this leader's lock, greater than every earlier
    /// leader's term of this election.
    ///
    /// # Examples
    /// See the example on [`Election::campaign`].
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The value this leader advertises now.
    ///
    /// # Examples
    /// See the example on [`Election::campaign`].
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The election's name.
    ///
    /// # Examples
    /// See the example on [`Election::campaign`].
    pub fn name(&self) -> &str {
        &self.election.name
    }

    /// The holder id this leader's lock is held with.
    ///
    /// # Examples
    /// See the example on [`Election::campaign`].
    pub fn holder(&self) -> &str {
        self.guard_ref().holder()
    }

    /// The guard of the election's lock: for writes guarded by the leadership, and for
    /// [`LockGuard::valid_until`].
    ///
    /// # Examples
    /// See the example on [`Election::campaign`].
    pub fn guard(&self) -> &LockGuard {
        self.guard_ref()
    }

    /// Cancelled when the leadership is known lost (the lock's
    /// [`lost`](LockGuard::lost)): stop acting as leader.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config, LostReason};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let election = client.election("scheduler");
    /// let leading = election.campaign("a").await?;
    /// assert!(leading.at_risk().borrow().is_none()); // renewals succeed: no deadline to stop by
    /// assert!(leading.lost_reason().is_none());
    /// client.fenced_lock(election.lock_name()).force_unlock().await?; // an operator steps in
    /// leading.lost().cancelled().await;
    /// assert!(matches!(leading.lost_reason(), Some(LostReason::ForceUnlocked)));
    /// # Ok(()) }) }
    /// ```
    pub fn lost(&self) -> CancellationToken {
        self.guard_ref().lost()
    }

    /// Why the leadership was lost, once [`lost`](Self::lost) fired.
    ///
    /// # Examples
    /// See the example on [`lost`](Self::lost).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.guard_ref().lost_reason()
    }

    /// `Some(end)` while the lock's renewals fail on a majority
    /// ([`LockGuard::at_risk`]): stop leading before `end`.
    ///
    /// # Examples
    /// See the example on [`lost`](Self::lost).
    pub fn at_risk(&self) -> tokio::sync::watch::Receiver<Option<Instant>> {
        self.guard_ref().at_risk()
    }

    /// Advertises a new value, in the same term (no new election); observers see a
    /// [`ChangeKind::Proclaimed`].
    ///
    /// # Errors
    /// [`Error::NotHeld`] when this process no longer leads (its lease ran out or the
    /// lock was broken); a master's error.
    ///
    /// # Examples
    /// See the example on [`Election::observe`].
    pub async fn proclaim(&mut self, value: impl Into<String>) -> Result<()> {
        let value = value.into();
        let guard = self.guard_ref();
        let engine = &self.election.client.engine;
        let leader = (guard.holder(), self.term);
        let name = &self.election.name;
        let done = (engine.election_proclaim(name, leader, &value, Event::Proclaimed)).await?;
        if !done {
            return Err(Error::NotHeld {
                name: self.election.lock_name(),
                holder: guard.holder().to_string(),
            });
        }
        self.value = value;
        Ok(())
    }

    /// Steps down: the record goes, observers see [`ChangeKind::Resigned`], the lock is
    /// released and the next campaigner is elected.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the leadership was lost before; a master's error.
    ///
    /// # Examples
    /// See the example on [`Election::campaign`].
    pub async fn resign(mut self) -> Result<()> {
        let guard = self.guard.take().expect("present until resigned");
        let engine = &self.election.client.engine;
        (engine.election_step_down(&self.election.name, guard.into_held(), self.term)).await
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the guard's own drop releases the lock
        };
        let engine = self.election.client.engine.clone();
        let (name, term) = (self.election.name.clone(), self.term);
        let step_down = async move {
            if let Err(e) = engine
                .election_step_down(&name, guard.into_held(), term)
                .await
            {
                tracing::debug!(election = %name, error = %e, "resigning on drop failed");
            }
        };
        self.election
            .client
            .engine
            .spawn_cleanup(step_down, &runtime);
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("name", &self.election.name)
            .field("term", &self.term)
            .field("value", &self.value)
            .finish()
    }
}

/// Watches an election ([`Election::observe`]): each change once, in order.
///
/// # Examples
/// See the example on [`Election::observe`].
pub struct Observer {
    election: Election,
    watch: Watch,
    leader: Option<Leader>,
}

impl Observer {
    /// Who led when the observer started (`None`: nobody).
    ///
    /// # Examples
    /// See the example on [`Election::observe`].
    pub fn leader(&self) -> Option<&Leader> {
        self.leader.as_ref()
    }

    /// The next change, waiting for it as long as it takes (without polling: a message
    /// on the election's channel wakes it). Changes come in the order they were made,
    /// each once; only the newest ~1000 are kept in Redis, so an observer that stops
    /// calling `next` for longer than that many changes misses the oldest.
    ///
    /// # Errors
    /// A master's error (unreachable, timed out): call again to go on from the same
    /// place.
    ///
    /// # Cancel safety
    /// Cancel safe: a change is consumed only when returned.
    ///
    /// # Examples
    /// See the example on [`Election::observe`].
    pub async fn next(&mut self) -> Result<Change> {
        let e = self.watch.next(&self.election.client.engine).await?;
        Ok(Change {
            kind: match e.event {
                Event::Elected => ChangeKind::Elected,
                Event::Proclaimed => ChangeKind::Proclaimed,
                Event::Resigned => ChangeKind::Resigned,
            },
            term: e.term,
            value: e.value,
            id: e.id,
        })
    }
}

impl Observer {
    /// The changes as a [`Stream`](futures_util::Stream) (each [`next`](Self::next) in
    /// turn), for `StreamExt` combinators; it ends after the first error.
    ///
    /// # Examples
    /// See the example on [`Election::observe`].
    pub fn into_stream(self) -> impl futures_util::Stream<Item = Result<Change>> + Send {
        futures_util::stream::unfold(Some(self), |observer| async move {
            let mut observer = observer?;
            match observer.next().await {
                Ok(change) => Some((Ok(change), Some(observer))),
                Err(e) => Some((Err(e), None)),
            }
        })
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("name", &self.election.name)
            .finish()
    }
}
