//! Redlock under faults: crashed (kill -9) and stopped (SIGSTOP) masters, slow masters
//! eating the validity, and the watchdog renewing by majority (SPEC §3, §5).

use redlatch_testkit as common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::redlock::{config, dbsize, holders, prelock, settle_holders, OTHER};
use common::{eventually, eventually_async, start_many, RedisServer};
use redlatch::{Client, Config, Error};

async fn connect(config: Config) -> Client {
    Client::connect(config).await.unwrap()
}

fn no_keys(servers: &[RedisServer]) -> bool {
    servers.iter().all(|s| dbsize(s) == 0)
}

#[tokio::test]
async fn with_two_of_five_masters_killed_lock_and_unlock_keep_working() {
    let mut servers = start_many(5);
    let client = connect(config(&servers)).await;
    let lock = client.lock("two-down");
    servers[0].kill();
    servers[3].kill();
    for _ in 0..3 {
        let g = lock.lock().await.unwrap();
        for i in [1, 2, 4] {
            assert_eq!(holders(&servers[i], "two-down"), [g.holder()]);
        }
        assert!(lock.is_locked().await.unwrap());
        g.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap());
    }
    let g = lock
        .try_lock(Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    drop(g);
    let live = |s: &&RedisServer| s.is_running();
    assert!(
        eventually_async(Duration::from_secs(5), || servers
            .iter()
            .filter(live)
            .all(|s| dbsize(s) == 0))
        .await
    );
}

#[tokio::test]
async fn with_three_of_five_masters_killed_nothing_hangs_and_restarting_them_resumes_work() {
    let mut servers = start_many(5);
    // A connect timeout (10 s) far above the unavailable timeout (0.8 s): a lock()
    // that waited for its subscription's confirmation would take 10 s, not about 1.
    let cfg = config(&servers)
        .watchdog_timeout(Duration::from_secs(2))
        .unavailable_timeout(Duration::from_millis(800))
        .connect_timeout(Duration::from_secs(10));
    let (a, b) = (connect(cfg.clone()).await, connect(cfg).await);
    servers[0].kill();
    servers[1].kill();
    let held = a
        .lock("held")
        .lock_with_lease(Duration::from_secs(30))
        .await;
    let held = held.unwrap();
    servers[2].kill();

    // The release of a held guard and queries report the missing quorum.
    let e = held.unlock().await.unwrap_err();
    let Error::NoQuorum {
        acquired: 2,
        needed: 3,
        errors,
    } = &e
    else {
        panic!("{e:?}");
    };
    // Every killed master's error, in the masters' order.
    let at: Vec<&str> = errors.iter().map(|m| m.addr.as_str()).collect();
    let killed: Vec<String> = servers[..3].iter().map(|s| s.addr()).collect();
    assert_eq!(at, killed, "{e}");
    assert!(a.lock("held").is_locked().await.unwrap_err().is_no_quorum());

    // A bounded wait returns at the end of its wait (not before: the lower bound is
    // the promise; the upper one only says it does not hang), with the quorum error.
    let wait = Duration::from_millis(500);
    let t = Instant::now();
    let r = b.lock("held").try_lock(wait).await;
    let took = t.elapsed();
    assert!(matches!(&r, Err(e) if e.is_no_quorum()), "{r:?}");
    assert!(
        took >= wait && took < wait + Duration::from_secs(5),
        "{took:?}"
    );
    let r = b.lock("free").try_lock(Duration::ZERO).await;
    assert!(matches!(&r, Err(e) if e.is_no_quorum()), "{r:?}");

    // An unbounded lock() gives up after the unavailable timeout (0.8 s; not after the
    // 10 s connect timeout its subscription would otherwise wait for confirmation).
    let t = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(20), b.lock("free").lock()).await;
    let took = t.elapsed();
    let e = r.expect("lock() must not hang").unwrap_err();
    assert!(e.is_no_quorum(), "{e:?}");
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(5),
        "{took:?}"
    );

    for s in &mut servers[..3] {
        s.restart();
    }
    let g = b
        .lock("free")
        .try_lock(Duration::from_secs(5))
        .await
        .unwrap();
    let g = g.expect("work resumes once a majority is back");
    assert!(b.lock("free").is_locked().await.unwrap());
    g.unlock().await.unwrap();
    let g = a
        .lock("again")
        .try_lock(Duration::from_secs(5))
        .await
        .unwrap();
    g.expect("the other client too").unlock().await.unwrap();
}

/// The last release of a hold asks the masters that did not answer again, as `lock()`
/// does, instead of failing at the first master timeout: two of three masters stall
/// (CLIENT PAUSE WRITE) for 0.7 s, three times the master timeout, while unlocking.
/// `unlock()` returns once a majority released: that majority has no key the moment it
/// returns; the last master's release lands when it does (promised only `eventually`).
#[tokio::test]
async fn an_unlock_outlasts_masters_that_answer_late() {
    let servers = start_many(3);
    let client = connect(config(&servers)).await;
    let g = client.lock("late-unlock").lock().await.unwrap();
    let me = g.holder().to_string();
    settle_holders(&servers, "late-unlock", |_| vec![me.clone()]).await;
    for s in &servers[1..] {
        s.cmd::<String>(&["CLIENT", "PAUSE", "700", "WRITE"]);
    }
    g.unlock().await.unwrap();
    let released = servers.iter().filter(|s| dbsize(s) == 0).count();
    assert!(released >= 2, "released on {released} of 3 masters");
    assert!(!client.lock("late-unlock").is_locked().await.unwrap());
    assert!(eventually_async(Duration::from_secs(5), || no_keys(&servers)).await);
}

#[tokio::test]
async fn a_restarted_master_takes_part_again_after_one_failed_command() {
    let mut servers = start_many(3);
    let client = connect(config(&servers)).await;
    let lock = client.lock("back");
    // Open both lanes: lock scripts (slot 0) and queries (the side slot).
    lock.try_lock(Duration::ZERO)
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
    assert!(!lock.is_locked().await.unwrap());
    servers[0].restart();
    // The first command to the restarted master fails if it went out on the
    // connection to the old process; one sent after the client saw that connection
    // close (a slower or busier machine) already reaches the new process. Either way
    // the master takes part again at once: the next acquisition lands on all three.
    lock.status().await.unwrap();
    let g = lock.try_lock(Duration::ZERO).await.unwrap().unwrap();
    let me = g.holder().to_string();
    settle_holders(&servers, "back", |_| vec![me.clone()]).await;
    g.unlock().await.unwrap();
    settle_holders(&servers, "back", |_| vec![]).await;
}

#[tokio::test]
async fn a_sigstopped_master_slows_down_neither_lock_nor_unlock() {
    let servers = start_many(3);
    // The stopped master never answers: a call that waited for it would take the
    // whole master timeout, 5 s. Half of it is the bound, robust to any load.
    let timeout = Duration::from_secs(5);
    let client = connect(config(&servers).master_timeout(timeout)).await;
    let lock = client.lock("stopped");
    servers[2].pause();
    for _ in 0..3 {
        let t = Instant::now();
        let g = lock.lock_with_lease(Duration::from_secs(5)).await.unwrap();
        // Done once the two live masters granted it: the stopped one's call runs on
        // in the background (up to the master timeout), nobody waits for it.
        assert!(t.elapsed() < timeout / 2, "{:?}", t.elapsed());
        assert_eq!(holders(&servers[0], "stopped"), [g.holder()]);
        assert_eq!(holders(&servers[1], "stopped"), [g.holder()]);
        let t = Instant::now();
        g.unlock().await.unwrap();
        assert!(t.elapsed() < timeout / 2, "{:?}", t.elapsed());
    }
    servers[2].resume();
    assert!(eventually_async(Duration::from_secs(10), || no_keys(&servers)).await);
}

#[tokio::test]
async fn a_stopped_master_costs_a_failing_attempt_one_master_timeout_not_a_tcp_timeout() {
    let servers = start_many(3);
    let timeout = Duration::from_millis(300);
    let client = connect(config(&servers).master_timeout(timeout)).await;
    prelock(&servers[0], "stopped", OTHER, Duration::from_secs(60));
    servers[2].pause();
    let t = Instant::now();
    // Busy on one, granted on one: the stopped master decides, so the attempt waits
    // for it, but only its timeout; the undo of its grant, out of time then (a call
    // returns within one master timeout of its wait), finishes in the background.
    let g = client
        .lock("stopped")
        .try_lock(Duration::ZERO)
        .await
        .unwrap();
    let took = t.elapsed();
    assert!(g.is_none());
    assert!(took >= timeout - Duration::from_millis(5), "{took:?}");
    // Bounded (a TCP timeout on a stopped process never comes): one master timeout
    // plus any machine's scheduling.
    assert!(took < Duration::from_secs(5), "{took:?}");
    let released = || holders(&servers[1], "stopped").is_empty();
    assert!(eventually_async(Duration::from_secs(5), released).await);
    servers[2].resume();
    let ours_gone = || dbsize(&servers[1]) + dbsize(&servers[2]) == 0;
    assert!(eventually_async(Duration::from_secs(5), ours_gone).await);
}

#[tokio::test]
async fn an_attempt_waits_for_the_slowest_master_not_the_sum_of_them() {
    let servers = start_many(5);
    // 1 s: large against a loaded machine's scheduling delays, so the bound below
    // (4 timeouts) separates "in parallel" (2) from "one after the other" (6) anywhere.
    let timeout = Duration::from_secs(1);
    let client = connect(config(&servers).master_timeout(timeout)).await;
    // Three of five stopped: no majority can answer, so the attempt hears from every
    // master (the stopped ones time out), then undoes it everywhere (bounded again).
    for i in [1, 2, 3] {
        servers[i].pause();
    }
    let t = Instant::now();
    let r = client.lock("parallel").try_lock(Duration::ZERO).await;
    let took = t.elapsed();
    assert!(r.is_err(), "{r:?}");
    // In parallel: one timeout for the attempt, one for the undo. One after the
    // other: six.
    assert!(
        took >= timeout - Duration::from_millis(5) && took < 4 * timeout,
        "{took:?}"
    );
    for i in [1, 2, 3] {
        servers[i].resume();
    }
    assert!(eventually_async(Duration::from_secs(5), || no_keys(&servers)).await);
}

/// Blocks `server` for `secs` with DEBUG SLEEP (from a thread), returns once it stalls.
fn stall(server: &RedisServer, secs: f64) -> std::thread::JoinHandle<()> {
    let mut conn = server.conn();
    let sleeper = std::thread::spawn(move || {
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(secs)
            .query(&mut conn)
            .unwrap();
    });
    // A raw PING (no client handshake, which would itself wait for the server). A
    // loaded server may miss the 100 ms before it stalls: harmless, the callers'
    // bounds allow the stall to begin later than it is seen.
    let stalled = eventually(Duration::from_secs(5), || {
        let mut c = std::net::TcpStream::connect(server.addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        c.write_all(b"PING\r\n").unwrap();
        c.read(&mut [0u8; 16]).is_err()
    });
    assert!(stalled, "DEBUG SLEEP did not stall {}", server.addr());
    sleeper
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_whose_validity_ran_out_before_quorum_fails_and_releases_everywhere() {
    // DEBUG (to stall master 0): Redis >= 7 serves it only when enabled; older ones
    // always do, and refuse the directive.
    let debug: &[&str] = if common::server_major() >= 7 {
        &["--enable-debug-command", "yes"]
    } else {
        &[]
    };
    let servers = [
        RedisServer::start_with(debug),
        RedisServer::start(),
        RedisServer::start(),
    ];
    // lease 5 s, drift 0.45: validity = 5000 − 2252 ms − elapsed. Margins of about
    // a second on either side of each stall, for any machine's scheduling.
    let cfg = config(&servers)
        .drift_factor(0.45)
        .master_timeout(Duration::from_secs(6))
        .watchdog_timeout(Duration::from_secs(10));
    let lock = connect(cfg).await.lock("slow");
    let lease = Duration::from_secs(5);
    // Busy on master 1: a majority needs the slow master 0.
    prelock(&servers[1], "slow", OTHER, Duration::from_secs(60));

    // A master answering after ~1.5 s: granted, with that much less validity (at
    // least 0.8 s less: the stall was under way when the attempt began).
    let sleeper = stall(&servers[0], 1.5);
    let g = lock
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap();
    let g = g.expect("2748 ms of validity minus ~1.5 s is still positive");
    assert!(
        g.validity() < Duration::from_millis(2748 - 800),
        "{:?}",
        g.validity()
    );
    g.unlock().await.unwrap();
    sleeper.join().unwrap();

    // A master answering after ~3.8 s: the grants came too late (2748 ms).
    let sleeper = stall(&servers[0], 3.8);
    let t = Instant::now();
    let g = lock
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap();
    let took = t.elapsed();
    assert!(g.is_none(), "no validity left after {took:?}");
    // Released where granted (not expired: the 5 s lease is still running); the
    // other holder's lock untouched.
    assert!(took < lease - Duration::from_millis(200), "{took:?}");
    assert_eq!(holders(&servers[1], "slow"), [OTHER]);
    for s in [&servers[0], &servers[2]] {
        assert_eq!(dbsize(s), 0, "{}", s.addr());
    }
    sleeper.join().unwrap();
}

#[tokio::test]
async fn an_attempt_slowed_past_its_lease_by_a_stopped_master_leaves_no_keys() {
    let servers = start_many(3);
    let cfg = config(&servers).master_timeout(Duration::from_millis(300));
    let lock = connect(cfg).await.lock("stopped-lease");
    // Busy on master 2: a majority needs the stopped master 1.
    prelock(&servers[2], "stopped-lease", OTHER, Duration::from_secs(60));
    servers[1].pause();
    let lease = Duration::from_millis(200);
    let t = Instant::now();
    let g = lock
        .try_lock_with_lease(Duration::from_millis(800), lease)
        .await
        .unwrap();
    assert!(g.is_none(), "every attempt outlived its lease");
    // Bounded: its 0.8 s wait plus a master timeout or two, and any machine's delays.
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert_eq!(dbsize(&servers[0]), 0);
    assert_eq!(holders(&servers[2], "stopped-lease"), [OTHER]);
    servers[1].resume();
    let ours_gone = || dbsize(&servers[0]) + dbsize(&servers[1]) == 0;
    assert!(eventually_async(Duration::from_secs(5), ours_gone).await);
}

/// A watchdog lease of 1.5 s, renewed every 0.5 s: a loaded machine may delay a
/// renewal by a second without losing a lock that is asserted to be kept.
const WATCHDOG: Duration = Duration::from_millis(1500);

fn watchdog_config(servers: &[RedisServer]) -> Config {
    config(servers).watchdog_timeout(WATCHDOG)
}

#[tokio::test]
async fn a_watchdog_lock_outlives_many_timeouts_while_one_of_three_masters_is_down() {
    let mut servers = start_many(3);
    let client = connect(watchdog_config(&servers)).await;
    let lock = client.lock("wd-survive");
    let g = lock.lock().await.unwrap();
    let me = g.holder().to_string();
    settle_holders(&servers, "wd-survive", |_| vec![me.clone()]).await;
    servers[0].kill();
    // Three watchdog timeouts: the key never lapses on the two live masters.
    let until = Instant::now() + 3 * WATCHDOG;
    while Instant::now() < until {
        for s in &servers[1..] {
            assert_eq!(holders(s, "wd-survive"), [g.holder()], "{}", s.addr());
        }
        assert!(!g.lost().is_cancelled());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(lock.is_held_by_current_task().await.unwrap());
    g.unlock().await.unwrap();
    assert!(dbsize(&servers[1]) + dbsize(&servers[2]) == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_lock_outlives_many_timeouts_while_one_of_three_masters_is_stopped() {
    let servers = start_many(3);
    let client = connect(watchdog_config(&servers)).await;
    let lock = client.lock("wd-stopped");
    let g = lock.lock().await.unwrap();
    let me = g.holder().to_string();
    settle_holders(&servers, "wd-stopped", |_| vec![me.clone()]).await;
    servers[0].pause();
    // A master that never answers must not slow the renewals down past the lease.
    let until = Instant::now() + 3 * WATCHDOG;
    while Instant::now() < until {
        for s in &servers[1..] {
            assert_eq!(holders(s, "wd-stopped"), [g.holder()], "{}", s.addr());
        }
        assert!(!g.lost().is_cancelled(), "lost while a majority renews");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    g.unlock().await.unwrap();
    servers[0].resume();
    assert!(eventually_async(Duration::from_secs(5), || no_keys(&servers)).await);
}

#[tokio::test]
async fn deleting_the_key_on_two_of_three_masters_makes_the_guard_lost() {
    let servers = start_many(3);
    let client = connect(watchdog_config(&servers)).await;
    let g = client.lock("wd-lost").lock().await.unwrap();
    let me = g.holder().to_string();
    settle_holders(&servers, "wd-lost", |_| vec![me.clone()]).await;
    let _: i64 = servers[0].cmd(&["DEL", "wd-lost"]);
    let _: i64 = servers[2].cmd(&["DEL", "wd-lost"]);
    let lost = g.lost();
    assert!(eventually_async(Duration::from_secs(5), || lost.is_cancelled()).await);
    assert!(g.unlock().await.unwrap_err().is_not_held());
    // Nobody renews the last copy any more: it expires.
    assert!(eventually_async(Duration::from_secs(5), || no_keys(&servers)).await);
}

#[tokio::test]
async fn deleting_the_key_on_one_of_three_masters_does_not_lose_the_lock() {
    let servers = start_many(3);
    let client = connect(watchdog_config(&servers)).await;
    let g = client.lock("wd-one").lock().await.unwrap();
    let me = g.holder().to_string();
    settle_holders(&servers, "wd-one", |_| vec![me.clone()]).await;
    let _: i64 = servers[1].cmd(&["DEL", "wd-one"]);
    // Several renewal rounds; a renewal never re-creates the missing key.
    let until = Instant::now() + 2 * WATCHDOG;
    while Instant::now() < until {
        assert!(!g.lost().is_cancelled());
        assert_eq!(dbsize(&servers[1]), 0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(holders(&servers[0], "wd-one"), [g.holder()]);
    g.unlock().await.unwrap();
    assert!(eventually_async(Duration::from_secs(5), || no_keys(&servers)).await);
}

#[tokio::test]
async fn the_watchdog_declares_a_lock_lost_before_its_lease_can_run_out_on_a_majority() {
    let mut servers = start_many(3);
    // Watchdog lease 3 s, validity 3000 − (900 + 2) = 2098 ms: the guard must be lost
    // ~0.9 s before the key can expire, a margin no machine's scheduling eats up
    // (the test notes the instant it hears of the loss, later than the library).
    let cfg = config(&servers)
        .watchdog_timeout(Duration::from_secs(3))
        .drift_factor(0.3);
    let client = connect(cfg).await;
    let g = client.lock("wd-deadline").lock().await.unwrap();
    let lost = g.lost();
    // Let a renewal round (every 1 s) or two pass, then crash a majority.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pttl = |s: &RedisServer| s.cmd::<i64>(&["PTTL", "wd-deadline"]);
    let read = Instant::now();
    let left = pttl(&servers[0]).min(pttl(&servers[1]));
    servers[0].kill();
    servers[1].kill();
    // The crashed masters would let the key go (and a restarted pair let a second
    // client in) `left` ms from `read`; the holder must have been told before.
    let expires = read + Duration::from_millis(left as u64);
    let r = tokio::time::timeout(Duration::from_secs(10), lost.cancelled()).await;
    let at = Instant::now();
    assert!(r.is_ok(), "never declared lost");
    assert!(
        at < expires,
        "declared lost {:?} after the lease ran out",
        at - expires
    );
    drop(g);
}
