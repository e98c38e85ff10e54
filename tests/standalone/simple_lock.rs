//! The simple lock (`Client::simple_lock`, the Redlock reference clients' `SET NX PX`
//! lock) against a real redis-server: its key is a string holding the holder's token
//! with the lease as its expiry, released by compare-and-delete; a reference client in
//! another process (redlatch_testkit::peer: redis-py's Lock / redsync's wire over raw
//! RESP) and redlatch exclude each other both ways, and each one's release lets the
//! other in; the watchdog extends it by compare-and-pexpire; it is not reentrant; its
//! waiters subscribe to nothing; queries, status and force-unlock read the string;
//! a Redisson-layout key is another type to it.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::peer::RedlockPeer;
use common::{eventually_async, RedisServer};
use redlatch::{Client, Config, Error, Kind};

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
async fn it_is_not_reentrant_and_its_waiters_subscribe_to_nothing() {
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
    // Another task waits, by polling: nothing is subscribed while it does.
    let started = Instant::now();
    let other = lock.try_lock(Duration::from_millis(300)).await.unwrap();
    assert!(other.is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(client.subscriptions(), 0);
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
    // What the scripts call inside (set, get, del) counts too.
    let sent: Vec<&(String, u64)> = (after.iter())
        .filter(|(n, _)| {
            !matches!(
                n.as_str(),
                "hset" | "hdel" | "pexpire" | "set" | "get" | "del"
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
