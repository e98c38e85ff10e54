//! The watchdog: leases kept while guards live, lost locks reported, crashed holders
//! freed by their lease.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{eventually_async, RedisServer};
use redlatch::{Client, Config};

const WATCHDOG: Duration = Duration::from_millis(600);

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
    let g = a
        .lock("leased")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let ttl = pttl(&server, "leased");
    assert!(ttl > 0 && ttl <= 300, "pttl {ttl}");
    assert!(
        eventually_async(Duration::from_secs(3), || server
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
    let a = Client::connect(
        Config::single(server.url())
            .watchdog_timeout(Duration::from_millis(1500))
            .master_timeout(Duration::from_millis(100)),
    )
    .await
    .unwrap();
    let g = a.lock("stall").lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(700)).await;
    server.resume();
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
    // Two periods of timeout/3 = up to 6 ticks (plus one of slack), never 300 per tick.
    assert!(
        (1..=7).contains(&renewals),
        "{renewals} renew calls for 300 locks"
    );
    for g in &guards {
        assert!(!g.lost().is_cancelled());
    }
    drop(guards);
    assert!(
        eventually_async(Duration::from_secs(5), || server.cmd::<i64>(&["DBSIZE"])
            == 0)
        .await
    );
}

#[tokio::test]
async fn dropping_the_client_stops_the_watchdog_and_reports_the_lock_lost() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let g = a.lock("orphan").lock().await.unwrap();
    drop(a);
    tokio::time::timeout(Duration::from_secs(2), g.lost().cancelled())
        .await
        .expect("lost() did not fire on shutdown");
    assert!(
        eventually_async(WATCHDOG * 4, || server.cmd::<i64>(&["EXISTS", "orphan"])
            == 0)
        .await
    );
}

/// Helper process for the SIGKILL test: runs only when REDLATCH_CHILD_URL is set.
#[tokio::test]
async fn child_process_holder() {
    let Ok(url) = std::env::var("REDLATCH_CHILD_URL") else {
        return;
    };
    let c = Client::connect(Config::single(url).watchdog_timeout(Duration::from_secs(1)))
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
            "child_process_holder",
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
    // Alive child: the watchdog keeps its 1 s lease well past it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
    assert!(killed.elapsed() <= Duration::from_secs(5));
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
/// after the round listed its holds) released one by one while rounds renew them
/// every 200 ms.
#[tokio::test]
async fn a_release_racing_a_renewal_is_not_a_loss() {
    let server = RedisServer::start();
    let a = client(&server).await;
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
    for g in guards {
        g.unlock().await.unwrap();
    }
    let releasing = started.elapsed();
    tokio::time::sleep(WATCHDOG / 3 * 2).await;
    let lost = tokens.iter().filter(|t| t.is_cancelled()).count();
    assert_eq!(
        lost, 0,
        "{lost} released locks reported lost (releasing took {releasing:?})"
    );
    assert_eq!(server.cmd::<i64>(&["DBSIZE"]), 0);
}
