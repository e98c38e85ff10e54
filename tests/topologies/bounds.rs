//! Every bounded call keeps its bound under every fault (docs/guarantees.md, "Bounds"):
//! a matrix of fault × call × wait on real servers. A client connects and uses its
//! master (connections open, scripts loaded, a subscription confirmed), the fault
//! strikes, then every call of the matrix runs at once on that client and each must
//! return within its bound:
//!
//! * a bounded wait (`try_lock(wait)` of every kind but the multi-lock, `try_campaign`,
//!   the blocking API's, both semaphores' `try_acquire`, the latch's `wait_timeout`):
//!   `wait` + the wait slack (`WAIT_SLACK`, 250 ms, or one master timeout where that is
//!   shorter);
//! * the multi-lock's `try_lock`: `wait` + one master timeout;
//! * `lock()` and `unlock()`: `unavailable_timeout` (here `wait`) + one master timeout;
//! * `status`: one master timeout; `close(t)`: `t`;
//!
//! each plus [`SLACK`]. Where the master never answers again (killed, hung, refusing
//! us) every call must fail with an error, not report contention. Only upper bounds
//! are asserted: a faster return is never wrong.
//!
//! The faults: killed (`kill -9`), hung (SIGSTOP: sockets open, no replies),
//! unreachable (a cut route: open connections carry nothing, new ones never connect),
//! restarting (killed, back on its port 200 ms later), refusing authentication
//! (`requirepass` set and our connections killed), and a Sentinel failover (the
//! primary killed), a Redis Cluster primary killed (its replica promoted after the node
//! timeout), and a whole Cluster down (a shard and its replica killed: every node
//! answers `CLUSTERDOWN`). Each row runs on its own servers; the test harness runs two
//! at a time.

use redlatch_testkit as common;

use std::thread;
use std::time::Duration;

use common::unreachable::Route;
use common::RedisServer;
use redlatch::{Client, Config};

use calls::calls;

mod calls;
mod deployments;

/// The master timeout of a single master or a Sentinel primary (the default).
const MASTER_TIMEOUT: Duration = Duration::from_secs(1);

/// Added to every bound: a loaded machine's timer and scheduling lateness (a timer
/// fires, then the task waits for a core; the calls of a row all run at once on a
/// two-worker runtime beside other test binaries) and the work of dropping what the
/// deadline abandoned. Small next to what the bounds exclude: before the deadline was
/// end to end, `try_lock(1 s)` on a killed master took 3 s and on a hung one 3 s.
const SLACK: Duration = Duration::from_millis(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Killed,
    Hung,
    /// A cut route (redlatch_testkit::unreachable): connections carry nothing, new
    /// ones hang in `connect()`.
    Unreachable,
    Restarting,
    AuthRefused,
}

impl Fault {
    /// The master never answers us again during the calls: each must fail.
    fn fails_every_call(self) -> bool {
        self != Fault::Restarting
    }
}

/// What one call came to.
#[derive(Debug)]
enum Outcome {
    Acquired,
    NotAcquired,
    /// Its message, shown in the report.
    Failed(#[allow(dead_code)] String),
    /// `status` and `close`: no acquisition to judge.
    Done,
}

/// One cell of the matrix: a call, its bound, and what it did.
#[derive(Debug)]
struct Cell {
    call: &'static str,
    bound: Duration,
    elapsed: Duration,
    outcome: Outcome,
    /// Whether the call is an acquisition (or unlock) that must fail when the master
    /// never answers.
    must_fail: bool,
}

/// What the calls need that exists before the fault: held guards to unlock, a latch
/// to wait for, a second client to close.
struct Before {
    client: Client,
    closing: Client,
    guard: redlatch::LockGuard,
    blocking: redlatch::blocking::Client,
}

/// Connects and uses the master: every kind once (connections, scripts, the
/// subscription), a guard kept for `unlock`, a latch set for `wait_timeout`.
async fn prepare(config: Config) -> (Client, Client, redlatch::LockGuard) {
    let client = Client::connect(config.clone()).await.unwrap();
    let closing = Client::connect(config).await.unwrap();
    for c in [&client, &closing] {
        common::lock_and_unlock(c, "bounds:warm").await;
    }
    let guard = client.lock("bounds:held").lock().await.unwrap();
    // A waiter's channel confirmed: the pub/sub connection is in use too.
    let other = client.lock("bounds:held");
    assert!(other
        .try_lock(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    // Counters live on one master (under Redlock they are refused at once).
    if client.config().quorum() == 1 {
        let latch = client.count_down_latch("bounds:latch");
        assert!(latch.try_set_count(1).await.unwrap());
        client.semaphore("bounds:sem").set_permits(0).await.unwrap();
    }
    (client, closing, guard)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Connects (both APIs), uses the master, strikes with `strike`, runs every call, and
/// checks each bound; `fails`: every acquisition must end in an error.
fn row(
    what: &str,
    config: Config,
    wait: Duration,
    per_request: Duration,
    fails: bool,
    strike: impl FnOnce(),
) {
    let rt = runtime();
    let (client, closing, guard) = rt.block_on(prepare(config.clone()));
    // The blocking client runs its own runtime: connected outside ours.
    let blocking = redlatch::blocking::Client::connect(config).unwrap();
    let warm = blocking.lock("bounds:warm-blocking");
    // Before the strike, on healthy masters: a 50 ms master timeout can still time out
    // on a machine busy with other work, so the warm-up tries a few times (what is
    // bounded is the calls after the strike).
    let warmed = (0..20).any(|_| match warm.try_lock(Duration::ZERO) {
        Ok(Some(g)) => g.unlock().is_ok(),
        _ => false,
    });
    assert!(warmed, "{what}: the blocking client never took a free lock");
    strike();
    let before = Before {
        client,
        closing,
        guard,
        blocking,
    };
    let (calls, blocking) = calls(before, wait, per_request);
    let mut cells = rt.block_on(futures_util::future::join_all(calls));
    cells.push(blocking.join().unwrap());
    let report: Vec<String> = cells
        .iter()
        .map(|c| {
            format!(
                "  {:<32} {:>8.3?} (bound {:?}) {:?}",
                c.call, c.elapsed, c.bound, c.outcome
            )
        })
        .collect();
    eprintln!("{what}, wait {wait:?}:\n{}", report.join("\n"));
    let mut broken = Vec::new();
    for c in &cells {
        if c.elapsed > c.bound {
            broken.push(format!(
                "{} took {:?}, bound {:?}",
                c.call, c.elapsed, c.bound
            ));
        }
        if fails && c.must_fail && !matches!(c.outcome, Outcome::Failed(_)) {
            broken.push(format!("{} returned {:?}, not an error", c.call, c.outcome));
        }
    }
    assert!(
        broken.is_empty(),
        "{what}, wait {wait:?}:\n{}\nall:\n{}",
        broken.join("\n"),
        report.join("\n")
    );
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// One row on a single master of its own.
fn single(fault: Fault, wait: Duration) {
    let mut server = Some(RedisServer::start());
    let live = server.as_ref().unwrap();
    let route = (fault == Fault::Unreachable).then(|| Route::to(live.port()));
    let url = route.as_ref().map_or(live.url(), Route::url);
    let config = Config::single(url).unavailable_timeout(wait);
    let what = format!("{fault:?} master {}", live.addr());
    let mut admin = live.conn();
    let mut restarting = None;
    let strike = || match fault {
        Fault::Killed => server.as_mut().unwrap().kill(),
        Fault::Hung => server.as_ref().unwrap().pause(),
        Fault::Unreachable => route.as_ref().unwrap().cut(),
        Fault::Restarting => {
            let mut moved = server.take().unwrap();
            moved.kill();
            restarting = Some(thread::spawn(move || {
                thread::sleep(Duration::from_millis(200));
                moved.restart();
                moved
            }));
        }
        Fault::AuthRefused => {
            // Our connections stay authenticated until they are killed; every new one
            // is refused (NOAUTH).
            let set: redis::RedisResult<()> = redis::cmd("CONFIG")
                .arg(&["SET", "requirepass", "bounds-secret"])
                .query(&mut admin);
            set.unwrap();
            for kind in ["normal", "pubsub"] {
                let killed: redis::RedisResult<i64> = redis::cmd("CLIENT")
                    .arg(&["KILL", "TYPE", kind, "SKIPME", "yes"])
                    .query(&mut admin);
                killed.unwrap();
            }
        }
    };
    row(
        &what,
        config,
        wait,
        MASTER_TIMEOUT,
        fault.fails_every_call(),
        strike,
    );
    if let Some(restarting) = restarting {
        drop(restarting.join().unwrap());
    }
    if let Some(server) = server.filter(|s| s.is_paused()) {
        server.resume();
    }
}

#[test]
fn a_killed_master_300ms() {
    single(Fault::Killed, Duration::from_millis(300));
}

#[test]
fn a_killed_master_1s() {
    single(Fault::Killed, Duration::from_secs(1));
}

#[test]
fn a_hung_master_300ms() {
    single(Fault::Hung, Duration::from_millis(300));
}

#[test]
fn a_hung_master_1s() {
    single(Fault::Hung, Duration::from_secs(1));
}

#[test]
fn an_unreachable_master_300ms() {
    single(Fault::Unreachable, Duration::from_millis(300));
}

#[test]
fn an_unreachable_master_1s() {
    single(Fault::Unreachable, Duration::from_secs(1));
}

#[test]
fn a_restarting_master_300ms() {
    single(Fault::Restarting, Duration::from_millis(300));
}

#[test]
fn a_restarting_master_1s() {
    single(Fault::Restarting, Duration::from_secs(1));
}

#[test]
fn a_master_refusing_authentication_300ms() {
    single(Fault::AuthRefused, Duration::from_millis(300));
}

#[test]
fn a_master_refusing_authentication_1s() {
    single(Fault::AuthRefused, Duration::from_secs(1));
}
