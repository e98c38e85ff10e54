//! The faster multi-lock (Redisson `getMultiLock(group, values)`): values under one
//! hash, all or none; exclusion per value under contention; waiters woken by the
//! group's channel; cancel safety; leases, the watchdog and bad input.

use redlatch_testkit as common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::inside::Values;
use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config, Error, FasterMultiLock, MAX_GROUP_VALUES, MAX_LEASE};

mod processes;
mod redlock;

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn fields(server: &RedisServer, group: &str) -> Vec<String> {
    let mut f: Vec<String> = server.cmd(&["HKEYS", group]);
    f.sort();
    f
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn one_value_held_elsewhere_means_nothing_of_the_batch_is_taken() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let held = a
        .faster_multi_lock("g", ["b"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let before = fields(&server, "g");
    assert_eq!(
        before.len(),
        3,
        "one value: holder, expiry, count: {before:?}"
    );
    let batch = b.faster_multi_lock("g", ["a", "b", "c"]).unwrap();
    assert!(batch.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert!(batch
        .try_lock(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        fields(&server, "g"),
        before,
        "a refused batch wrote nothing"
    );
    assert!(batch.is_locked().await.unwrap(), "b is locked");
    assert!(!b
        .faster_multi_lock("g", ["a", "c"])
        .unwrap()
        .is_locked()
        .await
        .unwrap());
    held.unlock().await.unwrap();
    let g = batch
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("all free now");
    assert_eq!(fields(&server, "g").len(), 9, "three values taken");
    g.unlock().await.unwrap();
    let left: i64 = server.cmd(&["EXISTS", "g"]);
    assert_eq!(left, 0, "every value released: the group is gone");
}

#[tokio::test]
async fn the_wire_layout_is_redissons_holder_expiry_and_count_per_value() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let lock = c.faster_multi_lock("class_100", ["Jack_001"]).unwrap();
    let guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let holder = guard.holder().to_string();
    let all: HashMap<String, String> = server.cmd(&["HGETALL", "class_100"]);
    let (field, owner) = all
        .iter()
        .find(|(_, v)| **v == holder)
        .expect("a value field");
    assert_eq!(field.len(), 22, "a base64 HighwayHash-128 digest: {field}");
    let expiry: u64 = all[&format!("{field}:{holder}:expire_time")]
        .parse()
        .unwrap();
    let now = now_ms();
    assert!(expiry > now && expiry <= now + 20_000, "{expiry} vs {now}");
    assert_eq!(all[&format!("{field}:{holder}:lock_count")], "1");
    assert_eq!(owner, &holder);
    let pttl: i64 = server.cmd(&["PTTL", "class_100"]);
    assert!(
        pttl > 0 && pttl <= 20_000,
        "the group lives the lease: {pttl}"
    );
    // Re-entry in the guard's scope counts the value again, on the wire.
    let again = guard.scope(lock.lock()).await.unwrap();
    let count: String = server.cmd(&["HGET", "class_100", &format!("{field}:{holder}:lock_count")]);
    assert_eq!(count, "2");
    assert_eq!(guard.scope(lock.hold_count()).await.unwrap(), 2);
    again.unlock().await.unwrap();
    assert!(guard.scope(lock.is_held_by_current_task()).await.unwrap());
    // Guarded writes are for single locks: refused, nothing written.
    let refused = guard.guarded().set("guarded-key", "v").await;
    assert!(
        matches!(
            refused,
            Err(Error::NotHeld { .. } | Error::Unsupported { .. })
        ),
        "{refused:?}"
    );
    let written: i64 = server.cmd(&["EXISTS", "guarded-key"]);
    assert_eq!(written, 0);
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// Several clients, several tasks each, overlapping value sets of one group: no
/// value ever has two holders.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_from_several_clients_never_share_a_value() {
    let server = RedisServer::start();
    let values = ["v0", "v1", "v2", "v3", "v4"];
    let holders: Arc<Values> = Default::default();
    let mut tasks = Vec::new();
    for c in 0..3 {
        let client = client(&server).await;
        for t in 0..3usize {
            let holders = holders.clone();
            let set: Vec<&'static str> = values
                .iter()
                .copied()
                .cycle()
                .skip(c + 2 * t)
                .take(2 + t % 2)
                .collect();
            let lock = client.faster_multi_lock("contended", set.clone()).unwrap();
            tasks.push(tokio::spawn(async move {
                for _ in 0..6 {
                    let g = lock.lock().await.unwrap();
                    holders.hold(&set).await;
                    g.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("a contender never finished")
            .unwrap();
    }
    let left: i64 = server.cmd(&["EXISTS", "contended"]);
    assert_eq!(left, 0, "everything released");
}

/// Two futures of one task (join!, for_each_concurrent) are two holders.
#[tokio::test]
async fn concurrent_futures_of_one_task_exclude_each_other() {
    use futures_util::StreamExt;
    let server = RedisServer::start();
    let c = client(&server).await;
    let inside = Arc::new(parking_lot::Mutex::new(0u32));
    let sets: Vec<FasterMultiLock> = [vec!["x", "y"], vec!["y", "z"], vec!["y"]]
        .into_iter()
        .map(|s| c.faster_multi_lock("one-task", s).unwrap())
        .collect();
    futures_util::stream::iter(sets.iter().cycle().take(9))
        .for_each_concurrent(None, |lock| {
            let inside = inside.clone();
            async move {
                let g = lock.lock().await.unwrap();
                {
                    let mut n = inside.lock();
                    *n += 1;
                    assert_eq!(*n, 1, "every set shares y: one holder at a time");
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
                *inside.lock() -= 1;
                g.unlock().await.unwrap();
            }
        })
        .await;
    let (a, b) = (&sets[0], &sets[2]);
    let first = a.lock().await.unwrap();
    let (second, _) = tokio::join!(b.try_lock(Duration::from_millis(100)), async {});
    assert!(
        second.unwrap().is_none(),
        "a sibling future is another holder"
    );
    first.unlock().await.unwrap();
}

/// Dropping a waiting `lock()` leaves nothing of it behind, even when its attempt was
/// in flight.
#[tokio::test]
async fn a_dropped_wait_leaves_no_value_held() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let holding = a
        .faster_multi_lock("cancel", ["b"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let batch = b.faster_multi_lock("cancel", ["a", "b", "c"]).unwrap();
    for ms in [0, 1, 5, 20, 60] {
        let r = tokio::time::timeout(Duration::from_millis(ms), batch.lock()).await;
        assert!(r.is_err(), "b is held: the wait cannot end");
    }
    holding.unlock().await.unwrap();
    assert!(
        eventually_async(Duration::from_secs(10), || {
            server.cmd::<i64>(&["EXISTS", "cancel"]) == 0
        })
        .await,
        "left behind: {:?}",
        fields(&server, "cancel")
    );
    // Nothing of b's is left: the batch can be taken and is then the only holder.
    let g = batch.try_lock(Duration::ZERO).await.unwrap().expect("free");
    assert_eq!(fields(&server, "cancel").len(), 9);
    g.unlock().await.unwrap();
}

/// A waiter sleeps until the release's message: no attempts while it waits, and the
/// release wakes it long before the holder's lease would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_by_the_release_message_not_by_polling() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let holding = a
        .faster_multi_lock("wake", ["x", "y"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    let lock = b.faster_multi_lock("wake", ["y"]).unwrap();
    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| (g, lock)) });
    assert!(
        eventually_async(Duration::from_secs(10), || {
            numsub(&server, "redisson_lock__channel:{wake}") >= 1
        })
        .await
    );
    // Subscribed: the waiter's next attempt is at most one away.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = calls(&server, "evalsha") + calls(&server, "eval");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let after = calls(&server, "evalsha") + calls(&server, "eval");
    assert_eq!(after, before, "the waiter sent nothing while it waited");
    holding.unlock().await.unwrap();
    // The holder's lease (the 30 s watchdog timeout) is far away: only the message
    // can end the wait in time.
    let (guard, _lock) = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
}

/// A holder that never releases (dead) frees its values when its lease ends.
#[tokio::test]
async fn a_dead_holders_values_are_free_after_its_lease() {
    let server = RedisServer::start();
    let b = client(&server).await;
    let lock = b.faster_multi_lock("dead", ["x", "y"]).unwrap();
    // A Redisson process that died holding y: its entry, as Redisson writes it.
    let probe = lock.try_lock(Duration::ZERO).await.unwrap().unwrap();
    let mine: HashMap<String, String> = server.cmd(&["HGETALL", "dead"]);
    let holder = probe.holder().to_string();
    probe.unlock().await.unwrap();
    let y = mine
        .keys()
        .filter(|k| k.len() == 22)
        .nth(1)
        .unwrap()
        .clone();
    let ends = (now_ms() + 600).to_string();
    let _: i64 = server.cmd(&[
        "HSET",
        "dead",
        &y,
        "dead-jvm:7",
        &format!("{y}:dead-jvm:7:expire_time"),
        &ends,
        &format!("{y}:dead-jvm:7:lock_count"),
        "1",
    ]);
    assert!(
        lock.try_lock(Duration::ZERO).await.unwrap().is_none(),
        "held until its lease ends"
    );
    let guard = tokio::time::timeout(Duration::from_secs(10), lock.lock())
        .await
        .expect("free after the lease")
        .unwrap();
    let all: HashMap<String, String> = server.cmd(&["HGETALL", "dead"]);
    assert!(
        !all.keys().any(|k| k.contains("dead-jvm")),
        "the dead holder's entry is gone: {all:?}"
    );
    assert_ne!(guard.holder(), holder);
    guard.unlock().await.unwrap();
}

/// The watchdog keeps every value past the lease; a value taken away makes the guard
/// lost.
#[tokio::test]
async fn the_watchdog_keeps_the_values_past_the_lease_and_reports_a_loss() {
    let server = RedisServer::start();
    // Renewed every 0.3 s (each renewal call bounded by that too): a loaded machine
    // may delay renewals by 0.6 s and the lease still holds. At 600 ms, 0.4 s of
    // delayed or slow renewals lost it, though this test is not about latency.
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(900));
    let a = Client::connect(config).await.unwrap();
    let b = client(&server).await;
    let lock = a.faster_multi_lock("kept", ["x", "y"]).unwrap();
    let guard = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2700)).await;
    assert!(!guard.lost().is_cancelled());
    let other = b.faster_multi_lock("kept", ["y"]).unwrap();
    assert!(
        other.try_lock(Duration::ZERO).await.unwrap().is_none(),
        "still held past three leases"
    );
    // Someone force-unlocks y: the next renewal finds it gone.
    assert!(other.force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(10), guard.lost().cancelled())
        .await
        .expect("reported lost");
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn bad_input_is_typed() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let none: [&str; 0] = [];
    assert!(matches!(
        c.faster_multi_lock("g", none),
        Err(Error::InvalidCount(_))
    ));
    let e = c.faster_multi_lock("g", ["a", "b", "a"]).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidCount(m) if m.contains("value 2") && m.contains("value 0")),
        "{e}"
    );
    let many: Vec<String> = (0..=MAX_GROUP_VALUES).map(|i| i.to_string()).collect();
    assert!(matches!(
        c.faster_multi_lock("g", &many),
        Err(Error::InvalidCount(_))
    ));
    assert!(c.faster_multi_lock("g", &many[..MAX_GROUP_VALUES]).is_ok());
    assert!(matches!(
        c.faster_multi_lock("", ["a"]),
        Err(Error::InvalidName(_))
    ));
    let lock = c.faster_multi_lock("g", ["a"]).unwrap();
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        MAX_LEASE + Duration::from_secs(1),
    ] {
        assert!(
            matches!(
                lock.lock_with_lease(lease).await,
                Err(Error::InvalidLease(_))
            ),
            "{lease:?}"
        );
    }
    let _: () = server.cmd(&["SET", "string-key", "x"]);
    let wrong = c.faster_multi_lock("string-key", ["a"]).unwrap();
    assert!(matches!(
        wrong.try_lock(Duration::ZERO).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        wrong.is_locked().await,
        Err(Error::WrongType { .. })
    ));
    let left: i64 = server.cmd(&["EXISTS", "g"]);
    assert_eq!(left, 0, "nothing was taken");
    // A large batch is one script: all of it or none.
    let big = c
        .faster_multi_lock("big", &many[..MAX_GROUP_VALUES])
        .unwrap();
    let g = big.lock().await.unwrap();
    let n: i64 = server.cmd(&["HLEN", "big"]);
    assert_eq!(n as usize, 3 * MAX_GROUP_VALUES);
    g.unlock().await.unwrap();
}

/// The blocking API: held per thread (re-entered by the same thread, counted per
/// value on the wire), excluded across threads, released by a dropped guard.
#[test]
fn blocking_holds_per_thread_and_excludes_other_threads() {
    let server = RedisServer::start();
    let c = redlatch::blocking::Client::connect(Config::single(server.url())).unwrap();
    let lock = c.faster_multi_lock("blocking", ["a", "b"]).unwrap();
    let first = lock.lock().unwrap();
    let second = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    let holder = first.holder().to_string();
    let all: HashMap<String, String> = server.cmd(&["HGETALL", "blocking"]);
    let counts = all
        .iter()
        .filter(|(k, v)| k.ends_with(&format!("{holder}:lock_count")) && *v == "2");
    assert_eq!(counts.count(), 2, "each value counted twice: {all:?}");
    let other = c.faster_multi_lock("blocking", ["b", "c"]).unwrap();
    let there = std::thread::spawn(move || {
        other
            .try_lock(Duration::from_millis(100))
            .unwrap()
            .is_some()
    });
    assert!(!there.join().unwrap(), "another thread is another holder");
    drop(second);
    assert!(lock.is_held_by_current_thread().unwrap());
    drop(first);
    let left: i64 = server.cmd(&["EXISTS", "blocking"]);
    assert_eq!(left, 0, "released before drop returned");
    let none: [&str; 0] = [];
    assert!(matches!(
        c.faster_multi_lock("g", none),
        Err(Error::InvalidCount(_))
    ));
}
