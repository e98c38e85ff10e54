//! Issue 49 item 5: a service whose ACL allows only its own keys still locks. Each
//! feature runs under a user of exactly the keys and channels docs/errors.md ("Minimal
//! ACL per feature") gives it, with bookkeeping off, and Redis's ACL LOG shows that
//! nothing was refused; with a bookkeeping prefix inside the service's keys, holders
//! and waiters are named and force-unlocks heard at once; a user lacking the prefix's
//! keys still locks, and what needs them is refused naming the key.

use redlatch_testkit as common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::acl::{confined, BOOKKEEPING, FEATURES, MORE_FEATURES};
use common::RedisServer;
use redlatch::{Client, Config, Error};

/// Within it a waiter is woken (the lease it would otherwise sleep out is 30 s).
pub(super) const WOKEN: Duration = Duration::from_secs(5);

fn rules(feature: &str) -> &'static [&'static str] {
    FEATURES.iter().find(|(f, _)| *f == feature).unwrap().1
}

pub(super) async fn client(url: &str, books: Option<&str>) -> Client {
    let config = Config::single(url);
    let config = match books {
        Some(prefix) => config.bookkeeping_prefix(prefix),
        None => config.bookkeeping(false),
    };
    Client::connect(config).await.unwrap()
}

/// The ACL LOG entries (refusals) since the last reset, as `reason object`.
pub(super) fn refusals(server: &RedisServer) -> Vec<String> {
    let log: Vec<Vec<redis::Value>> = server.cmd(&["ACL", "LOG"]);
    log.iter()
        .map(|entry| {
            let text: Vec<String> = entry
                .iter()
                .filter_map(|v| redis::from_redis_value::<String>(v.clone()).ok())
                .collect();
            text.join(" ")
        })
        .collect()
}

/// Listeners of `channel` and of the channels under it (a fair waiter's own).
fn listeners(server: &RedisServer, channel: &str) -> i64 {
    let channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", &format!("{channel}*")]);
    channels.iter().map(|c| common::numsub(server, c)).sum()
}

/// Runs `hold` (taking the resource), then `wait` on another task until `channel` (or
/// one under it) has a listener, then `release`; the waiter must be through within
/// [`WOKEN`].
pub(super) async fn woken<H, W, R>(
    server: &RedisServer,
    channel: &str,
    hold: H,
    wait: W,
    release: R,
) where
    H: Future<Output = ()>,
    W: Future<Output = bool> + Send + 'static,
    R: Future<Output = ()>,
{
    hold.await;
    let before = listeners(server, channel);
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        (wait.await, started.elapsed())
    });
    let listening = common::eventually_async(Duration::from_secs(10), || {
        listeners(server, channel) > before
    });
    assert!(
        listening.await,
        "nobody waits on {channel}: {:?}",
        refusals(server)
    );
    let released = Instant::now();
    release.await;
    let (through, _) = waiter.await.unwrap();
    assert!(through, "the waiter on {channel} got nothing");
    assert!(
        released.elapsed() <= WOKEN,
        "woken by the release, not a lease: {:?}",
        released.elapsed()
    );
}

/// Each feature under exactly its documented keys and channels, bookkeeping off:
/// held, waited for, woken, and nothing refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_feature_runs_under_exactly_its_documented_acl_with_bookkeeping_off() {
    let server = RedisServer::start();
    for (feature, rules) in FEATURES {
        let url = confined(&server, rules, &[]);
        let _: String = server.cmd(&["ACL", "LOG", "RESET"]);
        let (a, b) = (client(&url, None).await, client(&url, None).await);
        let timeout = tokio::time::timeout(Duration::from_secs(60), run(feature, &server, &a, &b));
        timeout.await.unwrap_or_else(|_| panic!("{feature}: stuck"));
        assert_eq!(refusals(&server), Vec::<String>::new(), "{feature}");
        let notices: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", "*_client__channel:*"]);
        assert!(notices.is_empty(), "{feature}: {notices:?}");
        a.close(Duration::from_secs(5)).await;
        b.close(Duration::from_secs(5)).await;
    }
}

/// One feature's scenario between clients `a` and `b`.
async fn run(feature: &str, server: &RedisServer, a: &Client, b: &Client) {
    const WAIT: Duration = Duration::from_secs(20);
    let lock_kind = |c: &Client, name: &str| match feature {
        "fair lock" => c.fair_lock(name),
        "fenced lock" => c.fenced_lock(name),
        _ => c.lock(name),
    };
    match feature {
        "plain lock" | "fair lock" | "fenced lock" => {
            let held = lock_kind(a, "orders:1")
                .lock()
                .await
                .unwrap_or_else(|e| panic!("{e}: {:?}", refusals(server)));
            let other = lock_kind(b, "orders:1");
            let wait = async move { other.try_lock(WAIT).await.unwrap().is_some() };
            let channel = "redisson_lock__channel:{orders:1}";
            woken(server, channel, async {}, wait, async {
                held.unlock().await.unwrap()
            })
            .await;
            let _again = lock_kind(a, "orders:2").lock().await.unwrap();
            assert!(lock_kind(b, "orders:2").force_unlock().await.unwrap());
        }
        "read-write lock" => {
            let held = a.read_write_lock("orders:rw").write().lock().await.unwrap();
            let reader = b.read_write_lock("orders:rw").read();
            let wait = async move { reader.try_lock(WAIT).await.unwrap().is_some() };
            let channel = "redisson_rwlock:{orders:rw}";
            woken(server, channel, async {}, wait, async {
                held.unlock().await.unwrap()
            })
            .await;
        }
        "semaphore" => {
            let sem = a.semaphore("orders:sem");
            sem.set_permits(1).await.unwrap();
            let permit = sem.acquire().await.unwrap();
            let other = b.semaphore("orders:sem");
            let wait = async move { other.try_acquire(WAIT).await.unwrap().is_some() };
            let channel = "redisson_sc:{orders:sem}";
            woken(server, channel, async {}, wait, async {
                permit.release().await.unwrap()
            })
            .await;
        }
        "count-down latch" => {
            let latch = a.count_down_latch("orders:latch");
            assert!(latch.try_set_count(1).await.unwrap());
            let other = b.count_down_latch("orders:latch");
            let wait = async move { other.wait_timeout(WAIT).await.unwrap() };
            let channel = "redisson_countdownlatch__channel__{orders:latch}";
            let down = async { assert_eq!(latch.count_down().await.unwrap(), 0) };
            woken(server, channel, async {}, wait, down).await;
        }
        "job" => {
            let job = |c: &Client| c.job("export").at_most(Duration::from_secs(10));
            let (started, finish) = (tokio::sync::Notify::new(), tokio::sync::Notify::new());
            let (job_a, job_b) = (job(a), job(b));
            assert!(job_a.run(async {}).await.unwrap().ran());
            let first = job_a.run(async {
                started.notify_one();
                finish.notified().await;
            });
            let second = async {
                started.notified().await;
                let skipped = job_b.run(async {}).await.unwrap();
                finish.notify_one();
                skipped
            };
            let (first, skipped) = tokio::join!(first, second);
            assert!(first.unwrap().ran() && !skipped.ran());
            assert!(job_b.run(async {}).await.unwrap().ran());
        }
        other => panic!("{other} is run by acl_kinds.rs, not here"),
    }
}

/// Bookkeeping under a prefix inside the service's keys: the record, ledger and
/// notice channel land there (none under `redlatch_`), holders and waiters are named,
/// a force-unlock is heard at once and a release request reaches the holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookkeeping_under_a_prefix_the_acl_allows_names_holders_and_hears_force_unlocks() {
    let server = RedisServer::start();
    let granted: Vec<&str> = rules("plain lock")
        .iter()
        .chain(BOOKKEEPING)
        .copied()
        .collect();
    let url = confined(&server, &granted, &[]);
    let _: String = server.cmd(&["ACL", "LOG", "RESET"]);
    let (a, b) = (
        client(&url, Some("orders:rl")).await,
        client(&url, Some("orders:rl")).await,
    );
    let record = format!("orders:rl_client:{{{}}}", a.id());
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", &record]),
        1,
        "{record}: {:?}",
        refusals(&server)
    );
    let held = a.lock("orders:9").lock().await.unwrap();
    let waiter = tokio::spawn({
        let lock = b.lock("orders:9");
        async move {
            lock.try_lock(Duration::from_secs(30))
                .await
                .unwrap()
                .is_some()
        }
    });
    let ledger = format!("orders:rl_ledger:{{{}}}", b.id());
    let waits = common::eventually_async(Duration::from_secs(10), || {
        let fields: Vec<String> = server.cmd(&["HKEYS", &ledger]);
        fields
            .iter()
            .any(|f| f.starts_with("w|") && f.ends_with("|orders:9"))
    });
    assert!(waits.await, "the waiter's ledger {ledger}");
    // An operator's client (no ACL) with the same prefix names holder and waiter.
    let ops = client(&server.url(), Some("orders:rl")).await;
    let listing = ops.list("orders:*").await.unwrap();
    let lock = listing.locks.iter().find(|l| l.name == "orders:9").unwrap();
    assert!(lock.holders[0].record, "{lock:?}");
    assert_eq!(lock.holders[0].holder.pid, Some(std::process::id()));
    assert_eq!(lock.waiting.len(), 1, "{lock:?}");
    assert_eq!(lock.waiting[0].pid, Some(std::process::id()));
    assert!(listing
        .locks
        .iter()
        .all(|l| !l.name.starts_with("orders:rl_")));
    // A release request reaches the holder; a force-unlock is heard at once (the
    // default 30 s watchdog renews every 10 s: only the notice can be this quick).
    let asked = ops.lock("orders:9").request_release().await.unwrap();
    assert_eq!((asked.holders.len(), asked.listeners), (1, 1));
    let forced = Instant::now();
    assert!(ops.lock("orders:9").force_unlock().await.unwrap());
    let heard = tokio::time::timeout(Duration::from_secs(5), held.lost().cancelled()).await;
    assert!(
        heard.is_ok(),
        "the holder heard of it after {:?}",
        forced.elapsed()
    );
    assert!(waiter.await.unwrap());
    assert_eq!(refusals(&server), Vec::<String>::new());
    let stray: Vec<String> = server.cmd(&["KEYS", "redlatch_client*"]);
    assert!(stray.is_empty(), "{stray:?}");
}

/// Bookkeeping off: what needs it degrades, typed, and locking does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_bookkeeping_off_what_needs_it_says_so_and_locking_goes_on() {
    let server = RedisServer::start();
    let url = confined(&server, rules("plain lock"), &[]);
    let svc = client(&url, None).await;
    let held = svc.lock("orders:5").lock().await.unwrap();
    let err = svc.lock("orders:5").request_release().await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("bookkeeping"), "{err}");
    let ops = client(&server.url(), Some("redlatch")).await;
    let listing = ops.list("orders:*").await.unwrap();
    let lock = listing.locks.iter().find(|l| l.name == "orders:5").unwrap();
    assert!(!lock.holders[0].record, "no record: {lock:?}");
    assert_eq!(lock.holders[0].holder.id, held.holder());
    let err = Client::connect(
        Config::single(&url)
            .bookkeeping(false)
            .deadlock_detection(true),
    )
    .await
    .expect_err("refused");
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
    held.unlock().await.unwrap();
}

/// A user without the bookkeeping keys, bookkeeping left on: locking works as with
/// bookkeeping off (the refused writes are logged once, at connect), and a release
/// request, which needs them, is refused naming the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_lacking_the_bookkeeping_keys_still_locks_and_is_told_which_key() {
    let server = RedisServer::start();
    let url = confined(&server, rules("plain lock"), &[]);
    let (a, b) = (
        client(&url, Some("redlatch")).await,
        client(&url, Some("redlatch")).await,
    );
    let held = a.lock("orders:7").lock().await.unwrap();
    let other = b.lock("orders:7");
    let wait = async move {
        other
            .try_lock(Duration::from_secs(20))
            .await
            .map_err(|e| panic!("{e}"))
            .unwrap()
            .is_some()
    };
    let channel = "redisson_lock__channel:{orders:7}";
    woken(&server, channel, async {}, wait, async {
        held.unlock().await.unwrap()
    })
    .await;
    let _held = a.lock("orders:8").lock().await.unwrap();
    let err = b.lock("orders:8").request_release().await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err:?}");
    assert!(
        refusals(&server)
            .iter()
            .any(|r| r.contains("redlatch_client:{")),
        "the record's write was refused: {:?}",
        refusals(&server)
    );
}

/// The "Minimal ACL per feature" block of docs/errors.md is what these tests run under.
#[test]
fn the_documented_acl_per_feature_is_the_tested_one() {
    let doc = include_str!("../../docs/errors.md");
    let block = doc
        .split("## Minimal ACL per feature")
        .nth(1)
        .and_then(|rest| rest.split("```text").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("docs/errors.md has a Minimal ACL per feature text block");
    let documented: Vec<(String, Vec<&str>)> = block
        .lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(feature, rules)| (feature.to_string(), rules.split_whitespace().collect()))
        .collect();
    let mut tested: Vec<(String, Vec<&str>)> = (FEATURES.iter().chain(MORE_FEATURES))
        .map(|(f, rules)| (f.to_string(), rules.to_vec()))
        .collect();
    tested.push(("bookkeeping under orders:rl".into(), BOOKKEEPING.to_vec()));
    assert_eq!(
        documented, tested,
        "docs/errors.md and redlatch-testkit/src/acl.rs differ"
    );
}
