//! Every public API that takes a `Duration`, with every kind of duration: zero, one
//! nanosecond, sub-millisecond, ordinary, the 30-day limit and just past it, and
//! `Duration::MAX`, plus random ones. None may panic; each either works or returns a
//! typed error (issue 11, defect 4). A panic counts wherever it happens: in the test's
//! own task or in one the library spawned (a release sent from a guard's drop), which
//! tokio would otherwise swallow ([`no_panics`]).

use redlatch_testkit as common;

use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use common::RedisServer;
use redlatch::{BackOff, Client, Config, Error, SyncReplicas, MAX_LEASE};

/// Panics in this file's tests, counted per test thread by a hook installed before any
/// test runs its calls: a spawned task's panic is caught by tokio and would pass unseen.
/// Per thread, so that one test's failed assertion is not counted against another's.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(name) = our_thread() {
                PANICS.lock().unwrap_or_else(|e| e.into_inner()).push(name);
            }
            previous(info);
        }));
    });
}

/// The name of the panicking thread if it runs one of this file's tests. Each is a
/// current-thread runtime, so the tasks the library spawns run on the test's own thread,
/// which the test harness names after the test (`durations::...`; `main` with one test
/// thread); the other tests of this binary panic on threads of their own.
fn our_thread() -> Option<String> {
    let ours = redlatch_testkit::test_name!("");
    let name = std::thread::current().name()?.to_string();
    (name.starts_with(&ours) || name == "main").then_some(name)
}

/// Fails if anything panicked so far on this test's thread (the hook's output above
/// names where).
fn no_panics() {
    let me = our_thread();
    let panics = PANICS.lock().unwrap_or_else(|e| e.into_inner());
    let mine = panics.iter().filter(|t| Some(*t) == me.as_ref()).count();
    assert_eq!(mine, 0, "a panic happened (see above)");
}

/// The edge cases, then random durations across the whole range of magnitudes.
fn durations() -> Vec<Duration> {
    let mut all = vec![
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
        Duration::from_millis(1),
        Duration::from_millis(10),
        Duration::from_millis(250),
        MAX_LEASE,
        MAX_LEASE + Duration::from_nanos(1),
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ];
    for _ in 0..24 {
        let bits = rand::random_range(0..=127u32);
        let nanos = rand::random::<u128>() >> (128 - bits.max(1));
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        all.push(Duration::new(secs, (nanos % 1_000_000_000) as u32));
    }
    all
}

/// A bound for calls that may legitimately wait forever (a busy lock, `MAX` wait).
const PATIENCE: Duration = Duration::from_millis(150);

/// How long a call waiting `d` for a busy lock is given, and whether it must have
/// returned by then: a short wait (under 1 s) must end, its wait plus 5 s for the
/// attempt on a loaded machine (150 ms was overrun by `try_lock(143ns)` there); a
/// longer one may go on past `PATIENCE`, when only a panic or an error would be wrong.
fn patience(d: Duration) -> (Duration, bool) {
    if d < Duration::from_secs(1) {
        (d + Duration::from_secs(5), true)
    } else {
        (PATIENCE, false)
    }
}

/// Runs `call` (waiting `d`) for as long as [`patience`] gives it: it must end by then
/// if `d` is short; a long one may still be waiting, but what it returned must be
/// `Ok` or a typed error.
async fn within_patience<T: std::fmt::Debug>(
    what: &str,
    d: Duration,
    call: impl std::future::Future<Output = redlatch::Result<T>>,
) -> Option<T> {
    let (given, must_return) = patience(d);
    match tokio::time::timeout(given, call).await {
        Ok(r) => {
            ok_or_typed(what, d, &r);
            r.ok()
        }
        Err(_) => {
            assert!(!must_return, "{what}({d:?}) overran its wait");
            None
        }
    }
}

fn ok_or_typed<T: std::fmt::Debug>(what: &str, d: Duration, r: &redlatch::Result<T>) {
    if let Err(e) = r {
        assert!(
            e.is_timeout()
                || matches!(
                    e,
                    Error::InvalidLease(_)
                        | Error::Config { .. }
                        | Error::NoQuorum { .. }
                        | Error::Timeout { .. }
                ),
            "{what}({d:?}): unexpected error {e}"
        );
    }
}

#[tokio::test]
async fn lock_apis_accept_or_refuse_every_duration() {
    count_panics();
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let other = Client::connect(Config::single(server.url())).await.unwrap();
    let busy = other.lock("durations:busy").lock().await.unwrap();
    let free = client.lock("durations:free");
    let taken = client.lock("durations:busy");
    for d in durations() {
        // A free lock: acquired at once or refused as an invalid lease.
        let asked = Instant::now();
        let r = free.lock_with_lease(d).await;
        ok_or_typed("lock_with_lease", d, &r);
        assert_eq!(
            r.is_ok(),
            (Duration::from_millis(10)..=MAX_LEASE).contains(&d)
        );
        // Given back before the next call, so that it meets a free lock: a dropped
        // guard's release runs in the background and may not have landed yet (under
        // load, not within a 10 ms wait).
        // A lease as short as 10 ms may run out before the unlock under load, which
        // then finds it gone: NotHeld, and only then.
        if let Ok(g) = r
            && let Err(e) = g.unlock().await
        {
            let ran_out = asked.elapsed() >= d;
            assert!(
                e.is_not_held() && ran_out,
                "unlock after lock_with_lease({d:?}): {e}"
            );
        }
        let r = free.try_lock(d).await;
        assert!(
            r.as_ref().unwrap().is_some(),
            "try_lock({d:?}) of a free lock"
        );
        r.unwrap().unwrap().unlock().await.unwrap();
        let r = free.try_lock_with_lease(d, d).await;
        ok_or_typed("try_lock_with_lease", d, &r);
        drop(r);
        tokio::task::yield_now().await;

        // A busy lock: gives up within the wait, or waits on (no panic, no error).
        let (given, must_return) = patience(d);
        match tokio::time::timeout(given, taken.try_lock(d)).await {
            Ok(r) => assert!(r.unwrap().is_none(), "try_lock({d:?}) of a busy lock"),
            Err(_) => assert!(!must_return, "try_lock({d:?}) overran its wait"),
        }
        let leased = taken.try_lock_with_lease(d, Duration::from_secs(1));
        match tokio::time::timeout(given, leased).await {
            Ok(r) => assert!(r.unwrap().is_none()),
            Err(_) => assert!(!must_return, "try_lock_with_lease({d:?}) overran its wait"),
        }
    }
    busy.unlock().await.unwrap();
    // After all that, a MAX wait on a lock that frees up is granted.
    let guard = taken.try_lock(Duration::MAX).await.unwrap();
    assert!(guard.is_some());
    drop(guard);
    tokio::task::yield_now().await;
    no_panics();
}

#[tokio::test]
async fn config_durations_are_validated_or_saturated() {
    count_panics();
    let server = RedisServer::start();
    for d in durations() {
        let configs = [
            (
                "watchdog_timeout",
                Config::single(server.url()).watchdog_timeout(d),
            ),
            (
                "master_timeout",
                Config::single(server.url()).master_timeout(d),
            ),
            ("retry_jitter", Config::single(server.url()).retry_jitter(d)),
            (
                "connect_timeout",
                Config::single(server.url()).connect_timeout(d),
            ),
            (
                "fair_stale_timeout",
                Config::single(server.url()).fair_stale_timeout(d),
            ),
            (
                "unavailable_timeout",
                Config::single(server.url()).unavailable_timeout(d),
            ),
            (
                "fair_wait_time",
                Config::single(server.url()).fair_wait_time(d),
            ),
            (
                "sync_replicas",
                Config::single(server.url()).sync_replicas(SyncReplicas::Count(0), d),
            ),
        ];
        for (what, config) in configs {
            let client = Client::connect(config).await;
            ok_or_typed(what, d, &client);
            let Ok(client) = client else { continue };
            let lock = client.lock("durations:config");
            let guard = lock.try_lock(Duration::from_millis(100)).await;
            ok_or_typed(what, d, &guard);
            // A guard dropped, not unlocked: its release is sent by a spawned task,
            // which must not panic either (it did, on `unavailable_timeout(MAX)`).
            drop(guard);
            let fair = client.fair_lock("durations:config:fair");
            let guard = fair.try_lock(Duration::from_millis(100)).await;
            ok_or_typed(what, d, &guard);
            drop(guard);
            tokio::time::sleep(Duration::from_millis(20)).await;
            client.close(d.min(Duration::from_secs(1))).await;
        }
    }
    no_panics();
}

/// The family's resources of [`family_apis_accept_or_refuse_every_duration`], made
/// once: each free but `busy_multi`, `busy` (a lock `other` holds) and `led`.
struct Family {
    client: Client,
    semaphore: redlatch::Semaphore,
    expirable: redlatch::PermitExpirableSemaphore,
    latch: redlatch::CountDownLatch,
    multi: redlatch::MultiLock,
    busy_multi: redlatch::MultiLock,
    group: redlatch::FasterMultiLock,
    election: redlatch::Election,
    led: redlatch::Election,
}

const BUSY: &str = "durations:family:busy";

impl Family {
    /// Sets the resources up; `other` holds [`BUSY`] and leads `durations:family:led`
    /// for as long as the returned guards live.
    async fn new(
        client: Client,
        other: &Client,
    ) -> (Self, redlatch::LockGuard, redlatch::Leadership) {
        let busy = other.lock(BUSY).lock().await.unwrap();
        let semaphore = client.semaphore("durations:family:sem");
        semaphore.set_permits(1).await.unwrap();
        let expirable = client.permit_expirable_semaphore("durations:family:exp");
        expirable.set_permits(1).await.unwrap();
        let latch = client.count_down_latch("durations:family:latch");
        assert!(latch.try_set_count(1).await.unwrap());
        let leading = other
            .election("durations:family:led")
            .campaign("other")
            .await
            .unwrap();
        let family = Family {
            multi: client.multi_lock(["durations:family:m1", "durations:family:m2"]),
            busy_multi: client.multi_lock(["durations:family:m3", BUSY]),
            group: client
                .faster_multi_lock("durations:family:group", ["a", "b"])
                .unwrap(),
            election: client.election("durations:family:election"),
            led: client.election("durations:family:led"),
            semaphore,
            expirable,
            latch,
            client,
        };
        (family, busy, leading)
    }

    /// The semaphores: a free permit at once or refused typed, a second of one waits
    /// within its wait; a TTL, a lease and its update work or are refused typed.
    async fn semaphores(&self, d: Duration) {
        let semaphore = &self.semaphore;
        let permit = within_patience("semaphore.try_acquire", d, semaphore.try_acquire(d)).await;
        assert!(
            matches!(permit, Some(Some(_))),
            "semaphore.try_acquire({d:?}) of a free permit: {permit:?}"
        );
        // Now taken: a second one waits, within its wait.
        let held = permit.flatten();
        let r = within_patience("semaphore.try_acquire", d, semaphore.try_acquire(d)).await;
        assert!(
            matches!(r, None | Some(None)),
            "a second permit of one: {r:?}"
        );
        if let Some(p) = held {
            p.release().await.unwrap();
        }
        let r = (self.client)
            .semaphore(format!("durations:family:ttl:{}", rand::random::<u32>()))
            .try_set_permits_with_ttl(1, d)
            .await;
        ok_or_typed("try_set_permits_with_ttl", d, &r);

        let expirable = &self.expirable;
        let r = expirable.acquire_with_lease(d).await;
        ok_or_typed("acquire_with_lease", d, &r);
        if let Ok(p) = r {
            let id = p.id().to_string();
            let u = expirable.update_lease_time(&id, d).await;
            ok_or_typed("update_lease_time", d, &u);
            expirable.release(&id).await.unwrap();
        }
        let r = within_patience("expirable.try_acquire", d, expirable.try_acquire(d)).await;
        if let Some(Some(p)) = r {
            p.release().await.unwrap();
        }
    }

    /// The latch and the multi-locks: an open latch is never counted down, a free
    /// multi-lock works or is refused typed, one over a busy lock gives up.
    async fn latch_and_multi_locks(&self, d: Duration) {
        let latch = &self.latch;
        let r = within_patience("latch.wait_timeout", d, latch.wait_timeout(d)).await;
        assert!(
            r != Some(true),
            "latch.wait_timeout({d:?}) of an open latch"
        );

        let r = self.multi.lock_with_lease(d).await;
        ok_or_typed("multi.lock_with_lease", d, &r);
        drop(r);
        let r = within_patience("multi.try_lock", d, self.multi.try_lock(d)).await;
        drop(r);
        let busy_multi = &self.busy_multi;
        let r = within_patience("busy multi.try_lock", d, busy_multi.try_lock(d)).await;
        assert!(
            matches!(r, None | Some(None)),
            "a multi-lock over a busy lock: {r:?}"
        );

        let r = self.group.lock_with_lease(d).await;
        ok_or_typed("group.lock_with_lease", d, &r);
        drop(r);
        let r = within_patience("group.try_lock", d, self.group.try_lock(d)).await;
        drop(r);
    }

    /// The spin lock's back-offs over a busy lock give up; a free election is won or
    /// refused typed, a led one is not won.
    async fn spin_locks_and_elections(&self, d: Duration) {
        for backoff in [BackOff::constant(d), BackOff::exponential(d, d, 2)] {
            let Ok(backoff) = backoff else { continue };
            let spin = self.client.spin_lock_with(BUSY, backoff);
            let r = within_patience("spin try_lock", d, spin.try_lock(d)).await;
            assert!(
                matches!(r, None | Some(None)),
                "a spin lock over a busy lock: {r:?}"
            );
        }

        let election = &self.election;
        let r = within_patience("try_campaign", d, election.try_campaign("me", d)).await;
        if let Some(Some(leading)) = r {
            leading.resign().await.unwrap();
        }
        let led = &self.led;
        let r = within_patience("busy try_campaign", d, led.try_campaign("me", d)).await;
        assert!(matches!(r, None | Some(None)), "a led election: {r:?}");
    }
}

/// The rest of the family (semaphores, latch, multi-locks, the spin lock's back-off,
/// elections): a free resource's call works or is refused typed, a busy one's gives up
/// within its wait or waits on; none panics.
#[tokio::test]
async fn family_apis_accept_or_refuse_every_duration() {
    count_panics();
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let other = Client::connect(Config::single(server.url())).await.unwrap();
    let (family, _busy, _leading) = Family::new(client, &other).await;
    for d in durations() {
        family.semaphores(d).await;
        family.latch_and_multi_locks(d).await;
        family.spin_locks_and_elections(d).await;
        tokio::task::yield_now().await;
    }
    no_panics();
}

/// `unavailable_timeout(MAX)` with the only master paused: `try_lock` returns the
/// outage's error within its wait and `lock()` keeps retrying, neither panics.
#[tokio::test]
async fn an_outage_with_an_unbounded_unavailable_timeout() {
    count_panics();
    let server = RedisServer::start();
    let config = Config::single(server.url())
        .unavailable_timeout(Duration::MAX)
        .retry_jitter(Duration::from_millis(20));
    let client = Client::connect(config).await.unwrap();
    let lock = client.lock("durations:outage");
    server.pause();
    let r = lock.try_lock(Duration::from_millis(300)).await;
    assert!(r.as_ref().is_err_and(|e| e.is_unavailable()), "{r:?}");
    let waiting = tokio::time::timeout(Duration::from_millis(300), lock.lock()).await;
    assert!(waiting.is_err(), "lock() gave up during the outage");
    server.resume();
    let guard = tokio::time::timeout(Duration::from_secs(10), lock.lock()).await;
    assert!(guard.unwrap().is_ok());
    no_panics();
}
