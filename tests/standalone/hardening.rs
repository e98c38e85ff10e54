//! Regression tests for the defects of the fault and bad-input campaign (issue 11):
//! one server listed twice, two fair names sharing one queue, SCRIPT FLUSH in a loop.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::RedisServer;
use redlatch::{Client, Config, Error};

/// 11.8: `localhost:P` and `127.0.0.1:P` are one server: refused by run_id, even
/// though the strings differ. Three distinct servers are accepted.
#[tokio::test]
async fn the_same_server_under_two_names_is_refused() {
    let servers = common::start_many(2);
    let (a, b) = (&servers[0], &servers[1]);
    let twice = Config::redlock([format!("redis://localhost:{}", a.port()), a.url(), b.url()]);
    let err = Client::connect(twice).await.unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("same server"), "{err}");

    let third = RedisServer::start();
    let distinct = Config::redlock([a.url(), b.url(), third.url()]);
    let client = Client::connect(distinct).await.unwrap();
    assert_eq!(client.quorum(), 2);
}

/// 11.9: fair locks `dl` and `{dl}` derive the same queue. Locking `{dl}` as a fair
/// lock is refused with a typed error at once, instead of queueing the holder of `dl`
/// behind a waiter of `dl` (a deadlock without a wait limit).
#[tokio::test]
async fn a_fair_name_sharing_another_fair_names_queue_is_refused() {
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let other = Client::connect(Config::single(server.url())).await.unwrap();
    let held = client.fair_lock("dl").lock().await.unwrap();
    let (waiter, queued) = common::fair::spawn_lock(&other.fair_lock("dl"));
    common::fair::wait_queued(&server, "dl", &waiter).await;
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(5), client.fair_lock("{dl}").lock())
        .await
        .expect("refused at once, not a deadlock")
        .unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err}");
    // At once: no attempt, no queueing (the deadlock would be unbounded).
    assert!(started.elapsed() < Duration::from_secs(4));
    // The same names as plain locks are distinct locks (only the channel is shared).
    let plain = client.lock("{dl}").try_lock(Duration::ZERO).await.unwrap();
    assert!(plain.is_some());
    drop(plain);
    held.unlock().await.unwrap();
    drop(queued.await.unwrap());
}

/// 11.10: SCRIPT FLUSH run in a loop (so it often lands between our SCRIPT LOAD and
/// the EVALSHA that follows, or after a script became known to the client): every
/// lock and unlock still succeeds.
///
/// The calls go on until the flusher has flushed 100 times meanwhile (300 calls at
/// least), within a bound: on a loaded machine the flusher thread may get far less
/// time than the calls (it once flushed fewer than 100 times during 300 calls at load
/// 30), and what is tested is calls interleaved with flushes, not their pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_in_a_loop_never_fails_a_call() {
    const CALLS: usize = 300;
    const FLUSHES: u64 = 100;
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flushes = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(60);
    let flusher = std::thread::spawn({
        let (stop, flushes) = (stop.clone(), flushes.clone());
        let mut conn = server.conn();
        move || {
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                redis::cmd("SCRIPT").arg("FLUSH").exec(&mut conn).unwrap();
                flushes.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let kinds = [
        client.lock("flush:plain"),
        client.fair_lock("flush:fair"),
        client.fenced_lock("flush:fenced"),
        client.simple_lock("flush:simple"),
    ];
    let mut i = 0;
    while i < CALLS || (flushes.load(Ordering::Relaxed) < FLUSHES && Instant::now() < until) {
        let lock = &kinds[i % kinds.len()];
        let guard = lock
            .lock()
            .await
            .unwrap_or_else(|e| panic!("lock {i}: {e}"));
        guard
            .unlock()
            .await
            .unwrap_or_else(|e| panic!("unlock {i}: {e}"));
        i += 1;
    }
    stop.store(true, Ordering::Relaxed);
    flusher.join().unwrap();
    let flushed = flushes.load(Ordering::Relaxed);
    assert!(
        flushed >= FLUSHES,
        "the flusher ran {flushed} times during {i} calls in 60 s"
    );
}

/// 11.6: the only master is paused past the validity: `lost()` fires. The renewals
/// queued meanwhile run when it resumes and would keep the key another full lease;
/// the lost hold is deleted instead, and `unlock()` reports NotHeld only once nothing
/// of it is left.
#[tokio::test]
async fn a_lock_lost_during_a_pause_is_not_kept_alive_by_late_renewals() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let config = Config::single(server.url())
        .watchdog_timeout(lease)
        .master_timeout(Duration::from_millis(200));
    let client = Client::connect(config).await.unwrap();
    let guard = client.lock("pause:lost").lock().await.unwrap();
    server.pause();
    tokio::time::timeout(2 * lease, guard.lost().cancelled())
        .await
        .expect("the watchdog declares the lock lost during the pause");
    server.resume();
    let err = tokio::time::timeout(lease, guard.unlock())
        .await
        .expect("unlock returns")
        .unwrap_err();
    assert!(err.is_not_held(), "{err}");
    // Late renewals ran after the resume; the key is gone all the same, well before a
    // renewed lease (3 s) would have ended.
    let pttl: i64 = server.cmd(&["PTTL", "pause:lost"]);
    assert_eq!(pttl, -2, "the lost lock is still there, pttl {pttl} ms");
    // And the same holder can take it again at once.
    let again = client
        .lock("pause:lost")
        .try_lock(Duration::ZERO)
        .await
        .unwrap();
    assert!(again.is_some());
}

/// 11.7: storms of cancelled `lock()` calls on three fresh masters (so the first calls
/// of each script load it, in the same round trip): once `close()` returns, no master holds anything of the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_redlock_storms_leave_nothing_after_close() {
    const STORMS: usize = 6;
    const CALLS: usize = 1500;
    for storm in 0..STORMS {
        let servers = common::start_many(3);
        let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
        let config = Config::redlock(urls).watchdog_timeout(Duration::from_secs(3));
        let client = Client::connect(config).await.unwrap();
        let id = client.id().to_string();
        common::cancelled_storm(&client, "storm:", 8, CALLS).await;
        for server in &servers {
            common::assert_no_holds(server, "storm:*", &id, &format!("storm {storm}"));
        }
    }
}

/// `close()` promises that guards still alive report their lock lost: by the time it
/// returns, not at some later watchdog tick.
#[tokio::test]
async fn close_reports_live_guards_lost_before_it_returns() {
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let guard = client.lock("close:alive").lock().await.unwrap();
    client.clone().close(Duration::from_secs(1)).await;
    assert!(guard.lost().is_cancelled());
}

/// Issue 46.7: the scripts flushed under a client that knows them, then 64 concurrent
/// lock() calls (group commit sends them as batches): each batch's EVALSHA meets
/// NOSCRIPT, did not run, and is sent again as EVAL, so every call is granted exactly
/// once (its key holds one hold) and every unlock frees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_under_concurrent_batches_grants_each_call_once() {
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let warm: Vec<_> = (0..64)
        .map(|i| client.lock(format!("flushed:{i}")))
        .collect();
    let taken = futures_util::future::join_all(warm.iter().map(|l| l.lock())).await;
    for g in taken {
        g.unwrap().unlock().await.unwrap();
    }
    server.cmd::<()>(&["SCRIPT", "FLUSH"]);
    let evals = common::calls(&server, "eval");
    let taken = futures_util::future::join_all(warm.iter().map(|l| l.lock())).await;
    assert!(
        common::calls(&server, "eval") > evals,
        "no call met NOSCRIPT"
    );
    let mut guards = Vec::new();
    for (i, g) in taken.into_iter().enumerate() {
        let g = g.unwrap_or_else(|e| panic!("lock {i}: {e}"));
        let holds: Vec<String> = server.cmd(&["HVALS", &format!("flushed:{i}")]);
        assert_eq!(holds, ["1"], "lock {i}");
        guards.push(g);
    }
    for g in guards {
        g.unlock().await.unwrap();
    }
    let keys: Vec<String> = server.cmd(&["KEYS", "flushed:*"]);
    assert!(keys.is_empty(), "{keys:?}");
}
