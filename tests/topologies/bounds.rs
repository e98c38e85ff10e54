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

use std::future::Future;
use std::pin::Pin;
use std::thread;
use std::time::{Duration, Instant};

use common::cluster::RedisCluster;
use common::sentinel::SentinelSet;
use common::unreachable::Route;
use common::RedisServer;
use redlatch::{Client, Config};

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

type Call = Pin<Box<dyn Future<Output = Cell> + Send>>;

/// Times `f`, an acquisition-like call whose result is judged by `judge`.
fn timed<F, T>(
    call: &'static str,
    bound: Duration,
    must_fail: bool,
    f: F,
    judge: fn(T) -> Outcome,
) -> Call
where
    F: Future<Output = T> + Send + 'static,
    T: 'static,
{
    Box::pin(async move {
        let started = Instant::now();
        let result = f.await;
        let elapsed = started.elapsed();
        Cell {
            call,
            bound,
            elapsed,
            outcome: judge(result),
            must_fail,
        }
    })
}

fn held<G>(r: redlatch::Result<Option<G>>) -> Outcome {
    match r {
        Ok(Some(_)) => Outcome::Acquired,
        Ok(None) => Outcome::NotAcquired,
        Err(e) => failed(e),
    }
}

fn got<G>(r: redlatch::Result<G>) -> Outcome {
    match r {
        Ok(_) => Outcome::Acquired,
        Err(e) => failed(e),
    }
}

fn reached(r: redlatch::Result<bool>) -> Outcome {
    match r {
        Ok(true) => Outcome::Acquired,
        Ok(false) => Outcome::NotAcquired,
        Err(e) => failed(e),
    }
}

/// An error, its message cut short for the report (a pipeline's may repeat one
/// refusal per command).
fn failed(e: redlatch::Error) -> Outcome {
    Outcome::Failed(e.to_string().chars().take(120).collect())
}

fn done<T>(_: T) -> Outcome {
    Outcome::Done
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

/// Every call of the matrix on `before`'s clients, with bounds for `wait` and one
/// request's bound `per_request` (the master timeout, plus the replicas' wait where
/// acquisitions wait for replicas).
fn calls(
    before: Before,
    wait: Duration,
    per_request: Duration,
) -> (Vec<Call>, thread::JoinHandle<Cell>) {
    let Before {
        client,
        closing,
        guard,
        blocking,
    } = before;
    let bounded = wait + per_request + SLACK;
    // A lock's bounded wait abandons a request at the deadline and the wait slack.
    let locking = wait + per_request.min(redlatch::WAIT_SLACK) + SLACK;
    let c = client.clone();
    let calls: Vec<Call> = vec![
        timed(
            "try_lock",
            locking,
            true,
            async move { c.lock("bounds:plain").try_lock(wait).await },
            held,
        ),
        {
            let c = client.clone();
            // unavailable_timeout is `wait`.
            timed(
                "lock()",
                bounded,
                true,
                async move { c.lock("bounds:lock").lock().await },
                got,
            )
        },
        {
            let c = client.clone();
            timed(
                "fair try_lock",
                locking,
                true,
                async move { c.fair_lock("bounds:fair").try_lock(wait).await },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "read try_lock",
                locking,
                true,
                async move { c.read_write_lock("bounds:rw").read().try_lock(wait).await },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "write try_lock",
                locking,
                true,
                async move { c.read_write_lock("bounds:rw2").write().try_lock(wait).await },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "multi try_lock",
                bounded,
                true,
                async move {
                    c.multi_lock(["bounds:m1", "bounds:m2"])
                        .try_lock(wait)
                        .await
                },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "faster multi try_lock",
                locking,
                true,
                async move {
                    c.faster_multi_lock("bounds:group", ["a", "b"])
                        .unwrap()
                        .try_lock(wait)
                        .await
                },
                held,
            )
        },
        {
            let c = client.clone();
            let spin = async move { c.spin_lock("bounds:spin").try_lock(wait).await };
            timed("spin try_lock", locking, true, spin, held)
        },
        {
            let c = client.clone();
            timed(
                "semaphore try_acquire",
                locking,
                true,
                async move { c.semaphore("bounds:sem").try_acquire(wait).await },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "expirable semaphore try_acquire",
                locking,
                true,
                async move {
                    c.permit_expirable_semaphore("bounds:permits")
                        .try_acquire(wait)
                        .await
                },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "latch wait_timeout",
                locking,
                true,
                async move { c.count_down_latch("bounds:latch").wait_timeout(wait).await },
                reached,
            )
        },
        {
            let c = client.clone();
            timed(
                "try_campaign",
                locking,
                true,
                async move { c.election("bounds:election").try_campaign("me", wait).await },
                held,
            )
        },
        timed("unlock", bounded, true, guard.unlock(), got),
        {
            let c = client.clone();
            timed(
                "status",
                per_request + SLACK,
                false,
                async move { c.lock("bounds:plain").status().await },
                done,
            )
        },
        timed("close(t)", wait + SLACK, false, closing.close(wait), done),
    ];
    let blocking = thread::spawn(move || {
        let started = Instant::now();
        let r = blocking.lock("bounds:blocking").try_lock(wait);
        let elapsed = started.elapsed();
        Cell {
            call: "blocking try_lock",
            bound: locking,
            elapsed,
            outcome: held(r),
            must_fail: true,
        }
    });
    (calls, blocking)
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

/// A Sentinel failover: the primary is killed; the sentinels promote the replica after
/// their down-after time (1 s) and an election. Calls during the switch may fail or,
/// once the new primary is known, succeed: only the bounds are asserted. An
/// acquisition there waits for the replica too, so one request's bound is the master
/// timeout plus the replica sync timeout (1 s each, the defaults).
#[test]
fn a_sentinel_failover() {
    let mut set = SentinelSet::start("bounds");
    let per_request = MASTER_TIMEOUT + Duration::from_secs(1);
    for wait in [300, 1000, 4000].map(Duration::from_millis) {
        let config =
            Config::sentinel(set.master_name(), set.sentinel_urls()).unavailable_timeout(wait);
        let old = set.primary_addr();
        let mut killed = None;
        row(
            "Sentinel failover",
            config,
            wait,
            per_request,
            false,
            || killed = Some(set.kill_primary()),
        );
        let new = set.wait_for_switch(&old);
        eprintln!("switched from {old} to {new}");
        // The next round starts clean: no lock, latch or semaphore left from this one.
        let primary = set.server(set.server_index(&new).unwrap());
        let _: String = primary.cmd(&["FLUSHALL"]);
        // The next round fails over back: restart the old primary as a replica.
        let i = set.server_index(&old).unwrap();
        set.server_mut(i).restart();
        set.wait_until_ready();
    }
}

/// Redlock over three masters, two of them (a majority) killed or hung: the master
/// timeout is 50 ms there. (Semaphores and latches live on one master: under Redlock
/// they fail at once, which the bound allows.)
#[test]
fn a_redlock_majority_killed_or_hung() {
    for (fault, wait) in [
        (Fault::Killed, Duration::from_millis(300)),
        (Fault::Hung, Duration::from_secs(1)),
    ] {
        let mut servers = common::start_many(3);
        let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
        let config = Config::redlock(urls).unavailable_timeout(wait);
        let strike = || {
            for s in &mut servers[..2] {
                match fault {
                    Fault::Killed => s.kill(),
                    _ => s.pause(),
                }
            }
        };
        let per_request = Duration::from_millis(50);
        row(
            &format!("Redlock, 2 of 3 {fault:?}"),
            config,
            wait,
            per_request,
            true,
            strike,
        );
        for s in servers.iter().filter(|s| s.is_paused()) {
            s.resume();
        }
    }
}

/// One request's bound on a Cluster or Sentinel primary: the master timeout, plus the
/// replicas' wait of an acquisition (both 1 s by default).
fn with_replicas(config: &Config) -> Duration {
    config.effective_master_timeout() + config.replica_sync().1
}

/// A Cluster primary killed: the keys of its slots are unreachable until the cluster
/// promotes its replica (after the node timeout, 1.5 s here), the others are served
/// throughout. Calls may fail or succeed: only the bounds are asserted.
#[test]
fn a_cluster_primary_killed() {
    for wait in [300, 4000].map(Duration::from_millis) {
        let mut cluster = RedisCluster::start(3, 1);
        let config = Config::cluster(cluster.urls()).unavailable_timeout(wait);
        let per_request = with_replicas(&config);
        let victim = cluster.primary_for_key("bounds:plain");
        row(
            "Cluster primary killed",
            config,
            wait,
            per_request,
            false,
            || cluster.kill(victim),
        );
    }
}

/// A whole Cluster down: a shard and its replica killed, every node answers
/// `CLUSTERDOWN` (the default full coverage). Nothing can be acquired: every
/// acquisition must fail, within its bound, not wait for the cluster to come back.
#[test]
fn a_cluster_down() {
    let mut cluster = RedisCluster::start(3, 1);
    let wait = Duration::from_secs(1);
    let config = Config::cluster(cluster.urls()).unavailable_timeout(wait);
    let per_request = with_replicas(&config);
    let shard = cluster.primary_for_key("bounds:plain");
    row("Cluster down", config, wait, per_request, true, || {
        cluster.take_down_shard(shard)
    });
}
