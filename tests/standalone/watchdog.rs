//! The watchdog: leases kept while guards live, lost locks reported, crashed holders
//! freed by their lease.

use redlatch_testkit as common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{eventually_async, RedisServer};
use redlatch::{Client, Config};

/// Renewed every 0.5 s: a loaded machine may delay a renewal by a second without
/// losing a lock a test asserts is kept (600 ms left it 400 ms).
const WATCHDOG: Duration = Duration::from_millis(1500);

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url()).watchdog_timeout(WATCHDOG))
        .await
        .unwrap()
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

#[tokio::test]
async fn the_watchdog_keeps_a_lock_past_three_times_its_timeout() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let g = a.lock("kept").lock().await.unwrap();
    let until = Instant::now() + WATCHDOG * 4;
    while Instant::now() < until {
        assert!(
            pttl(&server, "kept") > 0,
            "the lease ran out under the watchdog"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(b
        .lock("kept")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    assert!(!g.lost().is_cancelled());
    g.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "kept"]), 0);
}

#[tokio::test]
async fn lost_fires_when_the_key_is_deleted_and_renewal_stops() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let g = a.lock("deleted").lock().await.unwrap();
    let lost = g.lost();
    server.cmd::<i64>(&["DEL", "deleted"]);
    tokio::time::timeout(WATCHDOG * 5, lost.cancelled())
        .await
        .expect("lost() did not fire");
    // Renewal never re-creates the key, and unlock reports the loss.
    tokio::time::sleep(WATCHDOG).await;
    assert_eq!(server.cmd::<i64>(&["EXISTS", "deleted"]), 0);
    assert!(g.unlock().await.unwrap_err().is_not_held());
    assert_eq!(a.held_locks(), 0);
}

#[tokio::test]
async fn lost_fires_when_another_holder_took_over() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let g = a.lock("taken").lock().await.unwrap();
    server.cmd::<i64>(&["DEL", "taken"]);
    server.cmd::<i64>(&["HSET", "taken", "someone-else:1", "1"]);
    tokio::time::timeout(WATCHDOG * 5, g.lost().cancelled())
        .await
        .expect("lost() did not fire");
    // The other holder's hash is untouched.
    let fields: Vec<String> = server.cmd(&["HKEYS", "taken"]);
    assert_eq!(fields, vec!["someone-else:1".to_string()]);
    drop(g);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.cmd::<i64>(&["HLEN", "taken"]), 1);
}

#[tokio::test]
async fn the_watchdog_stops_when_the_count_reaches_zero() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let g = a.lock("stopped").lock().await.unwrap();
    let holder = g.holder().to_string();
    g.unlock().await.unwrap();
    // Put the same holder back by hand with a short lease: nobody may renew it now.
    server.cmd::<i64>(&["HSET", "stopped", &holder, "1"]);
    server.cmd::<i64>(&["PEXPIRE", "stopped", "400"]);
    assert!(
        eventually_async(WATCHDOG * 4, || server.cmd::<i64>(&["EXISTS", "stopped"])
            == 0)
        .await
    );
}

#[tokio::test]
async fn an_explicit_lease_expires_and_the_late_unlock_says_not_held() {
    let server = RedisServer::start();
    let a = client(&server).await;
    // 1 s: still there when PTTL is read, however late that runs.
    let g = a
        .lock("leased")
        .lock_with_lease(Duration::from_secs(1))
        .await
        .unwrap();
    let ttl = pttl(&server, "leased");
    assert!(ttl > 0 && ttl <= 1000, "pttl {ttl}");
    assert!(
        eventually_async(Duration::from_secs(5), || server
            .cmd::<i64>(&["EXISTS", "leased"])
            == 0)
        .await
    );
    let err = g.unlock().await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    assert!(err.to_string().contains("not held"));
}

#[tokio::test]
async fn a_brief_redis_stall_does_not_lose_the_lock() {
    let server = RedisServer::start();
    // Lease 3 s, renewed every 1 s: a 0.7 s stall leaves the retried renewal 1.3 s.
    let lease = Duration::from_secs(3);
    let a = Client::connect(
        Config::single(server.url())
            .watchdog_timeout(lease)
            .master_timeout(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    let g = a.lock("stall").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(700)).await;
    server.resume();
    // A lease past the stall: kept only if renewals went on.
    tokio::time::sleep(lease).await;
    assert!(
        !g.lost().is_cancelled(),
        "a transient error must be retried"
    );
    assert!(pttl(&server, "stall") > 0);
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn renewals_of_many_locks_are_batched_into_one_call_per_tick() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let mut guards = Vec::new();
    for i in 0..300 {
        guards.push(a.lock(format!("many:{i}")).lock().await.unwrap());
    }
    let calls = || common::calls(&server, "evalsha");
    let before = calls();
    tokio::time::sleep(WATCHDOG * 2).await;
    let renewals = calls() - before;
    // Two periods of timeout/3 = 6 ticks: one call each, never 300. The bound allows
    // twice that (a late tick caught up in the window, a timed-out call retried on a
    // loaded machine); renewing per lock would be 1800.
    assert!(
        (1..=12).contains(&renewals),
        "{renewals} renew calls for 300 locks"
    );
    for g in &guards {
        assert!(!g.lost().is_cancelled());
    }
    drop(guards);
    assert!(eventually_async(Duration::from_secs(5), || server.dbsize() == 0).await);
}

#[tokio::test]
async fn dropping_the_client_stops_the_watchdog_and_reports_the_lock_lost() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let g = a.lock("orphan").lock().await.unwrap();
    drop(a);
    tokio::time::timeout(Duration::from_secs(5), g.lost().cancelled())
        .await
        .expect("lost() did not fire on shutdown");
    assert!(
        eventually_async(WATCHDOG * 4, || server.cmd::<i64>(&["EXISTS", "orphan"])
            == 0)
        .await
    );
}

/// The SIGKILL test's child's watchdog lease (renewed every 2/3 s: a loaded machine
/// may delay it by over a second without losing the lock).
const CHILD_LEASE: Duration = Duration::from_secs(2);

/// Helper process for the SIGKILL test: runs only when REDLATCH_CHILD_URL is set.
#[tokio::test]
async fn child_process_holder() {
    let Ok(url) = std::env::var("REDLATCH_CHILD_URL") else {
        return;
    };
    let c = Client::connect(Config::single(url).watchdog_timeout(CHILD_LEASE))
        .await
        .unwrap();
    let _g = c.lock("crashed").lock().await.unwrap();
    println!("LOCKED");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test]
async fn a_holder_killed_with_sigkill_frees_the_lock_after_its_lease() {
    let server = RedisServer::start();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            redlatch_testkit::test_name!("child_process_holder").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("REDLATCH_CHILD_URL", server.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("LOCKED") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child exited before locking"
        );
    }
    let a = client(&server).await;
    // Alive child: the watchdog keeps its lease well past it.
    tokio::time::sleep(CHILD_LEASE * 3 / 2).await;
    assert!(a
        .lock("crashed")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    let g = a
        .lock("crashed")
        .try_lock(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the lease of a dead holder must run out");
    // Its lease (the lower bound is no promise: a renewal may have just landed).
    assert!(killed.elapsed() <= CHILD_LEASE + Duration::from_secs(5));
    g.unlock().await.unwrap();
}

/// A lock whose acquisition was answered late (the master paused 2.55 s after the
/// call was sent) has ~0.4 s of its 3 s validity left: it is renewed at once, not at
/// the next round ~0.8 s later, by when its validity has ended (a round running then
/// would declare it lost; W5 on a loaded cluster lost locks that way).
#[tokio::test]
async fn a_lock_acquired_late_is_renewed_at_once() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let config = Config::single(server.url())
        .watchdog_timeout(lease)
        .master_timeout(Duration::from_millis(2900));
    let a = Client::connect(config).await.unwrap();
    // Rounds tick one period (1 s) apart from the connect: sent at +0.6 s, the
    // acquisition is answered at ~+3.15 s, just after the tick at +3 s.
    let connected = Instant::now();
    tokio::time::sleep_until((connected + Duration::from_millis(600)).into()).await;
    let before = common::calls(&server, "evalsha");
    server.cmd::<String>(&["CLIENT", "PAUSE", "2550", "WRITE"]);
    let g = a.lock("late").lock().await.unwrap();
    let answered = connected.elapsed();
    // The acquisition, then the renewal.
    assert!(
        eventually_async(Duration::from_millis(500), || {
            common::calls(&server, "evalsha") >= before + 2
        })
        .await,
        "no renewal within 0.5 s of a late acquisition (answered at +{answered:?})"
    );
    tokio::time::sleep(lease).await;
    assert!(!g.lost().is_cancelled(), "the late lock was lost");
    assert!(pttl(&server, "late") > 0);
    g.unlock().await.unwrap();
}

/// A renewal that meets a lock its holder released meanwhile does not report it
/// lost: 12,000 locks (three renewal calls of 5,000 per round, the later ones sent
/// after the round listed its holds) released 100 at a time (one after the other, they
/// took 110 s of CI's critical path under load) while rounds renew them every 2 s.
/// The releases are paced to last at least 6 s, so several rounds run
/// among them on any machine; the 6 s lease and 2 s master timeout keep every lock
/// alive and every release answered on a loaded one, where a renewal call of 5,000
/// locks can keep Redis busy for a while (a lapsed lease would be a real loss, and
/// unlock say NotHeld; a 200 ms master timeout failed releases queued behind it, and
/// a 3 s lease was seen to lapse on a machine busy with other builds).
#[tokio::test]
async fn a_release_racing_a_renewal_is_not_a_loss() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(6);
    let config = Config::single(server.url())
        .watchdog_timeout(lease)
        .master_timeout(Duration::from_secs(2));
    let a = Client::connect(config).await.unwrap();
    let taken = futures_util::future::join_all((0..40).map(|t| {
        let a = a.clone();
        async move {
            let mut guards = Vec::new();
            for i in (t..12_000).step_by(40) {
                guards.push(a.lock(format!("race:{i}")).lock().await.unwrap());
            }
            guards
        }
    }))
    .await;
    let guards: Vec<_> = taken.into_iter().flatten().collect();
    let tokens: Vec<_> = guards.iter().map(|g| g.lost()).collect();
    let started = Instant::now();
    let mut guards = guards.into_iter();
    loop {
        let batch: Vec<_> = guards.by_ref().take(100).collect();
        if batch.is_empty() {
            break;
        }
        for released in futures_util::future::join_all(batch.into_iter().map(|g| g.unlock())).await
        {
            released.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let releasing = started.elapsed();
    // The rounds under way finish (and would report losses) meanwhile.
    tokio::time::sleep(lease / 3 * 2).await;
    let lost = tokens.iter().filter(|t| t.is_cancelled()).count();
    assert_eq!(
        lost, 0,
        "{lost} released locks reported lost (releasing took {releasing:?})"
    );
    assert_eq!(server.dbsize(), 0);
}
