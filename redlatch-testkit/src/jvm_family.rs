//! The family's wake-ups both ways between the real Redisson client and redlatch, on
//! any deployment (a cluster, Sentinel): for the read-write lock, the semaphore, the
//! permit-expirable semaphore, the count-down latch and the fenced lock, a waiter on
//! one side is woken by the other side's release, then the roles swap. The deployment
//! only changes how a test sees that a waiter has subscribed; the standalone family
//! (tests/redisson/redisson_jvm_family.rs) goes deeper, one test per kind.

use std::future::Future;
use std::time::Duration;

use redlatch::Client;

use super::jvm::Jvm;

/// How long a woken waiter may take to get in: far beyond any wake-up, short of a hang.
const WOKEN_WITHIN: Duration = Duration::from_secs(30);

/// Awaits `task`, failing with `what` if it has not finished within `within`.
async fn woken<T>(within: Duration, task: tokio::task::JoinHandle<T>, what: &str) -> T {
    tokio::time::timeout(within, task)
        .await
        .unwrap_or_else(|_| panic!("{what} within {within:?}"))
        .unwrap()
}

/// Awaits a Java call's reply, failing with `what` if it has not come within `within`.
async fn answered(within: Duration, call: super::jvm::Call, what: &str) -> super::jvm::Reply {
    tokio::time::timeout(within, call.reply())
        .await
        .unwrap_or_else(|_| panic!("{what} within {within:?}"))
}

/// Runs the five kinds both ways. `subscribed(channel)` returns once some client
/// listens on `channel` where its releases are published (a waiter is then asleep, so
/// a wake-up is what gets it in); `record(primitive)` is called as each kind passes.
pub async fn wake_both_ways<S, F>(java: &Jvm, client: &Client, subscribed: S, record: impl Fn(&str))
where
    S: Fn(&'static str) -> F,
    F: Future<Output = ()>,
{
    wake_both_ways_within(java, client, WOKEN_WITHIN, subscribed, record).await
}

/// [`wake_both_ways`], each waiter on either side woken within `within` (shorter than
/// the leases: a missed message then fails the test instead of the lease letting the
/// waiter in).
pub async fn wake_both_ways_within<S, F>(
    java: &Jvm,
    client: &Client,
    within: Duration,
    subscribed: S,
    record: impl Fn(&str),
) where
    S: Fn(&'static str) -> F,
    F: Future<Output = ()>,
{
    rwlock_both_ways(java, client, within, &subscribed).await;
    record("RReadWriteLock");
    semaphore_both_ways(java, client, within, &subscribed).await;
    record("RSemaphore");
    expirable_semaphore_both_ways(java, client, within, &subscribed).await;
    record("RPermitExpirableSemaphore");
    latch_both_ways(java, client, within, &subscribed).await;
    record("RCountDownLatch");

    // Fenced lock: one token sequence across the two.
    let t1 = java_token(java).await;
    let t2 = our_token(client).await;
    let t3 = java_token(java).await;
    assert!(t1 < t2 && t2 < t3, "tokens {t1} {t2} {t3}");
    record("RFencedLock");
}

/// Read-write lock: Java's write unlock wakes our reader; our writer's wakes Java's reader.
async fn rwlock_both_ways<S, F>(java: &Jvm, client: &Client, within: Duration, subscribed: &S)
where
    S: Fn(&'static str) -> F,
    F: Future<Output = ()>,
{
    java.call("w", "lock write rw").await.ok();
    let reader = {
        let r = client.read_write_lock("rw").read();
        tokio::spawn(async move { r.lock().await.unwrap() })
    };
    subscribed("redisson_rwlock:{rw}").await;
    java.call("w", "unlock write rw").await.ok();
    let g = woken(
        within,
        reader,
        "rwlock: Java's write unlock did not wake our reader",
    )
    .await;
    g.unlock().await.unwrap();
    let g = client.read_write_lock("rw").write().lock().await.unwrap();
    let call = java.send("r", "lock read rw");
    subscribed("redisson_rwlock:{rw}").await;
    // A subscriber of the channel may be our own reader's, still subscribed; and even
    // Java's own subscription is not enough: Redisson drops a read-unlock message that
    // comes before its waiter sleeps on the latch (see `Jvm::until_parked`).
    java.until_parked("r", within).await;
    g.unlock().await.unwrap();
    answered(
        within,
        call,
        "rwlock: our write unlock did not wake Java's reader",
    )
    .await
    .ok();
    java.call("r", "unlock read rw").await.ok();
}

/// Semaphore: Java's release wakes our waiter, and back.
async fn semaphore_both_ways<S, F>(java: &Jvm, client: &Client, within: Duration, subscribed: &S)
where
    S: Fn(&'static str) -> F,
    F: Future<Output = ()>,
{
    assert!(java.call("s", "sem sem trysetpermits 1").await.bool());
    java.call("s", "sem sem acquire 1").await.ok();
    let ours = {
        let sem = client.semaphore("sem");
        tokio::spawn(async move { sem.acquire().await.unwrap().forget() })
    };
    subscribed("redisson_sc:{sem}").await;
    java.call("s", "sem sem release 1").await.ok();
    woken(within, ours, "semaphore: Java's release did not wake us").await;
    let call = java.send("s", "sem sem acquire 1");
    subscribed("redisson_sc:{sem}").await;
    client.semaphore("sem").release().await.unwrap();
    answered(within, call, "semaphore: our release did not wake Java")
        .await
        .ok();
}

/// Permit-expirable semaphore: Java's release wakes our waiter, and back.
async fn expirable_semaphore_both_ways<S, F>(
    java: &Jvm,
    client: &Client,
    within: Duration,
    subscribed: &S,
) where
    S: Fn(&'static str) -> F,
    F: Future<Output = ()>,
{
    assert!(java.call("x", "xsem xs trysetpermits 1").await.bool());
    let permit = java.call("x", "xsem xs acquire").await.val().to_string();
    let ours = {
        let sem = client.permit_expirable_semaphore("xs");
        tokio::spawn(async move { sem.acquire().await.unwrap() })
    };
    subscribed("redisson_sc:{xs}").await;
    java.call("x", &format!("xsem xs release {permit}"))
        .await
        .ok();
    let p = woken(
        within,
        ours,
        "expirable semaphore: Java's release did not wake us",
    )
    .await;
    let call = java.send("x", "xsem xs acquire");
    subscribed("redisson_sc:{xs}").await;
    p.release().await.unwrap();
    let permit = answered(
        within,
        call,
        "expirable semaphore: our release did not wake Java",
    )
    .await
    .val()
    .to_string();
    java.call("x", &format!("xsem xs release {permit}"))
        .await
        .ok();
}

/// Count-down latch: Java's count-down opens our wait; ours opens Java's.
async fn latch_both_ways<S, F>(java: &Jvm, client: &Client, within: Duration, subscribed: &S)
where
    S: Fn(&'static str) -> F,
    F: Future<Output = ()>,
{
    assert!(java.call("l", "latch gate trysetcount 1").await.bool());
    let ours = {
        let latch = client.count_down_latch("gate");
        tokio::spawn(async move { latch.wait_timeout(within).await.unwrap() })
    };
    subscribed("redisson_countdownlatch__channel__{gate}").await;
    java.call("l", "latch gate countdown").await.ok();
    assert!(
        ours.await.unwrap(),
        "latch: Java's count-down did not open our wait"
    );
    assert!(client
        .count_down_latch("gate")
        .try_set_count(1)
        .await
        .unwrap());
    let call = java.send("l", &format!("latch gate await {}", within.as_millis()));
    subscribed("redisson_countdownlatch__channel__{gate}").await;
    client.count_down_latch("gate").count_down().await.unwrap();
    assert!(
        answered(
            within * 2,
            call,
            "latch: our count-down did not open Java's wait"
        )
        .await
        .bool(),
        "latch: our count-down did not open Java's wait"
    );
}

/// A fencing token taken (and the lock released again) by Java's `RFencedLock`.
async fn java_token(java: &Jvm) -> u64 {
    let token = java
        .call("f", "lock fenced fence")
        .await
        .val()
        .parse()
        .unwrap();
    java.call("f", "unlock fenced fence").await.ok();
    token
}

/// A fencing token taken (and the lock released again) by redlatch's fenced lock.
async fn our_token(client: &Client) -> u64 {
    let g = client.fenced_lock("fence").lock().await.unwrap();
    let token = g.fencing_token().unwrap();
    g.unlock().await.unwrap();
    token
}
