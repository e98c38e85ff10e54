//! Issue 14: a release of a plain lock hands it to the longest-waiting live redlatch
//! client (no acquire round trip), not to every subscriber; a waiter that died, was
//! cancelled or timed out never keeps a handed lock nor strands the others; with a
//! Redisson waiter listening, the release publishes "0" and leaves the lock free.
//! Each "process" is its own `Client` (its own connections and subscriber). The tests
//! of the scripts themselves (the library's files, as it sends them) are `scripts`.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config, SyncReplicas};

mod scripts;

/// A lease without the watchdog: no renewal call lands among the counted ones, and a
/// waiter's TTL bound is far beyond any assertion's window (only a message explains an
/// acquisition within it).
const LEASE: Duration = Duration::from_secs(60);

/// Without replica sync: with the default (`SyncReplicas::Auto`) a waiter handed the
/// lock claims it with an extra acquire call whenever its client's replica count is
/// over 1 s old (a stale count makes acquisitions synced, even with no replica), so the
/// calls counted here would depend on how long the machine took to get there.
async fn client(server: &RedisServer) -> Client {
    let config =
        Config::single(server.url()).sync_replicas(SyncReplicas::Off, Duration::from_secs(1));
    Client::connect(config).await.unwrap()
}

fn registry_key(name: &str) -> String {
    format!("redlatch_lock_waiters:{{{name}}}")
}

/// The waiter registry of `name` (lua/pass_on.lua): tickets, oldest first.
fn registry(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&["ZRANGE", &registry_key(name), "0", "-1"])
}

/// Script calls so far (every acquire try and every release is one).
fn script_calls(server: &RedisServer) -> u64 {
    calls(server, "evalsha") + calls(server, "eval")
}

/// Starts a waiter on `name` in its own client, with [`LEASE`]; returns once it is
/// registered and subscribed (to the marker too). The task reports its index when it
/// holds the lock, and keeps it.
async fn registered_waiter(
    server: &RedisServer,
    name: &str,
    index: usize,
    got: tokio::sync::mpsc::UnboundedSender<usize>,
) -> (Client, tokio::task::JoinHandle<redlatch::LockGuard>) {
    let c = client(server).await;
    let lock = c.lock(name);
    let task = tokio::spawn(async move {
        let g = lock.lock_with_lease(LEASE).await.unwrap();
        got.send(index).unwrap();
        g
    });
    wait_registered(server, name, &c).await;
    (c, task)
}

/// Waits until a waiter of client `c` is in the registry of `name` and `c` listens on
/// its wake channel.
async fn wait_registered(server: &RedisServer, name: &str, c: &Client) {
    let id = c.id().to_string();
    let wake = format!("redisson_lock__channel:{{{name}}}:{id}");
    let ready =
        || registry(server, name).iter().any(|t| t.starts_with(&id)) && numsub(server, &wake) == 1;
    assert!(
        eventually_async(Duration::from_secs(5), ready).await,
        "the waiter of {id} never registered"
    );
}

/// Waits until no script call has come in for 500 ms (the waiters' attempt after
/// subscribing is done), at most 10 s; returns the count.
async fn settled_calls(server: &RedisServer) -> u64 {
    common::settled_calls(server, &["evalsha", "eval"]).await
}

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<usize>, why: &str) -> usize {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("{why} (the lease is 60 s)"))
        .unwrap()
}

#[tokio::test]
async fn a_release_hands_the_lock_to_the_longest_waiting_client_in_one_call() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("herd").lock_with_lease(LEASE).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..4 {
        waiters.push(registered_waiter(&server, "herd", i, tx.clone()).await);
    }
    // Every waiter listens on the shared channel too (Redisson's releases).
    assert_eq!(numsub(&server, "redisson_lock__channel:{herd}"), 4);
    let before = settled_calls(&server).await;
    g.unlock().await.unwrap();
    let first = next(&mut rx, "nobody was handed the lock").await;
    assert_eq!(first, 0, "the longest-waiting client goes first");
    // Let any wrongly woken waiter run its attempt.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        script_calls(&server) - before,
        1,
        "the release alone: wake-and-retry takes 2 calls, a herd 5"
    );
    assert!(rx.try_recv().is_err(), "only one waiter holds the lock");
    assert_eq!(registry(&server, "herd").len(), 3);
    // The others follow one by one, each handed the lock by the previous holder's
    // release, one call per hand-over.
    let mut order = vec![first];
    for _ in 1..4 {
        let (_, task) = &mut waiters[*order.last().unwrap()];
        let before = script_calls(&server);
        task.await.unwrap().unlock().await.unwrap();
        order.push(next(&mut rx, "a release must hand the lock on").await);
        assert_eq!(script_calls(&server) - before, 1);
    }
    assert_eq!(order, vec![0, 1, 2, 3]);
    let (_, last) = &mut waiters[3];
    last.await.unwrap().unlock().await.unwrap();
    let keys: Vec<String> = server.lock_keys("*herd*");
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

#[tokio::test]
async fn a_handed_lock_has_the_waiters_lease_and_reenters_like_any_other() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("lease").lock_with_lease(LEASE).await.unwrap();
    let waiter = client(&server).await;
    let lock = waiter.lock("lease");
    let task = tokio::spawn(async move {
        let g = lock.lock_with_lease(Duration::from_secs(40)).await.unwrap();
        let validity = g.validity();
        let again = (g.scope(lock.lock_with_lease(Duration::from_secs(40))).await).unwrap();
        let count = lock.hold_count().await.unwrap();
        again.unlock().await.unwrap();
        let still = lock.is_held_by_current_task().await.unwrap();
        (g, validity, count, still)
    });
    wait_registered(&server, "lease", &waiter).await;
    let before = settled_calls(&server).await;
    g.unlock().await.unwrap();
    let (g, validity, count, still) = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("not handed the lock")
        .unwrap();
    // The release, the re-entry and its release: the hand-over itself took no call.
    assert_eq!(script_calls(&server) - before, 3);
    assert!(validity <= Duration::from_secs(40), "{validity:?}");
    assert!(validity > Duration::from_secs(25), "{validity:?}");
    assert_eq!(count, 2);
    assert!(still);
    let pttl: i64 = server.cmd(&["PTTL", "lease"]);
    assert!(
        (1..=40_000).contains(&pttl),
        "the waiter's 40 s lease, not 60 s: {pttl}"
    );
    // Its guard's deadline is no later than the lease on the server.
    assert!(g.validity() <= Duration::from_millis(pttl as u64));
    g.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "lease"]), 0);
}

#[tokio::test]
async fn a_dead_client_is_skipped_and_removed() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("dead").lock_with_lease(LEASE).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let live = registered_waiter(&server, "dead", 0, tx).await;
    // The ticket of a waiter whose process died: registered first, nobody listens.
    let ghost = "00000000-0000-4000-8000-000000000000:1:1:60000";
    let _: i64 = server.cmd(&["ZADD", &registry_key("dead"), "1", ghost]);
    assert_eq!(registry(&server, "dead")[0], ghost);
    g.unlock().await.unwrap();
    assert_eq!(next(&mut rx, "the live waiter was stranded").await, 0);
    assert!(
        registry(&server, "dead").is_empty(),
        "the dead ticket is removed"
    );
    let holders: Vec<String> = server.cmd(&["HKEYS", "dead"]);
    assert_eq!(holders.len(), 1);
    assert!(
        holders[0].starts_with(&live.0.id().to_string()),
        "{holders:?}"
    );
    live.1.await.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn a_hand_over_to_a_wait_that_ended_is_released_and_passed_on() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("gone").lock_with_lease(LEASE).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (a, a_task) = registered_waiter(&server, "gone", 0, tx.clone()).await;
    let (_b, b_task) = registered_waiter(&server, "gone", 1, tx).await;
    // A wait of client A that has just ended (timed out or cancelled) but is still at
    // the head of the registry: A listens on its wake channel (for its live waiter),
    // so the release hands the lock to the ended wait and A must pass it on at once.
    let ended = format!("{}:999999:424242:60000", a.id());
    let _: i64 = server.cmd(&["ZADD", &registry_key("gone"), "1", &ended]);
    g.unlock().await.unwrap();
    assert_eq!(
        next(&mut rx, "the handed lock was kept by a wait that ended").await,
        0,
        "passed on to the next in line: A's live waiter"
    );
    let holders: Vec<String> = server.cmd(&["HKEYS", "gone"]);
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert!(!holders[0].ends_with(":999999"), "{holders:?}");
    a_task.await.unwrap().unlock().await.unwrap();
    assert_eq!(next(&mut rx, "B was not handed the lock").await, 1);
    b_task.await.unwrap().unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "gone"]), 0);
}

#[tokio::test]
async fn a_cancelled_waiter_passes_a_hand_over_on() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    for round in 0..6 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let name = format!("cancel{round}");
        let g = holder.lock(name.clone()).lock().await.unwrap();
        let (_first_client, first) = registered_waiter(&server, &name, 0, tx.clone()).await;
        let (_second_client, second) = registered_waiter(&server, &name, 1, tx.clone()).await;
        // The longest-waiting waiter is cancelled around the release (before it, just
        // after it, or once the hand-over had time to arrive): the second one must get
        // the lock well within the 60 s lease either way.
        match round % 3 {
            0 => {
                first.abort();
                g.unlock().await.unwrap();
            }
            1 => {
                g.unlock().await.unwrap();
                first.abort();
            }
            _ => {
                g.unlock().await.unwrap();
                tokio::task::yield_now().await;
                first.abort();
            }
        }
        // With the handle goes a guard the first may have returned already.
        drop(first);
        let got = next(
            &mut rx,
            "a cancelled waiter kept the lock or stranded the other",
        )
        .await;
        if got == 0 {
            // The first took the lock before it was cancelled: its guard went with the
            // aborted task, and that release hands the lock on.
            assert_eq!(next(&mut rx, "the aborted holder's release").await, 1);
        }
        second.await.unwrap().unlock().await.unwrap();
        let (server, name) = (&server, name.clone());
        assert!(
            eventually_async(Duration::from_secs(5), || registry(server, &name)
                .is_empty()
                && server.lock_keys(&format!("*{name}*")).is_empty())
            .await,
            "round {round}: something was left behind"
        );
    }
}

#[tokio::test]
async fn a_waiter_that_times_out_leaves_the_registry() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("late").lock().await.unwrap();
    let other = client(&server).await;
    let got = other
        .lock("late")
        .try_lock(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(got.is_none());
    assert!(registry(&server, "late").is_empty());
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn with_a_redisson_waiter_listening_the_release_only_publishes_zero() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("mixed").lock_with_lease(LEASE).await.unwrap();
    let mut java_conn = server.conn();
    let mut java = java_conn.as_pubsub();
    java.subscribe("redisson_lock__channel:{mixed}").unwrap();
    java.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (ours, task) = registered_waiter(&server, "mixed", 0, tx).await;
    // Listens beside our waiter's client on its wake channel: a hand-over would show.
    let mut spy_conn = server.conn();
    let mut spy = spy_conn.as_pubsub();
    spy.subscribe(format!("redisson_lock__channel:{{mixed}}:{}", ours.id()))
        .unwrap();
    spy.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let before = settled_calls(&server).await;
    g.unlock().await.unwrap();
    let msg = java
        .get_message()
        .expect("the Redisson waiter was not woken");
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_eq!(next(&mut rx, "our waiter was not woken").await, 0);
    // Our waiter competed with an attempt of its own, as under Redisson.
    assert_eq!(script_calls(&server) - before, 2);
    assert!(spy.get_message().is_err(), "the lock was handed over");
    task.await.unwrap().unlock().await.unwrap();
}

/// With replicas to acknowledge acquisitions (`sync_replicas`), nobody waited for the
/// release script's write: the waiter claims the handed lock with its own (synced)
/// attempt, so its `lock()` returns only once the replica has the hold.
#[tokio::test]
async fn with_replicas_to_sync_a_hand_over_is_claimed_by_a_synced_attempt() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let up = common::eventually(Duration::from_secs(10), || {
        replica
            .cmd::<String>(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    assert!(up, "the replica never synced");
    // Acknowledging on the primary's side too: until the primary lists it online with
    // an acknowledged offset, a replica count finds nothing to wait for and is trusted
    // for a second, so the claim below would not wait (seen once under load).
    primary.set_replicated("warm", "1", 1);
    let config = || {
        Config::single(primary.url())
            .sync_replicas(redlatch::SyncReplicas::Auto, Duration::from_secs(2))
    };
    let holder = Client::connect(config()).await.unwrap();
    let g = holder.lock("synced").lock_with_lease(LEASE).await.unwrap();
    let waiter = Client::connect(config()).await.unwrap();
    let lock = waiter.lock("synced");
    let task = tokio::spawn(async move { lock.lock_with_lease(LEASE).await.unwrap() });
    wait_registered(&primary, "synced", &waiter).await;
    let before = settled_calls(&primary).await;
    g.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("not handed the lock (the lease is 60 s)")
        .unwrap();
    let holders: Vec<String> = replica.cmd(&["HKEYS", "synced"]);
    assert_eq!(
        holders.len(),
        1,
        "lock() returned before the replica had it"
    );
    assert!(holders[0].starts_with(&waiter.id().to_string()));
    // The release, and the claim (not an ordinary acquisition: nothing else could have
    // taken the lock in between, and the claim removed the hand-over's mark).
    assert_eq!(script_calls(&primary) - before, 2);
    let handed: Option<String> = primary.cmd(&["GET", "redlatch_lock_waiters:{synced}:handed"]);
    assert_eq!(handed, None);
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn no_double_grant_under_a_bounded_storm_of_waits_and_cancellations() {
    let server = RedisServer::start();
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for c in 0..4 {
        let client = client(&server).await;
        for t in 0..2 {
            let lock = client.lock("storm");
            let (inside, done, url) = (inside.clone(), done.clone(), server.url());
            tasks.push(tokio::spawn(async move {
                let mut conn = common::conn::async_conn(url.as_str()).await;
                for i in 0..25u64 {
                    let seed = (c * 2 + t) as u64 * 1000 + i;
                    if seed.is_multiple_of(4) {
                        // A caller that gives up after 0-3 ms (dropped mid-wait).
                        let patience = Duration::from_micros(seed.wrapping_mul(2654435761) % 3000);
                        let _ = tokio::time::timeout(patience, lock.lock_with_lease(LEASE)).await;
                        continue;
                    }
                    // 8 s, under the 60 s lease: a handed lock left behind stalls the storm.
                    let g =
                        tokio::time::timeout(Duration::from_secs(8), lock.lock_with_lease(LEASE))
                            .await
                            .expect("stalled: a hand-over was lost")
                            .unwrap();
                    assert_eq!(
                        inside.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two holders at once"
                    );
                    let holders: Vec<(String, i64)> = redis::cmd("HGETALL")
                        .arg("storm")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    assert_eq!(holders.len(), 1, "{holders:?}");
                    assert_eq!(holders[0].1, 1, "hold count {holders:?}");
                    tokio::time::sleep(Duration::from_micros(seed % 700)).await;
                    inside.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        clients.push(client);
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("the storm did not end")
            .unwrap();
    }
    assert!(done.load(Ordering::SeqCst) >= 100);
    let server = &server;
    assert!(
        eventually_async(Duration::from_secs(5), || server
            .lock_keys("*storm*")
            .is_empty())
        .await,
        "left behind: {:?}",
        server.lock_keys("*storm*")
    );
}

#[tokio::test]
async fn nobody_waiting_means_nothing_published() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let before = calls(&server, "publish");
    for _ in 0..5 {
        c.lock("quiet")
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
    }
    assert_eq!(calls(&server, "publish") - before, 0);
    assert!(registry(&server, "quiet").is_empty());
}

/// Storms of cancelled `lock()` calls on one master, where every wait registers and a
/// hand-over may land on any of them as it is cancelled: once `close()` returns,
/// nothing of the client is left (tests/standalone/hardening.rs does the same under Redlock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_storms_on_one_master_leave_nothing_after_close() {
    for storm in 0..6 {
        let server = RedisServer::start();
        let c = client(&server).await;
        let id = c.id().to_string();
        common::cancelled_storm(&c, "storm:", 8, 1500).await;
        common::assert_no_holds(&server, "storm:*", &id, &format!("storm {storm}"));
    }
}

/// With replica sync on by default (`SyncReplicas::Auto`) and no replica, a handed lock
/// is taken from the message however long the waiter waited: a replica count that is
/// merely older than its recount period is no reason to claim the lock again (it cost a
/// round trip per hand-over for every wait over a second).
#[tokio::test]
async fn without_replicas_a_long_wait_is_still_handed_over_in_one_call() {
    let server = RedisServer::start();
    let auto = || Config::single(server.url()); // SyncReplicas::Auto, the default
    let holder = Client::connect(auto()).await.unwrap();
    let g = holder.lock("long").lock_with_lease(LEASE).await.unwrap();
    let waiter = Client::connect(auto()).await.unwrap();
    let lock = waiter.lock("long");
    let task = tokio::spawn(async move { lock.lock_with_lease(LEASE).await.unwrap() });
    wait_registered(&server, "long", &waiter).await;
    // Past the replica recount period (1 s) of both clients.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = settled_calls(&server).await;
    g.unlock().await.unwrap();
    let handed = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the waiter was not handed the lock")
        .unwrap();
    // Let a claim, if any, land before counting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        script_calls(&server) - before,
        1,
        "the release alone; a claim would add one"
    );
    handed.unlock().await.unwrap();
}
