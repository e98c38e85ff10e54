//! `Client::list` on a 3+3 cluster (every primary scanned, waiters counted where they
//! subscribe) and under Redlock (every master scanned; a master down is named unread,
//! the others still listed).

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::cluster::shared_cluster;
use common::{eventually_async, redlock, start_many};
use redlatch::{Client, Config, ListedKind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_lists_the_locks_of_every_primary() {
    let cluster = shared_cluster();
    let a = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let b = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    // One plain lock on each primary, a read-write lock and a fair lock with a waiter.
    let names: Vec<String> = primaries
        .iter()
        .map(|&p| cluster.key_on(p, "lc:plain:"))
        .collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(a.lock(name.as_str()).lock().await.unwrap());
    }
    let _writer = a.read_write_lock("lc:rw").write().lock().await.unwrap();
    let _fair = a.fair_lock("lc:fair").lock().await.unwrap();
    let fair_b = b.fair_lock("lc:fair");
    let queued = tokio::spawn(async move { fair_b.lock().await.map(drop) });
    // A waiter on the first plain lock, in another client.
    let lock_b = b.lock(names[0].as_str());
    let waiting = tokio::spawn(async move { lock_b.lock().await.map(drop) });
    let channel = format!("redisson_lock__channel:{{{}}}", names[0]);
    let subscribed = eventually_async(Duration::from_secs(10), || {
        cluster.channel_subscribers(&channel) == 1
    });
    assert!(subscribed.await, "the waiter never subscribed");
    let queued_up = eventually_async(Duration::from_secs(10), || {
        let node = cluster.node(cluster.primary_for_key("lc:fair"));
        node.cmd::<i64>(&["LLEN", "redisson_lock_queue:{lc:fair}"]) == 1
    });
    assert!(queued_up.await, "the fair waiter never queued");

    let listing = a.list("lc:*").await.unwrap();
    assert!(!listing.incomplete, "{:?}", listing.unread);
    let mut want: Vec<&str> = names.iter().map(String::as_str).collect();
    want.extend(["lc:fair", "lc:rw"]);
    want.sort();
    let got: Vec<&str> = listing.locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(got, want, "{listing:#?}");
    let find = |n: &str| listing.locks.iter().find(|l| l.name == n).unwrap();
    for (name, guard) in names.iter().zip(&guards) {
        let l = find(name);
        assert_eq!(l.kind, ListedKind::Lock);
        assert_eq!(l.holders[0].holder.id, guard.holder());
    }
    assert_eq!(find(&names[0]).waiters, 1, "the waiting client");
    assert_eq!(find(&names[1]).waiters, 0);
    assert_eq!(find("lc:rw").kind, ListedKind::ReadWrite);
    assert_eq!(find("lc:rw").mode.as_deref(), Some("write"));
    assert_eq!(
        (find("lc:fair").kind, find("lc:fair").waiters),
        (ListedKind::Fair, 1)
    );
    // Lock::status counts the same waiter on the primary serving the lock.
    let status = a.lock(names[0].as_str()).status().await.unwrap();
    assert_eq!(status[0].waiters, 1);

    drop(_fair);
    guards.remove(0).unlock().await.unwrap();
    waiting.await.unwrap().unwrap();
    queued.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_lists_every_master_and_names_one_that_is_down() {
    let mut servers = start_many(3);
    let a = Client::connect(redlock::config(&servers)).await.unwrap();
    let b = Client::connect(redlock::config(&servers)).await.unwrap();
    let guard = a.lock("rl:1").lock().await.unwrap();
    let _other = b.fenced_lock("rl:2").lock().await.unwrap();
    let listing = a.list("rl:*").await.unwrap();
    assert!(!listing.incomplete, "{:?}", listing.unread);
    let got: Vec<(&str, ListedKind, usize)> = listing
        .locks
        .iter()
        .map(|l| (l.name.as_str(), l.kind, l.masters))
        .collect();
    // A grant lands on the minority in the background: on at least a majority.
    assert_eq!(got.len(), 2, "{listing:#?}");
    assert_eq!((got[0].0, got[0].1), ("rl:1", ListedKind::Lock));
    assert_eq!((got[1].0, got[1].1), ("rl:2", ListedKind::Fenced));
    assert!(got.iter().all(|g| g.2 >= 2), "{got:?}");
    assert_eq!(listing.locks[0].holders[0].holder.id, guard.holder());
    // A master down: the listing says so and still lists what the others hold.
    servers[2].kill();
    let started = Instant::now();
    let listing = a.list_within("rl:*", Duration::from_secs(3)).await.unwrap();
    assert!(started.elapsed() <= Duration::from_secs(3) + Duration::from_secs(2));
    assert!(listing.incomplete);
    assert_eq!(listing.unread.len(), 1, "{:?}", listing.unread);
    assert_eq!(listing.unread[0].master, servers[2].addr());
    let names: Vec<&str> = listing.locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["rl:1", "rl:2"]);
}
