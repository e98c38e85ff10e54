//! The non-reentrant locks (Redisson `getNonReentrantLock`, `getNonReentrantFairLock`)
//! against a real redis-server: a holder asking again is refused with
//! `Error::Reentry` (lock and try_lock alike, as Redisson throws
//! IllegalMonitorStateException), any other holder waits; futures of one task exclude
//! each other; several clients and processes never overlap; a dropped wait leaves
//! nothing; a dead holder's lease frees the lock; bad input is typed; Redlock works.

use redlatch_testkit as common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::inside::Inside;
use common::{eventually_async, RedisServer};
use futures_util::stream::{self, StreamExt};
use redlatch::{Client, Config, Error, Kind, Lock};

const KINDS: [Kind; 2] = [Kind::NonReentrant, Kind::NonReentrantFair];

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn lock_of(client: &Client, kind: Kind, name: &str) -> Lock {
    match kind {
        Kind::NonReentrant => client.non_reentrant_lock(name),
        Kind::NonReentrantFair => client.non_reentrant_fair_lock(name),
        other => panic!("not a non-reentrant kind: {other:?}"),
    }
}

#[tokio::test]
async fn the_holder_is_refused_and_other_holders_wait() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for kind in KINDS {
        let name = format!("nr:{kind:?}");
        let lock = lock_of(&client, kind, &name);
        assert_eq!(lock.kind(), kind);
        let guard = lock.lock().await.unwrap();
        // The holder itself, in its guard's scope: refused, by lock() and try_lock().
        let again = guard.scope(lock.lock()).await;
        assert!(
            matches!(&again, Err(Error::Reentry { name: n }) if *n == name),
            "{kind:?}: {again:?}"
        );
        let again = guard.scope(lock.try_lock(Duration::from_secs(5))).await;
        assert!(matches!(again, Err(Error::Reentry { .. })), "{kind:?}");
        assert!(again.unwrap_err().is_permanent());
        // Nothing changed on the server: still one hold of one holder.
        let fields: HashMap<String, i64> = server.cmd(&["HGETALL", &name]);
        assert_eq!(fields, HashMap::from([(guard.holder().to_string(), 1)]));
        // Another call is another holder: busy, not an error.
        assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
        assert!(lock
            .try_lock(Duration::from_millis(50))
            .await
            .unwrap()
            .is_none());
        guard.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap());
    }
}

#[tokio::test]
async fn an_owner_is_one_holder_and_is_refused_wherever_it_asks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for kind in KINDS {
        let lock = lock_of(&client, kind, &format!("owned:{kind:?}"));
        let owner = client.owner();
        let guard = lock.owned_by(owner).lock().await.unwrap();
        let l = lock.owned_by(owner);
        let elsewhere = tokio::spawn(async move { l.try_lock(Duration::ZERO).await })
            .await
            .unwrap();
        assert!(matches!(elsewhere, Err(Error::Reentry { .. })), "{kind:?}");
        let other = client.owner();
        assert!(lock
            .owned_by(other)
            .try_lock(Duration::ZERO)
            .await
            .unwrap()
            .is_none());
        guard.unlock().await.unwrap();
        // Released, the owner may take it again.
        lock.owned_by(owner)
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
    }
}

/// A hold this client does not know (a Redisson thread, another redlatch process
/// reusing the id) is refused by the acquire script itself.
#[tokio::test]
async fn the_script_refuses_a_holder_already_in_the_hash() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for kind in KINDS {
        let name = format!("scripted:{kind:?}");
        let lock = lock_of(&client, kind, &name);
        let owner = client.owner();
        let holder = format!("{}:{}", client.id(), owner.number());
        let _: () = server.cmd(&["HSET", &name, &holder, "1"]);
        let _: () = server.cmd(&["PEXPIRE", &name, "30000"]);
        let r = lock.owned_by(owner).try_lock(Duration::ZERO).await;
        assert!(matches!(r, Err(Error::Reentry { .. })), "{kind:?}: {r:?}");
        // Not released by the refusal: the hold is still there, count 1.
        let count: i64 = server.cmd(&["HGET", &name, &holder]);
        assert_eq!(count, 1);
        let _: () = server.cmd(&["DEL", &name]);
    }
}

#[tokio::test]
async fn futures_of_one_task_never_both_enter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for kind in KINDS {
        let lock = lock_of(&client, kind, &format!("joined:{kind:?}"));
        let inside = Inside::default();
        tokio::join!(
            inside.section(&lock),
            inside.section(&lock),
            inside.section(&lock)
        );
        stream::iter(0..8)
            .for_each_concurrent(None, |_| inside.section(&lock))
            .await;
        assert_eq!(inside.most(), 1, "{kind:?}");
        assert_eq!(inside.sections(), 11, "{kind:?}");
        assert!(!lock.is_locked().await.unwrap());
    }
}

/// One critical section counted in Redis, so that processes see each other: INCR on
/// entry (a value above 1 is a second holder, recorded), DECR on exit.
async fn counted_section(lock: &Lock, conn: &mut redis::aio::MultiplexedConnection, key: &str) {
    let guard = lock.lock().await.unwrap();
    let inside: i64 = redis::cmd("INCR")
        .arg(format!("{key}:inside"))
        .query_async(conn)
        .await
        .unwrap();
    if inside > 1 {
        let _: i64 = redis::cmd("INCR")
            .arg(format!("{key}:overlaps"))
            .query_async(conn)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    let _: i64 = redis::cmd("DECR")
        .arg(format!("{key}:inside"))
        .query_async(conn)
        .await
        .unwrap();
    let _: i64 = redis::cmd("INCR")
        .arg(format!("{key}:sections"))
        .query_async(conn)
        .await
        .unwrap();
    guard.unlock().await.unwrap();
}

const ROUNDS: usize = 15;
const TASKS: usize = 3;

/// Helper process for the contention test: runs only when REDLATCH_NR_CHILD is set
/// (`url kind`), TASKS tasks of ROUNDS sections each on one client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_process_contender() {
    let Ok(spec) = std::env::var("REDLATCH_NR_CHILD") else {
        return;
    };
    let (url, kind) = spec.split_once(' ').unwrap();
    let kind = if kind == "fair" {
        Kind::NonReentrantFair
    } else {
        Kind::NonReentrant
    };
    contend(url, kind).await;
}

async fn contend(url: &str, kind: Kind) {
    let client = Client::connect(Config::single(url)).await.unwrap();
    let redis = redis::Client::open(url).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let lock = lock_of(&client, kind, "contended");
        let redis = redis.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = redis
                .get_multiplexed_async_connection_with_config(&common::conn::async_config())
                .await
                .unwrap();
            for _ in 0..ROUNDS {
                counted_section(&lock, &mut conn, "contended").await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    client.close(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_clients_and_processes_never_overlap() {
    for (kind, arg) in [
        (Kind::NonReentrant, "plain"),
        (Kind::NonReentrantFair, "fair"),
    ] {
        let server = RedisServer::start();
        let children: Vec<_> = (0..2)
            .map(|_| {
                Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        redlatch_testkit::test_name!("child_process_contender").as_str(),
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("REDLATCH_NR_CHILD", format!("{} {arg}", server.url()))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        // Two clients in this process besides.
        let url = server.url();
        tokio::join!(contend(&url, kind), contend(&url, kind));
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{kind:?} child: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let sections: usize = server
            .cmd::<Option<usize>>(&["GET", "contended:sections"])
            .unwrap();
        let overlaps: Option<i64> = server.cmd(&["GET", "contended:overlaps"]);
        assert_eq!(sections, 4 * TASKS * ROUNDS, "{kind:?}");
        assert_eq!(overlaps, None, "{kind:?}: two holders inside at once");
        assert_eq!(server.cmd::<i64>(&["EXISTS", "contended"]), 0);
    }
}

#[tokio::test]
async fn a_dropped_wait_leaves_nothing_behind() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    for kind in KINDS {
        let name = format!("dropped:{kind:?}");
        let held = lock_of(&a, kind, &name).lock().await.unwrap();
        let waiting = lock_of(&b, kind, &name);
        // Dropped at its await points: while subscribing, queued, waiting.
        for after in [0, 1, 5, 40] {
            let r = tokio::time::timeout(Duration::from_millis(after), waiting.lock()).await;
            assert!(r.is_err(), "{kind:?}: acquired a held lock");
        }
        held.unlock().await.unwrap();
        // The next caller gets it at once: no queue entry or hold was left.
        let next = lock_of(&b, kind, &name)
            .try_lock(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("free after the holder's release");
        next.unlock().await.unwrap();
        assert!(
            eventually_async(Duration::from_secs(5), || server.dbsize() == 0).await,
            "{kind:?}: keys left: {:?}",
            server.lock_keys("*")
        );
        assert_eq!(b.held_locks(), 0);
    }
}

#[tokio::test]
async fn a_dead_holders_lease_frees_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for kind in KINDS {
        let name = format!("dead:{kind:?}");
        // A holder that died: its hash and lease, nobody renewing it.
        let _: () = server.cmd(&["HSET", &name, "00000000-dead:1", "1"]);
        let _: () = server.cmd(&["PEXPIRE", &name, "300"]);
        let started = Instant::now();
        let guard = lock_of(&client, kind, &name)
            .try_lock(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("the dead holder's lease runs out");
        assert!(started.elapsed() < Duration::from_secs(10));
        guard.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn bad_input_is_typed() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for kind in KINDS {
        let r = lock_of(&client, kind, "").lock().await;
        assert!(matches!(r, Err(Error::InvalidName(_))), "{kind:?}: {r:?}");
        let r = lock_of(&client, kind, "short")
            .lock_with_lease(Duration::from_micros(1))
            .await;
        assert!(matches!(r, Err(Error::InvalidLease(_))), "{kind:?}: {r:?}");
        let _: () = server.cmd(&["SET", "a-string", "x"]);
        let r = lock_of(&client, kind, "a-string").lock().await;
        assert!(matches!(r, Err(Error::WrongType { .. })), "{kind:?}: {r:?}");
        assert_eq!(server.cmd::<String>(&["GET", "a-string"]), "x");
    }
}

#[tokio::test]
async fn redlock_over_three_masters() {
    let servers = common::start_many(3);
    let config = common::redlock::config(&servers);
    let client = Client::connect(config).await.unwrap();
    for kind in KINDS {
        let name = format!("redlock:{kind:?}");
        let lock = lock_of(&client, kind, &name);
        let guard = lock.lock().await.unwrap();
        let holder = guard.holder().to_string();
        common::redlock::settle_holders(&servers, &name, |_| vec![holder.clone()]).await;
        assert!(matches!(
            guard.scope(lock.lock()).await,
            Err(Error::Reentry { .. })
        ));
        let inside = Inside::default();
        let waiter = async {
            let g = lock.lock().await.unwrap();
            g.unlock().await.unwrap();
        };
        let release = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            guard.unlock().await.unwrap();
        };
        tokio::join!(waiter, release);
        tokio::join!(inside.section(&lock), inside.section(&lock));
        assert_eq!(inside.most(), 1);
        assert!(!lock.is_locked().await.unwrap());
    }
}

#[tokio::test]
async fn the_blocking_api_refuses_the_same_thread() {
    let server = RedisServer::start();
    let url = server.url();
    tokio::task::spawn_blocking(move || {
        let client = redlatch::blocking::Client::connect(Config::single(url)).unwrap();
        for lock in [
            client.non_reentrant_lock("blocking"),
            client.non_reentrant_fair_lock("blocking-fair"),
        ] {
            let guard = lock.lock().unwrap();
            assert!(matches!(lock.lock(), Err(Error::Reentry { .. })));
            assert!(matches!(
                lock.try_lock(Duration::ZERO),
                Err(Error::Reentry { .. })
            ));
            let other = std::thread::scope(|s| s.spawn(|| lock.try_lock(Duration::ZERO)).join());
            assert!(other.unwrap().unwrap().is_none());
            guard.unlock().unwrap();
        }
    })
    .await
    .unwrap();
}

/// The watchdog keeps a hold of every new kind past its lease, and `lost()` fires when
/// the lock is taken away (force-unlocked), as for the reentrant lock.
#[tokio::test]
async fn the_watchdog_keeps_them_and_lost_fires_when_they_go() {
    let server = RedisServer::start();
    let watchdog = Duration::from_millis(900);
    let client = Client::connect(Config::single(server.url()).watchdog_timeout(watchdog))
        .await
        .unwrap();
    let locks = [
        client.non_reentrant_lock("kept"),
        client.non_reentrant_fair_lock("kept-fair"),
        client.spin_lock("kept-spin"),
    ];
    let mut guards = Vec::new();
    for lock in &locks {
        guards.push(lock.lock().await.unwrap());
    }
    // Three leases long: only renewals can keep them.
    tokio::time::sleep(watchdog * 3).await;
    for (lock, guard) in locks.iter().zip(&guards) {
        assert!(!guard.lost().is_cancelled(), "{:?}", lock.kind());
        let count: i64 = server.cmd(&["HGET", lock.name(), guard.holder()]);
        assert_eq!(count, 1, "{:?}", lock.kind());
    }
    for (lock, guard) in locks.iter().zip(&guards) {
        assert!(lock.force_unlock().await.unwrap());
        tokio::time::timeout(Duration::from_secs(10), guard.lost().cancelled())
            .await
            .unwrap_or_else(|_| panic!("{:?}: lost() did not fire", lock.kind()));
    }
    for guard in guards {
        assert!(guard.unlock().await.unwrap_err().is_not_held());
    }
}
