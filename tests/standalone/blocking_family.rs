//! `redlatch::blocking` for the rest of the family: the read-write lock, the
//! multi-lock, both semaphores and the latch, used from plain threads of several
//! clients; limits and exclusion never broken, guards given back before `drop`
//! returns (and in the background when dropped inside a runtime).

use redlatch_testkit as common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::RedisServer;
use redlatch::blocking::{Client, MultiLock};
use redlatch::{Config, Error};

fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).unwrap()
}

/// Counts what is inside; panics when `limit` is passed. Returns the most seen.
#[derive(Default, Clone)]
struct Inside(Arc<(AtomicI64, AtomicI64)>);

impl Inside {
    fn enter(&self, n: i64, limit: i64) {
        let now = self.0 .0.fetch_add(n, Ordering::SeqCst) + n;
        self.0 .1.fetch_max(now, Ordering::SeqCst);
        assert!(now <= limit, "{now} inside out of {limit}");
    }
    fn leave(&self, n: i64) {
        self.0 .0.fetch_sub(n, Ordering::SeqCst);
    }
    fn most(&self) -> i64 {
        self.0 .1.load(Ordering::SeqCst)
    }
}

#[test]
fn a_blocking_semaphore_limits_the_threads_of_two_clients() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    assert!(clients[0].semaphore("b:sem").try_set_permits(3).unwrap());
    let inside = Inside::default();
    thread::scope(|s| {
        for (i, c) in clients.iter().cycle().take(6).enumerate() {
            let (sem, inside) = (c.semaphore("b:sem"), inside.clone());
            s.spawn(move || {
                for round in 0..8i64 {
                    let n = 1 + (i as i64 + round) % 2;
                    let permit = sem.acquire_many(n).unwrap();
                    inside.enter(n, 3);
                    thread::sleep(Duration::from_millis(2));
                    inside.leave(n);
                    drop(permit); // given back before drop returns
                }
            });
        }
    });
    assert!(inside.most() >= 2, "never concurrent");
    // No eventually: every guard gave its permits back before its drop returned.
    assert_eq!(server.cmd::<String>(&["GET", "b:sem"]), "3");
    let sem = clients[1].semaphore("b:sem");
    sem.acquire().unwrap().forget();
    assert_eq!(sem.drain_permits().unwrap(), 2);
    assert!(sem
        .try_acquire(Duration::from_millis(20))
        .unwrap()
        .is_none());
    assert!(sem.release_if_exists(3).unwrap());
    let err = sem.acquire_many(-1).unwrap_err();
    assert!(matches!(err, Error::InvalidCount(_)), "{err:?}");
}

#[test]
fn blocking_expirable_permits_limit_threads_and_come_back_on_drop() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let setup = clients[0].permit_expirable_semaphore("b:xs");
    assert!(setup.try_set_permits(3).unwrap());
    let inside = Inside::default();
    thread::scope(|s| {
        for (i, c) in clients.iter().cycle().take(4).enumerate() {
            let (sem, inside) = (c.permit_expirable_semaphore("b:xs"), inside.clone());
            s.spawn(move || {
                for round in 0..6i64 {
                    let n = 1 + (i as i64 + round) % 2;
                    let permits = match round % 3 {
                        0 => sem.acquire_many(n).unwrap(),
                        1 => sem
                            .acquire_many_with_lease(n, Duration::from_secs(30))
                            .unwrap(),
                        _ => sem
                            .try_acquire_many(n, Duration::from_secs(60))
                            .unwrap()
                            .expect("permits within a minute"),
                    };
                    assert_eq!(permits.len() as i64, n);
                    inside.enter(n, 3);
                    thread::sleep(Duration::from_millis(2));
                    inside.leave(n);
                    if round % 2 == 0 {
                        drop(permits);
                    } else {
                        let ids: Vec<&str> = permits.iter().map(|p| p.id()).collect();
                        assert!(sem.release_many(&ids).unwrap());
                        drop(permits); // already given back: quiet
                    }
                }
            });
        }
    });
    assert!(inside.most() >= 2, "never concurrent");
    assert_eq!(
        (setup.available().unwrap(), setup.acquired().unwrap()),
        (3, 0)
    );
    let p = setup.acquire_with_lease(Duration::from_secs(5)).unwrap();
    assert!(setup
        .update_lease_time(p.id(), Duration::from_secs(60))
        .unwrap());
    assert!(setup.lease_time(p.id()).unwrap().unwrap() > Duration::from_secs(5));
    assert_eq!(setup.permits().unwrap(), 3);
    p.release().unwrap();
    assert_eq!(setup.acquired().unwrap(), 0);
}

#[test]
fn a_blocking_latch_is_a_barrier_for_threads() {
    let server = RedisServer::start();
    let (a, b) = (client(&server), client(&server));
    let latch = a.count_down_latch("b:gate");
    latch.wait().unwrap(); // not set: open
    assert!(latch.try_set_count(3).unwrap());
    assert!(!latch.wait_timeout(Duration::from_millis(30)).unwrap());
    let counted = AtomicI64::new(0);
    thread::scope(|s| {
        for _ in 0..3 {
            let (l, counted) = (b.count_down_latch("b:gate"), &counted);
            s.spawn(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                l.count_down().unwrap();
            });
        }
        latch.wait().unwrap();
        // Open only once every thread counted down.
        assert_eq!(counted.load(Ordering::SeqCst), 3);
    });
    assert_eq!(latch.count().unwrap(), 0);
    let err = latch.try_set_count(-1).unwrap_err();
    assert!(matches!(err, Error::InvalidCount(_)), "{err:?}");
}

#[test]
fn blocking_readers_share_and_writers_exclude_across_threads() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let (readers, writers) = (Inside::default(), Inside::default());
    thread::scope(|s| {
        for (i, c) in clients.iter().cycle().take(6).enumerate() {
            let rw = c.read_write_lock("b:rw");
            let (readers, writers) = (readers.clone(), writers.clone());
            s.spawn(move || {
                for _ in 0..6 {
                    if i % 3 == 0 {
                        let w = rw.write().lock().unwrap();
                        writers.enter(1, 1);
                        assert_eq!(readers.0 .0.load(Ordering::SeqCst), 0, "read while written");
                        thread::sleep(Duration::from_millis(2));
                        writers.leave(1);
                        drop(w);
                    } else {
                        let r = rw.read().lock().unwrap();
                        readers.enter(1, 4);
                        assert_eq!(writers.0 .0.load(Ordering::SeqCst), 0, "written while read");
                        thread::sleep(Duration::from_millis(2));
                        readers.leave(1);
                        drop(r);
                    }
                }
            });
        }
    });
    assert_eq!(server.cmd::<i64>(&["EXISTS", "b:rw"]), 0);
}

#[test]
fn a_blocking_multi_lock_excludes_overlapping_sets() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let names = ["b:m1", "b:m2", "b:m3"];
    let inside: Vec<Inside> = names.iter().map(|_| Inside::default()).collect();
    thread::scope(|s| {
        for (i, c) in clients.iter().cycle().take(3).enumerate() {
            let set = [i, (i + 1) % 3];
            let m = c.multi_lock(set.map(|k| names[k]));
            let inside = &inside;
            s.spawn(move || {
                for round in 0..6 {
                    let guard = if round % 2 == 0 {
                        m.lock().unwrap()
                    } else {
                        m.try_lock(Duration::from_secs(60))
                            .unwrap()
                            .expect("within a minute")
                    };
                    set.iter().for_each(|&k| inside[k].enter(1, 1));
                    thread::sleep(Duration::from_millis(2));
                    set.iter().for_each(|&k| inside[k].leave(1));
                    drop(guard); // both released before drop returns
                }
            });
        }
    });
    for name in names {
        assert_eq!(server.cmd::<i64>(&["EXISTS", name]), 0);
    }
    // Mixed kinds, held by this thread; a part broken shows on the guard.
    let c = &clients[0];
    let m = MultiLock::new([c.fair_lock("b:f"), c.read_write_lock("b:rw2").write()]);
    let guard = m.lock().unwrap();
    assert_eq!(guard.names(), ["b:f", "b:rw2"]);
    c.fair_lock("b:f").force_unlock().unwrap();
    assert!(guard.unlock().unwrap_err().is_not_held());
    assert_eq!(server.cmd::<i64>(&["EXISTS", "b:rw2"]), 0);
}

#[test]
fn family_guards_dropped_inside_a_runtime_are_given_back_in_the_background() {
    let server = RedisServer::start();
    let client = client(&server);
    let sem = client.semaphore("b:rt");
    sem.set_permits(1).unwrap();
    let xs = client.permit_expirable_semaphore("b:rtx");
    xs.set_permits(1).unwrap();
    let (permit, xpermit) = (sem.acquire().unwrap(), xs.acquire().unwrap());
    let multi = client.multi_lock(["b:rt1", "b:rt2"]).lock().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        drop((permit, xpermit, multi)); // no panic: released on the client's runtime
    });
    assert!(common::eventually(Duration::from_secs(5), || {
        server.cmd::<String>(&["GET", "b:rt"]) == "1"
            && server.cmd::<i64>(&["ZCARD", "{b:rtx}:timeout"]) == 0
            && server.cmd::<i64>(&["EXISTS", "b:rt1"]) == 0
    }));
}

/// Every blocking getter and mirror the doc examples no longer run reaches its async
/// namesake: the lock kinds, the semaphores' remaining calls, the client's getters.
#[test]
fn the_blocking_mirrors_reach_their_async_namesakes() {
    let server = RedisServer::start();
    let client = client(&server);
    assert_eq!(client.masters().len(), 1);
    assert_eq!(client.config().urls().len(), 1);
    assert_eq!(client.as_async().id(), client.id());
    let backoff = redlatch::BackOff::constant(Duration::from_millis(5)).unwrap();
    let kinds = [
        (client.spin_lock("m:spin"), redlatch::Kind::Spin),
        (
            client.spin_lock_with("m:spin2", backoff),
            redlatch::Kind::Spin,
        ),
        (
            client.non_reentrant_lock("m:nr"),
            redlatch::Kind::NonReentrant,
        ),
        (
            client.non_reentrant_fair_lock("m:nrf"),
            redlatch::Kind::NonReentrantFair,
        ),
    ];
    for (lock, kind) in kinds {
        assert_eq!(lock.kind(), kind);
        let guard = lock.lock().unwrap();
        let busy = thread::scope(|s| s.spawn(|| lock.try_lock(Duration::ZERO)).join().unwrap());
        assert!(busy.unwrap().is_none(), "{} not held", lock.name());
        drop(guard);
        assert!(!lock.is_locked().unwrap());
    }
    let rw = client.read_write_lock("m:rw").prefer_writers(false);
    assert!(!rw.prefers_writers());
    let group = client.faster_multi_lock("m:group", ["a", "b"]).unwrap();
    let held = group.lock_with_lease(Duration::from_secs(5)).unwrap();
    assert!(group.is_held_by_current_thread().unwrap());
    assert!(group.remaining_ttl().unwrap().is_some());
    assert!(group.force_unlock().unwrap());
    assert!(held.unlock().unwrap_err().is_not_held());

    let sem = client.semaphore("m:sem");
    assert!(sem
        .try_set_permits_with_ttl(1, Duration::from_secs(30))
        .unwrap());
    sem.add_permits(1).unwrap();
    sem.acquire_many(2).unwrap().forget();
    sem.release().unwrap();
    assert_eq!(sem.available().unwrap(), 1);
    let expiring = client.permit_expirable_semaphore("m:xsem");
    assert!(expiring.try_set_permits(2).unwrap());
    let lease = Duration::from_secs(5);
    let one = expiring
        .try_acquire_with_lease(Duration::ZERO, lease)
        .unwrap();
    let rest = expiring
        .try_acquire_many_with_lease(1, Duration::ZERO, lease)
        .unwrap();
    assert_eq!(rest.as_ref().map(Vec::len), Some(1));
    assert!(expiring
        .try_acquire_many_with_lease(1, Duration::ZERO, lease)
        .unwrap()
        .is_none());
    assert!(one.unwrap().validity() <= lease); // dropped here: given back
    drop(rest);
    assert_eq!(expiring.available().unwrap(), 2);
}
