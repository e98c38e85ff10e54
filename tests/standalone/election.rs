//! Leader election (issue 27.1) on a real server: one leader at a time across clients,
//! terms that grow, observers that see every change once and in order, a stalled
//! leader replaced within its lease (its writes guarded by the leadership refused), Redlock refused with its reason.
//! Cluster and Sentinel: tests/topologies/election_deployments.rs; processes and kill -9:
//! redlatch-cli/tests/cli/cli_elect.rs.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::RedisServer;
use redlatch::{ChangeKind, Client, Config, Error};

async fn client(server: &RedisServer, lease: Duration) -> Client {
    Client::connect(Config::single(server.url()).watchdog_timeout(lease))
        .await
        .unwrap()
}

/// The next change, failing the test after `within`.
async fn next(observer: &mut redlatch::Observer, within: Duration) -> redlatch::Change {
    tokio::time::timeout(within, observer.next())
        .await
        .expect("a change within the bound")
        .expect("read the change")
}

#[tokio::test]
async fn one_leader_at_a_time_terms_grow_and_observers_see_each_change_once() {
    let server = RedisServer::start();
    let watcher = client(&server, Duration::from_secs(30)).await;
    let election = watcher.election("sched");
    let mut observers = [
        election.observe().await.unwrap(),
        election.observe().await.unwrap(),
    ];
    assert!(observers[0].leader().is_none());

    const CLIENTS: usize = 4;
    const ROUNDS: usize = 3;
    let leading = Arc::new(AtomicBool::new(false));
    let terms = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let cl = client(&server, Duration::from_secs(30)).await;
        let (leading, terms) = (leading.clone(), terms.clone());
        tasks.push(tokio::spawn(async move {
            let election = cl.election("sched");
            for r in 0..ROUNDS {
                let me = format!("c{c}r{r}");
                let leadership = election.campaign(me.clone()).await.unwrap();
                assert!(
                    !leading.swap(true, Ordering::SeqCst),
                    "two leaders at once ({me} elected while another led)"
                );
                terms.lock().push((leadership.term(), me.clone()));
                let now = election.leader().await.unwrap().expect("a leader");
                assert_eq!(
                    (now.term, now.value.as_str()),
                    (leadership.term(), me.as_str())
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
                leading.store(false, Ordering::SeqCst);
                leadership.resign().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("every campaign ends")
            .unwrap();
    }
    let terms = terms.lock().clone();
    assert_eq!(terms.len(), CLIENTS * ROUNDS);
    assert!(
        terms.windows(2).all(|w| w[0].0 < w[1].0),
        "terms must grow from leader to leader: {terms:?}"
    );
    assert!(election.leader().await.unwrap().is_none());

    // Each observer: every election and resignation once, in the order they happened.
    for observer in &mut observers {
        for (term, value) in &terms {
            let elected = next(observer, Duration::from_secs(10)).await;
            assert_eq!(
                (elected.kind, elected.term, &elected.value),
                (ChangeKind::Elected, *term, value)
            );
            let resigned = next(observer, Duration::from_secs(10)).await;
            assert_eq!(
                (resigned.kind, resigned.term, &resigned.value),
                (ChangeKind::Resigned, *term, value)
            );
        }
    }
}

#[tokio::test]
async fn proclaim_changes_the_value_in_the_same_term_and_a_dropped_leadership_resigns() {
    let server = RedisServer::start();
    let c = client(&server, Duration::from_secs(30)).await;
    let election = c.election("svc");
    let mut observer = election.observe().await.unwrap();
    let mut leading = election.campaign("10.0.0.1").await.unwrap();
    let term = leading.term();
    leading.proclaim("10.0.0.2").await.unwrap();
    assert_eq!(leading.value(), "10.0.0.2");
    let now = election.leader().await.unwrap().unwrap();
    assert_eq!((now.term, now.value.as_str()), (term, "10.0.0.2"));
    assert!(now.lease_left.is_some_and(|l| l <= Duration::from_secs(30)));
    drop(leading); // resigns in the background
    let mut changes = Vec::new();
    for _ in 0..3 {
        let c = next(&mut observer, Duration::from_secs(10)).await;
        changes.push((c.kind, c.term, c.value));
    }
    assert_eq!(
        changes,
        [
            (ChangeKind::Elected, term, "10.0.0.1".to_string()),
            (ChangeKind::Proclaimed, term, "10.0.0.2".to_string()),
            (ChangeKind::Resigned, term, "10.0.0.2".to_string()),
        ]
    );
    // The next leader is elected in a later term, at once (the drop released the lock).
    let next_leader = election
        .try_campaign("10.0.0.3", Duration::from_secs(10))
        .await
        .unwrap()
        .expect("elected after the drop");
    assert!(next_leader.term() > term);
    // try_campaign while another leads gives up.
    let other = client(&server, Duration::from_secs(30)).await;
    let e2 = other.election("svc");
    assert!(e2
        .try_campaign("x", Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    next_leader.resign().await.unwrap();
}

/// A leader whose process stalls (its runtime thread blocked: no renewals, like a long
/// GC pause) past its lease is replaced; when it resumes, its term is older than its
/// successor's, it is told it lost, and its proclaim is refused.
#[tokio::test]
async fn a_stalled_leader_is_replaced_within_its_lease_and_its_term_is_older() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(1);
    let url = server.url();
    let (elected_tx, elected_rx) = std::sync::mpsc::channel();
    let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
    let stalled = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let c = Client::connect(Config::single(url).watchdog_timeout(lease))
                .await
                .unwrap();
            let mut leading = c.election("stall").campaign("A").await.unwrap();
            elected_tx.send((leading.term(), Instant::now())).unwrap();
            // Block the whole runtime (watchdog included) until told to go on.
            resume_rx.recv().unwrap();
            let lost = tokio::time::timeout(Duration::from_secs(10), leading.lost().cancelled())
                .await
                .is_ok();
            let proclaimed = leading.proclaim("A again").await;
            // A write guarded by the leadership is refused by Redis itself.
            let wrote = leading.guard().guarded().set("{stall}:config", "A").await;
            (leading.term(), lost, proclaimed, wrote)
        })
    });
    let (term_a, _) = tokio::task::spawn_blocking(move || elected_rx.recv().unwrap())
        .await
        .unwrap();
    let b = client(&server, Duration::from_secs(30)).await;
    let election = b.election("stall");
    let started = Instant::now();
    let leading_b = tokio::time::timeout(Duration::from_secs(30), election.campaign("B"))
        .await
        .expect("B elected once A's lease ran out")
        .unwrap();
    // Within the lease: B waited at most the lease A's last renewal left (plus the time
    // the test itself took to get here; no finer bound holds on a busy machine).
    assert!(
        started.elapsed() < lease + Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(leading_b.term() > term_a, "{} > {term_a}", leading_b.term());
    assert_eq!(election.leader().await.unwrap().unwrap().value, "B");
    leading_b
        .guard()
        .guarded()
        .set("{stall}:config", "B")
        .await
        .unwrap();
    resume_tx.send(()).unwrap();
    let (term, lost, proclaimed, wrote) =
        tokio::task::spawn_blocking(move || stalled.join().unwrap())
            .await
            .unwrap();
    assert_eq!(term, term_a);
    assert!(lost, "the resumed leader must learn it lost");
    assert!(
        matches!(proclaimed, Err(Error::NotHeld { .. })),
        "{proclaimed:?}"
    );
    assert!(matches!(wrote, Err(Error::NotHeld { .. })), "{wrote:?}");
    assert_eq!(server.cmd::<String>(&["GET", "{stall}:config"]), "B");
    // B's record is untouched by A's attempt.
    let now = election.leader().await.unwrap().unwrap();
    assert_eq!((now.term, now.value.as_str()), (leading_b.term(), "B"));
    leading_b.resign().await.unwrap();
}

#[tokio::test]
async fn redlock_is_refused_with_the_reason() {
    let servers = common::start_many(3);
    let c = Client::connect(common::redlock::config(&servers))
        .await
        .unwrap();
    let election = c.election("e");
    let err = election.campaign("v").await.unwrap_err();
    assert!(
        matches!(&err, Error::Unsupported { reason, .. } if reason.contains("independent masters")),
        "{err:?}"
    );
    assert!(err.is_permanent());
    assert!(matches!(
        election.leader().await,
        Err(Error::Unsupported { .. })
    ));
    assert!(matches!(
        election.observe().await,
        Err(Error::Unsupported { .. })
    ));
    // Nothing was written anywhere.
    for s in &servers {
        assert_eq!(common::redlock::dbsize(s), 0);
    }
}

#[tokio::test]
async fn bad_names_are_refused_before_sending() {
    let server = RedisServer::start();
    let c = client(&server, Duration::from_secs(30)).await;
    let err = c.election("").campaign("v").await.unwrap_err();
    assert!(matches!(err, Error::InvalidName(_)), "{err:?}");
    assert_eq!(common::redlock::dbsize(&server), 0);
    // The lock's name puts the name in a hash tag, unless it has one already.
    assert_eq!(
        c.election("payouts").lock_name(),
        "redlatch_election:{payouts}"
    );
    assert_eq!(
        c.election("{eu}:payouts").lock_name(),
        "redlatch_election:{eu}:payouts"
    );
}
