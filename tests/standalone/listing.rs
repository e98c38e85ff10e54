//! `Client::list` (and `Lock::status`'s waiter count) against one redis-server: every
//! kind found and told apart, derived keys skipped, waiters counted, holders resolved to
//! their clients' records and ledgers, a pattern's bounds, and the deadline.

use redlatch_testkit as common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{eventually_async, RedisServer};
use redlatch::{Client, Config, Hold, ListedKind, Listing, LockListing};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn by_name(listing: &Listing) -> HashMap<&str, &LockListing> {
    listing.locks.iter().map(|l| (l.name.as_str(), l)).collect()
}

/// Waits until `n` connections listen on `channel`.
async fn listeners(server: &RedisServer, channel: &str, n: i64) {
    let seen = eventually_async(Duration::from_secs(10), || {
        common::numsub(server, channel) == n
    });
    assert!(
        seen.await,
        "{channel}: {} listeners, not {n}",
        common::numsub(server, channel)
    );
}

/// Starts a fair waiter for `k:fair` in client `b` and returns once it is queued.
async fn fair_waiter_queued(
    server: &RedisServer,
    b: &Client,
) -> tokio::task::JoinHandle<redlatch::Result<redlatch::LockGuard>> {
    let fair_b = b.fair_lock("k:fair");
    let queued = tokio::spawn(async move { fair_b.lock().await });
    let queue_key = "redisson_lock_queue:{k:fair}";
    let in_queue = eventually_async(Duration::from_secs(10), || {
        server.cmd::<i64>(&["LLEN", queue_key]) == 1
    });
    assert!(in_queue.await, "the fair waiter never queued");
    queued
}

/// The listing of `k:*` names each kind once, as what it is, in name order.
fn assert_each_kind(listing: &Listing) {
    let kinds: Vec<(&str, ListedKind)> = listing
        .locks
        .iter()
        .map(|l| (l.name.as_str(), l.kind))
        .collect();
    use ListedKind::*;
    assert_eq!(
        kinds,
        [
            ("k:elect", Election),
            ("k:fair", Fair),
            ("k:fenced", Fenced),
            ("k:group", FasterMulti),
            ("k:latch", Counter),
            ("k:m1", Lock),
            ("k:m2", Lock),
            ("k:plain", Lock),
            ("k:rw", ReadWrite),
            ("k:sem", Counter),
            ("k:simple", Simple),
            ("k:spin", Lock),
            ("k:xsem", ExpirableSemaphore),
        ],
        "{listing:#?}"
    );
}

/// The counters' counts, the election's key, and a TTL within the lease on each held kind.
fn assert_counts_keys_and_ttls(found: &HashMap<&str, &LockListing>) {
    assert_eq!(found["k:elect"].key, "redlatch_election:{k:elect}");
    assert_eq!(found["k:sem"].count, Some(5));
    assert_eq!(found["k:latch"].count, Some(3));
    assert!(found["k:sem"].holders.is_empty() && found["k:sem"].ttl.is_none());
    for name in [
        "k:plain", "k:simple", "k:fair", "k:rw", "k:group", "k:elect",
    ] {
        let ttl = found[name].ttl.unwrap_or_else(|| panic!("{name}: no ttl"));
        assert!(
            ttl > Duration::ZERO && ttl <= Duration::from_secs(30),
            "{name}: {ttl:?}"
        );
    }
}

/// The fair queue holds `b`'s waiter with its deadline (counted as its waiters); every
/// lock holder of `a` resolves to a's record (a permit's id has none).
fn assert_fair_queue_and_records(listing: &Listing, a: &Client, b: &Client) {
    let found = by_name(listing);
    let fair_found = found["k:fair"];
    assert_eq!(fair_found.waiters, 1);
    assert_eq!(fair_found.queue.len(), 1);
    assert!(
        fair_found.queue[0].id.starts_with(&b.id().to_string()),
        "{:?}",
        fair_found.queue
    );
    assert!(fair_found.queue[0].deadline_ms.is_some());
    let a_id = a.id().to_string();
    for h in listing.locks.iter().flat_map(|l| &l.holders) {
        let ours = h.holder.id.starts_with(&a_id);
        assert_eq!(h.record, ours, "{h:?}");
        assert_eq!(h.holder.pid.is_some(), ours, "{h:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_listed_once_as_what_it_is() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let plain = a.lock("k:plain").lock().await.unwrap();
    let spin = a.spin_lock("k:spin").lock().await.unwrap();
    let simple = a.simple_lock("k:simple").lock().await.unwrap();
    let fair = a.fair_lock("k:fair").lock().await.unwrap();
    let fenced = a.fenced_lock("k:fenced").lock().await.unwrap();
    let reader = a.read_write_lock("k:rw").read().lock().await.unwrap();
    let multi = a.multi_lock(["k:m1", "k:m2"]).lock().await.unwrap();
    let group = a
        .faster_multi_lock("k:group", ["x", "y"])
        .unwrap()
        .lock()
        .await
        .unwrap();
    assert!(a.semaphore("k:sem").try_set_permits(5).await.unwrap());
    let xsem = a.permit_expirable_semaphore("k:xsem");
    assert!(xsem.try_set_permits(2).await.unwrap());
    let permit = xsem.acquire().await.unwrap();
    assert!(a
        .count_down_latch("k:latch")
        .try_set_count(3)
        .await
        .unwrap());
    let leader = a.election("k:elect").campaign("me").await.unwrap();
    // A fair waiter in another client, so the fair lock has its queue keys too.
    let queued = fair_waiter_queued(&server, &b).await;
    // Not locks: a foreign string and a hash without hold counts.
    let _: () = server.cmd(&["SET", "k:text", "hello"]);
    let _: () = server.cmd(&["HSET", "k:hash", "field", "value"]);

    let listing = a.list("k:*").await.unwrap();
    assert!(!listing.incomplete, "{:?}", listing.unread);
    let found = by_name(&listing);
    assert_each_kind(&listing);
    let holder = |name: &str| -> Vec<String> {
        found[name]
            .holders
            .iter()
            .map(|h| h.holder.id.clone())
            .collect()
    };
    assert_eq!(holder("k:plain"), [plain.holder().to_string()]);
    assert_eq!(holder("k:spin"), [spin.holder().to_string()]);
    assert_eq!(holder("k:simple"), [simple.holder().to_string()]);
    assert_eq!(holder("k:fair"), [fair.holder().to_string()]);
    assert_eq!(holder("k:fenced"), [fenced.holder().to_string()]);
    assert_eq!(holder("k:rw"), [reader.holder().to_string()]);
    assert_eq!(found["k:rw"].mode.as_deref(), Some("read"));
    assert_eq!(holder("k:m1"), [multi.holder().to_string()]);
    assert_eq!(holder("k:group"), [group.holder().to_string()]);
    assert_eq!(found["k:group"].holders[0].count, 2, "two values held");
    assert_eq!(holder("k:xsem"), [permit.id().to_string()]);
    assert_eq!(found["k:xsem"].count, Some(1), "one permit left");
    assert_eq!(holder("k:elect"), [leader.holder().to_string()]);
    assert_eq!(
        found["k:fenced"].fencing_counter,
        Some(fenced.fencing_token().unwrap())
    );
    assert_counts_keys_and_ttls(&found);
    assert_fair_queue_and_records(&listing, &a, &b);

    fair.unlock().await.unwrap();
    let next = queued.await.unwrap().unwrap();
    let listing = a.list("k:fair").await.unwrap();
    assert_eq!(listing.locks.len(), 1, "{listing:#?}");
    assert_eq!(listing.locks[0].holders[0].holder.id, next.holder());
    assert_eq!(listing.locks[0].waiters, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_bounds_the_listing_and_derived_keys_never_show() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let _one = a.lock("orders:1").lock().await.unwrap();
    let _two = a.fenced_lock("{orders}:2").lock().await.unwrap();
    let _other = a.lock("jobs:1").lock().await.unwrap();
    let _reader = a.read_write_lock("orders:rw").read().lock().await.unwrap();
    let names = |l: &Listing| l.locks.iter().map(|l| l.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&a.list("orders:*").await.unwrap()),
        ["orders:1", "orders:rw"]
    );
    assert_eq!(names(&a.list("jobs:?").await.unwrap()), ["jobs:1"]);
    // Everything, and not one derived key (fencing counters, read holds' timeouts).
    let all = names(&a.list("*").await.unwrap());
    assert_eq!(all, ["jobs:1", "orders:1", "orders:rw", "{orders}:2"]);
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert!(
        keys.iter().any(|k| k.contains("rwlock_timeout")),
        "{keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.starts_with("redisson_lock_token")),
        "{keys:?}"
    );
    assert!(a.list("").await.is_err(), "an empty pattern is refused");
}

/// Waiters of a plain, a read-write and a spin lock: the first two counted by their
/// subscribed clients (in `list` and `Lock::status`), each client once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_locks_waiters_are_counted_per_client() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let guard = holder.lock("w:plain").lock().await.unwrap();
    let mut tasks = Vec::new();
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let c = client(&server).await;
        let lock = c.lock("w:plain");
        tasks.push(tokio::spawn(async move { lock.lock().await.map(drop) }));
        waiting.push(c);
    }
    listeners(&server, "redisson_lock__channel:{w:plain}", 2).await;
    let listing = holder.list("w:*").await.unwrap();
    assert_eq!(listing.locks[0].waiters, 2, "{listing:#?}");
    let status = holder.lock("w:plain").status().await.unwrap();
    assert_eq!(status[0].waiters, 2);
    guard.unlock().await.unwrap();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let settled = eventually_async(Duration::from_secs(10), || {
        common::numsub(&server, "redisson_lock__channel:{w:plain}") == 0
    });
    assert!(settled.await);
    let status = holder.lock("w:plain").status().await.unwrap();
    assert_eq!(
        (status[0].key_type.as_str(), status[0].waiters),
        ("none", 0)
    );
}

/// The listing of `r:*` once the ledgers show the plain lock's acquisition, the spin
/// lock's two waiters and the fair waiter's start (at most 10 s: ledgers are written at
/// most once a second; the assertions that follow say what is missing after that).
async fn listing_with_ledgers(a: &Client) -> Listing {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let listing = a.list("r:*").await.unwrap();
        let found = by_name(&listing);
        let acquired = |name: &str| {
            found
                .get(name)
                .is_some_and(|l| l.holders[0].holder.acquired.is_some())
        };
        let ready = acquired("r:plain")
            && found.get("r:spin").is_some_and(|l| l.waiters == 2)
            && (found.get("r:fair"))
                .is_some_and(|l| l.queue.iter().all(|q| q.waiting_since.is_some()));
        if ready || Instant::now() >= until {
            break listing;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Holders resolve to their clients' records and ledgers (which every redlatch client
/// writes: its record at connect, its ledger at most once a second): a host, pid, app
/// and the time it took the lock; a queued fair waiter to the time it began waiting; a
/// ledger's waits count a spin lock's waiters (spin waiters do not subscribe). A Java
/// holder (no record) is its id alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_resolve_to_their_clients_records() {
    let now_ms = || {
        let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since_epoch.unwrap().as_millis() as i64
    };
    let server = RedisServer::start();
    let before = now_ms();
    let named = |app: &str| Config::single(server.url()).app(app);
    let a = Client::connect(named("nightly")).await.unwrap();
    let b = Client::connect(named("nightly-b")).await.unwrap();
    let _guard = a.lock("r:plain").lock().await.unwrap();
    let spin = a.spin_lock("r:spin").lock().await.unwrap();
    let fair = a.fair_lock("r:fair").lock().await.unwrap();
    let fair_b = b.fair_lock("r:fair");
    let queued = tokio::spawn(async move { fair_b.lock().await.map(drop) });
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let lock = b.spin_lock("r:spin");
            tokio::spawn(async move { lock.lock().await.map(drop) })
        })
        .collect();
    let listing = listing_with_ledgers(&a).await;
    let found = by_name(&listing);
    let h = &found["r:plain"].holders[0];
    assert!(h.record, "{h:?}");
    assert!(
        h.holder
            .host
            .as_deref()
            .is_some_and(|host| !host.is_empty()),
        "{h:?}"
    );
    assert_eq!(h.holder.pid, Some(std::process::id()));
    assert_eq!(h.holder.app.as_deref(), Some("nightly"));
    assert_eq!(h.holder.version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
    let now = now_ms();
    let within = |t: Option<i64>| t.is_some_and(|t| (before..=now).contains(&t));
    assert!(within(h.holder.since) && within(h.holder.acquired), "{h:?}");
    // The spin lock: its holder, and the two waiters only b's ledger knows of.
    let s = &found["r:spin"].holders[0];
    assert_eq!(
        (s.holder.id.as_str(), s.holder.app.as_deref()),
        (spin.holder(), Some("nightly"))
    );
    assert_eq!(found["r:spin"].waiters, 2, "{:?}", found["r:spin"]);
    let q = &found["r:fair"].queue[0];
    assert!(q.id.starts_with(&b.id().to_string()), "{q:?}");
    assert!(within(q.waiting_since), "{q:?}");
    assert_eq!(q.app.as_deref(), Some("nightly-b"));
    // A Java holder (no record): its id alone.
    let _: () = server.cmd(&[
        "HSET",
        "r:java",
        "6f1c0b7e-0000-4000-8000-000000000001:1",
        "1",
    ]);
    let _: () = server.cmd(&["PEXPIRE", "r:java", "30000"]);
    let listing = a.list("r:java").await.unwrap();
    let java = &listing.locks[0].holders[0];
    assert!(!java.record && java.holder.host.is_none() && java.holder.acquired.is_none());
    // And the records and ledgers are no locks of their own.
    assert!(a.list("redlatch_*").await.unwrap().locks.is_empty());
    fair.unlock().await.unwrap();
    queued.await.unwrap().unwrap();
    spin.unlock().await.unwrap();
    for s in spinners {
        s.await.unwrap().unwrap();
    }
}

/// The whole call keeps one deadline: a server that does not answer (paused) makes the
/// listing return at the deadline, naming it unread, not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_server_is_named_unread_at_the_deadline() {
    let server = RedisServer::start();
    let a = Client::connect(Config::single(server.url()).master_timeout(Duration::from_secs(20)))
        .await
        .unwrap();
    let _g = a.lock("d:1").lock().await.unwrap();
    server.pause();
    let started = Instant::now();
    let within = Duration::from_millis(500);
    let listing = a.list_within("d:*", within).await;
    let elapsed = started.elapsed();
    server.resume();
    let listing = listing.unwrap();
    // Slack: the scheduler of a loaded machine, not the server.
    assert!(elapsed <= within + Duration::from_secs(2), "{elapsed:?}");
    assert!(listing.incomplete);
    assert_eq!(listing.unread.len(), 1, "{:?}", listing.unread);
    assert_eq!(listing.unread[0].master, server.addr());
    assert!(listing.locks.is_empty());
}
