//! Deadlock detection (`Config::deadlock_detection`) against real servers: the
//! youngest waiter of a cycle of two clients fails with `Error::Deadlock` naming the
//! cycle and the other goes on; tasks of one client that wait independently, and
//! any cycle with detection off, are left alone. (Holder records and
//! `redlatch deadlocks`: redlatch-cli/tests/cli/cli_observe.rs.)

use redlatch_testkit as common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster::shared_cluster;
use common::RedisServer;
use redlatch::{Client, Config, Error, LockGuard};
use tokio::sync::{oneshot, Barrier};

/// Detection writes a wait at once, checks every second and wants the cycle seen
/// twice: about 2 s after the cycle closes; the bound allows for a loaded machine.
const DETECTED_WITHIN: Duration = Duration::from_secs(12);

/// What a waiter's call returned, and when.
type Outcome = (Result<LockGuard, Error>, Instant);

/// A task of `client` that takes `first`, meets `barrier`, waits `delay`, then waits
/// for `second`; it sends what that wait returned (and keeps both guards until
/// `release` fires or is dropped).
fn hold_then_wait(
    client: &Client,
    (first, second): (&str, &str),
    delay: Duration,
    barrier: &Arc<Barrier>,
) -> (oneshot::Receiver<Outcome>, oneshot::Sender<()>) {
    let (client, first, second) = (client.clone(), first.to_string(), second.to_string());
    let (barrier, (tx, rx), (stop_tx, stop_rx)) =
        (barrier.clone(), oneshot::channel(), oneshot::channel());
    tokio::spawn(async move {
        let held = client.lock(&first).lock().await.unwrap();
        barrier.wait().await;
        tokio::time::sleep(delay).await;
        let got = client.lock(&second).lock().await;
        let failed = got.is_err();
        let _ = tx.send((got, Instant::now()));
        if failed {
            drop(held); // as an application would: give up what it holds
        } else {
            let _ = stop_rx.await;
        }
    });
    (rx, stop_tx)
}

async fn youngest_fails_and_the_other_goes_on(config: impl Fn(&str) -> Config, l1: &str, l2: &str) {
    let a = Client::connect(config("alpha").deadlock_detection(true))
        .await
        .unwrap();
    let b = Client::connect(config("beta").deadlock_detection(true))
        .await
        .unwrap();
    let barrier = Arc::new(Barrier::new(3));
    // alpha waits first; beta closes the cycle 300 ms later: beta is the youngest.
    let (older, _keep_a) = hold_then_wait(&a, (l1, l2), Duration::ZERO, &barrier);
    let (younger, _keep_b) = hold_then_wait(&b, (l2, l1), Duration::from_millis(300), &barrier);
    barrier.wait().await;
    let closed = Instant::now() + Duration::from_millis(300);
    let (got, at) = tokio::time::timeout(DETECTED_WITHIN * 2, younger)
        .await
        .unwrap()
        .unwrap();
    let err = got.expect_err("the youngest waiter fails");
    assert!(
        at.saturating_duration_since(closed) <= DETECTED_WITHIN,
        "detected after {:?}",
        at - closed
    );
    assert!(
        matches!(&err, Error::Deadlock { name, .. } if name == l1),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("deadlock") && text.contains(l1) && text.contains(l2),
        "{text}"
    );
    assert!(
        text.contains("alpha on") && text.contains("beta on"),
        "{text}"
    );
    // beta gave up L2: alpha, the older waiter, gets it.
    let (got, _) = tokio::time::timeout(Duration::from_secs(30), older)
        .await
        .unwrap()
        .unwrap();
    assert!(got.is_ok(), "the older waiter goes on: {got:?}");
    a.close(Duration::from_secs(5)).await;
    b.close(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_youngest_waiter_of_a_cycle_fails_with_deadlock() {
    let server = RedisServer::start();
    let url = server.url();
    youngest_fails_and_the_other_goes_on(
        |app| Config::single(url.clone()).app(app),
        "dd:1",
        "dd:2",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_youngest_waiter_of_a_cycle_across_cluster_primaries_fails_with_deadlock() {
    let cluster = shared_cluster();
    let (l1, l2) = (
        cluster.key_on(cluster.primaries()[0], "ddc:"),
        cluster.key_on(cluster.primaries()[1], "ddc:"),
    );
    let urls = cluster.urls();
    youngest_fails_and_the_other_goes_on(|app| Config::cluster(urls.clone()).app(app), &l1, &l2)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_youngest_waiter_of_a_cycle_under_redlock_fails_with_deadlock() {
    let servers = common::start_many(3);
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    youngest_fails_and_the_other_goes_on(
        |app| Config::redlock(urls.clone()).app(app),
        "ddr:1",
        "ddr:2",
    )
    .await;
}

/// No error: neither a cycle with detection off nor independent tasks of one client
/// with it on (X's task A: I1 then I2; Y: I2 then I3; X's task B holds I3): both wait
/// on past the time detection takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_deadlock_without_a_cycle_of_tasks_or_with_detection_off() {
    let server = RedisServer::start();
    let url = server.url();
    let on = |app: &str| {
        Config::single(url.clone())
            .app(app)
            .deadlock_detection(true)
    };
    let (x, y) = (
        Client::connect(on("x")).await.unwrap(),
        Client::connect(on("y")).await.unwrap(),
    );
    let b_held = x.lock("ind:3").lock().await.unwrap();
    let barrier = Arc::new(Barrier::new(5));
    let (mut a_wait, _ka) = hold_then_wait(&x, ("ind:1", "ind:2"), Duration::ZERO, &barrier);
    let (mut y_wait, _ky) = hold_then_wait(&y, ("ind:2", "ind:3"), Duration::ZERO, &barrier);
    // And a real cycle between two clients without detection.
    let off = |app: &str| Config::single(url.clone()).app(app);
    let (p, q) = (
        Client::connect(off("p")).await.unwrap(),
        Client::connect(off("q")).await.unwrap(),
    );
    let (mut p_wait, _kp) = hold_then_wait(&p, ("off:1", "off:2"), Duration::ZERO, &barrier);
    let (mut q_wait, _kq) = hold_then_wait(&q, ("off:2", "off:1"), Duration::ZERO, &barrier);
    barrier.wait().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (what, rx) in [
        ("A", &mut a_wait),
        ("Y", &mut y_wait),
        ("P", &mut p_wait),
        ("Q", &mut q_wait),
    ] {
        assert!(
            matches!(rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)),
            "{what} stopped waiting"
        );
    }
    // The chain is real: once B lets I3 go, Y gets it, and then A gets I2... after Y.
    drop(b_held);
    let (got, _) = tokio::time::timeout(Duration::from_secs(30), y_wait)
        .await
        .unwrap()
        .unwrap();
    assert!(got.is_ok(), "{got:?}");
}

/// `Lock::status()` names each redlatch waiter (issue 49): a plain lock's from its
/// client's ledger, a fair lock's queue resolved, with host, pid, app and since when it
/// waits, as holders are; the count stays beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_each_waiter_of_a_plain_and_a_fair_lock() {
    let server = RedisServer::start();
    let config = || Config::single(server.url()).app("status-waiter");
    let holder = Client::connect(config()).await.unwrap();
    let waiter = Client::connect(config()).await.unwrap();
    for fair in [false, true] {
        let pick = |c: &Client| match fair {
            true => c.fair_lock("sw:fair"),
            false => c.lock("sw:plain"),
        };
        let held = pick(&holder).lock().await.unwrap();
        let lock = pick(&waiter);
        let waiting = tokio::spawn(async move { lock.lock().await.map(drop) });
        // The ledger (since when it waits) is flushed within a second of the wait.
        let deadline = Instant::now() + Duration::from_secs(20);
        let w = loop {
            let s = pick(&holder).status().await.unwrap();
            let dated = s[0].waiting.iter().all(|w| w.waiting_since.is_some());
            if s[0].waiting.len() == 1 && dated {
                break s[0].waiting[0].clone();
            }
            assert!(Instant::now() < deadline, "fair {fair}: never named: {s:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(
            w.id.starts_with(&waiter.id().to_string()),
            "fair {fair}: {w:?}"
        );
        assert_eq!(w.pid, Some(std::process::id()), "fair {fair}: {w:?}");
        assert_eq!(
            w.app.as_deref(),
            Some("status-waiter"),
            "fair {fair}: {w:?}"
        );
        assert!(w.host.is_some(), "fair {fair}: {w:?}");
        held.unlock().await.unwrap();
        waiting.await.unwrap().unwrap();
    }
}
