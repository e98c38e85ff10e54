//! redlatch against the real Redisson client (a JVM per test, redlatch-testkit/src/jvm.rs) on a
//! standalone Redis, for the rest of the family: RFairLock (FIFO across the two),
//! RFencedLock (one token sequence), RReadWriteLock (both directions, downgrade),
//! RSemaphore, RPermitExpirableSemaphore, RCountDownLatch and RedissonMultiLock. Each
//! scenario runs on the three Redisson versions; wake latencies are printed.

use redlatch_testkit as common;
use redlatch_testkit::per_version;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::jvm::{self, addr_of, mono_nanos, Deployment, Jvm};
use common::{eventually_async, RedisServer};
use redlatch::{Client, Config};

per_version!(
    fair_lock_fifo_across_the_two,
    fenced_lock_one_token_sequence,
    read_write_lock_both_ways_and_downgrade,
    semaphore_both_ways,
    permit_expirable_semaphore_both_ways,
    count_down_latch_both_ways,
    multi_lock_both_ways,
);

fn ms(nanos: i64) -> f64 {
    nanos as f64 / 1e6
}

struct Setup {
    server: RedisServer,
    java: Jvm,
    client: Client,
    id: String,
}

async fn setup(test: &str, version: &str) -> Setup {
    let id = format!("redisson_jvm_family-{test}-{version}");
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let java = Jvm::start(version, &Deployment::Single(addr_of(&server.url())), "").await;
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    Setup {
        server,
        java,
        client,
        id,
    }
}

/// Subscribers of every channel whose name contains `{name}` (classic pub/sub).
fn subscribers(server: &RedisServer, name: &str) -> i64 {
    let channels: Vec<String> = server.cmd(&["PUBSUB", "CHANNELS", &format!("*{{{name}}}*")]);
    channels
        .iter()
        .map(|c| common::numsub(server, c))
        .sum::<i64>()
}

/// Scripts the server ran so far (EVAL and EVALSHA calls).
fn scripts_run(server: &RedisServer) -> u64 {
    common::calls(server, "eval") + common::calls(server, "evalsha")
}

/// Redisson tries, subscribes, tries again, then sleeps on its latch: waits for that second
/// try (two scripts since `before`), so what wakes the Java waiter is the release message.
async fn until_retried(server: &RedisServer, before: u64) {
    assert!(
        eventually_async(Duration::from_secs(10), || scripts_run(server)
            >= before + 2)
        .await,
        "Redisson never retried after subscribing"
    );
}

/// Sends `cmd` to Java thread `thread` and returns once that call sleeps on Redisson's
/// latch: subscribed on `name`'s channel, retried after subscribing, and unanswered
/// 200 ms later. Whatever gets it in after this is a wake-up.
async fn java_asleep(s: &Setup, thread: &str, cmd: &str, name: &str) -> jvm::Call {
    let before = scripts_run(&s.server);
    let mut call = s.java.send(thread, cmd);
    until_subscribers(&s.server, name, 1).await;
    until_retried(&s.server, before).await;
    s.java.until_parked(thread, Duration::from_secs(10)).await;
    assert!(
        call.answered_within(Duration::from_millis(200))
            .await
            .is_none(),
        "Java's {cmd} got in before any release"
    );
    call
}

/// Runs `release`, waits for `call`'s answer and prints how long after the release it
/// came (`what`: who released, who was woken).
async fn woken_by(
    call: jvm::Call,
    release: impl std::future::Future<Output = ()>,
    what: &str,
) -> jvm::Reply {
    let released = mono_nanos();
    release.await;
    let got = call.reply().await;
    println!("{what} {:.2} ms", ms(got.nanos - released));
    got
}

/// Takes and releases plain lock `name` at once if it is free.
async fn free_for_us(client: &Client, name: &str) -> bool {
    match client.lock(name).try_lock(Duration::ZERO).await.unwrap() {
        Some(g) => {
            g.unlock().await.unwrap();
            true
        }
        None => false,
    }
}

async fn until_subscribers(server: &RedisServer, name: &str, n: i64) {
    assert!(
        eventually_async(Duration::from_secs(10), || subscribers(server, name) >= n).await,
        "fewer than {n} waiters subscribed on {name}"
    );
}

async fn fair_lock_fifo_across_the_two(version: &str) {
    let s = setup("fair", version).await;
    let (java, server) = (&s.java, &s.server);
    let queue = "redisson_lock_queue:{fair}";
    java.call("h", "lock fair fair").await.ok();
    assert!(s
        .client
        .fair_lock("fair")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    // Four waiters queued one after another, alternating sides: J1 R2 J3 R4.
    let order = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut tasks = Vec::new();
    for i in 1..=4 {
        let name = format!("{}{i}", if i % 2 == 1 { "J" } else { "R" });
        if i % 2 == 1 {
            let call = java.send(&name, "lock fair fair");
            let (order, java_call) = (order.clone(), name.clone());
            tasks.push(tokio::spawn(async move {
                call.reply().await.ok();
                order.lock().unwrap().push(java_call);
            }));
        } else {
            let lock = s.client.fair_lock("fair");
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let g = lock.lock().await.unwrap();
                order.lock().unwrap().push(name);
                g.unlock().await.unwrap();
            }));
        }
        assert!(
            eventually_async(Duration::from_secs(10), || server
                .cmd::<i64>(&["LLEN", queue])
                == i)
            .await,
            "waiter {i} never queued"
        );
    }
    // Each Java waiter releases once it got the lock (its own thread's unlock).
    java.call("h", "unlock fair fair").await.ok();
    for (i, task) in tasks.into_iter().enumerate() {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a fair waiter starved")
            .unwrap();
        if i % 2 == 0 {
            java.call(&format!("J{}", i + 1), "unlock fair fair")
                .await
                .ok();
        }
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order, ["J1", "R2", "J3", "R4"], "FIFO across the two");
    assert_eq!(server.cmd::<i64>(&["LLEN", queue]), 0);
    assert!(!java.call("h", "islocked fair fair").await.bool());
    jvm::record(&s.id, "RFairLock", version, "standalone", "pass");
}

async fn fenced_lock_one_token_sequence(version: &str) {
    let s = setup("fenced", version).await;
    let java = &s.java;
    let lock = s.client.fenced_lock("fence");
    let t1: u64 = java
        .call("t1", "lock fenced fence")
        .await
        .val()
        .parse()
        .unwrap();
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await.unwrap() })
    };
    until_subscribers(&s.server, "fence", 1).await;
    let released = java.call("t1", "unlock fenced fence").await;
    let g = waiter.await.unwrap();
    let at = mono_nanos();
    let t2 = g.fencing_token().expect("a fenced lock's token");
    println!(
        "Redisson {version}: fenced: Java unlock -> redlatch acquired {:.2} ms; tokens {t1} then {t2}",
        ms(at - released.before.unwrap())
    );
    assert!(t2 > t1, "redlatch's token {t2} after Java's {t1}");
    assert_eq!(
        java.call("t2", "trylock fenced fence 0").await.outcome,
        jvm::Outcome::Bool(false)
    );
    g.unlock().await.unwrap();
    let t3: u64 = java
        .call("t1", "lock fenced fence")
        .await
        .val()
        .parse()
        .unwrap();
    assert!(t3 > t2, "Java's token {t3} after redlatch's {t2}");
    java.call("t1", "unlock fenced fence").await.ok();
    jvm::record(&s.id, "RFencedLock", version, "standalone", "pass");
}

async fn read_write_lock_both_ways_and_downgrade(version: &str) {
    let s = setup("rwlock", version).await;
    let (java, server) = (&s.java, &s.server);
    let rw = s.client.read_write_lock("rw");

    // Readers of both sides share; a writer of either side waits for both.
    java.call("j1", "lock read rw").await.ok();
    let ours = rw.read().lock().await.unwrap();
    assert!(!java.call("j2", "trylock write rw 0").await.bool());
    // (From another task: this one's read hold would make it an upgrade, refused.)
    let other = rw.write();
    let refused =
        tokio::spawn(async move { other.try_lock(Duration::ZERO).await.unwrap().is_none() });
    assert!(refused.await.unwrap());
    let writer = {
        let w = rw.write();
        tokio::spawn(async move { (w.lock().await.unwrap(), mono_nanos()) })
    };
    until_subscribers(server, "rw", 1).await;
    ours.unlock().await.unwrap();
    assert!(!writer.is_finished(), "the Java reader still holds");
    let released = java.call("j1", "unlock read rw").await;
    let (wg, at) = writer.await.unwrap();
    println!(
        "Redisson {version}: rwlock: Java read unlock -> redlatch writer {:.2} ms",
        ms(at - released.before.unwrap())
    );
    // Our writer keeps out Java's readers and writers; its release wakes them.
    assert!(!java.call("j1", "trylock read rw 0").await.bool());
    assert!(!java.call("j2", "trylock write rw 0").await.bool());
    let reader = java_asleep(&s, "j1", "lock read rw", "rw").await;
    let release = async { wg.unlock().await.unwrap() };
    let what = format!("Redisson {version}: rwlock: redlatch write unlock -> Java reader");
    woken_by(reader, release, &what).await.ok();
    java.call("j1", "unlock read rw").await.ok();

    // Java downgrade: write, then read on the same thread, then the write released: a
    // redlatch reader gets in, a redlatch writer does not.
    java.call("j1", "lock write rw").await.ok();
    java.call("j1", "lock read rw").await.ok();
    assert!(rw.read().try_lock(Duration::ZERO).await.unwrap().is_none());
    java.call("j1", "unlock write rw").await.ok();
    assert!(rw.write().try_lock(Duration::ZERO).await.unwrap().is_none());
    let r = rw.read().try_lock(Duration::from_secs(5)).await.unwrap();
    assert!(
        r.is_some(),
        "a redlatch reader beside Java's downgraded read lock"
    );
    r.unwrap().unlock().await.unwrap();
    java.call("j1", "unlock read rw").await.ok();

    // redlatch downgrade: write, read in the same task, write released: Java readers in,
    // Java writers out.
    let w = rw.write().lock().await.unwrap();
    let r = w.scope(rw.read().lock()).await.unwrap(); // the downgrade: in the writer's scope
    assert!(!java.call("j1", "trylock read rw 0").await.bool());
    w.unlock().await.unwrap();
    assert!(java.call("j1", "trylock read rw 5000").await.bool());
    assert!(!java.call("j2", "trylock write rw 0").await.bool());
    java.call("j1", "unlock read rw").await.ok();
    r.unlock().await.unwrap();
    assert!(java.call("j2", "trylock write rw 0").await.bool());
    java.call("j2", "unlock write rw").await.ok();
    assert_eq!(server.cmd::<i64>(&["EXISTS", "rw"]), 0);
    jvm::record(&s.id, "RReadWriteLock", version, "standalone", "pass");
}

async fn semaphore_both_ways(version: &str) {
    let s = setup("semaphore", version).await;
    let (java, server) = (&s.java, &s.server);
    let sem = s.client.semaphore("sem");
    assert!(java.call("j", "sem sem trysetpermits 2").await.bool());
    assert!(!sem.try_set_permits(5).await.unwrap());
    assert_eq!(sem.available().await.unwrap(), 2);
    sem.acquire_many(2).await.unwrap().forget();
    assert!(!java.call("j", "sem sem tryacquire 1 0").await.bool());
    let waiting = java_asleep(&s, "j", "sem sem acquire 1", "sem").await;
    let release = async { sem.release().await.unwrap() };
    let what = format!("Redisson {version}: semaphore: redlatch release -> Java acquire");
    woken_by(waiting, release, &what).await.ok();
    assert_eq!(java.call("j", "sem sem available").await.val(), "0");
    let ours = {
        let sem = s.client.semaphore("sem");
        tokio::spawn(async move {
            sem.acquire_many(2).await.unwrap().forget();
            mono_nanos()
        })
    };
    until_subscribers(server, "sem", 1).await;
    java.call("j", "sem sem release 1").await.ok();
    assert!(!ours.is_finished(), "acquire(2) with one permit free");
    let released = java.call("j", "sem sem release 1").await;
    let at = ours.await.unwrap();
    println!(
        "Redisson {version}: semaphore: Java release -> redlatch acquire(2) {:.2} ms",
        ms(at - released.before.unwrap())
    );
    assert_eq!(java.call("j", "sem sem available").await.val(), "0");
    sem.release_many(2).await.unwrap();
    assert_eq!(java.call("j", "sem sem available").await.val(), "2");
    jvm::record(&s.id, "RSemaphore", version, "standalone", "pass");
}

async fn permit_expirable_semaphore_both_ways(version: &str) {
    let s = setup("xsemaphore", version).await;
    let (java, server) = (&s.java, &s.server);
    let sem = s.client.permit_expirable_semaphore("xs");
    assert!(java.call("j", "xsem xs trysetpermits 1").await.bool());
    let id = java.call("j", "xsem xs acquire").await.val().to_string();
    assert!(sem.try_acquire(Duration::ZERO).await.unwrap().is_none());
    let waiter = {
        let sem = s.client.permit_expirable_semaphore("xs");
        tokio::spawn(async move { (sem.acquire().await.unwrap(), mono_nanos()) })
    };
    until_subscribers(server, "xs", 1).await;
    let released = java.call("j", &format!("xsem xs release {id}")).await;
    released.ok();
    let (permit, at) = waiter.await.unwrap();
    println!(
        "Redisson {version}: expirable semaphore: Java release -> redlatch acquire {:.2} ms",
        ms(at - released.before.unwrap())
    );
    // Java's tryRelease of an id nobody holds is refused; the one permit is ours.
    assert!(!java
        .call("j", "xsem xs tryrelease 0123456789abcdef0123456789abcdef")
        .await
        .bool());
    assert_eq!(
        java.call("j", "xsem xs tryacquire 0").await.outcome,
        jvm::Outcome::Bool(false)
    );
    let waiting = java_asleep(&s, "j", "xsem xs acquire", "xs").await;
    let release = async { permit.release().await.unwrap() };
    let what = format!("Redisson {version}: expirable semaphore: redlatch release -> Java acquire");
    let got = woken_by(waiting, release, &what).await;
    let id = got.val().to_string();
    java.call("j", &format!("xsem xs release {id}")).await.ok();
    // A Java permit with a lease frees itself for redlatch.
    let _ = java.call("j", "xsem xs acquire 800").await.val();
    let got = sem.try_acquire(Duration::from_secs(10)).await.unwrap();
    assert!(got.is_some(), "the Java permit's lease never ran out");
    got.unwrap().release().await.unwrap();
    assert_eq!(java.call("j", "xsem xs available").await.val(), "1");
    jvm::record(
        &s.id,
        "RPermitExpirableSemaphore",
        version,
        "standalone",
        "pass",
    );
}

async fn count_down_latch_both_ways(version: &str) {
    let s = setup("latch", version).await;
    let (java, server) = (&s.java, &s.server);
    let latch = s.client.count_down_latch("gate");
    assert!(java.call("j", "latch gate trysetcount 2").await.bool());
    assert!(!latch.try_set_count(5).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), 2);
    let ours = {
        let latch = s.client.count_down_latch("gate");
        tokio::spawn(async move {
            let opened = latch.wait_timeout(Duration::from_secs(30)).await.unwrap();
            (opened, mono_nanos())
        })
    };
    let theirs = java.send("w", "latch gate await 30000");
    until_subscribers(server, "gate", 2).await;
    java.call("j", "latch gate countdown").await.ok();
    assert_eq!(latch.count().await.unwrap(), 1);
    assert!(!ours.is_finished());
    let released = mono_nanos();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let (opened, at) = ours.await.unwrap();
    assert!(opened);
    let theirs = theirs.reply().await;
    assert!(theirs.bool());
    println!(
        "Redisson {version}: latch: redlatch count-down -> redlatch waiter {:.2} ms, Java await {:.2} ms",
        ms(at - released),
        ms(theirs.nanos - released)
    );
    // The reverse: our count, Java's count-down opens our waiter.
    assert!(latch.try_set_count(1).await.unwrap());
    assert_eq!(java.call("j", "latch gate count").await.val(), "1");
    let ours = {
        let latch = s.client.count_down_latch("gate");
        tokio::spawn(async move {
            latch.wait().await.unwrap(); // Redisson's await(), unbounded
            (true, mono_nanos())
        })
    };
    until_subscribers(server, "gate", 1).await;
    let released = java.call("j", "latch gate countdown").await;
    let (opened, at) = ours.await.unwrap();
    assert!(opened);
    println!(
        "Redisson {version}: latch: Java count-down -> redlatch waiter {:.2} ms",
        ms(at - released.before.unwrap())
    );
    jvm::record(&s.id, "RCountDownLatch", version, "standalone", "pass");
}

async fn multi_lock_both_ways(version: &str) {
    let s = setup("multi", version).await;
    let (java, server) = (&s.java, &s.server);
    let ours = s.client.multi_lock(["m2", "m3"]);
    java.call("j", "multi lock m1,m2").await.ok();
    assert!(ours.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert!(free_for_us(&s.client, "m3").await);
    let waiter = {
        let client = s.client.clone();
        tokio::spawn(async move {
            (
                client.multi_lock(["m2", "m3"]).lock().await.unwrap(),
                mono_nanos(),
            )
        })
    };
    until_subscribers(server, "m2", 1).await;
    let released = java.call("j", "multi unlock m1,m2").await;
    let (g, at) = waiter.await.unwrap();
    println!(
        "Redisson {version}: multi-lock: Java unlock -> redlatch multi-lock {:.2} ms",
        ms(at - released.before.unwrap())
    );
    assert!(!java.call("j", "multi trylock m1,m2 200").await.bool());
    // Redisson's failed multi-lock attempt left nothing behind.
    assert!(free_for_us(&s.client, "m1").await);
    let mut waiting = java.send("j", "multi lock m1,m2");
    until_subscribers(server, "m2", 1).await;
    assert!(waiting
        .answered_within(Duration::from_millis(200))
        .await
        .is_none());
    let released = mono_nanos();
    g.unlock().await.unwrap();
    let got = waiting.reply().await;
    got.ok();
    println!(
        "Redisson {version}: multi-lock: redlatch unlock -> Java multi-lock {:.2} ms",
        ms(got.nanos - released)
    );
    assert!(s
        .client
        .lock("m1")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    java.call("j", "multi unlock m1,m2").await.ok();
    jvm::record(&s.id, "RedissonMultiLock", version, "standalone", "pass");
}
