//! Semaphores (Redisson RSemaphore, RPermitExpirableSemaphore) and the count-down latch
//! (RCountDownLatch): limits never exceeded under contention, wake-ups without polling,
//! cancel safety, expiring permits of dead holders, refusal under Redlock, bad input.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config, Error};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_never_lets_more_than_its_permits_in() {
    let server = RedisServer::start();
    let setup = client(&server).await;
    assert!(setup.semaphore("limit").try_set_permits(3).await.unwrap());
    let (inside, max) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = client(&server).await;
        for t in 0..4u32 {
            let s = client.semaphore("limit");
            let (inside, max) = (inside.clone(), max.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..10 {
                    let n = 1 + i64::from(t % 2);
                    let permit = s.acquire_many(n).await.unwrap();
                    let now = inside.fetch_add(n, Ordering::SeqCst) + n;
                    max.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 3, "{now} permits in use out of 3");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(n, Ordering::SeqCst);
                    permit.release().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert!(max.load(Ordering::SeqCst) >= 2, "never concurrent");
    assert_eq!(setup.semaphore("limit").available().await.unwrap(), 3);
}

#[tokio::test]
async fn semaphore_waiters_wake_on_release_without_polling() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let s = a.semaphore("wake");
    s.set_permits(0).await.unwrap();
    let waiting = {
        let s = b.semaphore("wake");
        tokio::spawn(async move {
            s.acquire_many(2).await.unwrap().forget();
            Instant::now()
        })
    };
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_sc:{wake}"
        ) == 1)
        .await
    );
    // Its attempt after subscribing has landed (quiet for 500 ms), however late.
    let before = common::settled_calls(&server, &["evalsha", "get"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        calls(&server, "evalsha") + calls(&server, "get") - before,
        0,
        "the waiter polled"
    );
    s.release().await.unwrap(); // not enough yet
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished());
    let released = Instant::now();
    s.release().await.unwrap();
    let at = waiting.await.unwrap();
    assert!(at.duration_since(released) < Duration::from_secs(5));
    assert_eq!(s.available().await.unwrap(), 0);
    assert!(
        eventually_async(Duration::from_secs(2), || numsub(
            &server,
            "redisson_sc:{wake}"
        ) == 0)
        .await
    );
}

#[tokio::test]
async fn a_cancelled_acquire_takes_no_permit() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let s = client.semaphore("cancel");
    s.set_permits(0).await.unwrap();
    for delay_us in [0u64, 50, 200, 1000, 5000, 50_000] {
        let s2 = s.clone();
        let t = tokio::spawn(async move { s2.acquire().await.map(|p| p.forget()) });
        tokio::time::sleep(Duration::from_micros(delay_us)).await;
        s.release().await.unwrap(); // races with the cancellation
        t.abort();
        let taken = matches!(t.await, Ok(Ok(())));
        if taken {
            s.release().await.unwrap(); // the task finished: give its permit back
        }
        assert!(
            eventually_async(Duration::from_secs(2), || server
                .cmd::<i64>(&["GET", "cancel"])
                == 1)
            .await,
            "a permit was lost by a cancelled acquire"
        );
        s.try_acquire(Duration::ZERO)
            .await
            .unwrap()
            .unwrap()
            .forget();
    }
    assert!(
        eventually_async(Duration::from_secs(2), || numsub(
            &server,
            "redisson_sc:{cancel}"
        ) == 0)
        .await
    );
}

#[tokio::test]
async fn semaphore_set_add_and_bad_input() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let s = client.semaphore("sem");
    assert_eq!(s.available().await.unwrap(), 0);
    assert!(s.try_acquire(Duration::ZERO).await.unwrap().is_none());
    assert!(s.try_set_permits(2).await.unwrap());
    assert!(!s.try_set_permits(5).await.unwrap());
    s.add_permits(3).await.unwrap();
    s.add_permits(-1).await.unwrap();
    assert_eq!(s.available().await.unwrap(), 4);
    assert!(s
        .try_acquire_many(5, Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    let four = s.try_acquire_many(4, Duration::ZERO).await.unwrap();
    four.unwrap().forget();
    s.acquire_many(0).await.unwrap().release().await.unwrap();
    assert_eq!(s.available().await.unwrap(), 0);
    s.set_permits(7).await.unwrap();
    assert_eq!(server.cmd::<String>(&["GET", "sem"]), "7");

    let err = client.semaphore("").acquire().await.unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err:?}");
    let _: i64 = server.cmd(&["HSET", "hash", "f", "1"]);
    let err = client
        .semaphore("hash")
        .try_acquire(Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let _: () = server.cmd(&["SET", "text", "abc"]);
    let err = client
        .semaphore("text")
        .try_acquire(Duration::ZERO)
        .await
        .unwrap_err();
    assert!(err.is_permanent(), "{err:?}");
    let x = client.permit_expirable_semaphore("xs");
    for lease in [Duration::ZERO, Duration::from_secs(400 * 86_400)] {
        let err = x.acquire_with_lease(lease).await.unwrap_err();
        assert!(matches!(err, Error::InvalidLease(_)), "{err:?}");
    }
    assert!(matches!(
        x.release("nope").await,
        Err(Error::InvalidName(_))
    ));
    let err = client
        .count_down_latch("hash")
        .count_down()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_permits_limit_concurrency_across_clients() {
    let server = RedisServer::start();
    let setup = client(&server).await;
    setup
        .permit_expirable_semaphore("x")
        .set_permits(2)
        .await
        .unwrap();
    let (inside, max) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = client(&server).await;
        for _ in 0..3 {
            let s = client.permit_expirable_semaphore("x");
            let (inside, max) = (inside.clone(), max.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..8 {
                    let p = s.acquire().await.unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 2, "{now} permits held out of 2");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    p.release().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
    let x = setup.permit_expirable_semaphore("x");
    assert_eq!(x.available().await.unwrap(), 2);
    assert_eq!(x.acquired().await.unwrap(), 0);
}

#[tokio::test]
async fn a_dead_holders_permit_expires_and_its_waiter_gets_it() {
    let server = RedisServer::start();
    let (dead, live) = (client(&server).await, client(&server).await);
    let s = dead.permit_expirable_semaphore("die");
    s.set_permits(1).await.unwrap();
    let p = s
        .acquire_with_lease(Duration::from_millis(500))
        .await
        .unwrap();
    std::mem::forget(p);
    // The waiter sleeps until the permit is due, not until a message that never comes.
    let started = Instant::now();
    let got = live
        .permit_expirable_semaphore("die")
        .try_acquire(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(got.is_some());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn watchdog_permits_are_renewed_and_reported_lost_when_gone() {
    let server = RedisServer::start();
    // Renewed every 0.5 s: a loaded machine may delay a renewal by a second.
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(config).await.unwrap();
    let s = client.permit_expirable_semaphore("kept");
    s.set_permits(1).await.unwrap();
    let p = s.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(!p.lost().is_cancelled());
    assert_eq!(
        s.acquired().await.unwrap(),
        1,
        "the watchdog let the permit expire"
    );
    // Someone releases it by id (an operator): the watchdog finds it gone.
    assert!(s.release(p.id()).await.unwrap());
    let lost = p.lost();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .is_ok()
    );
    assert!(p.release().await.unwrap_err().is_not_held());
    assert_eq!(
        s.available().await.unwrap(),
        1,
        "given back once, not twice"
    );
}

#[tokio::test]
async fn expirable_waiters_wake_without_polling_and_cancel_cleanly() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let s = a.permit_expirable_semaphore("xw");
    s.set_permits(1).await.unwrap();
    let held = s.acquire().await.unwrap();
    let waiting = {
        let s = b.permit_expirable_semaphore("xw");
        tokio::spawn(async move { s.acquire().await.map(|p| p.id().to_string()) })
    };
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_sc:{xw}"
        ) == 1)
        .await
    );
    // Its attempt after subscribing has landed (quiet for 500 ms), however late.
    let before = common::settled_calls(&server, &["evalsha"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(calls(&server, "evalsha") - before, 0, "the waiter polled");
    held.release().await.unwrap();
    let id = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(id.len(), 32);
    // Cancelled waits take nothing.
    let s = b.permit_expirable_semaphore("xw");
    let held = s.acquire().await.unwrap();
    for delay_ms in [0u64, 1, 5, 50] {
        let s2 = s.clone();
        let t = tokio::spawn(async move { s2.acquire().await.map(drop) });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        t.abort();
        let _ = t.await;
    }
    held.release().await.unwrap();
    assert!(
        eventually_async(Duration::from_secs(3), || numsub(
            &server,
            "redisson_sc:{xw}"
        ) == 0)
        .await
    );
    assert_eq!(s.available().await.unwrap(), 1);
}

#[tokio::test]
async fn a_latch_wakes_every_waiter_at_zero_without_polling() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let l = a.count_down_latch("go");
    assert!(l.try_set_count(3).await.unwrap());
    assert!(!l.try_set_count(1).await.unwrap());
    let mut waiters = Vec::new();
    for i in 0..3 {
        let l = b.count_down_latch("go");
        waiters.push(tokio::spawn(async move {
            // One unbounded wait (Redisson's await()) beside timed ones.
            let done = match i {
                0 => l.wait().await.map(|()| true),
                _ => l.wait_timeout(Duration::from_secs(30)).await,
            };
            (done, Instant::now())
        }));
    }
    let channel = "redisson_countdownlatch__channel__{go}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    // Their attempts after subscribing have landed (quiet for 500 ms), however late.
    let before = common::settled_calls(&server, &["get", "evalsha"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        calls(&server, "get") + calls(&server, "evalsha") - before,
        0,
        "waiters polled"
    );
    assert_eq!(l.count_down().await.unwrap(), 2);
    assert_eq!(l.count_down().await.unwrap(), 1);
    assert_eq!(l.count().await.unwrap(), 1);
    let zero = Instant::now();
    assert_eq!(l.count_down().await.unwrap(), 0);
    for w in waiters {
        let (done, at) = w.await.unwrap();
        assert!(done.unwrap());
        assert!(at.duration_since(zero) < Duration::from_secs(5));
    }
    assert_eq!(server.cmd::<i64>(&["EXISTS", "go"]), 0);
    assert!(
        l.try_set_count(1).await.unwrap(),
        "reusable after reaching zero"
    );
    assert!(!b
        .count_down_latch("go")
        .wait_timeout(Duration::from_millis(100))
        .await
        .unwrap());
}

#[tokio::test]
async fn counters_are_refused_under_redlock_with_a_typed_error() {
    let servers = common::start_many(3);
    let client = Client::connect(common::redlock::config(&servers))
        .await
        .unwrap();
    let err = client
        .semaphore("s")
        .try_acquire(Duration::ZERO)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    assert!(err.is_permanent());
    let err = client
        .permit_expirable_semaphore("s")
        .acquire()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    let err = client.count_down_latch("l").count_down().await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    for s in &servers {
        assert_eq!(s.dbsize(), 0);
    }
}

/// A master that restarts while a counter waits is an outage, tried again within the
/// wait as a lock's waiter does (docs/guarantees.md, "Bounds"): the semaphore's
/// `try_acquire`, the expirable semaphore's and the latch's `wait_timeout` each get
/// what the restarted master then offers, instead of failing at the first refused
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_wait_rides_out_a_restarting_master() {
    let mut server = RedisServer::start();
    let c = client(&server).await;
    // Used once before the fault: connections open, scripts loaded.
    assert!(c.semaphore("warm").try_set_permits(1).await.unwrap());
    assert!(c
        .semaphore("warm")
        .try_acquire(Duration::ZERO)
        .await
        .unwrap()
        .is_some());
    server.kill();
    let wait = Duration::from_secs(5);
    let started = Instant::now();
    let (sem, permits, latch) = (
        c.semaphore("after"),
        c.permit_expirable_semaphore("after-x"),
        c.count_down_latch("after-latch"),
    );
    let waits = async {
        tokio::join!(
            sem.try_acquire(wait),
            permits.try_acquire(wait),
            latch.wait_timeout(wait)
        )
    };
    let restart = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        tokio::task::block_in_place(|| server.restart());
        // What the waiters find once the master is back: permits to take; the latch
        // was never set, so it is open.
        assert!(c.semaphore("after").try_set_permits(1).await.unwrap());
        assert!(permits.try_set_permits(1).await.unwrap());
    };
    let ((sem, taken, opened), ()) = tokio::join!(waits, restart);
    let took = started.elapsed();
    assert!(sem.unwrap().is_some(), "the semaphore's wait failed");
    assert!(
        taken.unwrap().is_some(),
        "the expirable semaphore's wait failed"
    );
    assert!(opened.unwrap(), "the latch's wait failed");
    assert!(took <= wait + Duration::from_secs(2), "took {took:?}");
}
