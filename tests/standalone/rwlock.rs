//! The read-write lock (Redisson RReadWriteLock layout): sharing and exclusion under
//! contention, reentrancy, downgrade, refused upgrade, wake-ups without polling, leases of
//! dead holders, the watchdog, cancel safety, writer preference and bad input.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config, Error};

mod leases;
mod redlock;

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn exists(server: &RedisServer, key: &str) -> bool {
    server.cmd::<i64>(&["EXISTS", key]) == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_a_writer_excludes_everyone_across_clients() {
    let server = RedisServer::start();
    // Bit layout of `state`: readers in the low 32 bits, writers above.
    let state = Arc::new(AtomicI64::new(0));
    let (max_readers, reads, writes) = (
        Arc::new(AtomicI64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut tasks = Vec::new();
    for c in 0..3 {
        let client = client(&server).await;
        for t in 0..4 {
            let rw = client.read_write_lock("shared");
            let (state, max_readers) = (state.clone(), max_readers.clone());
            let (reads, writes) = (reads.clone(), writes.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..12 {
                    let write = (c + t + i) % 4 == 0;
                    if write {
                        let g = rw.write().lock().await.unwrap();
                        let before = state.fetch_add(1 << 32, Ordering::SeqCst);
                        assert_eq!(before, 0, "a writer entered while {before:#x} held");
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        state.fetch_sub(1 << 32, Ordering::SeqCst);
                        g.unlock().await.unwrap();
                        writes.fetch_add(1, Ordering::Relaxed);
                    } else {
                        let g = rw.read().lock().await.unwrap();
                        let before = state.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(before >> 32, 0, "a reader entered while a writer held");
                        max_readers.fetch_max(before + 1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        state.fetch_sub(1, Ordering::SeqCst);
                        g.unlock().await.unwrap();
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    assert_eq!(
        reads.load(Ordering::Relaxed) + writes.load(Ordering::Relaxed),
        144
    );
    assert!(writes.load(Ordering::Relaxed) > 0);
    assert!(
        max_readers.load(Ordering::SeqCst) > 1,
        "readers never overlapped: the read lock serialised them"
    );
    assert!(eventually_async(Duration::from_secs(5), || !exists(&server, "shared")).await);
}

#[tokio::test]
async fn the_layout_is_redissons_hash_fields_and_per_hold_timeout_keys() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let rw = client.read_write_lock("layout");
    let r1 = rw.read().lock().await.unwrap();
    let r2 = r1.scope(rw.read().lock()).await.unwrap();
    let reader = r1.holder().to_string();
    assert_eq!(r2.holder(), reader);
    assert_eq!(server.cmd::<String>(&["HGET", "layout", "mode"]), "read");
    assert_eq!(server.cmd::<i64>(&["HGET", "layout", &reader]), 2);
    for n in 1..=2 {
        let key = format!("{{layout}}:{reader}:rwlock_timeout:{n}");
        let ttl: i64 = server.cmd(&["PTTL", &key]);
        assert!(ttl > 0, "{key} has no lease: {ttl}");
    }
    r2.unlock().await.unwrap();
    assert!(!exists(
        &server,
        &format!("{{layout}}:{reader}:rwlock_timeout:2")
    ));
    assert!(exists(
        &server,
        &format!("{{layout}}:{reader}:rwlock_timeout:1")
    ));
    r1.unlock().await.unwrap();
    assert!(!exists(&server, "layout"));

    let w = rw.write().lock().await.unwrap();
    assert!(w.holder().ends_with(":write"), "{}", w.holder());
    assert!(w.holder().starts_with(&format!("{}:", client.id())));
    assert_eq!(server.cmd::<String>(&["HGET", "layout", "mode"]), "write");
    assert_eq!(server.cmd::<i64>(&["HGET", "layout", w.holder()]), 1);
    w.unlock().await.unwrap();
    let keys: Vec<String> = server.lock_keys("*");
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test]
async fn reentry_downgrade_and_a_refused_upgrade() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let rw = client.read_write_lock("grade");
    let (read, write) = (rw.read(), rw.write());

    let w1 = write.lock().await.unwrap();
    let w2 = w1.scope(write.lock()).await.unwrap();
    assert_eq!(write.hold_count().await.unwrap(), 2);
    assert_eq!(w2.holder(), w1.holder());
    // Downgrade: in the writer's scope, reading is allowed; outside it, it waits.
    assert!(read.try_lock(Duration::ZERO).await.unwrap().is_none());
    let r = w1.scope(read.lock()).await.unwrap();
    assert_eq!(format!("{}:write", r.holder()), w1.holder());
    w2.unlock().await.unwrap();
    w1.unlock().await.unwrap();
    assert_eq!(server.cmd::<String>(&["HGET", "grade", "mode"]), "read");
    assert!(read.is_locked().await.unwrap());
    assert!(!write.is_locked().await.unwrap());
    // Another client may read now, not write.
    let other = Client::connect(Config::single(server.url())).await.unwrap();
    let shared = other.read_write_lock("grade");
    let g = shared.read().try_lock(Duration::ZERO).await.unwrap();
    assert!(g.is_some());
    drop(g);
    assert!(shared
        .write()
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());

    // An upgrade is refused at once, not a self-deadlock.
    let started = Instant::now();
    let err = r.scope(write.lock()).await.unwrap_err();
    assert!(
        matches!(&err, Error::Upgrade { name } if name == "grade"),
        "{err:?}"
    );
    assert!(err.is_permanent());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(r
        .scope(write.try_lock(Duration::from_secs(1)))
        .await
        .is_err());
    // Outside the reader's scope, the write lock is another holder: it waits.
    assert!(write.try_lock(Duration::ZERO).await.unwrap().is_none());
    r.unlock().await.unwrap();
    let w = write.try_lock(Duration::from_secs(5)).await.unwrap();
    assert!(w.is_some(), "free after the read lock went");
}

#[tokio::test]
async fn a_write_unlock_wakes_every_waiting_reader_without_polling() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let w = a.read_write_lock("wake").write().lock().await.unwrap();
    let mut readers = Vec::new();
    for _ in 0..4 {
        let read = b.read_write_lock("wake").read();
        readers.push(tokio::spawn(async move {
            let g = read.lock().await.unwrap();
            let at = Instant::now();
            tokio::time::sleep(Duration::from_millis(300)).await; // all hold at once
            g.unlock().await.unwrap();
            at
        }));
    }
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_rwlock:{wake}"
        ) == 1)
        .await
    );
    // Their attempts after subscribing have landed (quiet for 500 ms), however late.
    let before = common::settled_calls(&server, &["evalsha"]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        calls(&server, "evalsha") - before,
        0,
        "waiting readers polled Redis"
    );
    let released = Instant::now();
    w.unlock().await.unwrap();
    for r in readers {
        let at = r.await.unwrap();
        // The lease (30 s) is the only other way out.
        assert!(at.duration_since(released) < Duration::from_secs(5));
    }
    assert!(
        eventually_async(Duration::from_secs(2), || numsub(
            &server,
            "redisson_rwlock:{wake}"
        ) == 0)
        .await
    );
}

#[tokio::test]
async fn a_read_unlock_wakes_a_waiting_writer() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let r = a.read_write_lock("rw-wake").read().lock().await.unwrap();
    let write = b.read_write_lock("rw-wake").prefer_writers(false).write();
    let waiter = tokio::spawn(async move {
        let g = write.lock().await.unwrap();
        let at = Instant::now();
        g.unlock().await.unwrap();
        at
    });
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_rwlock:{rw-wake}"
        ) == 1)
        .await
    );
    // Its attempt after subscribing has landed (quiet for 500 ms), however late.
    let before = common::settled_calls(&server, &["evalsha"]).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        calls(&server, "evalsha") - before,
        0,
        "the writer polled Redis"
    );
    let released = Instant::now();
    r.unlock().await.unwrap();
    let at = waiter.await.unwrap();
    assert!(at.duration_since(released) < Duration::from_secs(5));
}

/// Two readers that relay the read lock: a reader takes a new hold only while the
/// other holds, then tells it to let go of its own and take the next one, so some
/// reader always holds the lock while new read holds are granted. One that hears
/// nothing for `patience` (the other cannot get a new hold) lets go. Runs until `stop`.
fn relaying_readers(
    rw: redlatch::ReadWriteLock,
    stop: Arc<std::sync::atomic::AtomicBool>,
    patience: Duration,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (a_tx, a_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let (b_tx, b_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    [(true, a_rx, b_tx), (false, b_rx, a_tx)]
        .into_iter()
        .map(|(first, mut mine, other)| {
            let (read, stop) = (rw.read(), stop.clone());
            tokio::spawn(async move {
                let mut held = None;
                if first {
                    held = Some(read.lock().await.unwrap());
                    let _ = other.send(());
                }
                for _ in 0..20_000 {
                    let turn = tokio::time::timeout(patience, mine.recv()).await;
                    if let Some(g) = held.take() {
                        g.unlock().await.unwrap();
                    }
                    match turn {
                        Ok(Some(())) if !stop.load(Ordering::Relaxed) => {
                            held = Some(read.lock().await.unwrap());
                            let _ = other.send(());
                        }
                        Ok(_) => break,
                        Err(_) => {}
                    }
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_is_not_starved_by_a_steady_stream_of_readers() {
    let server = RedisServer::start();
    let (readers, writer) = (client(&server).await, client(&server).await);
    let patience = Duration::from_secs(1);
    // Redisson's semantics: the readers' relay keeps the writer out (what the writer
    // preference below prevents).
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay = relaying_readers(
        readers.read_write_lock("starve").prefer_writers(false),
        stop.clone(),
        patience,
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let starved = (writer
        .read_write_lock("starve")
        .prefer_writers(false)
        .write())
    .try_lock(Duration::from_secs(2))
    .await
    .unwrap();
    assert!(
        starved.is_none(),
        "without writer preference the relay should keep the writer out"
    );
    stop.store(true, Ordering::Relaxed);
    for r in relay {
        r.await.unwrap();
    }
    // With it (the default), new read holds wait behind the waiting writer: the relay
    // breaks after `patience` and the writer gets in.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay = relaying_readers(readers.read_write_lock("starve"), stop.clone(), patience);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let w = (writer.read_write_lock("starve").write())
        .try_lock(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the writer got in although readers kept coming");
    w.unlock().await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in relay {
        r.await.unwrap();
    }
    assert!(
        eventually_async(Duration::from_secs(5), || !exists(
            &server,
            "redlatch_rwlock_writers:{starve}"
        ))
        .await
    );
}

#[tokio::test]
async fn cancelled_waits_leave_no_hold_intent_or_subscription() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let r = a.read_write_lock("cancel").read().lock().await.unwrap();
    // A waiting writer, cancelled at several points of its wait.
    for delay_ms in [0u64, 1, 5, 20, 200] {
        let write = b.read_write_lock("cancel").write();
        let waiting = tokio::spawn(async move { write.lock().await.map(drop) });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        waiting.abort();
        let _ = waiting.await;
    }
    assert!(
        eventually_async(Duration::from_secs(5), || {
            !exists(&server, "redlatch_rwlock_writers:{cancel}")
                && numsub(&server, "redisson_rwlock:{cancel}") == 0
        })
        .await,
        "a cancelled writer left its intent or subscription"
    );
    // New readers are not kept out by a writer that left.
    let r2 = b
        .read_write_lock("cancel")
        .read()
        .try_lock(Duration::ZERO)
        .await
        .unwrap();
    assert!(r2.is_some());
    drop(r2);
    r.unlock().await.unwrap();
    // A waiting reader, cancelled likewise while a writer holds.
    let w = a.read_write_lock("cancel").write().lock().await.unwrap();
    for delay_ms in [0u64, 1, 5, 20, 200] {
        let read = b.read_write_lock("cancel").read();
        let waiting = tokio::spawn(async move { read.lock().await.map(drop) });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        waiting.abort();
        let _ = waiting.await;
    }
    assert!(
        eventually_async(Duration::from_secs(5), || numsub(
            &server,
            "redisson_rwlock:{cancel}"
        ) == 0)
        .await
    );
    w.unlock().await.unwrap();
    assert!(
        eventually_async(Duration::from_secs(5), || {
            let keys: Vec<String> = server.lock_keys("*");
            keys.is_empty()
        })
        .await
    );
}

#[tokio::test]
async fn bad_input_is_typed() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let err = client.read_write_lock("").read().lock().await.unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err:?}");
    let huge = "x".repeat(redlatch::MAX_NAME_LEN + 1);
    let err = client
        .read_write_lock(huge)
        .write()
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err:?}");
    let rw = client.read_write_lock("bad");
    for lease in [Duration::ZERO, Duration::from_secs(400 * 86_400)] {
        let err = rw.read().lock_with_lease(lease).await.unwrap_err();
        assert!(matches!(err, Error::InvalidLease(_)), "{err:?}");
        let err = rw.write().lock_with_lease(lease).await.unwrap_err();
        assert!(matches!(err, Error::InvalidLease(_)), "{err:?}");
    }
    let _: () = server.cmd(&["SET", "bad", "text"]);
    let err = rw.read().lock().await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let err = rw.write().try_lock(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    assert!(matches!(
        rw.read().is_locked().await,
        Err(Error::WrongType { .. })
    ));
    assert_eq!(server.cmd::<String>(&["GET", "bad"]), "text");
}
