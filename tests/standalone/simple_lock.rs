//! The simple lock (`Client::simple_lock`, the Redlock reference clients' `SET NX PX`
//! lock) against a real redis-server: its key is a string holding the holder's token
//! with the lease as its expiry, released by compare-and-delete; a reference client in
//! another process (redlatch_testkit::peer: redis-py's Lock / redsync's wire over raw
//! RESP) and redlatch exclude each other both ways, and each one's release lets the
//! other in; the watchdog extends it by compare-and-pexpire; it is not reentrant; its
//! waiters poll with the back-off set and are woken at once by a redlatch release (a
//! message on `…:redlatch-simple`, published only when someone listens); queries,
//! status and force-unlock read the string; a Redisson-layout key is another type to
//! it; a process loads only the scripts it calls (issue 46.7).

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::peer::RedlockPeer;
use common::{eventually_async, RedisServer};
use redlatch::{BackOff, Client, Config, Error, Kind};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn get(server: &RedisServer, name: &str) -> Option<String> {
    server.cmd(&["GET", name])
}

fn pttl(server: &RedisServer, name: &str) -> i64 {
    server.cmd(&["PTTL", name])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_key_is_a_string_with_the_token_and_the_lease_and_release_deletes_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.simple_lock("simple:wire");
    assert_eq!(lock.kind(), Kind::Simple);
    let guard = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let key_type: String = server.cmd(&["TYPE", "simple:wire"]);
    assert_eq!(key_type, "string");
    assert_eq!(get(&server, "simple:wire").as_deref(), Some(guard.holder()));
    let ttl = pttl(&server, "simple:wire");
    assert!(ttl > 15_000 && ttl <= 20_000, "PX lease: {ttl}");
    // The queries read the string.
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(guard.scope(lock.hold_count()).await.unwrap(), 1);
    assert!(guard.scope(lock.is_held_by_current_task()).await.unwrap());
    assert!(lock.remaining_ttl().await.unwrap().unwrap() > Duration::from_secs(15));
    let status = lock.status().await.unwrap();
    assert_eq!(status[0].key_type, "string");
    assert_eq!(status[0].holders, [(guard.holder().to_string(), 1)]);
    // Only the token's own key is deleted.
    guard.unlock().await.unwrap();
    assert_eq!(get(&server, "simple:wire"), None);
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_client_holding_the_name_blocks_redlatch_and_its_release_lets_it_in() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "simple:peer-first";
    let mut peer = RedlockPeer::start(
        &[&server],
        name,
        Duration::from_secs(30),
        Duration::from_secs(5),
    );
    let token = peer.held().await.expect("the peer takes the free lock");
    let lock = client.simple_lock(name);
    assert!(lock
        .try_lock(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(
        lock.status().await.unwrap()[0].holders,
        [(token.clone(), 1)]
    );
    // A waiter polls; the peer's compare-and-delete lets it in.
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock(Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "acquired while the peer held it");
    assert_eq!(peer.release().await, 1);
    let guard = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("acquired after the release");
    assert_eq!(get(&server, name).as_deref(), Some(guard.holder()));
    guard.unlock().await.unwrap();
    assert_eq!(get(&server, name), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlatch_holding_the_name_blocks_a_reference_client_and_its_release_lets_it_in() {
    let server = RedisServer::start();
    // Renewed every 0.5 s: the peer's tries span several leases.
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(config).await.unwrap();
    let name = "simple:redlatch-first";
    let guard = client.simple_lock(name).lock().await.unwrap();
    // The peer retries for two leases: the watchdog's compare-and-pexpire keeps it out.
    let refused = RedlockPeer::start(
        &[&server],
        name,
        Duration::from_secs(30),
        Duration::from_secs(3),
    );
    assert_eq!(refused.held().await, None);
    assert_eq!(get(&server, name).as_deref(), Some(guard.holder()));
    assert!(pttl(&server, name) > 0);
    // A waiting peer gets it once redlatch releases.
    let mut peer = RedlockPeer::start(
        &[&server],
        name,
        Duration::from_secs(30),
        Duration::from_secs(20),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.unlock().await.unwrap();
    let token = peer
        .held()
        .await
        .expect("the peer takes it after the release");
    assert_eq!(get(&server, name), Some(token));
    // redlatch's compare-and-delete of a lost hold never touches the peer's key: a
    // force-unlock is the operator's, and it does.
    let lock = client.simple_lock(name);
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert!(lock.force_unlock().await.unwrap());
    assert_eq!(peer.release().await, 0, "the key was force-unlocked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_extends_it_and_a_peer_extending_someone_elses_key_fails() {
    let server = RedisServer::start();
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(900));
    let client = Client::connect(config).await.unwrap();
    let name = "simple:renewed";
    let guard = client.simple_lock(name).lock().await.unwrap();
    let before = client_renewals(&server);
    // Held past three leases: renewed, never lost.
    let held = eventually_async(Duration::from_secs(15), || {
        client_renewals(&server) >= before + 3
    })
    .await;
    assert!(held, "the watchdog did not renew");
    assert!(!guard.lost().is_cancelled());
    assert_eq!(get(&server, name).as_deref(), Some(guard.holder()));
    // Its hold is lost when the key is taken away, and redlatch says so.
    server.cmd::<i64>(&["DEL", name]);
    tokio::time::timeout(Duration::from_secs(10), guard.lost().cancelled())
        .await
        .expect("the watchdog finds the key gone");
}

/// EVALSHA calls of the renewal script so far (the watchdog's rounds).
fn client_renewals(server: &RedisServer) -> u64 {
    common::calls(server, "evalsha") + common::calls(server, "eval")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn it_is_not_reentrant_and_a_waiter_polls_until_its_wait_runs_out() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.simple_lock("simple:once");
    let guard = lock.lock().await.unwrap();
    // The holder (inside its guard's scope) is refused at once.
    let again = guard.scope(lock.try_lock(Duration::from_secs(5))).await;
    assert!(matches!(again, Err(Error::Reentry { .. })), "{again:?}");
    // The blocking API's holder is its thread: a second lock() on it is refused too.
    let url = server.url();
    std::thread::spawn(move || {
        let client = redlatch::blocking::Client::connect(Config::single(url)).unwrap();
        let lock = client.simple_lock("simple:thread");
        let guard = lock.lock().unwrap();
        assert!(matches!(lock.lock(), Err(Error::Reentry { .. })));
        guard.unlock().unwrap();
    })
    .join()
    .unwrap();
    // Another task waits, by polling (and listening): it gives up at its deadline.
    let started = Instant::now();
    let other = lock.try_lock(Duration::from_millis(300)).await.unwrap();
    assert!(other.is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_layout_key_is_another_type_both_ways() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let plain = client.lock("simple:typed").lock().await.unwrap();
    let simple = client.simple_lock("simple:typed");
    let err = simple.try_lock(Duration::ZERO).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    assert!(matches!(
        simple.is_locked().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        simple.force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    plain.unlock().await.unwrap();
    // The plain lock's try on a simple lock's key never takes it (it reads the key as
    // busy or as another type, by the path its attempt took).
    let held = simple.lock().await.unwrap();
    let plain = client.lock("simple:typed").try_lock(Duration::ZERO).await;
    assert!(!matches!(plain, Ok(Some(_))), "{plain:?}");
    assert_eq!(get(&server, "simple:typed").as_deref(), Some(held.holder()));
    held.unlock().await.unwrap();
    // A string without expiry is nobody's lock: reported, not waited on forever.
    server.cmd::<String>(&["SET", "simple:forever", "x"]);
    let err = client
        .simple_lock("simple:forever")
        .lock()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BadData { .. }), "{err:?}");
}

/// `INFO stats`' `field` read on `conn`.
fn stat(conn: &mut redis::Connection, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(conn).unwrap();
    common::info_field(&info, field).unwrap().parse().unwrap()
}

/// `INFO commandstats` as `(command, calls)` on `conn`, the test's own `INFO` and
/// `CONFIG RESETSTAT` left out.
fn commands(conn: &mut redis::Connection) -> Vec<(String, u64)> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let mut out: Vec<(String, u64)> = (info.lines())
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            Some((name.to_string(), rest.split(',').next()?.parse().ok()?))
        })
        .filter(|(name, _)| name != "info" && name != "config|resetstat")
        .collect();
    out.sort();
    out
}

/// Issue 46.7: nothing is loaded at connect, and an uncontended lock and unlock cost
/// two round trips on the connection connect opened (each script's first call is its
/// `SCRIPT LOAD` and `EVALSHA` written together), and close one more (the client
/// record's `DEL`). Round trips are the server's read events (`total_reads_processed`,
/// one per request the client wrote at once) less those of background writes that may
/// fall in the window (the ledger's and the record's flushes: one `HSET` or `HDEL`
/// each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_costs_two_round_trips_after_connect_and_close_one() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = client(&server).await;
    let loaded = commands(&mut conn);
    assert!(
        !loaded
            .iter()
            .any(|(name, _)| name.starts_with("script") || name.starts_with("eval")),
        "connect loaded or ran scripts: {loaded:?}"
    );
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .unwrap();
    let (reads, conns) = (
        stat(&mut conn, "total_reads_processed"),
        stat(&mut conn, "total_connections_received"),
    );
    let lock = client.simple_lock("simple:trips");
    lock.lock().await.unwrap().unlock().await.unwrap();
    let reads = stat(&mut conn, "total_reads_processed") - reads - 2; // our own INFOs
    let after = commands(&mut conn);
    let background = |cmds: &[(String, u64)]| -> u64 {
        cmds.iter()
            .filter(|(n, _)| n == "hset" || n == "hdel")
            .map(|(_, c)| c)
            .sum()
    };
    assert_eq!(reads - background(&after), 2, "reads {reads}: {after:?}");
    assert_eq!(
        stat(&mut conn, "total_connections_received"),
        conns,
        "a connection opened after connect"
    );
    // What the scripts call inside (set, get, del, the release's pubsub numsub) counts
    // too.
    let sent: Vec<&(String, u64)> = (after.iter())
        .filter(|(n, _)| {
            !matches!(
                n.as_str(),
                "hset" | "hdel" | "pexpire" | "set" | "get" | "del" | "pubsub|numsub"
            )
        })
        .collect();
    assert_eq!(
        sent,
        [&("evalsha".to_string(), 2), &("script|load".to_string(), 2)],
        "{after:?}"
    );
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .unwrap();
    client.close(Duration::from_secs(5)).await;
    assert_eq!(commands(&mut conn), [("del".to_string(), 1)]);
    // A second lock of the same client: EVALSHA alone.
    let client = self::client(&server).await;
    let lock = client.simple_lock("simple:trips");
    lock.lock().await.unwrap().unlock().await.unwrap();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    let again = commands(&mut conn);
    assert!(again.contains(&("evalsha".to_string(), 2)), "{again:?}");
    assert!(!again.iter().any(|(n, _)| n == "script|load"), "{again:?}");
}

/// Scripts flushed while the client runs (`SCRIPT FLUSH`): the next call meets
/// NOSCRIPT once, runs (EVAL), and the call after loads the script again with its
/// EVALSHA in one round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_costs_one_reload_and_the_next_call_loads_again() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let client = client(&server).await;
    let lock = client.simple_lock("simple:flushed");
    lock.lock().await.unwrap().unlock().await.unwrap();
    redis::cmd("SCRIPT").arg("FLUSH").exec(&mut conn).unwrap();
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec(&mut conn)
        .unwrap();
    let guard = lock.lock().await.unwrap();
    assert_eq!(
        get(&server, "simple:flushed").as_deref(),
        Some(guard.holder())
    );
    guard.unlock().await.unwrap();
    let after = commands(&mut conn);
    let calls = |name: &str| after.iter().find(|(n, _)| n == name).map_or(0, |(_, c)| *c);
    // The acquire: EVALSHA (NOSCRIPT), EVAL; the release: SCRIPT LOAD + EVALSHA.
    assert_eq!((calls("eval"), calls("script|load")), (1, 1), "{after:?}");
    assert_eq!(get(&server, "simple:flushed"), None);
}

/// `PUBSUB NUMSUB` of `channel`.
fn listeners(server: &RedisServer, channel: &str) -> i64 {
    let counts: Vec<redis::Value> = server.cmd(&["PUBSUB", "NUMSUB", channel]);
    redis::from_redis_value(counts[1].clone()).unwrap()
}

/// Issue 46.7: a waiter whose back-off is far longer than the test (30 s) is woken by
/// another client's release at once: the release publishes on the lock's
/// `:redlatch-simple` channel because the waiter listens there; a release nobody waits
/// for publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlatch_release_wakes_another_clients_waiter_at_once() {
    let server = RedisServer::start();
    let (holder, waiter) = (client(&server).await, client(&server).await);
    let name = "simple:woken";
    let channel = "redisson_lock__channel:{simple:woken}:redlatch-simple";
    let lone = holder.simple_lock("simple:alone").lock().await.unwrap();
    lone.unlock().await.unwrap();
    assert_eq!(
        common::calls(&server, "publish"),
        0,
        "published with nobody waiting"
    );
    let guard = holder.simple_lock(name).lock().await.unwrap();
    let slow = BackOff::constant(Duration::from_secs(30)).unwrap();
    let lock = waiter.simple_lock_with(name, slow);
    let waiting = tokio::spawn(async move {
        let got = lock.try_lock(Duration::from_secs(25)).await;
        (got, Instant::now())
    });
    // Listening, and its try after subscribing refused (the next one is 30 s away).
    assert!(eventually_async(Duration::from_secs(10), || listeners(&server, channel) == 1).await);
    common::settled_calls(&server, &["evalsha", "eval"]).await;
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let (got, at) = waiting.await.unwrap();
    let got = got.unwrap().expect("woken by the release");
    // Woken, not polled: the next poll was 30 s after the subscription.
    assert!(
        at - released < Duration::from_secs(10),
        "{:?}",
        at - released
    );
    assert_eq!(common::calls(&server, "publish"), 1);
    got.unlock().await.unwrap();
    assert_eq!(get(&server, name), None);
}

/// Issue 46.7: a task of the same client is woken by its release without a message,
/// and force-unlock wakes a waiter as a release does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_release_and_a_force_unlock_wake_waiters_at_once() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let slow = BackOff::constant(Duration::from_secs(30)).unwrap();
    for force in [false, true] {
        let name = if force {
            "simple:forced"
        } else {
            "simple:local"
        };
        let channel = format!("redisson_lock__channel:{{{name}}}:redlatch-simple");
        let guard = a.simple_lock(name).lock().await.unwrap();
        // The same client's waiter, or another's while the name is force-unlocked.
        let lock = if force {
            b.simple_lock_with(name, slow)
        } else {
            a.simple_lock_with(name, slow)
        };
        let waiting = tokio::spawn(async move { lock.try_lock(Duration::from_secs(25)).await });
        assert!(
            eventually_async(Duration::from_secs(10), || listeners(&server, &channel)
                >= 1)
            .await
        );
        common::settled_calls(&server, &["evalsha", "eval"]).await;
        let released = Instant::now();
        match force {
            true => assert!(b.simple_lock(name).force_unlock().await.unwrap()),
            false => guard.unlock().await.unwrap(),
        }
        let got = waiting.await.unwrap().unwrap().expect("woken");
        assert!(
            released.elapsed() < Duration::from_secs(10),
            "{:?}",
            released.elapsed()
        );
        got.unlock().await.unwrap();
    }
}

/// Issue 46.7: a foreign holder's release publishes nothing; the waiter sees it at its
/// next poll, spaced by the back-off it was given (here 100 ms: well before the peer's
/// 30 s lease would have ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_release_is_seen_at_the_next_poll_of_the_backoff_set() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "simple:polled";
    let mut peer = RedlockPeer::start(
        &[&server],
        name,
        Duration::from_secs(30),
        Duration::from_secs(5),
    );
    peer.held().await.expect("the peer takes the free lock");
    let every = BackOff::constant(Duration::from_millis(100)).unwrap();
    let lock = client.simple_lock_with(name, every);
    let waiting = tokio::spawn(async move { lock.try_lock(Duration::from_secs(25)).await });
    let channel = "redisson_lock__channel:{simple:polled}:redlatch-simple";
    assert!(eventually_async(Duration::from_secs(10), || listeners(&server, channel) == 1).await);
    let released = Instant::now();
    assert_eq!(peer.release().await, 1);
    let got = waiting.await.unwrap().unwrap().expect("seen at a poll");
    assert!(
        released.elapsed() < Duration::from_secs(10),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(common::calls(&server, "publish"), 0);
    got.unlock().await.unwrap();
}

/// Issue 46.8: what a foreign client can still do to a simple lock. ShedLock unlocks
/// with a plain `DEL` and, during `lockAtLeastFor`, shortens with `SET XX PX`: a
/// ShedLock run that outlived its `lockAtMostFor` deletes or overwrites the key we took
/// since. Our holder learns it at its next renewal (every third of the watchdog
/// timeout: here 1 s), and its release then leaves the other value alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_del_or_overwrite_is_learnt_at_the_next_renewal() {
    let server = RedisServer::start();
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_secs(3));
    let client = Client::connect(config).await.unwrap();
    let shedlock = "ADDED:2026-12-02T01:22:33.456Z@build-7";
    for overwrite in [false, true] {
        let name = if overwrite {
            "simple:overwritten"
        } else {
            "simple:deleted"
        };
        let guard = client.simple_lock(name).lock().await.unwrap();
        let at = Instant::now();
        match overwrite {
            true => server.cmd::<()>(&["SET", name, shedlock, "XX", "PX", "60000"]),
            false => server.cmd::<()>(&["DEL", name]),
        }
        tokio::time::timeout(Duration::from_secs(20), guard.lost().cancelled())
            .await
            .expect("lost at the next renewal");
        // One renewal period (1 s) and a loaded machine's slack.
        assert!(
            at.elapsed() < Duration::from_secs(1) + Duration::from_secs(5),
            "{:?}",
            at.elapsed()
        );
        let err = guard.unlock().await.unwrap_err();
        assert!(err.is_not_held(), "{err}");
        let left = get(&server, name);
        assert_eq!(left.as_deref(), overwrite.then_some(shedlock));
    }
}
