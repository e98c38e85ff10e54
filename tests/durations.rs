//! Every public API that takes a `Duration`, with every kind of duration: zero, one
//! nanosecond, sub-millisecond, ordinary, the 30-day limit and just past it, and
//! `Duration::MAX`, plus random ones. None may panic; each either works or returns a
//! typed error (issue 11, defect 4).

mod common;

use std::time::Duration;

use common::RedisServer;
use redlatch::{Client, Config, Error, MAX_LEASE};

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

fn ok_or_typed<T: std::fmt::Debug>(what: &str, d: Duration, r: &redlatch::Result<T>) {
    if let Err(e) = r {
        assert!(
            e.is_timeout()
                || matches!(
                    e,
                    Error::InvalidLease(_)
                        | Error::Config(_)
                        | Error::NoQuorum { .. }
                        | Error::Timeout { .. }
                ),
            "{what}({d:?}): unexpected error {e}"
        );
    }
}

#[tokio::test]
async fn lock_apis_accept_or_refuse_every_duration() {
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let other = Client::connect(Config::single(server.url())).await.unwrap();
    let busy = other.lock("durations:busy").lock().await.unwrap();
    let free = client.lock("durations:free");
    let taken = client.lock("durations:busy");
    for d in durations() {
        // A free lock: acquired at once or refused as an invalid lease.
        let r = free.lock_with_lease(d).await;
        ok_or_typed("lock_with_lease", d, &r);
        assert_eq!(
            r.is_ok(),
            (Duration::from_millis(10)..=MAX_LEASE).contains(&d)
        );
        drop(r);
        let r = free.try_lock(d).await;
        assert!(
            r.as_ref().unwrap().is_some(),
            "try_lock({d:?}) of a free lock"
        );
        drop(r);
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
}

#[tokio::test]
async fn config_durations_are_validated_or_saturated() {
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
        ];
        for (what, config) in configs {
            let client = Client::connect(config).await;
            ok_or_typed(what, d, &client);
            let Ok(client) = client else { continue };
            let lock = client.lock("durations:config");
            let guard = lock.try_lock(Duration::from_millis(100)).await;
            ok_or_typed(what, d, &guard);
            drop(guard);
            client.close(d.min(Duration::from_secs(1))).await;
        }
    }
}

/// `unavailable_timeout(MAX)` with the only master paused: `try_lock` returns the
/// outage's error within its wait and `lock()` keeps retrying, neither panics.
#[tokio::test]
async fn an_outage_with_an_unbounded_unavailable_timeout() {
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
}
