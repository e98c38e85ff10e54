//! Redlock over 3 and 5 healthy masters: quorum, validity, queries by majority,
//! reentrancy across masters and fencing tokens (SPEC §3, §8).

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::redlock::{
    config, count, dbsize, holders, prelock, reconnected, settle_holders, OTHER,
};
use common::{eventually_async, start_many, RedisServer};
use redlatch::{Client, Config};

async fn connect(config: Config) -> Client {
    Client::connect(config).await.unwrap()
}

/// The holder id of the calling task for `client` (taken from a throw-away guard).
/// For every subset of masters pre-locked by another holder, one try must win exactly
/// when the free masters form a majority, and leave nothing of ours behind.
async fn every_subset_of_prelocked_masters(n: usize) {
    let servers = start_many(n);
    let client = connect(config(&servers)).await;
    let quorum = n / 2 + 1;
    let lock = client.lock("subset");
    for mask in 0u32..(1 << n) {
        let taken = |i: usize| mask & (1 << i) != 0;
        for (i, s) in servers.iter().enumerate().filter(|(i, _)| taken(*i)) {
            prelock(s, "subset", OTHER, Duration::from_secs(60));
            assert_eq!(holders(s, "subset"), [OTHER], "master {i}");
        }
        let free = n - mask.count_ones() as usize;
        let guard = lock.try_lock(Duration::ZERO).await.unwrap();
        assert_eq!(
            guard.is_some(),
            free >= quorum,
            "mask {mask:0n$b}: {free} of {n} free"
        );
        if let Some(g) = guard {
            let me = g.holder().to_string();
            let want = |i| {
                vec![if taken(i) {
                    OTHER.to_string()
                } else {
                    me.clone()
                }]
            };
            settle_holders(&servers, "subset", want).await;
            g.unlock().await.unwrap();
        }
        // Nothing of ours anywhere; the other holder's locks untouched.
        let after = |i| {
            if taken(i) {
                vec![OTHER.to_string()]
            } else {
                vec![]
            }
        };
        settle_holders(&servers, "subset", after).await;
        for (i, s) in servers.iter().enumerate() {
            if taken(i) {
                assert_eq!(count(s, "subset", OTHER), 1);
                assert!(s.cmd::<i64>(&["PTTL", "subset"]) > 50_000);
            }
            let _: i64 = s.cmd(&["DEL", "subset"]);
            assert_eq!(dbsize(s), 0, "mask {mask:0n$b}, master {i}: stray keys");
        }
    }
}

#[tokio::test]
async fn with_three_masters_a_try_wins_exactly_when_the_free_masters_form_a_majority() {
    every_subset_of_prelocked_masters(3).await;
}

#[tokio::test]
async fn with_five_masters_a_try_wins_exactly_when_the_free_masters_form_a_majority() {
    every_subset_of_prelocked_masters(5).await;
}

#[tokio::test]
async fn validity_is_the_lease_minus_the_elapsed_time_minus_the_drift() {
    let servers = start_many(5);
    let client = connect(config(&servers).drift_factor(0.1)).await;
    let lease = Duration::from_secs(10);
    let before = Instant::now();
    let g = client
        .lock("validity")
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .unwrap();
    // The time left, read before the time taken: it counts from the attempt's start.
    let validity = g.validity();
    let elapsed = before.elapsed();
    // drift = 10 s × 0.1 + 2 ms
    let max = Duration::from_millis(10_000 - 1_002);
    assert!(validity <= max, "{validity:?}");
    assert!(validity >= max - elapsed, "{validity:?} after {elapsed:?}");
    let me = g.holder().to_string();
    settle_holders(&servers, "validity", |_| vec![me.clone()]).await;
    for s in &servers {
        let pttl: i64 = s.cmd(&["PTTL", "validity"]);
        assert!(
            pttl > 5_000 && pttl <= 10_000,
            "the lease itself is 10 s: {pttl}"
        );
    }
    g.unlock().await.unwrap();
}

/// Writes `holder` with `counts[i]` holds and a lease of `ttls_ms[i]` on master i
/// (count 0: no key there).
fn write_lock(servers: &[RedisServer], name: &str, holder: &str, counts: &[i64], ttls_ms: &[u64]) {
    for ((s, c), ttl) in servers.iter().zip(counts).zip(ttls_ms) {
        let _: i64 = s.cmd(&["DEL", name]);
        if *c > 0 {
            let _: i64 = s.cmd(&["HSET", name, holder, &c.to_string()]);
            let _: i64 = s.cmd(&["PEXPIRE", name, &ttl.to_string()]);
        }
    }
}

#[tokio::test]
async fn is_locked_answers_by_majority() {
    for n in [3usize, 5] {
        let servers = start_many(n);
        let lock = connect(config(&servers)).await.lock("q-locked");
        let quorum = n / 2 + 1;
        for present in 0..=n {
            let counts: Vec<i64> = (0..n).map(|i| i64::from(i < present)).collect();
            write_lock(&servers, "q-locked", OTHER, &counts, &vec![60_000; n]);
            let locked = lock.is_locked().await.unwrap();
            assert_eq!(locked, present >= quorum, "key on {present} of {n}");
        }
    }
}

#[tokio::test]
async fn hold_count_is_what_a_majority_of_masters_holds_at_least() {
    let servers = start_many(3);
    let client = connect(config(&servers)).await;
    // An explicit owner: hold_count asks about its holder id, which the test writes.
    let owner = client.owner();
    let lock = client.lock("q-count").owned_by(owner);
    let me = format!("{}:{}", client.id(), owner.number());
    let ttls = [60_000; 3];
    for (counts, want) in [
        ([3, 2, 0], 2),
        ([0, 5, 1], 1),
        ([4, 0, 0], 0),
        ([2, 2, 2], 2),
    ] {
        write_lock(&servers, "q-count", &me, &counts, &ttls);
        assert_eq!(lock.hold_count().await.unwrap(), want, "{counts:?}");
        assert_eq!(
            lock.is_held_by_current_task().await.unwrap(),
            want > 0,
            "{counts:?}"
        );
    }
    // Another holder's hash counts for nobody but it.
    write_lock(&servers, "q-count", OTHER, &[1, 1, 1], &ttls);
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    assert!(lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn remaining_ttl_is_what_a_majority_of_masters_still_has_at_least() {
    let servers = start_many(5);
    let lock = connect(config(&servers)).await.lock("q-ttl");
    let ttls = [10_000, 50_000, 20_000, 40_000, 30_000];
    write_lock(&servers, "q-ttl", OTHER, &[1; 5], &ttls);
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    // The third largest: 30 s, minus the time the test took so far.
    assert!(
        ttl <= Duration::from_secs(30) && ttl > Duration::from_secs(25),
        "{ttl:?}"
    );
    // On a minority only: not locked, no TTL.
    write_lock(&servers, "q-ttl", OTHER, &[1, 0, 1, 0, 0], &ttls);
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn queries_answer_from_the_remaining_majority_while_a_master_is_down() {
    let mut servers = start_many(3);
    let lock = connect(config(&servers)).await.lock("q-down");
    write_lock(&servers, "q-down", OTHER, &[1, 1, 0], &[60_000; 3]);
    servers[0].kill();
    // Of the two that answer, one has it: no majority of the three.
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    prelock(&servers[2], "q-down", OTHER, Duration::from_secs(60));
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.remaining_ttl().await.unwrap().unwrap() > Duration::from_secs(50));
}

#[tokio::test]
async fn nested_locks_count_up_on_every_master_and_unwind_everywhere() {
    let servers = start_many(3);
    let client = connect(config(&servers)).await;
    let lock = client.lock("nested");
    let g1 = lock.lock().await.unwrap();
    let g2 = g1.scope(lock.lock()).await.unwrap();
    let g3 = g1
        .scope(lock.try_lock(Duration::ZERO))
        .await
        .unwrap()
        .unwrap();
    let me = g1.holder().to_string();
    let counts = || {
        servers
            .iter()
            .map(|s| count(s, "nested", &me))
            .collect::<Vec<_>>()
    };
    let settled = |want: i64| {
        let counts = &counts;
        async move {
            let ok = eventually_async(Duration::from_secs(5), || counts() == [want; 3]).await;
            assert!(ok, "want {want} everywhere, got {:?}", counts());
        }
    };
    settled(3).await;
    assert_eq!(lock.hold_count().await.unwrap(), 3);
    g3.unlock().await.unwrap();
    g2.unlock().await.unwrap();
    settled(1).await;
    g1.unlock().await.unwrap();
    settled(0).await;
    assert_eq!(client.held_locks(), 0);
}

#[tokio::test]
async fn nested_locks_and_unlocks_succeed_with_a_quorum_while_a_master_is_down() {
    let mut servers = start_many(3);
    let client = connect(config(&servers)).await;
    let lock = client.lock("nested-down");
    let g1 = lock.lock().await.unwrap();
    let me = g1.holder().to_string();
    // lock() returned at a majority: the third grant lands eventually. Counted below
    // on the two masters left, so it must have landed there first.
    settle_holders(&servers, "nested-down", |_| vec![me.clone()]).await;
    servers[2].kill();
    let g2 = g1.scope(lock.lock()).await.unwrap();
    for s in &servers[..2] {
        assert_eq!(count(s, "nested-down", &me), 2);
    }
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    g2.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g1.unlock().await.unwrap();
    for s in &servers[..2] {
        assert_eq!(dbsize(s), 0);
    }
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_nested_lock_after_a_master_restarted_empty_still_unwinds_to_a_free_lock() {
    let mut servers = start_many(3);
    let client = connect(config(&servers)).await;
    let lock = client.lock("nested-restart");
    let g1 = lock.lock().await.unwrap();
    let me = g1.holder().to_string();
    servers[0].restart();
    reconnected(&lock, 0).await;
    // Re-entered on the two that hold it, freshly taken on the empty one: still nested.
    let g2 = g1.scope(lock.lock()).await.unwrap();
    let counts = || {
        (0..3)
            .map(|i| count(&servers[i], "nested-restart", &me))
            .collect::<Vec<_>>()
    };
    assert!(
        eventually_async(Duration::from_secs(5), || counts() == [1, 2, 2]).await,
        "{:?}",
        counts()
    );
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    g2.unlock().await.unwrap();
    assert!(lock.is_held_by_current_task().await.unwrap());
    g1.unlock().await.unwrap();
    settle_holders(&servers, "nested-restart", |_| vec![]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_the_unlock_message_not_at_the_end_of_the_lease() {
    let mut servers = start_many(3);
    let (a, b) = (
        connect(config(&servers)).await,
        connect(config(&servers)).await,
    );
    servers[2].kill(); // the message still comes from the others
    let g = a.lock("wake").lock().await.unwrap(); // 30 s watchdog lease
    let waiter = tokio::spawn(async move {
        let g = b
            .lock("wake")
            .try_lock(Duration::from_secs(20))
            .await
            .unwrap();
        (Instant::now(), g.map(|g| g.holder().to_string()))
    });
    // Released once the waiter has subscribed on the live masters.
    let channel = "redisson_lock__channel:{wake}";
    let subscribed = || servers[..2].iter().all(|s| common::numsub(s, channel) == 1);
    assert!(eventually_async(Duration::from_secs(5), subscribed).await);
    let released = Instant::now();
    g.unlock().await.unwrap();
    let (got, holder) = waiter.await.unwrap();
    assert!(holder.is_some(), "the waiter got the lock");
    assert!(
        got - released < Duration::from_secs(2),
        "woke after {:?}",
        got - released
    );
}

/// Takes and releases the fenced lock `name` once; returns the token.
async fn fenced_token(client: &Client, name: &str) -> u64 {
    let g = client.fenced_lock(name).lock().await.unwrap();
    let t = g.fencing_token().expect("a fenced lock carries a token");
    g.unlock().await.unwrap();
    t
}

#[tokio::test]
async fn fencing_tokens_strictly_increase_across_acquisitions_and_clients() {
    let servers = start_many(3);
    let a = connect(config(&servers)).await;
    let b = connect(config(&servers)).await;
    let mut last = 0;
    for i in 0..6 {
        let t = fenced_token(if i % 2 == 0 { &a } else { &b }, "fence").await;
        assert!(t > last, "token {t} after {last}");
        last = t;
    }
    for s in &servers {
        let counter: u64 = s.cmd(&["GET", "redisson_lock_token:{fence}"]);
        assert_eq!(counter, last, "{}", s.addr());
    }
    assert_eq!(
        a.lock("fence")
            .try_lock(Duration::ZERO)
            .await
            .unwrap()
            .unwrap()
            .fencing_token(),
        None
    );
}

#[tokio::test]
async fn fencing_tokens_keep_increasing_after_a_minority_of_masters_restarts_empty() {
    let mut servers = start_many(5);
    let client = connect(config(&servers)).await;
    let lock = client.fenced_lock("fence-restart");
    let counters = |servers: &[RedisServer]| -> Vec<Option<u64>> {
        let key = "redisson_lock_token:{fence-restart}";
        let up = servers.iter().filter(|s| s.is_running());
        up.map(|s| s.cmd(&["GET", key])).collect()
    };
    let mut last = 0;
    for _ in 0..3 {
        last = fenced_token(&client, "fence-restart").await;
    }
    servers[0].restart();
    servers[1].restart();
    assert_eq!(counters(&servers[..2]), [None, None], "counters lost");
    let t = fenced_token(&client, "fence-restart").await;
    assert!(t > last, "token {t} after {last}");
    // The token handed out was first written back to at least a majority.
    let at_t = counters(&servers).iter().filter(|c| **c == Some(t)).count();
    assert!(at_t >= 3, "{:?}", counters(&servers));
    last = t;
    // Lose the counter on two masters again and take two others down: the quorum now
    // needs both empty masters, and only E of the three is current (A and B restarted).
    // E happens to have the last token, but in general the masters that kept it may
    // be exactly those that are down (tests/topologies/fencing_restart.rs): no token is handed
    // out, the attempt fails safe as an outage.
    servers[0].restart();
    servers[1].restart();
    servers[2].kill();
    servers[3].kill();
    reconnected(&lock, 0).await;
    reconnected(&lock, 1).await;
    // One attempt, with the whole command timeout for its replies: A, B and E grant,
    // only E is current.
    match lock.try_lock(Duration::ZERO).await {
        Err(redlatch::Error::NoQuorum {
            acquired: 1,
            needed: 3,
            ..
        }) => {}
        Err(e) => panic!("expected NoQuorum with E alone current, got {e}"),
        Ok(g) => panic!("handed out {:?}", g.map(|g| g.fencing_token())),
    }
    // Retrying does not change that. The error is the last attempt's, and that attempt
    // may run out of the wait before every master answers (fewer grants, not more).
    match lock.try_lock(Duration::from_millis(1500)).await {
        Err(redlatch::Error::NoQuorum {
            acquired,
            needed: 3,
            ..
        }) if acquired < 3 => {}
        Err(e) => panic!("expected NoQuorum, got {e}"),
        Ok(g) => panic!("handed out {:?}", g.map(|g| g.fencing_token())),
    }
    // C and D come back (empty too): with every master answering, the largest of all
    // counters is E's, and the token still grows.
    servers[2].restart();
    servers[3].restart();
    reconnected(&lock, 2).await;
    reconnected(&lock, 3).await;
    let t = fenced_token(&client, "fence-restart").await;
    assert!(t > last, "token {t} after {last}");
    assert_eq!(counters(&servers), [Some(t); 5]);
}
