//! `redlatch::blocking`: the same locks for synchronous code, held per thread, guards
//! released before `drop` returns. Plain `#[test]`s: no async runtime of our own.

use redlatch_testkit as common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::RedisServer;
use redlatch::blocking::Client;
use redlatch::{Config, Error};

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
