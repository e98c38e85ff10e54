//! Redlock crash-recovery (SPEC §3.9): a master restarted without its data, at once
//! (unsafe) or only after the longest lease (scripts/delayed-restart.sh), and mutual
//! exclusion while minorities of masters crash and come back late.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::redlock::{config, holders, prelock, reconnected, DelayedRestart, OTHER};
use common::{eventually_async, start_many, RedisServer};
use redlatch::{Client, Config, LockGuard};

async fn connect(config: Config) -> Client {
    Client::connect(config).await.unwrap()
}

/// The seed state: client 1 holds `name` with `lease` on masters A, B, C of five
/// (D and E were held by another holder while it acquired, and are free again now).
/// Returns the client, its guard and the instant before it asked for the lock.
async fn seed(
    servers: &[RedisServer],
    name: &str,
    lease: Duration,
) -> (Client, LockGuard, Instant) {
    for s in &servers[3..] {
        prelock(s, name, OTHER, Duration::from_secs(60));
    }
    let client = connect(config(servers)).await;
    let asked = Instant::now();
    let g = client
        .lock(name)
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap();
    let g = g.expect("A, B and C are free");
    for s in &servers[..3] {
        assert_eq!(holders(s, name), [g.holder()]);
    }
    // The refusals of D and E may still be on their way (the lock was granted at a
    // majority): free them only once their acquire script ran (it reads the PTTL of
    // a busy lock), or a late one would take them for the first client.
    for s in &servers[3..] {
        let refused = || common::calls(s, "pttl") >= 1;
        assert!(eventually_async(Duration::from_secs(5), refused).await);
        let _: i64 = s.cmd(&["DEL", name]);
    }
    (client, g, asked)
}

#[tokio::test]
async fn an_immediate_empty_restart_is_the_unsafe_case_a_second_client_gets_a_held_lock() {
    let mut servers = start_many(5);
    let lease = Duration::from_secs(5);
    let (_c1, g1, _asked) = seed(&servers, "seed-now", lease).await;
    servers[2].restart(); // C is back at once, without the lock it granted
    let c2 = connect(config(&servers)).await;
    let g2 = c2
        .lock("seed-now")
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap();
    assert!(
        Instant::now() < g1.valid_until(),
        "the first lease is still valid"
    );
    let g2 = g2.expect("C, D and E form a majority: the lock is granted a second time");
    for (i, s) in servers.iter().enumerate() {
        let want = if i < 2 { g1.holder() } else { g2.holder() };
        assert_eq!(holders(s, "seed-now"), [want], "master {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_delayed_past_the_lease_keeps_a_second_client_out_while_the_first_lease_is_valid()
{
    let mut servers = start_many(5);
    let lease = Duration::from_secs(1);
    let c2 = connect(config(&servers)).await;
    let lock2 = c2.lock("seed-late");
    let (_c1, g1, asked) = seed(&servers, "seed-late", lease).await;
    let valid_until = g1.valid_until();
    let restart = DelayedRestart::crash(&mut servers[2], lease, Duration::from_millis(200));

    // Client 2 keeps trying. While C is out, it can win only A, B, D, E, and A and B
    // stay client 1's until the first lease ran out.
    let mut tries = 0;
    let mut first_refused = None;
    let g2 = loop {
        assert!(
            asked.elapsed() < lease + Duration::from_secs(5),
            "client 2 never got in"
        );
        if let Some(g) = lock2
            .try_lock_with_lease(Duration::ZERO, lease)
            .await
            .unwrap()
        {
            break g;
        }
        tries += 1;
        first_refused.get_or_insert_with(Instant::now);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let got = Instant::now();
    assert!(
        got >= asked + lease,
        "granted {:?} before the first lease ran out",
        asked + lease - got
    );
    // Refused while the first lease was valid (how often depends on the machine's
    // speed: not counted), granted only after it.
    let first_refused = first_refused.expect("client 2 was never refused");
    assert!(
        first_refused < valid_until && got > valid_until,
        "{tries} tries, the first {:?} after the first lease's validity",
        first_refused.saturating_duration_since(valid_until)
    );
    g2.unlock().await.unwrap();

    // C came back only after the lease (plus margin), empty, and takes part again.
    let up = restart.wait_up(Duration::from_secs(10)).await;
    assert!(up - restart.started() >= lease, "{}", restart.output());
    assert!(
        restart.output().contains("waiting 1.200s"),
        "{}",
        restart.output()
    );
    reconnected(&lock2, 2).await;
    let g = lock2
        .try_lock(Duration::from_secs(3))
        .await
        .unwrap()
        .unwrap();
    let taken = || holders(&servers[2], "seed-late") == [g.holder()];
    assert!(eventually_async(Duration::from_secs(5), taken).await);
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn the_delayed_restart_script_refuses_while_the_master_still_runs() {
    let server = RedisServer::start();
    let mut restart =
        DelayedRestart::spawn(&server, Duration::from_millis(100), Duration::ZERO, &[]);
    let exited = common::eventually(Duration::from_secs(5), || restart.exited().is_some());
    assert!(exited, "{}", restart.output());
    assert_eq!(restart.exited().unwrap().code(), Some(2));
    assert!(
        restart.output().contains("still listens"),
        "{}",
        restart.output()
    );
    assert_eq!(server.cmd::<String>(&["PING"]), "PONG");
}

#[tokio::test]
async fn with_stop_the_script_stops_the_master_waits_out_the_lease_and_starts_it_empty() {
    let server = RedisServer::start();
    let _: () = server.cmd(&["SET", "k", "v"]);
    let (lease, margin) = (Duration::from_millis(500), Duration::from_millis(100));
    let restart = DelayedRestart::stop(&server, lease, margin);
    let up = restart.wait_up(Duration::from_secs(10)).await;
    assert!(
        up - restart.started() >= lease + margin,
        "{}",
        restart.output()
    );
    let out = restart.output();
    assert!(
        out.contains("shutdown nosave") && out.contains("waiting 0.600s"),
        "{out}"
    );
    assert_eq!(server.dbsize(), 0, "restarted without its data");
}

/// Crashes minorities of masters in turn, each restarted only after `lease` + margin,
/// until `stop`, counting finished crash rounds in `crashes`; returns the masters
/// (kept alive for the workers).
fn crash_in_turn(
    mut masters: Vec<RedisServer>,
    lease: Duration,
    stop: Arc<AtomicBool>,
    crashes: Arc<AtomicU64>,
) -> Vec<RedisServer> {
    let pairs = [[0, 1], [2, 3], [4, 0], [1, 2], [3, 4]];
    for pair in pairs.iter().cycle() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        for &i in pair {
            masters[i].kill();
        }
        std::thread::sleep(lease + Duration::from_millis(100)); // the delayed restart
        for &i in pair {
            masters[i].restart();
        }
        crashes.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(200));
    }
    masters
}

/// The workers run until both at least `WORK` increments and `ROUNDS` crash rounds are
/// done (not for a fixed time: a fast machine would finish its work before the
/// crashes, a slow one do too little of it), bounded by `LIMIT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_holds_while_minorities_of_masters_crash_and_restart_late() {
    const WORK: u64 = 150;
    const ROUNDS: u64 = 3;
    const LIMIT: Duration = Duration::from_secs(60);
    let lease = Duration::from_millis(500);
    let masters = start_many(5);
    let counter = RedisServer::start();
    let cfg = config(&masters).watchdog_timeout(lease);
    let (done, unlock_errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let crashes = Arc::new(AtomicU64::new(0));
    let faults = {
        let (stop, crashes) = (stop.clone(), crashes.clone());
        tokio::task::spawn_blocking(move || crash_in_turn(masters, lease, stop, crashes))
    };
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..3 {
        let client = connect(cfg.clone()).await;
        for _ in 0..4 {
            let mut conn = counter.async_conn().await;
            let (lock, done, errors, crashes) = (
                client.lock("exclusive"),
                done.clone(),
                unlock_errors.clone(),
                crashes.clone(),
            );
            workers.push(tokio::spawn(async move {
                let enough = || {
                    done.load(Ordering::SeqCst) >= WORK && crashes.load(Ordering::SeqCst) >= ROUNDS
                };
                while !enough() && started.elapsed() < LIMIT {
                    let Ok(Some(g)) = lock.try_lock(Duration::from_secs(1)).await else {
                        continue;
                    };
                    let n: Option<u64> = redis::cmd("GET")
                        .arg("n")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await; // widen the race
                    let next = n.unwrap_or(0) + 1;
                    let _: () = redis::cmd("SET")
                        .arg("n")
                        .arg(next)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                    if g.unlock().await.is_err() {
                        errors.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
    }
    for w in workers {
        w.await.unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let _masters = faults.await.unwrap();
    let done = done.load(Ordering::SeqCst);
    let n: u64 = counter.cmd(&["GET", "n"]);
    assert_eq!(n, done, "lost updates: two holders at once");
    // Only short of them if work stalled for a whole minute.
    assert!(
        done >= WORK,
        "only {done} increments in {:?}",
        started.elapsed()
    );
    let crashes = crashes.load(Ordering::SeqCst);
    assert!(
        crashes >= ROUNDS,
        "only {crashes} crash rounds while working"
    );
    // Releases only fail for a holder whose masters crashed under it; that is rare.
    assert!(unlock_errors.load(Ordering::SeqCst) * 10 < done);
}
