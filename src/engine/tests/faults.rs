//! Faults over the fake server: late and lost replies of attempts and releases, group
//! commit under a burst, and Redlock's majority with masters down.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::acquire::waiter::acquire;
use crate::engine::fake::Server;
use crate::engine::tests::*;
use crate::engine::Engine;
use crate::error::Error;

/// B's `lock()` of a free lock whose first acquire reply is late (`late`: it landed,
/// its answer came after the master timeout) or lost with its request: B ends holding
/// it once, never twice (the landed attempt is undone before the next one).
async fn first_attempt_unanswered(late: bool) {
    let server = Server::new();
    let b = client(&server);
    let mb = holder(&b, 1);
    if late {
        server.set_latency(Duration::from_secs(2));
    } else {
        server.lose_next(1);
    }
    let (b2, mb2) = (b.clone(), mb.clone());
    let waiting = tokio::spawn(async move {
        let call = call("n", &mb2, Some(Duration::from_secs(5)));
        let grant = acquire(&b2, &call)
            .await
            .expect("no error")
            .expect("granted");
        hold(&b2, &call, &grant)
    });
    settle(Duration::from_millis(1)).await;
    server.set_latency(Duration::from_millis(1));
    let held = waiting.await.expect("no panic");
    assert_eq!(
        server.holders("n"),
        vec![(mb.to_string(), 1)],
        "late: {late}"
    );
    give_back(&b, &held).await;
    assert!(server.holders("n").is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_attempt_answered_too_late_is_undone_before_the_next() {
    first_attempt_unanswered(true).await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_attempt_is_retried() {
    first_attempt_unanswered(false).await;
}

/// A release whose request is lost, or whose reply comes after the master timeout, is
/// asked again until answered: the unlock succeeds and the lock is free.
/// An outage's cause outlives the attempt the caller's deadline cut: B waits for A's
/// lock; when A's lease ends, the node answers B's attempt (and its undo) with
/// CLUSTERDOWN, then stops answering. B's try_lock, ending in that outage, returns the cluster's error, not
/// the timeout of the attempt its end cut (waiter invariant 11).
#[tokio::test(start_paused = true)]
async fn a_deadline_in_an_outage_returns_its_cause_not_the_cut() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    let _held = take(&a, "n", &ma).await;
    server.expire_in("n", Duration::from_millis(200));
    let waiting = tokio::spawn(async move {
        let call = call("n", &mb, Some(Duration::from_millis(500)));
        let started = tokio::time::Instant::now();
        (acquire(&b, &call).await.err(), started.elapsed())
    });
    settle(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "B waits for A");
    // The attempt and its undo are refused; every later request is parked.
    for _ in 0..2 {
        server.refuse_next(Error::ClusterDown {
            addr: "fake:1".into(),
            detail: "CLUSTERDOWN The cluster is down".into(),
        });
    }
    server.park(true);
    let (err, took) = waiting.await.expect("no panic");
    let err = err.expect("no grant in an outage");
    assert!(
        matches!(err, Error::ClusterDown { .. }),
        "{err:?} after {took:?}"
    );
    // Bounded as invariant 11 says: one request's bound (the fake's master timeout,
    // 1 s) after the outage began at A's lease end, the wait being shorter.
    assert!(took <= Duration::from_millis(1250), "{took:?}");
    server.park(false);
}

async fn release_unanswered(late: bool) {
    let server = Server::new();
    let a = client(&server);
    let me = holder(&a, 1);
    let held = take(&a, "n", &me).await;
    if late {
        server.set_latency(Duration::from_secs(2));
    } else {
        server.lose_next(1);
    }
    let releasing = tokio::spawn({
        let a = a.clone();
        async move { give_back(&a, &held).await }
    });
    settle(Duration::from_millis(1)).await;
    server.set_latency(Duration::from_millis(1));
    releasing.await.expect("released, no panic");
    assert!(server.holders("n").is_empty(), "late: {late}");
}

#[tokio::test(start_paused = true)]
async fn a_release_answered_too_late_is_asked_again_and_counts() {
    release_unanswered(true).await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_release_is_sent_again() {
    release_unanswered(false).await;
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_plain_acquisitions_shares_batched_calls() {
    let server = Server::new();
    let a = client(&server);
    let burst: Vec<_> = (0..32)
        .map(|i| {
            let (a, me) = (a.clone(), holder(&a, i));
            tokio::spawn(async move { take(&a, &format!("n{i}"), &me).await })
        })
        .collect();
    for t in burst {
        t.await.expect("granted");
    }
    let log = server.log();
    assert!(log.contains(&"batch.lua"), "{log:?}");
    assert!(
        log.len() < 32,
        "group commit: {} calls for 32 acquisitions",
        log.len()
    );
    for i in 0..32 {
        assert_eq!(server.holders(&format!("n{i}")).len(), 1);
    }
}

/// A client of three independent masters (Redlock).
fn redlock_client(servers: &[Arc<Server>]) -> Arc<Engine> {
    Engine::start(servers.iter().map(|s| s.link()).collect(), settings())
}

#[tokio::test(start_paused = true)]
async fn under_redlock_a_majority_grants_and_a_minority_cannot() {
    let servers: Vec<Arc<Server>> = (0..3).map(|_| Server::new()).collect();
    let a = redlock_client(&servers);
    let me = holder(&a, 1);
    // One master down: a majority grants.
    servers[2].lose_next(usize::MAX);
    let held = take(&a, "n", &me).await;
    for s in &servers[..2] {
        assert_eq!(s.holders("n"), vec![(me.to_string(), 1)]);
    }
    give_back(&a, &held).await;
    for s in &servers {
        assert!(s.holders("n").is_empty());
    }
    // Two down: no majority within the wait, an error naming the quorum, and the
    // grant of the one master that answered is undone.
    servers[1].lose_next(usize::MAX);
    let c = call("n", &me, Some(Duration::from_secs(3)));
    let refused = acquire(&a, &c).await;
    assert!(
        matches!(refused, Err(crate::Error::NoQuorum { needed: 2, .. })),
        "{:?}",
        refused.map(|g| g.is_some())
    );
    settle(Duration::from_secs(1)).await;
    assert!(servers[0].holders("n").is_empty(), "undone where granted");
    nothing_left_locally(&a);
}

/// Under Redlock a release returns once a majority released; a master whose release
/// was lost meanwhile (under load a request waits out its bound in a busy group-commit
/// queue and is dropped unsent) is asked again in the background, not left holding the
/// grant until the lease ends. Before, nothing asked it again: a storm of cancelled
/// Redlock calls under a CPU hog left such grants after close() (issue 48).
#[tokio::test(start_paused = true)]
async fn under_redlock_a_release_lost_on_a_minority_is_asked_again() {
    let servers: Vec<Arc<Server>> = (0..3).map(|_| Server::new()).collect();
    let a = redlock_client(&servers);
    let me = holder(&a, 1);
    let held = take(&a, "n", &me).await;
    settle(Duration::from_millis(10)).await;
    for s in &servers {
        assert_eq!(s.holders("n"), vec![(me.to_string(), 1)]);
    }
    servers[2].lose_next(1);
    give_back(&a, &held).await;
    assert_eq!(
        servers[2].holders("n"),
        vec![(me.to_string(), 1)],
        "returned at a majority, the third release lost"
    );
    settle(Duration::from_secs(2)).await;
    for s in &servers {
        assert!(
            s.holders("n").is_empty(),
            "asked again, well within the lease"
        );
    }
    nothing_left_locally(&a);
}

/// Waiter invariant 1 in an outage, on a subscriber connection that is up already (every
/// real client has one: its notice channel). B's first attempt meets an outage, so
/// its wait for the SUBSCRIBE's confirmation is cut to a back-off pause and its next
/// attempt goes unconfirmed; A releases while that attempt is in flight (nobody hears
/// it: B is not subscribed yet), and the confirmation lands before the attempt's
/// refusal does. B must not sleep on that refusal: no message will come, and no
/// reconnect wakes it. Before the fix it slept the lease A's hold had left (30 s).
#[tokio::test(start_paused = true)]
async fn a_release_while_an_unconfirmed_attempt_flies_still_wakes_the_waiter() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    // B's subscriber connection comes up for another lock first.
    let other = take(&a, "other", &holder(&a, 2)).await;
    let other_waiter = tokio::spawn({
        let (b, mb) = (b.clone(), holder(&b, 2));
        async move { acquire(&b, &call("other", &mb, None)).await }
    });
    while server.numsub(&crate::keys::channel("other")) == 0 {
        settle(Duration::from_millis(1)).await;
    }
    settle(Duration::from_millis(50)).await;
    let held = take(&a, "n", &ma).await;
    let tries = || server.log().iter().filter(|s| **s == "acquire.lua").count();
    let before = tries();
    server.slow_subscribe(true);
    server.park(true);
    server.refuse_next(Error::ClusterDown {
        addr: "fake:1".into(),
        detail: "CLUSTERDOWN The cluster is down".into(),
    });
    let waiting = tokio::spawn({
        let (b, mb) = (b.clone(), mb.clone());
        async move { acquire(&b, &call("n", &mb, None)).await }
    });
    // The refused attempt, the pause, then the attempt sent unconfirmed: it ran (refused,
    // A holds the lock) and its answer is parked.
    while tries() == before {
        settle(Duration::from_millis(1)).await;
    }
    let started = tokio::time::Instant::now();
    let releasing = tokio::spawn({
        let a = a.clone();
        async move { give_back(&a, &held).await }
    });
    while !server.holders("n").is_empty() {
        settle(Duration::from_millis(1)).await;
    }
    server.slow_subscribe(false);
    settle(Duration::from_millis(20)).await;
    server.park(false);
    releasing.await.expect("released, no panic");
    let grant = waiting.await.expect("no panic").expect("no error");
    assert!(grant.is_some(), "granted");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "woken by an attempt after the confirmation, not the lease: {:?}",
        started.elapsed()
    );
    assert_eq!(server.holders("n"), vec![(mb.to_string(), 1)]);
    give_back(&a, &other).await;
    let other = other_waiter.await.expect("no panic").expect("no error");
    assert!(other.is_some());
}
