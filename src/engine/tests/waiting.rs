//! The wait and the hand-over over the fake server: acquisition, contention, the
//! hand-over races, and cancellation at every await point.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::engine::acquire::waiter::acquire;
use crate::engine::fake::Server;
use crate::engine::tests::*;
use crate::engine::Engine;
use crate::keys;

#[tokio::test(start_paused = true)]
async fn a_free_lock_is_granted_in_one_script_and_released_in_one() {
    let server = Server::new();
    let a = client(&server);
    let me = holder(&a, 1);
    let held = take(&a, "n", &me).await;
    assert_eq!(server.holders("n"), vec![(me.to_string(), 1)]);
    give_back(&a, &held).await;
    assert!(server.holders("n").is_empty());
    assert_eq!(server.log(), vec!["acquire.lua", "release.lua"]);
    nothing_left_locally(&a);
}

#[tokio::test(start_paused = true)]
async fn a_busy_lock_refuses_a_try_and_counts_reentry() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    let first = take(&a, "n", &ma).await;
    let again = take(&a, "n", &ma).await;
    assert_eq!(server.holders("n"), vec![(ma.to_string(), 2)]);
    let tried = acquire(&b, &call("n", &mb, Some(Duration::ZERO))).await;
    assert!(tried.expect("no error").is_none(), "refused");
    give_back(&a, &again).await;
    assert_eq!(server.holders("n"), vec![(ma.to_string(), 1)]);
    give_back(&a, &first).await;
    assert!(server.holders("n").is_empty());
    nothing_left_locally(&b);
}

#[tokio::test(start_paused = true)]
async fn another_clients_waiter_is_handed_the_lock_by_the_release_script() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    let held = take(&a, "n", &ma).await;
    let b2 = b.clone();
    let mb2 = mb.clone();
    let waiting = tokio::spawn(async move {
        let call = call("n", &mb2, None);
        let grant = acquire(&b2, &call)
            .await
            .expect("no error")
            .expect("granted");
        (grant.validity, hold(&b2, &call, &grant))
    });
    // Registered, subscribed, and refused once more (invariant 1): the release hands
    // the lock over.
    while server.log().len() < 3 {
        settle(Duration::from_millis(1)).await;
    }
    let own = keys::waiter_channel("n", &b.id.to_string());
    assert_eq!(
        server.numsub(&own),
        1,
        "B's client listens on its own channel"
    );
    assert_eq!(server.registry(&keys::waiters("n")).len(), 1);
    let started = tokio::time::Instant::now();
    give_back(&a, &held).await;
    let (validity, hold_b) = waiting.await.expect("no panic");
    assert!(validity > Duration::ZERO);
    assert_eq!(server.holders("n"), vec![(mb.to_string(), 1)]);
    // Taken from the message: no acquire round trip after the release.
    let log = server.log();
    assert_eq!(log.last(), Some(&"release.lua"), "{log:?}");
    assert!(started.elapsed() < LEASE, "woken, not timed out");
    give_back(&b, &hold_b).await;
    assert!(server.holders("n").is_empty());
    settle(Duration::from_secs(1)).await;
    nothing_left_locally(&b);
    assert!(server.registry(&keys::waiters("n")).is_empty());
}

/// A lease in its last millisecond reads PTTL 0: the waiter retries within a
/// millisecond and gets the lock, instead of sleeping a whole watchdog timeout (the
/// holder here stalled: it neither renews nor releases, so no message comes).
#[tokio::test(start_paused = true)]
async fn a_lease_read_in_its_last_millisecond_is_retried_at_once() {
    let server = Server::new();
    server.set_latency(Duration::ZERO);
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    let _stalled = take(&a, "n", &ma).await;
    server.expire_in("n", Duration::from_micros(500));
    let started = tokio::time::Instant::now();
    let held = take(&b, "n", &mb).await;
    assert!(
        started.elapsed() <= Duration::from_millis(2),
        "retried at once, not after the fallback: {:?}",
        started.elapsed()
    );
    assert_eq!(server.holders("n"), vec![(mb.to_string(), 1)]);
    give_back(&b, &held).await;
}

/// Runs B's `lock()` against a lock A holds, polling it `steps` times (A releases
/// before poll `release_at`), then drops it wherever it is and checks that nothing is
/// left: on the server (no hold, no registration, no unclaimed hand-over) and in either
/// client. Returns whether B's call had finished by itself.
async fn drop_after(steps: usize, release_at: usize) -> bool {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    let held = take(&a, "n", &ma).await;
    let c = call("n", &mb, None);
    let mut fut = Box::pin(acquire(&b, &c));
    let (mut released, mut done) = (false, None);
    for i in 0..steps {
        if i == release_at {
            give_back(&a, &held).await;
            released = true;
        }
        if let Poll::Ready(r) = poll_once(&mut fut).await {
            done = Some(r.expect("no error").expect("granted"));
            break;
        }
        settle(Duration::from_micros(300)).await;
    }
    drop(fut);
    let at = format!("dropped after {steps} polls, released before poll {release_at}");
    if !released {
        // Before anything else happens: the dropped wait left nothing registered.
        settle(Duration::from_secs(1)).await;
        assert!(server.registry(&keys::waiters("n")).is_empty(), "{at}");
        nothing_left_locally(&b);
        give_back(&a, &held).await;
    }
    let finished = done.is_some();
    if let Some(grant) = done {
        give_back(&b, &hold(&b, &c, &grant)).await;
    }
    // Far less than the lease: nothing may be left to expire.
    settle(Duration::from_secs(1)).await;
    assert!(
        server.holders("n").is_empty(),
        "{at}: {:?}",
        server.holders("n")
    );
    assert!(server.registry(&keys::waiters("n")).is_empty(), "{at}");
    assert!(server.handed(&keys::waiters("n")).is_none(), "{at}");
    for engine in [&a, &b] {
        nothing_left_locally(engine);
    }
    finished
}

#[tokio::test(start_paused = true)]
async fn a_waiter_dropped_at_any_await_point_leaves_nothing_behind() {
    let mut runs = 0;
    for release_at in [0, 1, 2, 3, 5, 8, 13, 21] {
        let mut steps = 0;
        while !drop_after(steps, release_at).await {
            steps += 1;
            runs += 1;
            assert!(
                steps < 400,
                "B never got the lock (released at {release_at})"
            );
        }
    }
    assert!(runs > 40, "the wait has await points to drop at: {runs}");
}

#[tokio::test(start_paused = true)]
async fn a_release_racing_the_waiters_subscribe_still_wakes_it() {
    let server = Server::new();
    let (a, b) = (client(&server), client(&server));
    let (ma, mb) = (holder(&a, 1), holder(&b, 1));
    let held = take(&a, "n", &ma).await;
    server.slow_subscribe(true);
    let (b2, mb2) = (b.clone(), mb.clone());
    let waiting = tokio::spawn(async move {
        let call = call("n", &mb2, None);
        acquire(&b2, &call)
            .await
            .expect("no error")
            .expect("granted")
    });
    // Refused and registered, its subscriptions not confirmed yet: nobody to hand to.
    while server.registry(&keys::waiters("n")).is_empty() {
        settle(Duration::from_millis(1)).await;
    }
    let started = tokio::time::Instant::now();
    give_back(&a, &held).await;
    assert!(
        server.holders("n").is_empty(),
        "passed over: nobody listened"
    );
    settle(Duration::from_millis(50)).await;
    server.slow_subscribe(false);
    let grant = waiting.await.expect("no panic");
    // The attempt after the subscription is immediate (invariant 1), not the TTL bound.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(grant.validity > Duration::ZERO);
    assert_eq!(server.holders("n"), vec![(mb.to_string(), 1)]);
}

#[tokio::test(start_paused = true)]
async fn a_hand_over_to_a_cancelled_waiter_is_passed_on_to_the_next() {
    let server = Server::new();
    let (a, b, c) = (client(&server), client(&server), client(&server));
    let (ma, mb, mc) = (holder(&a, 1), holder(&b, 1), holder(&c, 1));
    let held = take(&a, "n", &ma).await;
    let wait = |engine: &Arc<Engine>, me: &Arc<str>| {
        let (engine, me) = (engine.clone(), me.clone());
        tokio::spawn(async move {
            let call = call("n", &me, None);
            let grant = acquire(&engine, &call).await.expect("no error");
            grant.map(|g| hold(&engine, &call, &g))
        })
    };
    let first = wait(&b, &mb);
    while server.registry(&keys::waiters("n")).is_empty() {
        settle(Duration::from_millis(1)).await;
    }
    let second = wait(&c, &mc);
    while server.registry(&keys::waiters("n")).len() < 2 {
        settle(Duration::from_millis(1)).await;
    }
    // B goes as the release hands it the lock: its wait's ticket is gone when the
    // message comes, and the hand-over must reach C rather than wait out the lease.
    server.park(true);
    let released = tokio::spawn({
        let (a, held) = (a.clone(), held.clone());
        async move { give_back(&a, &held).await }
    });
    settle(Duration::from_millis(5)).await;
    first.abort();
    server.park(false);
    released.await.expect("no panic");
    let started = tokio::time::Instant::now();
    let hold_c = second.await.expect("no panic").expect("granted");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "not left to the lease"
    );
    assert_eq!(server.holders("n"), vec![(mc.to_string(), 1)]);
    give_back(&c, &hold_c).await;
    settle(Duration::from_secs(1)).await;
    assert!(server.holders("n").is_empty());
    assert!(server.registry(&keys::waiters("n")).is_empty());
    for engine in [&a, &b, &c] {
        nothing_left_locally(engine);
    }
}

#[tokio::test(start_paused = true)]
async fn a_local_hand_over_to_a_waiter_dropped_meanwhile_is_released() {
    let server = Server::new();
    let a = client(&server);
    let (first, second) = (holder(&a, 1), holder(&a, 2));
    let held = take(&a, "n", &first).await;
    let (a2, s2) = (a.clone(), second.clone());
    let waiting = tokio::spawn(async move {
        let call = call("n", &s2, None);
        acquire(&a2, &call).await.expect("no error").map(|_| ())
    });
    // The second task waits on the local hold with an offer posted (invariant 7).
    while a.offers(false).len() == 0 {
        settle(Duration::from_millis(1)).await;
    }
    // The release takes the offer; its script lands but its reply is held back.
    server.park(true);
    let released = tokio::spawn({
        let (a, held) = (a.clone(), held.clone());
        async move { give_back(&a, &held).await }
    });
    settle(Duration::from_millis(5)).await;
    assert_eq!(
        server.holders("n"),
        vec![(second.to_string(), 1)],
        "handed over"
    );
    waiting.abort();
    settle(Duration::from_millis(5)).await;
    server.park(false);
    released.await.expect("no panic");
    settle(Duration::from_secs(1)).await;
    assert!(server.holders("n").is_empty(), "{:?}", server.holders("n"));
    nothing_left_locally(&a);
    // The same holder can take it again at once (the settling is over).
    let again = take(&a, "n", &second).await;
    give_back(&a, &again).await;
}
