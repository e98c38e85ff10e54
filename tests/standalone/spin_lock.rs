//! The spin lock (Redisson `getSpinLock`) against a real redis-server: its waiters
//! never subscribe (checked with PUBSUB and CLIENT LIST while they wait) and retry
//! instead; its release publishes nothing; it re-enters like RLock; futures of one
//! task, several clients and several processes never overlap; a dropped wait leaves
//! nothing; a dead holder's lease frees it; bad input is typed; Redlock works.
//! (How long its back-off makes a waiter lag a release is measured in BENCHMARKS.md,
//! not asserted here.)

use redlatch_testkit as common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::inside::Inside;
use common::{calls, eventually_async, RedisServer};
use futures_util::stream::{self, StreamExt};
use redlatch::{BackOff, Client, Config, Error, Kind};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

/// Subscriptions of any kind held by any connection to `server`, but the notice
/// channels every client listens on for its life (one connection each, one channel).
fn subscribers(server: &RedisServer) -> Vec<String> {
    let notices: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", "redlatch_client__channel:*"]);
    let mut all = connection_subscriptions(server);
    for _ in &notices {
        if let Some(i) = all.iter().position(|l| l.contains(" sub=1 psub=0 ssub=0 ")) {
            all.remove(i);
        }
    }
    all
}

/// Subscriptions of any kind held by any connection to `server`.
fn connection_subscriptions(server: &RedisServer) -> Vec<String> {
    let list: String = server.cmd(&["CLIENT", "LIST"]);
    list.lines()
        .filter(|l| {
            l.split(' ').any(|f| {
                ["sub=", "psub=", "ssub="]
                    .iter()
                    .any(|p| f.strip_prefix(p).is_some_and(|n| n != "0"))
            })
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_waiter_retries_without_any_subscription_and_a_release_publishes_nothing() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let name = "spun";
    let held = a.spin_lock(name).lock().await.unwrap();
    let published = calls(&server, "publish");
    let tries = calls(&server, "evalsha") + calls(&server, "eval");
    let waiter = tokio::spawn({
        let lock = b.spin_lock(name);
        async move { lock.lock().await }
    });
    // It spins: its tries reach the server one after another while the lock is held…
    assert!(
        eventually_async(Duration::from_secs(10), || {
            calls(&server, "evalsha") + calls(&server, "eval") >= tries + 3
        })
        .await,
        "the waiter does not retry"
    );
    assert!(!waiter.is_finished());
    // … and nothing listens, anywhere, but each client's one notice channel (it
    // listens there for its life, for force-unlocks and release requests).
    let notices = |c: &str| c.starts_with("redlatch_client__channel:");
    assert_eq!(subscribers(&server), Vec::<String>::new());
    let mut channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", "*"]);
    channels.retain(|c| !notices(c));
    assert_eq!(channels, Vec::<String>::new());
    assert_eq!(
        common::numsub(&server, &format!("redisson_lock__channel:{{{name}}}")),
        0
    );
    assert_eq!(b.subscriptions(), 0);
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter's next try takes it")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
    assert_eq!(
        calls(&server, "publish"),
        published,
        "a spin release published"
    );
    assert!(!a.spin_lock(name).is_locked().await.unwrap());
}

#[tokio::test]
async fn a_bounded_wait_gives_up_only_when_its_time_is_over() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.spin_lock_with(
        "bounded",
        BackOff::constant(Duration::from_millis(7)).unwrap(),
    );
    let held = lock.lock().await.unwrap();
    for wait in [
        Duration::ZERO,
        Duration::from_millis(20),
        Duration::from_millis(150),
    ] {
        let started = Instant::now();
        assert!(lock.try_lock(wait).await.unwrap().is_none());
        assert!(started.elapsed() >= wait, "gave up before {wait:?}");
    }
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn it_re_enters_like_rlock_on_redissons_layout() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.spin_lock("reentrant");
    assert_eq!(lock.kind(), Kind::Spin);
    let guard = lock.lock().await.unwrap();
    let inner = guard.scope(lock.lock()).await.unwrap();
    let count: i64 = server.cmd(&["HGET", "reentrant", guard.holder()]);
    assert_eq!(count, 2);
    assert!(server.cmd::<i64>(&["PTTL", "reentrant"]) > 0);
    inner.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    guard.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "reentrant"]), 0);
}

#[tokio::test]
async fn futures_of_one_task_never_both_enter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.spin_lock("joined");
    let inside = Inside::default();
    tokio::join!(
        inside.section(&lock),
        inside.section(&lock),
        inside.section(&lock)
    );
    stream::iter(0..8)
        .for_each_concurrent(None, |_| inside.section(&lock))
        .await;
    assert_eq!(inside.most(), 1);
    assert_eq!(inside.sections(), 11);
    assert!(!lock.is_locked().await.unwrap());
}

const ROUNDS: usize = 12;
const TASKS: usize = 3;

async fn contend(url: &str) {
    let client = Client::connect(Config::single(url)).await.unwrap();
    let redis = redis::Client::open(url).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let lock = client.spin_lock("contended");
        let redis = redis.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = redis
                .get_multiplexed_async_connection_with_config(&common::conn::async_config())
                .await
                .unwrap();
            for _ in 0..ROUNDS {
                let guard = lock.lock().await.unwrap();
                let inside: i64 = redis::cmd("INCR")
                    .arg("inside")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if inside > 1 {
                    let _: i64 = redis::cmd("INCR")
                        .arg("overlaps")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _: i64 = redis::cmd("DECR")
                    .arg("inside")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let _: i64 = redis::cmd("INCR")
                    .arg("sections")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                guard.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    client.close(Duration::from_secs(5)).await;
}

/// Helper process for the contention test: runs only when REDLATCH_SPIN_CHILD is set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_contender() {
    let Ok(url) = std::env::var("REDLATCH_SPIN_CHILD") else {
        return;
    };
    contend(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_clients_and_processes_never_overlap() {
    let server = RedisServer::start();
    let url = server.url();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    redlatch_testkit::test_name!("child_process_contender").as_str(),
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("REDLATCH_SPIN_CHILD", &url)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    tokio::join!(contend(&url), contend(&url));
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "child: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        server.cmd::<Option<usize>>(&["GET", "sections"]),
        Some(4 * TASKS * ROUNDS)
    );
    assert_eq!(
        server.cmd::<Option<i64>>(&["GET", "overlaps"]),
        None,
        "two holders at once"
    );
    assert_eq!(server.cmd::<i64>(&["EXISTS", "contended"]), 0);
}

#[tokio::test]
async fn a_dropped_wait_leaves_nothing_behind() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let held = a.spin_lock("dropped").lock().await.unwrap();
    let waiting = b.spin_lock("dropped");
    // Dropped inside a try, or asleep between tries.
    for after in [0, 1, 2, 5, 17, 40] {
        let r = tokio::time::timeout(Duration::from_millis(after), waiting.lock()).await;
        assert!(r.is_err(), "acquired a held lock");
    }
    held.unlock().await.unwrap();
    // Nothing of the dropped waits holds it.
    assert!(
        eventually_async(Duration::from_secs(5), || server.dbsize() == 0).await,
        "keys left: {:?}",
        server.lock_keys("*")
    );
    assert_eq!(b.held_locks(), 0);
    let next = waiting
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .expect("free");
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn a_dead_holders_lease_frees_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let _: () = server.cmd(&["HSET", "dead", "00000000-dead:1", "1"]);
    let _: () = server.cmd(&["PEXPIRE", "dead", "300"]);
    let guard = client
        .spin_lock("dead")
        .try_lock(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the dead holder's lease runs out");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn bad_input_is_typed() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let r = client.spin_lock("").lock().await;
    assert!(matches!(r, Err(Error::InvalidName(_))), "{r:?}");
    let r = client
        .spin_lock("short")
        .lock_with_lease(Duration::from_micros(1))
        .await;
    assert!(matches!(r, Err(Error::InvalidLease(_))), "{r:?}");
    let _: () = server.cmd(&["SET", "a-string", "x"]);
    let r = client.spin_lock("a-string").lock().await;
    assert!(matches!(r, Err(Error::WrongType { .. })), "{r:?}");
    let ms = Duration::from_millis;
    assert!(matches!(
        BackOff::exponential(ms(0), ms(9), 2),
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        BackOff::exponential(ms(9), ms(1), 2),
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        BackOff::exponential(ms(1), ms(9), 0),
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        BackOff::constant(ms(0)),
        Err(Error::Config { .. })
    ));
}

#[tokio::test]
async fn redlock_over_three_masters() {
    let servers = common::start_many(3);
    let client = Client::connect(common::redlock::config(&servers))
        .await
        .unwrap();
    let lock = client.spin_lock("redlock");
    let guard = lock.lock().await.unwrap();
    let holder = guard.holder().to_string();
    common::redlock::settle_holders(&servers, "redlock", |_| vec![holder.clone()]).await;
    assert!(lock
        .try_lock(Duration::from_millis(20))
        .await
        .unwrap()
        .is_none());
    guard.unlock().await.unwrap();
    let inside = Inside::default();
    tokio::join!(
        inside.section(&lock),
        inside.section(&lock),
        inside.section(&lock)
    );
    assert_eq!(inside.most(), 1);
    for s in &servers {
        assert_eq!(subscribers(s), Vec::<String>::new());
        // Released at a majority; the last master's answer lands in the background.
        assert!(
            eventually_async(Duration::from_secs(5), || s
                .cmd::<i64>(&["EXISTS", "redlock"])
                == 0)
            .await
        );
    }
}

#[tokio::test]
async fn the_blocking_api_re_enters_per_thread_and_excludes_other_threads() {
    let server = RedisServer::start();
    let url = server.url();
    tokio::task::spawn_blocking(move || {
        let client = redlatch::blocking::Client::connect(Config::single(url)).unwrap();
        let lock = client.spin_lock("blocking");
        let outer = lock.lock().unwrap();
        let inner = lock.lock().unwrap();
        assert_eq!(lock.hold_count().unwrap(), 2);
        let other =
            std::thread::scope(|s| s.spawn(|| lock.try_lock(Duration::from_millis(20))).join());
        assert!(other.unwrap().unwrap().is_none());
        inner.unlock().unwrap();
        outer.unlock().unwrap();
    })
    .await
    .unwrap();
}
