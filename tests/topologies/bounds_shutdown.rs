//! The bounds a shutdown meets (docs/guarantees.md, "Bounds"), under a killed, a hung
//! (SIGSTOP) and an unreachable master (a cut route: open connections carry nothing,
//! new ones hang in `connect()`; redlatch_testkit::unreachable), with the default
//! configuration (watchdog and unavailable timeouts 30 s):
//!
//! * `unlock()` of a last hold and a permit's `release()`: the release timeout
//!   ([`redlatch::DEFAULT_RELEASE_TIMEOUT`], 3 s), not the 30 s unavailable timeout the
//!   release used to wait (Kubernetes' grace period: a pod stopping in an outage was
//!   killed inside `unlock()`);
//! * a re-entrant inner `unlock()`: one master timeout (it could take two);
//! * `close(60 s)` with a dropped guard's release and a cancelled `lock()`'s undo still
//!   asking the master: the release timeout and one request (the record's removal);
//! * `try_lock(w)`, the master failing before the call or while it waits: `w` and
//!   [`redlatch::WAIT_SLACK`] (it took `w` and a whole master timeout, 1 s).
//!
//! Each plus [`SLACK`]; every call must end in an error where the master never answers.

use redlatch_testkit as common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::unreachable::Route;
use common::{eventually, numsub, RedisServer};
use redlatch::{Client, Config, DEFAULT_RELEASE_TIMEOUT, WAIT_SLACK};

/// A single master's timeout (the default).
const MASTER_TIMEOUT: Duration = Duration::from_secs(1);

/// A loaded machine's timer and scheduling lateness, as in bounds.rs.
const SLACK: Duration = Duration::from_millis(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Killed,
    Hung,
    Unreachable,
}

const FAULTS: [Fault; 3] = [Fault::Killed, Fault::Hung, Fault::Unreachable];

/// A master and the way the client reaches it (through a relay for `Unreachable`).
struct Master {
    server: RedisServer,
    route: Option<Route>,
}

impl Master {
    fn start(fault: Fault) -> Master {
        let server = RedisServer::start();
        let route = (fault == Fault::Unreachable).then(|| Route::to(server.port()));
        Master { server, route }
    }

    fn url(&self) -> String {
        self.route.as_ref().map_or(self.server.url(), Route::url)
    }

    fn strike(&mut self, fault: Fault) {
        match fault {
            Fault::Killed => self.server.kill(),
            Fault::Hung => self.server.pause(),
            Fault::Unreachable => self.route.as_ref().unwrap().cut(),
        }
    }

    fn heal(&self) {
        if self.server.is_paused() {
            self.server.resume();
        }
    }
}

/// Runs `f`, returns its result and how long it took.
async fn timed<T>(f: impl Future<Output = T>) -> (T, Duration) {
    let started = Instant::now();
    let out = f.await;
    (out, started.elapsed())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Every shutdown call at once after `fault`, each checked against its bound.
fn shutdown_calls(fault: Fault) {
    let mut master = Master::start(fault);
    let config = Config::single(master.url());
    let rt = runtime();
    let mut broken = Vec::new();
    rt.block_on(async {
        let client = Client::connect(config.clone()).await.unwrap();
        let closing = Client::connect(config).await.unwrap();
        let guard = client.lock("sd:plain").lock().await.unwrap();
        let reentered = client.lock("sd:re");
        let outer = reentered.lock().await.unwrap();
        let inner = outer.scope(reentered.lock()).await.unwrap();
        let sem = client.permit_expirable_semaphore("sd:permits");
        sem.set_permits(1).await.unwrap();
        let permit = sem.try_acquire(Duration::ZERO).await.unwrap().unwrap();
        let dropped = closing.lock("sd:dropped").lock().await.unwrap();
        master.strike(fault);
        // Background work that meets the fault: a dropped guard's release, and the
        // undo of a lock() cancelled while its attempt was in flight.
        drop(dropped);
        let cancelled = closing.lock("sd:undo");
        let _ = tokio::time::timeout(Duration::from_millis(50), cancelled.lock()).await;
        let release = DEFAULT_RELEASE_TIMEOUT + SLACK;
        let (inner, outer, unlock, permit, close) = tokio::join!(
            timed(inner.unlock()),
            async {
                // The outer hold after its inner one: the same bound as any last hold.
                tokio::time::sleep(Duration::from_millis(1)).await;
                timed(outer.unlock()).await
            },
            timed(guard.unlock()),
            timed(permit.release()),
            timed(closing.close(Duration::from_secs(60))),
        );
        let cells = [
            (
                "inner unlock",
                inner.1,
                MASTER_TIMEOUT + SLACK,
                inner.0.err(),
            ),
            ("outer unlock", outer.1, release, outer.0.err()),
            ("unlock", unlock.1, release, unlock.0.err()),
            ("permit release", permit.1, release, permit.0.err()),
        ];
        for (call, took, bound, error) in cells {
            eprintln!("{fault:?}: {call} {took:?} (bound {bound:?}): {error:?}");
            if took > bound {
                broken.push(format!("{call} took {took:?}, bound {bound:?}"));
            }
            if error.is_none() {
                broken.push(format!("{call} reported success on a {fault:?} master"));
            }
        }
        let bound = DEFAULT_RELEASE_TIMEOUT + MASTER_TIMEOUT + SLACK;
        eprintln!("{fault:?}: close(60 s) {:?} (bound {bound:?})", close.1);
        if close.1 > bound {
            broken.push(format!("close(60 s) took {:?}, bound {bound:?}", close.1));
        }
        client.close(Duration::ZERO).await;
    });
    master.heal();
    assert!(broken.is_empty(), "{fault:?}: {}", broken.join("; "));
    rt.shutdown_timeout(Duration::from_secs(1));
}

#[test]
fn unlock_release_and_close_keep_the_release_timeout_on_a_killed_master() {
    shutdown_calls(Fault::Killed);
}

#[test]
fn unlock_release_and_close_keep_the_release_timeout_on_a_hung_master() {
    shutdown_calls(Fault::Hung);
}

#[test]
fn unlock_release_and_close_keep_the_release_timeout_on_an_unreachable_master() {
    shutdown_calls(Fault::Unreachable);
}

/// Holds `name` as another client would (a plain lock: a hash with a holder field).
fn hold(server: &RedisServer, name: &str) {
    let _: i64 = server.cmd(&["HSET", name, "someone-else:1", "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", name, "60000"]);
}

/// `try_lock(w)` of a busy lock whose master fails after the call began (it tried,
/// and listens for the release): `w` and the wait slack.
fn try_lock_while_waiting(fault: Fault) {
    let wait = Duration::from_millis(300);
    let mut master = Master::start(fault);
    hold(&master.server, "sd:busy");
    let rt = runtime();
    let (result, took) = rt.block_on(async {
        let client = Client::connect(Config::single(master.url())).await.unwrap();
        common::lock_and_unlock(&client, "sd:warm").await;
        let lock = client.lock("sd:busy");
        let call = tokio::spawn(async move { timed(lock.try_lock(wait)).await });
        let channel = "redisson_lock__channel:{sd:busy}";
        let server = &master.server;
        assert!(eventually(Duration::from_secs(10), || numsub(
            server, channel
        ) == 1));
        master.strike(fault);
        let (result, took) = call.await.unwrap();
        client.close(Duration::ZERO).await;
        (result.map(|g| g.is_some()), took)
    });
    master.heal();
    let bound = wait + WAIT_SLACK + SLACK;
    eprintln!(
        "{fault:?} while it waited: try_lock({wait:?}) {took:?} (bound {bound:?}): {result:?}"
    );
    assert!(took <= bound, "{fault:?}: {took:?}, bound {bound:?}");
    assert!(
        !matches!(result, Ok(true)),
        "{fault:?}: acquired a held lock"
    );
    rt.shutdown_timeout(Duration::from_secs(1));
}

#[test]
fn try_lock_returns_by_its_wait_and_the_slack_when_the_master_fails_while_it_waits() {
    for fault in FAULTS {
        try_lock_while_waiting(fault);
    }
}

#[test]
fn try_lock_returns_by_its_wait_and_the_slack_when_the_master_failed_before() {
    for fault in FAULTS {
        let mut master = Master::start(fault);
        let rt = runtime();
        let (result, took) = rt.block_on(async {
            let client = Client::connect(Config::single(master.url())).await.unwrap();
            common::lock_and_unlock(&client, "sd:warm").await;
            master.strike(fault);
            let wait = Duration::from_millis(300);
            let r = timed(client.lock("sd:free").try_lock(wait)).await;
            client.close(Duration::ZERO).await;
            r
        });
        master.heal();
        let bound = Duration::from_millis(300) + WAIT_SLACK + SLACK;
        eprintln!(
            "{fault:?} before: {took:?} (bound {bound:?}): {:?}",
            result.as_ref().map(|g| g.is_some())
        );
        assert!(took <= bound, "{fault:?}: {took:?}, bound {bound:?}");
        assert!(
            result.is_err(),
            "{fault:?}: not an error: {:?}",
            result.map(|g| g.is_some())
        );
        rt.shutdown_timeout(Duration::from_secs(1));
    }
}
