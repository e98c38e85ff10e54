//! The counters' waits (counters.rs over signal.rs) on the fake server: the
//! semaphore's taking and waiting, wake-ups by a release (not by the timeout), a
//! release racing the subscription, two waiters racing for one permit, cancellation
//! at every await point (a permit taken for a caller that went is given back); the
//! latch's wait for zero.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::facade::counters::Set;
use crate::engine::fake::Server;
use crate::engine::tests::*;
use crate::engine::Engine;

/// Sets the semaphore `name` to `n` permits.
async fn set(engine: &Engine, name: &str, n: i64) {
    let written = engine.semaphore_set(name, Set::Always, n, None).await;
    assert!(written.expect("no error"), "set");
}

/// Gives `n` permits back to `name`.
async fn release(engine: &Engine, name: &str, n: i64) {
    let given = engine.semaphore_release(name, n, false).await;
    assert!(given.expect("no error"));
}

/// A task of `engine` waiting as long as it takes for `n` permits of `name`.
fn waiter(engine: &Arc<Engine>, name: &str, n: i64) -> tokio::task::JoinHandle<bool> {
    let (engine, name) = (engine.clone(), name.to_string());
    tokio::spawn(async move {
        let taken = engine.semaphore_acquire(&name, n, None).await;
        taken.expect("no error")
    })
}

/// Lets time pass until `done` holds (bounded: the fake's steps are milliseconds).
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        settle(Duration::from_millis(1)).await;
    }
    panic!("never happened");
}

#[tokio::test(start_paused = true)]
async fn permits_there_are_taken_at_once_and_a_bounded_wait_runs_out() {
    let server = Server::new();
    let a = client(&server);
    set(&a, "s", 2).await;
    assert!(a.semaphore_acquire("s", 2, None).await.expect("no error"));
    assert_eq!(server.counter("s"), Some(0));
    assert_eq!(server.log(), vec!["sem_set.lua", "sem_acquire.lua"]);
    // One try: refused without subscribing.
    let tried = a.semaphore_acquire("s", 1, Some(Duration::ZERO)).await;
    assert!(!tried.expect("no error"));
    assert_eq!(server.log().len(), 3, "one attempt, nothing else");
    // A bounded wait: attempts, subscribes, attempts again, and gives up at its end.
    let started = Instant::now();
    let waited = a
        .semaphore_acquire("s", 1, Some(Duration::from_millis(200)))
        .await;
    assert!(!waited.expect("no error"));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(
        started.elapsed() < LEASE,
        "its deadline ended it, not the idle bound"
    );
    assert_eq!(server.counter("s"), Some(0), "nothing taken");
    settle(Duration::from_secs(1)).await;
    nothing_left_locally(&a);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_is_woken_by_the_release_that_makes_enough() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    set(&a, "s", 1).await;
    let waiting = waiter(&b, "s", 2);
    // Refused twice (before and after subscribing, invariant 1), then idle.
    until(|| {
        server
            .log()
            .iter()
            .filter(|s| **s == "sem_acquire.lua")
            .count()
            == 2
    })
    .await;
    assert_eq!(server.numsub(&crate::keys::sem_channel("s")), 1);
    let started = Instant::now();
    // A release that does not make enough wakes it, and it waits on.
    release(&a, "s", 0).await;
    settle(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished());
    release(&a, "s", 1).await;
    assert!(waiting.await.expect("no panic"));
    assert!(
        started.elapsed() < LEASE,
        "woken by the message, not the idle bound"
    );
    assert_eq!(server.counter("s"), Some(0));
    settle(Duration::from_secs(1)).await;
    nothing_left_locally(&b);
    assert_eq!(server.numsub(&crate::keys::sem_channel("s")), 0);
}

#[tokio::test(start_paused = true)]
async fn a_release_racing_the_waiters_subscribe_still_wakes_it() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    set(&a, "s", 0).await;
    server.slow_subscribe(true);
    let waiting = waiter(&b, "s", 1);
    // Refused once; its subscription not confirmed yet, so nobody hears the release.
    until(|| server.log().contains(&"sem_acquire.lua")).await;
    let started = Instant::now();
    release(&a, "s", 1).await;
    settle(Duration::from_millis(50)).await;
    server.slow_subscribe(false);
    assert!(waiting.await.expect("no panic"));
    // The attempt after the subscription is immediate (signal.rs invariant 1).
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.counter("s"), Some(0));
}

/// Two clients and an empty semaphore "s"; the second client's subscriber connection is
/// up already, for a waiter of the semaphore "other" (returned: release "other" to end it).
async fn live_connection(
    server: &Arc<Server>,
) -> (Arc<Engine>, Arc<Engine>, tokio::task::JoinHandle<bool>) {
    let (a, b) = (client(server), client(server));
    set(&a, "s", 0).await;
    set(&a, "other", 0).await;
    let other = waiter(&b, "other", 1);
    until(|| server.numsub(&crate::keys::sem_channel("other")) == 1).await;
    settle(Duration::from_millis(50)).await;
    (a, b, other)
}

/// How many acquire attempts the server has seen.
fn acquire_tries(server: &Server) -> usize {
    let log = server.log();
    log.iter().filter(|s| **s == "sem_acquire.lua").count()
}

/// As above, on a client whose subscriber connection is up already (every real client
/// has one: its notice channel): the new channel's SUBSCRIBE rides that connection, so
/// no reconnect wakes the waiter, and only its attempt after the confirmation can see
/// the release. Before that attempt was made, the waiter slept the idle bound (30 s);
/// CI hung on it (standalone::semaphore_methods::dropped_guards_never_let_more_than_the_permits_in).
#[tokio::test(start_paused = true)]
async fn a_release_racing_the_subscribe_on_a_live_connection_still_wakes_it() {
    let server = Server::new();
    let (a, b, other) = live_connection(&server).await;
    let tries = || acquire_tries(&server);
    let before = tries();
    server.slow_subscribe(true);
    let waiting = waiter(&b, "s", 1);
    // Refused once; its SUBSCRIBE is not confirmed yet, so nobody hears the release.
    until(|| tries() > before).await;
    let started = Instant::now();
    release(&a, "s", 1).await;
    settle(Duration::from_millis(50)).await;
    server.slow_subscribe(false);
    assert!(waiting.await.expect("no panic"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "woken by its attempt after subscribing, not the idle bound: {:?}",
        started.elapsed()
    );
    assert_eq!(server.counter("s"), Some(0));
    release(&a, "other", 1).await;
    assert!(other.await.expect("no panic"));
}

#[tokio::test(start_paused = true)]
async fn one_permit_released_to_two_waiters_goes_to_one_of_them() {
    let server = Server::new();
    let (a, b, c) = (client(&server), client(&server), client(&server));
    set(&a, "s", 0).await;
    let (first, second) = (waiter(&b, "s", 1), waiter(&c, "s", 1));
    until(|| server.numsub(&crate::keys::sem_channel("s")) == 2).await;
    until(|| {
        server
            .log()
            .iter()
            .filter(|s| **s == "sem_acquire.lua")
            .count()
            == 4
    })
    .await;
    release(&a, "s", 1).await;
    settle(Duration::from_secs(1)).await;
    // Both woke and tried; the counter allowed one.
    assert_eq!(server.counter("s"), Some(0));
    let done = [first.is_finished(), second.is_finished()];
    assert_eq!(done.iter().filter(|d| **d).count(), 1, "{done:?}");
    release(&a, "s", 1).await;
    assert!(first.await.expect("no panic"));
    assert!(second.await.expect("no panic"));
    assert_eq!(server.counter("s"), Some(0), "each took one");
    settle(Duration::from_secs(1)).await;
    for engine in [&b, &c] {
        nothing_left_locally(engine);
    }
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_while_its_acquisition_is_in_flight_takes_nothing() {
    let server = Server::new();
    let a = client(&server);
    set(&a, "s", 3).await;
    server.park(true);
    let a2 = a.clone();
    let taking = tokio::spawn(async move { a2.semaphore_acquire("s", 2, None).await });
    settle(Duration::from_millis(5)).await;
    assert_eq!(server.counter("s"), Some(1), "the script took effect");
    taking.abort();
    server.park(false);
    settle(Duration::from_secs(1)).await;
    assert_eq!(
        server.counter("s"),
        Some(3),
        "given back (signal.rs invariant 3)"
    );
    assert_eq!(server.log().last(), Some(&"sem_release.lua"));
    nothing_left_locally(&a);
}

/// Runs B's wait for one permit of an empty semaphore, polling it `steps` times (A
/// releases one before poll `release_at`), then drops it wherever it is. No permit is
/// lost or made: the one released is B's (its wait finished) or back on the server.
/// Returns whether B's wait had finished by itself.
async fn drop_after(steps: usize, release_at: usize) -> bool {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    set(&a, "s", 0).await;
    let mut fut = Box::pin(b.semaphore_acquire("s", 1, None));
    let (mut released, mut done) = (false, false);
    for i in 0..steps {
        if i == release_at {
            release(&a, "s", 1).await;
            released = true;
        }
        if let Poll::Ready(r) = poll_once(&mut fut).await {
            done = r.expect("no error");
            assert!(done, "an unbounded wait ends with the permits");
            break;
        }
        settle(Duration::from_micros(300)).await;
    }
    drop(fut);
    settle(Duration::from_secs(1)).await;
    let at = format!("dropped after {steps} polls, released before poll {release_at}");
    let expected = i64::from(released && !done);
    assert_eq!(
        server.counter("s"),
        Some(expected),
        "{at}: {:?}",
        server.log()
    );
    for engine in [&a, &b] {
        nothing_left_locally(engine);
    }
    done
}

#[tokio::test(start_paused = true)]
async fn a_semaphore_wait_dropped_at_any_await_point_loses_no_permit() {
    let mut runs = 0;
    for release_at in [0, 1, 2, 3, 5, 8, 13, 21] {
        let mut steps = 0;
        while !drop_after(steps, release_at).await {
            steps += 1;
            runs += 1;
            assert!(
                steps < 400,
                "B never got the permit (released at {release_at})"
            );
        }
    }
    assert!(runs > 20, "the wait has await points to drop at: {runs}");
}

#[tokio::test(start_paused = true)]
async fn latch_waiters_are_woken_by_the_count_down_to_zero_and_a_drop_leaves_nothing() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    assert!(a.latch_set("l", 2).await.expect("no error"));
    assert!(!a.latch_set("l", 5).await.expect("no error"), "set once");
    let b2 = b.clone();
    let waiting = tokio::spawn(async move { b2.latch_wait("l", None).await });
    // A bounded wait that runs out, and one dropped mid-wait, beside it.
    let short = a.latch_wait("l", Some(Duration::from_millis(100))).await;
    assert!(!short.expect("no error"));
    let mut dropped = Box::pin(a.latch_wait("l", None));
    assert!(poll_once(&mut dropped).await.is_pending());
    settle(Duration::from_millis(10)).await;
    drop(dropped);
    assert_eq!(a.latch_count_down("l").await.expect("no error"), 1);
    settle(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "one left to count");
    let started = Instant::now();
    assert_eq!(a.latch_count_down("l").await.expect("no error"), 0);
    assert!(waiting.await.expect("no panic").expect("no error"));
    assert!(
        started.elapsed() < LEASE,
        "woken by the message, not the idle bound"
    );
    assert_eq!(a.latch_count("l").await.expect("no error"), 0);
    assert_eq!(server.counter("l"), None, "deleted at zero");
    settle(Duration::from_secs(1)).await;
    for engine in [&a, &b] {
        nothing_left_locally(engine);
    }
}

/// As above, in an outage: the first attempt fails, so the wait for the SUBSCRIBE's
/// confirmation is cut to the back-off pause and the next attempt goes unconfirmed;
/// the release comes while that attempt is in flight, and the confirmation before its
/// refusal. The waiter must confirm and attempt again, not sleep on that refusal
/// (signal.rs invariant 1). Before the fix it slept the idle bound (30 s).
#[tokio::test(start_paused = true)]
async fn a_release_while_an_unconfirmed_attempt_flies_still_wakes_it() {
    let server = Server::new();
    let (a, b, other) = live_connection(&server).await;
    let tries = || acquire_tries(&server);
    let before = tries();
    server.slow_subscribe(true);
    server.park(true);
    server.refuse_next(crate::error::Error::ClusterDown {
        addr: "fake:1".into(),
        detail: "CLUSTERDOWN The cluster is down".into(),
    });
    let waiting = waiter(&b, "s", 1);
    // Refused by the outage, then tried unconfirmed: refused (no permit), answer parked.
    until(|| tries() > before).await;
    let started = Instant::now();
    let releasing = tokio::spawn({
        let a = a.clone();
        async move { release(&a, "s", 1).await }
    });
    until(|| server.counter("s") == Some(1)).await;
    server.slow_subscribe(false);
    settle(Duration::from_millis(20)).await;
    server.park(false);
    releasing.await.expect("no panic");
    assert!(waiting.await.expect("no panic"));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "woken by its attempt after the confirmation, not the idle bound: {:?}",
        started.elapsed()
    );
    assert_eq!(server.counter("s"), Some(0));
    release(&a, "other", 1).await;
    assert!(other.await.expect("no panic"));
}

/// A bounded wait on a master that stops answering (replies parked: a hung master)
/// returns by its wait and the wait slack, not a master timeout later, with a timeout
/// naming the master (signal.rs invariant 5). A single try keeps a request's bound.
#[tokio::test(start_paused = true)]
async fn a_bounded_wait_on_a_hung_master_ends_at_its_wait_and_the_slack() {
    let server = Server::new();
    let a = client(&server);
    set(&a, "s", 1).await;
    server.park(true);
    for (wait, bound) in [
        (
            Duration::from_millis(300),
            Duration::from_millis(300) + crate::WAIT_SLACK,
        ),
        (Duration::ZERO, Duration::from_secs(1)),
    ] {
        let started = Instant::now();
        let err = a.semaphore_acquire("s", 1, Some(wait)).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        assert!(err.to_string().contains("fake:1"), "{err}");
        assert!(
            started.elapsed() <= bound,
            "{:?} for {wait:?}",
            started.elapsed()
        );
        let started = Instant::now();
        let err = a.latch_wait("l", Some(wait)).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        assert!(
            started.elapsed() <= bound,
            "{:?} for {wait:?}",
            started.elapsed()
        );
    }
    server.park(false);
}
