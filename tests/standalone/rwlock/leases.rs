//! Leases and losses of read-write holds: a dead reader's or writer's hold lapses on
//! its lease alone, the watchdog renews both modes, a vanished hold key and a
//! `force_unlock` are reported lost (part of `rwlock`).

use std::time::{Duration, Instant};

use redlatch::{Client, Config};
use redlatch_testkit::{eventually_async, RedisServer};

use super::{client, exists};

#[tokio::test]
async fn a_dead_readers_hold_lapses_on_its_lease_without_cutting_the_others_short() {
    let server = RedisServer::start();
    let (dead, live) = (client(&server).await, client(&server).await);
    let g = dead
        .read_write_lock("lapse")
        .read()
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let dead_holder = g.holder().to_string();
    std::mem::forget(g); // the holder dies without releasing
    let live_guard = live.read_write_lock("lapse").read().lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!exists(
        &server,
        &format!("{{lapse}}:{dead_holder}:rwlock_timeout:1")
    ));
    assert!(live
        .read_write_lock("lapse")
        .read()
        .is_held_by_current_task()
        .await
        .is_ok());
    assert_eq!(
        server.cmd::<i64>(&["HGET", "lapse", live_guard.holder()]),
        1
    );
    assert!(!live_guard.lost().is_cancelled());
    live_guard.unlock().await.unwrap();
    // The dead reader's field does not keep the lock: its hold key is gone.
    assert!(!exists(&server, "lapse"));
    let writer = client(&server).await;
    let w = writer
        .read_write_lock("lapse")
        .write()
        .try_lock(Duration::ZERO)
        .await
        .unwrap();
    assert!(w.is_some());
}

#[tokio::test]
async fn a_dead_writer_is_freed_by_its_lease() {
    let server = RedisServer::start();
    let (dead, other) = (client(&server).await, client(&server).await);
    let g = dead
        .read_write_lock("dead-w")
        .write()
        .lock_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    std::mem::forget(g);
    let started = Instant::now();
    let r = other
        .read_write_lock("dead-w")
        .read()
        .try_lock(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(r.is_some());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn the_watchdog_renews_read_and_write_holds() {
    let server = RedisServer::start();
    // Renewed every 0.5 s: a loaded machine may delay a renewal by a second.
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(config).await.unwrap();
    let rw = client.read_write_lock("kept");
    let w = rw.write().lock().await.unwrap();
    let r = w.scope(rw.read().lock()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(!w.lost().is_cancelled() && !r.lost().is_cancelled());
    let key = format!("{{kept}}:{}:rwlock_timeout:1", r.holder());
    assert!(exists(&server, &key), "the read hold's key lapsed");
    w.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(exists(&server, &key));
    assert!(!r.lost().is_cancelled());
    r.unlock().await.unwrap();
    assert!(!exists(&server, "kept"));
}

#[tokio::test]
async fn a_read_hold_whose_key_vanished_is_reported_lost() {
    let server = RedisServer::start();
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(600));
    let client = Client::connect(config).await.unwrap();
    let r = client
        .read_write_lock("vanish")
        .read()
        .lock()
        .await
        .unwrap();
    let key = format!("{{vanish}}:{}:rwlock_timeout:1", r.holder());
    let _: i64 = server.cmd(&["DEL", &key]);
    let lost = r.lost();
    assert!(
        tokio::time::timeout(Duration::from_secs(5), lost.cancelled())
            .await
            .is_ok()
    );
    assert!(r.unlock().await.unwrap_err().is_not_held());
    // The lost hold was dropped: nothing keeps the lock.
    assert!(eventually_async(Duration::from_secs(2), || !exists(&server, "vanish")).await);
}

#[tokio::test]
async fn force_unlock_breaks_only_its_own_mode_and_reports_guards_lost() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let rw = client.read_write_lock("force");
    let w = rw.write().lock().await.unwrap();
    assert!(!rw.read().force_unlock().await.unwrap(), "not in read mode");
    assert!(!w.lost().is_cancelled());
    assert!(rw.write().force_unlock().await.unwrap());
    assert!(w.lost().is_cancelled());
    assert!(w.unlock().await.unwrap_err().is_not_held());
    let r = rw.read().lock().await.unwrap();
    assert!(rw.read().force_unlock().await.unwrap());
    assert!(r.lost().is_cancelled());
    assert!(!exists(&server, "force"));
}
