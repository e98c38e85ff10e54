//! The Redisson 4.7 methods of the semaphores and the latch beyond acquire/release:
//! RSemaphore drainPermits, releaseIfExists, trySetPermits with a time to live, the
//! owned permit guard; RPermitExpirableSemaphore acquire(n) / tryAcquire(n, ..),
//! release(List) all or nothing, updateLeaseTime, getLeaseTime, setPermits, getPermits;
//! RCountDownLatch await(). Limits under contention, cancel safety, bad input.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config, Error};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn drain_release_if_exists_and_a_time_to_live() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let s = client.semaphore("sem");
    // No semaphore: drain finds nothing and creates nothing; release_if_exists too.
    assert_eq!(s.drain_permits().await.unwrap(), 0);
    assert!(!s.release_if_exists(2).await.unwrap());
    assert_eq!(server.cmd::<i64>(&["EXISTS", "sem"]), 0);
    s.set_permits(5).await.unwrap();
    assert_eq!(s.drain_permits().await.unwrap(), 5);
    assert_eq!(server.cmd::<String>(&["GET", "sem"]), "0");
    assert!(s.release_if_exists(2).await.unwrap());
    assert!(!s.release_if_exists(0).await.unwrap()); // Redisson: false for 0
    assert_eq!(s.available().await.unwrap(), 2);
    s.add_permits(-3).await.unwrap();
    assert_eq!(s.drain_permits().await.unwrap(), -1); // a negative count is drained too
    assert_eq!(s.available().await.unwrap(), 0);

    let t = client.semaphore("ttl");
    assert!(t
        .try_set_permits_with_ttl(3, Duration::from_secs(60))
        .await
        .unwrap());
    let pttl: i64 = server.cmd(&["PTTL", "ttl"]);
    assert!(pttl > 0 && pttl <= 60_000, "{pttl}");
    assert!(!t
        .try_set_permits_with_ttl(9, Duration::from_secs(60))
        .await
        .unwrap());
    t.acquire().await.unwrap().forget(); // DECRBY keeps the time to live
    assert!(server.cmd::<i64>(&["PTTL", "ttl"]) > 0);
    assert!(t
        .try_set_permits_with_ttl(1, Duration::from_millis(1))
        .await
        .is_ok_and(|set| !set));

    let gone = client.semaphore("short");
    assert!(gone
        .try_set_permits_with_ttl(1, Duration::from_millis(50))
        .await
        .unwrap());
    assert!(
        eventually_async(Duration::from_secs(5), || server
            .cmd::<i64>(&["EXISTS", "short"])
            == 0)
        .await
    );
    assert!(gone.try_set_permits(1).await.unwrap());

    // Bad input, typed, and nothing written.
    for r in [
        s.acquire_many(-1).await.map(drop),
        s.try_acquire_many(-2, Duration::ZERO).await.map(drop),
        s.release_many(-1).await,
        s.release_if_exists(-1).await.map(drop),
        s.set_permits(-1).await,
        s.try_set_permits(-1).await.map(drop),
        client
            .count_down_latch("l")
            .try_set_count(-1)
            .await
            .map(drop),
    ] {
        assert!(matches!(r, Err(Error::InvalidCount(_))), "{r:?}");
        assert!(r.unwrap_err().is_permanent());
    }
    let r = s
        .try_set_permits_with_ttl(1, Duration::from_micros(10))
        .await;
    assert!(matches!(r, Err(Error::InvalidLease(_))), "{r:?}");
    assert_eq!(server.cmd::<i64>(&["EXISTS", "l"]), 0);
}

#[tokio::test]
async fn a_permit_guard_gives_back_on_drop_and_keeps_on_forget() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let s = client.semaphore("guard");
    s.set_permits(3).await.unwrap();
    let two = s.acquire_many(2).await.unwrap();
    assert_eq!((two.permits(), two.name()), (2, "guard"));
    assert_eq!(s.available().await.unwrap(), 1);
    drop(two);
    assert!(
        eventually_async(Duration::from_secs(5), || server
            .cmd::<String>(&["GET", "guard"])
            == "3")
        .await
    );
    s.acquire().await.unwrap().forget();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        s.available().await.unwrap(),
        2,
        "a forgotten permit stays taken"
    );
    s.release().await.unwrap();
    let one = s.try_acquire(Duration::ZERO).await.unwrap().unwrap();
    one.release().await.unwrap();
    assert_eq!(s.available().await.unwrap(), 3);
    // A guard dropped at shutdown: close waits for the background release.
    let last = s.acquire_many(3).await.unwrap();
    drop(last);
    client.close(Duration::from_secs(5)).await;
    assert_eq!(server.cmd::<String>(&["GET", "guard"]), "3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_guards_never_let_more_than_the_permits_in() {
    let server = RedisServer::start();
    let setup = client(&server).await;
    assert!(setup.semaphore("limit").try_set_permits(3).await.unwrap());
    let (inside, max) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = client(&server).await;
        for t in 0..4i64 {
            let s = client.semaphore("limit");
            let (inside, max) = (inside.clone(), max.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..8 {
                    let n = 1 + t % 3;
                    let permit = s.acquire_many(n).await.unwrap();
                    let now = inside.fetch_add(n, Ordering::SeqCst) + n;
                    max.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 3, "{now} permits in use out of 3");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    // Counted out before the drop can give them back.
                    inside.fetch_sub(n, Ordering::SeqCst);
                    drop(permit);
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
    assert!(
        eventually_async(Duration::from_secs(5), || server
            .cmd::<String>(&["GET", "limit"])
            == "3")
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_expirable_permits_at_once_never_exceed_the_limit() {
    let server = RedisServer::start();
    let setup = client(&server).await;
    assert!(setup
        .permit_expirable_semaphore("xs")
        .try_set_permits(4)
        .await
        .unwrap());
    let (inside, max) = (Arc::new(AtomicI64::new(0)), Arc::new(AtomicI64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = client(&server).await;
        for t in 0..3i64 {
            let s = client.permit_expirable_semaphore("xs");
            let (inside, max) = (inside.clone(), max.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..6 {
                    let n = 1 + (t + round) % 3;
                    let permits = if round % 2 == 0 {
                        s.acquire_many(n).await.unwrap()
                    } else {
                        s.try_acquire_many_with_lease(
                            n,
                            Duration::from_secs(60),
                            Duration::from_secs(30),
                        )
                        .await
                        .unwrap()
                        .expect("permits within a minute")
                    };
                    assert_eq!(permits.len() as i64, n);
                    let now = inside.fetch_add(n, Ordering::SeqCst) + n;
                    max.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 4, "{now} permits in use out of 4");
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    inside.fetch_sub(n, Ordering::SeqCst);
                    let ids: Vec<&str> = permits.iter().map(|p| p.id()).collect();
                    assert!(s.release_many(&ids).await.unwrap());
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
    let s = setup.permit_expirable_semaphore("xs");
    assert!(
        eventually_async(Duration::from_secs(5), || server
            .cmd::<i64>(&["ZCARD", "{xs}:timeout"])
            == 0)
        .await
    );
    assert_eq!(
        (s.available().await.unwrap(), s.permits().await.unwrap()),
        (4, 4)
    );
}

#[tokio::test]
async fn expirable_many_all_or_none_and_cancel_safe() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let s = client.permit_expirable_semaphore("xm");
    s.set_permits(2).await.unwrap();
    assert!(s
        .try_acquire_many(3, Duration::from_millis(30))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        (s.available().await.unwrap(), s.acquired().await.unwrap()),
        (2, 0)
    );
    assert!(s.acquire_many(0).await.unwrap().is_empty());
    // A waiter for two is woken when the second comes back, not before.
    let first = s.acquire().await.unwrap();
    let waiting = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire_many(2).await.unwrap() })
    };
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_sc:{xm}"
        ) == 1)
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "one of two free: it must wait");
    first.release().await.unwrap();
    let two = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(two.len(), 2);
    drop(two);

    // Cancelled at any point, an acquisition of two takes none for good.
    for delay_us in [0u64, 100, 1000, 5000, 50_000] {
        assert!(
            eventually_async(Duration::from_secs(5), || server
                .cmd::<String>(&["GET", "xm"])
                == "2")
            .await
        );
        let hold = s.acquire_many(2).await.unwrap();
        let s2 = s.clone();
        let t = tokio::spawn(async move { s2.acquire_many(2).await });
        tokio::time::sleep(Duration::from_micros(delay_us)).await;
        let ids: Vec<&str> = hold.iter().map(|p| p.id()).collect();
        assert!(s.release_many(&ids).await.unwrap()); // races with the abort
        t.abort();
        if let Ok(Ok(permits)) = t.await {
            drop(permits); // it finished first: its guards give them back
        }
        drop(hold); // given back by id already: the guards find them gone, quietly
        assert!(
            eventually_async(Duration::from_secs(5), || server
                .cmd::<i64>(&["ZCARD", "{xm}:timeout"])
                == 0)
            .await,
            "a cancelled acquisition kept permits (after {delay_us} µs)"
        );
        assert_eq!(server.cmd::<String>(&["GET", "xm"]), "2");
    }
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_sc:{xm}"
        ) == 0)
        .await
    );
}

#[tokio::test]
async fn releasing_several_ids_is_all_or_nothing() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let s = a.permit_expirable_semaphore("xr");
    s.set_permits(3).await.unwrap();
    let held = s.acquire_many(3).await.unwrap();
    let ids: Vec<String> = held.iter().map(|p| p.id().to_string()).collect();
    // Another client gives back one by id: now the three cannot be released together.
    let other = b.permit_expirable_semaphore("xr");
    assert!(other.release(&ids[0]).await.unwrap());
    assert!(!other.release_many(&ids).await.unwrap());
    assert_eq!(
        server.cmd::<i64>(&["ZCARD", "{xr}:timeout"]),
        2,
        "nothing given back"
    );
    assert_eq!(s.available().await.unwrap(), 1);
    assert!(other.release_many(&ids[1..]).await.unwrap());
    assert_eq!(
        (s.available().await.unwrap(), s.acquired().await.unwrap()),
        (3, 0)
    );
    // Their guards find them gone.
    for p in held {
        assert!(p.release().await.unwrap_err().is_not_held());
    }
    // An expired permit is not held either.
    let short = s
        .acquire_many_with_lease(2, Duration::from_millis(100))
        .await
        .unwrap();
    let ids: Vec<String> = short.iter().map(|p| p.id().to_string()).collect();
    std::mem::forget(short); // their holder "dies"
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!s.release_many(&ids).await.unwrap());
    assert_eq!(s.available().await.unwrap(), 3);

    // Bad lists, typed.
    let empty: [&str; 0] = [];
    for r in [
        s.release_many(&empty).await,
        s.release_many(&[ids[0].as_str(), ids[0].as_str()]).await,
        s.release_many(&[ids[0].to_uppercase(), ids[0].clone()])
            .await,
    ] {
        assert!(matches!(r, Err(Error::InvalidCount(_))), "{r:?}");
    }
    let r = s.release_many(&["nope"]).await;
    assert!(matches!(r, Err(Error::InvalidName(_))), "{r:?}");
    let r = s
        .acquire_many(redlatch::MAX_PERMITS_PER_CALL as i64 + 1)
        .await;
    assert!(matches!(r, Err(Error::InvalidCount(_))), "{r:?}");
    let r = s.acquire_many(-1).await;
    assert!(matches!(r, Err(Error::InvalidCount(_))), "{r:?}");
}

#[tokio::test]
async fn lease_times_are_read_and_changed_by_id() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let s = client.permit_expirable_semaphore("xl");
    s.set_permits(2).await.unwrap();
    // Long enough to still run when it is read and updated, on a slow machine too.
    let first = Duration::from_secs(2);
    let p = s.acquire_with_lease(first).await.unwrap();
    let left = s.lease_time(p.id()).await.unwrap().expect("a lease");
    assert!(left <= first, "{left:?}");
    assert!(s
        .update_lease_time(p.id(), Duration::from_secs(60))
        .await
        .unwrap());
    let left = s.lease_time(p.id()).await.unwrap().unwrap();
    assert!(
        left > Duration::from_secs(50) && left <= Duration::from_secs(60),
        "{left:?}"
    );
    // Past its first lease it is still held: the update counted.
    tokio::time::sleep(first + Duration::from_millis(500)).await;
    assert_eq!(s.acquired().await.unwrap(), 1);
    // Shortened, it expires and is taken back.
    assert!(s
        .update_lease_time(p.id(), Duration::from_millis(50))
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.acquired().await.unwrap(), 0);
    assert!(s.lease_time(p.id()).await.unwrap_err().is_not_held());
    assert!(!s
        .update_lease_time(p.id(), Duration::from_secs(5))
        .await
        .unwrap());
    drop(p);
    // A Redisson permit acquired without a lease never expires on its own.
    let id = "0123456789abcdef"; // 16 raw bytes, as Redisson stores ids
    let _: i64 = server.cmd(&["DECRBY", "xl", "1"]);
    let _: i64 = server.cmd(&["ZADD", "{xl}:timeout", "922337203685477", id]);
    let hex = "30313233343536373839616263646566";
    assert_eq!(s.lease_time(hex).await.unwrap(), None);
    // Bad input, typed.
    assert!(matches!(
        s.lease_time("xyz").await,
        Err(Error::InvalidName(_))
    ));
    let r = s.update_lease_time(hex, Duration::ZERO).await;
    assert!(matches!(r, Err(Error::InvalidLease(_))), "{r:?}");
    // set_permits counts the acquired ones (Redisson setPermits): 1 acquired, 2 in all.
    s.set_permits(2).await.unwrap();
    assert_eq!(
        (s.available().await.unwrap(), s.permits().await.unwrap()),
        (1, 2)
    );
    s.set_permits(0).await.unwrap();
    assert_eq!(s.available().await.unwrap(), -1);
    assert!(s.try_acquire(Duration::ZERO).await.unwrap().is_none());
}

#[tokio::test]
async fn an_unbounded_latch_wait_returns_at_zero_and_cancels_cleanly() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let l = client.count_down_latch("gate");
    l.wait().await.unwrap(); // not set: open at once
    assert!(l.try_set_count(2).await.unwrap());
    let cancelled = {
        let l = l.clone();
        tokio::spawn(async move { l.wait().await })
    };
    let channel = "redisson_countdownlatch__channel__{gate}";
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 1).await);
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    assert!(eventually_async(Duration::from_secs(5), || numsub(&server, channel) == 0).await);
    let waiting = {
        let l = l.clone();
        tokio::spawn(async move { l.wait().await })
    };
    assert_eq!(l.count_down().await.unwrap(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    assert_eq!(l.count_down().await.unwrap(), 0);
    tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
