//! `redlatch::blocking`: the same locks for synchronous code, held per thread, guards
//! released before `drop` returns. Plain `#[test]`s: no async runtime of our own.

use redlatch_testkit as common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::RedisServer;
use redlatch::blocking::Client;
use redlatch::{Config, Error, LostReason};

fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).unwrap()
}

#[test]
fn one_thread_reenters_and_drop_releases_at_once() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("blocking:reentrant");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());
    assert_eq!(outer.holder(), inner.holder());
    assert!(outer.holder().starts_with(&client.id().to_string()));
    assert!(lock.remaining_ttl().unwrap().is_some());
    inner.unlock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 1);
    drop(outer);
    // No eventually: the release happened before drop returned.
    assert!(!lock.is_locked().unwrap());
    assert_eq!(server.cmd::<i64>(&["EXISTS", "blocking:reentrant"]), 0);
    assert_eq!(client.held_locks(), 0);
}

#[test]
fn another_thread_waits_for_the_holder() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("blocking:contended");
    let guard = lock.lock().unwrap();
    let (tx, rx) = mpsc::channel();
    let other = thread::spawn({
        let lock = lock.clone();
        move || {
            // A different thread is a different holder.
            assert!(!lock.is_held_by_current_thread().unwrap());
            assert!(lock.try_lock(Duration::from_millis(50)).unwrap().is_none());
            // Noted before the main thread hears from us: it holds on for 100 ms
            // after that, so this lock() waits at least as long, however late it runs.
            let started = Instant::now();
            tx.send(()).unwrap();
            let guard = lock.lock().unwrap();
            let waited = started.elapsed();
            assert_eq!(lock.hold_count().unwrap(), 1);
            drop(guard);
            waited
        }
    });
    rx.recv().unwrap();
    thread::sleep(Duration::from_millis(100));
    drop(guard);
    let waited = other.join().unwrap();
    assert!(waited >= Duration::from_millis(100), "{waited:?}");
    assert!(!lock.is_locked().unwrap());
}

#[test]
fn the_watchdog_renews_while_the_thread_is_busy() {
    let server = RedisServer::start();
    // Renewed every 0.3 s: a loaded machine may delay a renewal by 0.6 s.
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(900));
    let client = Client::connect(config).unwrap();
    let lock = client.lock("blocking:watchdog");
    let guard = lock.lock().unwrap();
    // The calling thread is busy (not in any redlatch call) for several leases.
    thread::sleep(Duration::from_millis(2700));
    assert!(!guard.is_lost());
    assert!(lock.is_locked().unwrap());
    // Deleting the key makes the watchdog report the lock lost.
    server.cmd::<i64>(&["DEL", "blocking:watchdog"]);
    assert!(common::eventually(Duration::from_secs(5), || guard.is_lost()));
    assert!(guard.unlock().unwrap_err().is_not_held());
}

#[test]
fn leases_fencing_fair_and_force_unlock() {
    let server = RedisServer::start();
    let client = client(&server);

    let leased = client.lock("blocking:leased");
    let guard = leased
        .try_lock_with_lease(Duration::ZERO, Duration::from_millis(200))
        .unwrap()
        .expect("free");
    assert!(guard.validity() <= Duration::from_millis(200));
    assert!(common::eventually(Duration::from_secs(5), || !leased
        .is_locked()
        .unwrap()));
    // Dropping a guard whose lease ran out is quiet: nothing to release.
    drop(guard);

    let fenced = client.fenced_lock("blocking:fenced");
    let first = fenced.lock().unwrap().fencing_token().unwrap();
    let second = fenced
        .lock_with_lease(Duration::from_secs(5))
        .unwrap()
        .fencing_token()
        .unwrap();
    assert!(second > first, "{first} then {second}");

    let fair = client.fair_lock("blocking:fair");
    let held = fair.lock().unwrap();
    assert_eq!(fair.status().unwrap()[0].holders.len(), 1);
    assert!(fair.force_unlock().unwrap());
    assert!(common::eventually(Duration::from_secs(5), || held.is_lost()));
    drop(held);
    assert!(!fair.is_locked().unwrap());
}

#[test]
fn errors_are_typed() {
    let server = RedisServer::start();
    let client = client(&server);
    server.cmd::<String>(&["SET", "blocking:string", "x"]);
    let err = client.lock("blocking:string").lock().unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err}");
    let err = client.lock("").lock().unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err}");

    let port = server.port();
    drop(server);
    let config = Config::single(format!("redis://127.0.0.1:{port}"))
        .connect_timeout(Duration::from_millis(500));
    let err = Client::connect(config).unwrap_err();
    assert!(err.is_unavailable(), "{err}");
}

#[test]
fn a_guard_dropped_inside_a_runtime_is_released_in_the_background() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("blocking:in-runtime");
    let guard = lock.lock().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move { drop(guard) });
    assert!(common::eventually(Duration::from_secs(5), || !lock
        .is_locked()
        .unwrap()));
    client.close(Duration::from_secs(1));
}

/// Every blocking call made inside a tokio runtime fails with a typed error naming
/// redlatch and the remedy instead of tokio's generic panic ("Cannot start a runtime
/// from within a runtime"), on both kinds of runtime; the client keeps working outside
/// it, and `close` inside one closes in the background.
#[test]
fn blocking_calls_inside_a_runtime_fail_with_the_remedy_not_a_panic() {
    let server = RedisServer::start();
    let client = client(&server);
    let lock = client.lock("blocking:inside");
    let guard = lock.lock().unwrap();
    let check = |what: &str, err: Error| {
        assert!(matches!(err, Error::Runtime { .. }), "{what}: {err:?}");
        let text = err.to_string();
        for needle in [
            "redlatch::blocking",
            "tokio runtime",
            "async API",
            "spawn_blocking",
        ] {
            assert!(text.contains(needle), "{what}: {text}");
        }
    };
    for multi in [false, true] {
        let rt = if multi {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        }
        .unwrap();
        rt.block_on(async {
            check(
                "connect",
                Client::connect(Config::single(server.url())).unwrap_err(),
            );
            check("lock", lock.lock().unwrap_err());
            check("try_lock", lock.try_lock(Duration::ZERO).unwrap_err());
            check("is_locked", lock.is_locked().unwrap_err());
            let sem = client.semaphore("blocking:inside-sem");
            check("try_acquire", sem.try_acquire(Duration::ZERO).unwrap_err());
        });
    }
    // Outside again: the same client and guard work.
    assert!(lock.is_locked().unwrap());
    guard.unlock().unwrap();
    assert!(!lock.is_locked().unwrap());
    let rt = waiter();
    let guard = lock.lock().unwrap();
    let unlocked = rt.block_on(async move { guard.unlock() });
    check("unlock", unlocked.unwrap_err());
    rt.block_on(async move { client.close(Duration::from_secs(1)) });
    // The guard whose unlock was refused was dropped with it: released in the
    // background, and the client closed after its release (close waits for it).
    let fresh = Client::connect(Config::single(server.url())).unwrap();
    let lock = fresh.lock("blocking:inside");
    assert!(common::eventually(Duration::from_secs(5), || !lock
        .is_locked()
        .unwrap()));
    fresh.close(Duration::from_secs(1));
}

/// A runtime of the test's own, to wait on a guard's tokens and watch from a plain
/// thread (and to ask for a release from an async client).
fn waiter() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `fut` on `rt` for at most `bound`; `None` if it did not finish.
fn within<F: std::future::Future>(
    rt: &tokio::runtime::Runtime,
    bound: Duration,
    fut: F,
) -> Option<F::Output> {
    rt.block_on(async { tokio::time::timeout(bound, fut).await.ok() })
}

#[test]
fn a_blocking_guard_is_at_risk_while_renewals_fail_and_clears_after_one_counts() {
    let server = RedisServer::start();
    // Renewed every 3 s, each renewal waiting at most 3 s: a paused master is flagged
    // at most 6 s after the last renewal that counted, well inside the 9 s validity.
    let lease = Duration::from_secs(9);
    let client = Client::connect(Config::single(server.url()).watchdog_timeout(lease)).unwrap();
    let guard = client.lock("blocking:risk").lock().unwrap();
    let mut risk = guard.at_risk();
    assert_eq!(*risk.borrow(), None, "at risk before any failure");
    let rt = waiter();
    server.pause();
    let flagged = within(&rt, 2 * lease, risk.wait_for(|r| r.is_some()));
    let flagged = flagged.is_some_and(|r| r.is_ok());
    let (end, lost) = (*risk.borrow(), guard.is_lost());
    server.resume();
    assert!(flagged, "never at risk");
    assert!(!lost, "lost before at risk: {:?}", guard.lost_reason());
    let end = end.expect("at risk with the end of its validity");
    assert!(end <= Instant::now() + lease);
    // The master answers again: the watchdog's next round renews and clears it.
    let cleared = within(&rt, 2 * lease, risk.wait_for(|r| r.is_none()));
    assert!(
        cleared.is_some(),
        "still at risk after the master came back"
    );
    assert!(!guard.is_lost() && guard.lost_reason().is_none());
    guard.unlock().unwrap();
}

#[test]
fn blocking_guards_say_why_they_were_lost_and_hear_release_requests() {
    let server = RedisServer::start();
    let client = client(&server);
    let rt = waiter();
    let fired = |token: tokio_util::sync::CancellationToken| {
        within(&rt, Duration::from_secs(5), token.cancelled_owned()).is_some()
    };
    let lock = client.lock("blocking:lost");
    let guard = lock.lock().unwrap();
    assert!(guard.lost_reason().is_none());
    let revoke = guard.revoke_requested();
    let asked = rt.block_on(async {
        let other = redlatch::Client::connect(Config::single(server.url())).await?;
        other.lock("blocking:lost").request_release().await
    });
    assert_eq!(asked.unwrap().holders, [guard.holder()]);
    assert!(fired(revoke), "the release request was not heard");
    assert!(lock.force_unlock().unwrap());
    assert!(fired(guard.lost()));
    assert!(matches!(
        guard.lost_reason(),
        Some(LostReason::ForceUnlocked)
    ));
    assert!(guard.unlock().unwrap_err().is_not_held());

    // A multi-lock's guard: the reason of the part that was lost.
    let multi = client
        .multi_lock(["blocking:m1", "blocking:m2"])
        .lock()
        .unwrap();
    assert_eq!(*multi.at_risk().borrow(), None);
    assert!(client.lock("blocking:m2").force_unlock().unwrap());
    assert!(fired(multi.lost()));
    assert!(matches!(
        multi.lost_reason(),
        Some(LostReason::ForceUnlocked)
    ));
    drop(multi);
    assert!(!client.lock("blocking:m1").is_locked().unwrap());

    // Permits: an expiring one has the lock's shape; a counting one has no lease.
    let sem = client.permit_expirable_semaphore("blocking:permits");
    assert!(sem.try_set_permits(1).unwrap());
    let permit = sem.acquire().unwrap();
    assert_eq!(permit.holder(), permit.id());
    assert!(permit.lost_reason().is_none() && permit.at_risk().borrow().is_none());
    assert!(permit.validity() > Duration::ZERO && !permit.is_lost());
    permit.release().unwrap();
    let counting = client.semaphore("blocking:counting");
    assert!(counting.try_set_permits(1).unwrap());
    let taken = counting.acquire().unwrap();
    assert_eq!(taken.validity(), Duration::MAX);
    assert!(!taken.is_lost() && taken.lost_reason().is_none());
    assert!(taken.at_risk().borrow().is_none());
    drop(taken);
    assert_eq!(counting.available().unwrap(), 1);
}
