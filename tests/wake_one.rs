//! Issue 14: a release of a plain lock wakes one waiting client (the longest-waiting),
//! not every subscriber; a waiter that died or was cancelled never strands the others.
//! Each "process" is its own `Client` (its own connections and subscriber).

mod common;

use std::time::Duration;

use common::{calls, eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

/// A lease without the watchdog: no renewal call lands among the counted ones, and a
/// waiter's TTL bound is far beyond any assertion's window.
const LEASE: Duration = Duration::from_secs(60);

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

/// The waiter registry of `name` (lua/wake_one.lua), oldest first.
fn registry(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&[
        "ZRANGE",
        &format!("redlatch_lock_waiters:{{{name}}}"),
        "0",
        "-1",
    ])
}

/// Script calls so far (every acquire try and every release is one).
fn script_calls(server: &RedisServer) -> u64 {
    calls(server, "evalsha") + calls(server, "eval")
}

/// Starts a waiter on `name` in its own client; returns once it is registered and
/// subscribed (to the marker too). The task reports its index when it holds the lock,
/// and keeps it.
async fn registered_waiter(
    server: &RedisServer,
    name: &str,
    index: usize,
    got: tokio::sync::mpsc::UnboundedSender<usize>,
) -> (Client, tokio::task::JoinHandle<redlatch::LockGuard>) {
    let c = client(server).await;
    let lock = c.lock(name);
    let before = registry(server, name).len();
    let marker = format!("redisson_lock__channel:{{{name}}}:redlatch-waiters");
    let subscribed = numsub(server, &marker);
    let task = tokio::spawn(async move {
        let g = lock.lock_with_lease(LEASE).await.unwrap();
        got.send(index).unwrap();
        g
    });
    let (server, name) = (server, name.to_string());
    let ready = || registry(server, &name).len() > before && numsub(server, &marker) > subscribed;
    assert!(
        eventually_async(Duration::from_secs(5), ready).await,
        "waiter {index} never registered"
    );
    (c, task)
}

/// Waits until no script call has come in for 300 ms (the waiters' attempt after
/// subscribing is done), at most 10 s; returns the count.
async fn settled_calls(server: &RedisServer) -> u64 {
    let mut last = script_calls(server);
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = script_calls(server);
        if now == last {
            break;
        }
        last = now;
    }
    last
}

#[tokio::test]
async fn one_release_wakes_only_the_longest_waiting_client() {
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
    let first = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("no waiter was woken (the lease is 60 s)")
        .unwrap();
    assert_eq!(first, 0, "the longest-waiting client goes first");
    // Let any wrongly woken waiter run its attempt.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let tries = script_calls(&server) - before;
    assert_eq!(
        tries, 2,
        "the release and one acquire; a herd would have made 5 calls"
    );
    assert!(rx.try_recv().is_err(), "only one waiter holds the lock");
    assert_eq!(registry(&server, "herd").len(), 3);
    // The others follow one by one, each woken by the previous holder's release.
    for (c, task) in waiters.drain(..1) {
        task.await.unwrap().unlock().await.unwrap();
        drop(c);
    }
    let mut order = vec![0];
    for _ in 1..4 {
        let next = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a release must wake the next waiter")
            .unwrap();
        order.push(next);
        let (_, task) = &mut waiters[next - 1];
        task.await.unwrap().unlock().await.unwrap();
    }
    assert_eq!(order, vec![0, 1, 2, 3]);
    assert!(registry(&server, "herd").is_empty());
}

#[tokio::test]
async fn a_dead_registered_waiter_is_passed_over() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let g = holder.lock("dead").lock().await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let live = registered_waiter(&server, "dead", 0, tx).await;
    // A waiter whose process died: registered before the live one, nobody listens.
    let ghost = "00000000-0000-4000-8000-000000000000:1";
    let _: i64 = server.cmd(&["ZADD", "redlatch_lock_waiters:{dead}", "1", ghost]);
    assert_eq!(registry(&server, "dead")[0], ghost);
    g.unlock().await.unwrap();
    let woken = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
    assert_eq!(woken.expect("the live waiter was stranded").unwrap(), 0);
    assert!(
        !registry(&server, "dead").contains(&ghost.to_string()),
        "the dead waiter is removed"
    );
    live.1.await.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_waiter_passes_its_wake_on() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    for round in 0..5 {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let name = format!("cancel{round}");
        let g = holder.lock(name.clone()).lock().await.unwrap();
        let (_first_client, first) = registered_waiter(&server, &name, 0, tx.clone()).await;
        let (_second_client, second) = registered_waiter(&server, &name, 1, tx.clone()).await;
        // The longest-waiting waiter is cancelled around the release: whichever comes
        // first, the second one must get the lock well within the 60 s lease.
        if round % 2 == 0 {
            first.abort();
            g.unlock().await.unwrap();
        } else {
            g.unlock().await.unwrap();
            first.abort();
        }
        let got = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        let got = got.expect("a cancelled waiter stranded the other").unwrap();
        if got == 0 {
            // The first got the lock before it was cancelled: it is held, not lost.
            continue;
        }
        second.await.unwrap().unlock().await.unwrap();
        let name2 = name.clone();
        let server = &server;
        assert!(
            eventually_async(Duration::from_secs(5), || registry(server, &name2)
                .is_empty())
            .await,
            "the cancelled waiter left the registry"
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
