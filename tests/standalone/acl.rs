//! Issue 11.5: the core scenarios under exactly the minimal ACL docs/errors.md documents,
//! and permission or data errors reported at once as typed errors, never retried as
//! outages (which took 30 s before) or reported as lost locks.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::acl::{user, CHANNELS, MINIMAL};
use common::RedisServer;
use redlatch::{Client, Config, Error};

async fn connect(url: String) -> Client {
    // Renewed every 0.5 s: a loaded machine may delay a renewal by a second.
    let config = Config::single(url).watchdog_timeout(Duration::from_millis(1500));
    Client::connect(config).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_scenarios_run_under_the_minimal_acl() {
    let server = RedisServer::start();
    let url = user(&server, &[]);
    let (a, b) = (connect(url.clone()).await, connect(url).await);

    // Reentrancy, watchdog renewal past three leases, status.
    let lock = a.lock("acl:plain");
    let outer = lock.lock().await.unwrap();
    let inner = outer.scope(lock.lock()).await.unwrap();
    assert_eq!(outer.scope(lock.hold_count()).await.unwrap(), 2);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert!(!outer.lost().is_cancelled());
    assert_eq!(lock.status().await.unwrap()[0].holders.len(), 1);

    // Another client waits and is woken by the unlock message (pub/sub allowed).
    let waiter = tokio::spawn({
        let lock = b.lock("acl:plain");
        async move {
            let started = Instant::now();
            let guard = lock.try_lock(Duration::from_secs(20)).await.unwrap();
            (guard.is_some(), started.elapsed())
        }
    });
    assert!(
        common::eventually_async(Duration::from_secs(5), || {
            common::numsub(&server, "redisson_lock__channel:{acl:plain}") == 1
        })
        .await
    );
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    let (got, waited) = waiter.await.unwrap();
    assert!(got);
    assert!(
        waited < Duration::from_secs(5),
        "woken, not the lease: {waited:?}"
    );

    // Fair and fenced locks, try_lock timing out, force_unlock.
    let fair = a.fair_lock("acl:fair").lock().await.unwrap();
    let busy = b.fair_lock("acl:fair");
    assert!(busy
        .try_lock(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    // Two queued waiters: the first one's acquisition moves the second's deadline
    // (ZINCRBY, Redisson's arithmetic).
    let mut queued = Vec::new();
    for _ in 0..2 {
        let lock = b.fair_lock("acl:fair");
        queued.push(tokio::spawn(async move {
            lock.lock().await.unwrap().unlock().await.unwrap()
        }));
        let len = queued.len();
        assert!(
            common::eventually_async(Duration::from_secs(5), || {
                server.cmd::<i64>(&["LLEN", "redisson_lock_queue:{acl:fair}"]) == len as i64
            })
            .await
        );
    }
    fair.unlock().await.unwrap();
    for task in queued {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap();
    }
    let first = a.fenced_lock("acl:fenced").lock().await.unwrap();
    let t1 = first.fencing_token().unwrap();
    first.unlock().await.unwrap();
    let second = b.fenced_lock("acl:fenced").lock().await.unwrap();
    assert!(second.fencing_token().unwrap() > t1);
    assert!(a.lock("acl:fenced").force_unlock().await.unwrap());
}

/// A permission or data error comes back at once, typed; no retrying until the
/// unavailable timeout.
async fn refused_at_once(result: impl std::future::Future<Output = redlatch::Result<()>>) -> Error {
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), result)
        .await
        .expect("an answer, not a retry loop")
        .unwrap_err();
    assert!(err.is_permanent(), "{err}");
    // Retrying until the unavailable timeout took 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    err
}

#[tokio::test]
async fn a_user_without_evalsha_is_refused_at_once() {
    let server = RedisServer::start();
    let client = connect(user(&server, &["+evalsha"])).await;
    let lock = client.lock("acl:no-evalsha");
    let err = refused_at_once(async { lock.lock().await.map(drop) }).await;
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert!(err.to_string().contains("evalsha"), "{err}");
    assert!(!err.to_string().contains("s3cret"));
}

/// Without `+hexists` (called by re-entry and renewal): a re-entry is refused at once,
/// and a renewal refused is not mistaken for "the lock is gone" (it used to report
/// the lock lost at the first renewal; now the cause is logged and the lock is lost
/// only when its validity really ends).
#[tokio::test]
async fn a_user_without_a_command_the_scripts_call_is_refused_at_once() {
    let server = RedisServer::start();
    let client = connect(user(&server, &["+hexists"])).await;
    let lock = client.lock("acl:no-hexists");
    let guard = lock.lock().await.unwrap(); // a fresh grant needs no HEXISTS
                                            // A re-entry (in the guard's scope) needs HEXISTS.
    let err = refused_at_once(guard.scope(async { lock.lock().await.map(drop) })).await;
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.renew_now().await;
    assert!(
        !guard.lost().is_cancelled(),
        "a refused renewal is not a lost lock"
    );
}

#[tokio::test]
async fn a_waiter_without_subscribe_is_refused_instead_of_sleeping_out_the_lease() {
    let server = RedisServer::start();
    let holder = Client::connect(Config::single(server.url())).await.unwrap();
    let held = holder.lock("acl:no-subscribe").lock().await.unwrap(); // 30 s lease
    let client = connect(user(&server, &["+subscribe"])).await;
    let lock = client.lock("acl:no-subscribe");
    let err = refused_at_once(async { lock.lock().await.map(drop) }).await;
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn a_fencing_counter_that_is_not_a_number_is_bad_data_and_leaves_no_lock() {
    let server = RedisServer::start();
    server.cmd::<String>(&["SET", "redisson_lock_token:{acl:bad}", "not-a-number"]);
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let lock = client.fenced_lock("acl:bad");
    let err = refused_at_once(async { lock.lock().await.map(drop) }).await;
    assert!(matches!(err, Error::BadData { .. }), "{err}");
    assert!(
        common::eventually_async(Duration::from_secs(5), || {
            server.cmd::<i64>(&["EXISTS", "acl:bad"]) == 0
        })
        .await
    );
}

#[tokio::test]
async fn a_master_out_of_memory_is_reported_at_once() {
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    server.cmd::<String>(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    server.cmd::<String>(&["CONFIG", "SET", "maxmemory", "1"]);
    let lock = client.lock("acl:oom");
    let err = refused_at_once(async { lock.lock().await.map(drop) }).await;
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    server.cmd::<String>(&["CONFIG", "SET", "maxmemory", "0"]);
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_some());
}

/// The "Minimal ACL" block of docs/errors.md grants exactly what these tests run under.
#[test]
fn the_documented_minimal_acl_is_the_tested_one() {
    let doc = include_str!("../../docs/errors.md");
    let block = doc
        .split("**Minimal ACL**")
        .nth(1)
        .and_then(|rest| rest.split("```text").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("docs/errors.md has a Minimal ACL text block");
    let granted: Vec<&str> = block
        .split_whitespace()
        .filter(|w| (w.starts_with('+') || w.starts_with('&')) && *w != "-@all")
        .collect();
    let mut tested: Vec<&str> = MINIMAL.iter().chain(CHANNELS).copied().collect();
    let mut documented = granted.clone();
    tested.sort_unstable();
    documented.sort_unstable();
    assert_eq!(
        documented, tested,
        "docs/errors.md and redlatch-testkit/src/acl.rs differ"
    );
}

/// A user who may not run the scripts (only `+ping`, as an operator might start from)
/// connects (nothing is loaded in advance) and is refused at the first lock, and the
/// refusal names what was refused: `evalsha` (the first call of a script loads it and
/// runs it in one round trip), not a bare "permission denied:".
#[tokio::test]
async fn a_refusal_at_the_first_lock_names_the_refused_command() {
    let server = RedisServer::start();
    let url = common::acl::ping_only(&server, "pw-not-shown");
    let client = Client::connect(Config::single(url)).await.unwrap();
    let lock = client.simple_lock("acl:first");
    let err = refused_at_once(async { lock.lock().await.map(drop) }).await;
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("'evalsha'"), "{text}");
    assert!(text.contains(&server.addr()), "{text}");
    assert!(!text.contains("pw-not-shown"), "{text}");
    assert!(
        !text.contains('\n') && text.len() < 300,
        "one short line: {text}"
    );
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(keys.iter().all(|k| k.starts_with("redlatch_")), "{keys:?}");
}
