//! redlatch against the real Redisson client (a JVM per test, redlatch-testkit/src/jvm.rs) on a
//! standalone Redis: the plain lock (RLock) in both directions, re-entry and refusal
//! across the two, dead holders freed by their leases, watchdogs on both sides.
//! Every scenario runs on the three Redisson versions (common::jvm::VERSIONS).
//!
//! Wake latencies are printed (`--nocapture`), not asserted: they are the JVM's
//! `System.nanoTime()` and our CLOCK_MONOTONIC, the same clock on Linux.

use redlatch_testkit as common;
use redlatch_testkit::per_version;

use std::time::{Duration, Instant};

use common::jvm::{self, addr_of, mono_nanos, Deployment, Jvm};
use common::{eventually_async, numsub, RedisServer};
use redlatch::{Client, Config};

per_version!(
    a_dead_redlatch_reader_and_a_live_java_reader,
    a_dead_redlatch_fair_waiter_is_passed_over_for_java,
    java_release_wakes_a_redlatch_waiter,
    redlatch_release_wakes_a_java_waiter,
    reentry_and_refusal_across_the_two,
    a_dead_jvms_lock_frees_by_its_lease_for_redlatch,
    a_dead_redlatch_process_frees_by_its_lease_for_java,
    watchdogs_on_both_sides_keep_a_hold_past_the_lease,
);

fn single(server: &RedisServer) -> Deployment {
    Deployment::Single(addr_of(&server.url()))
}

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

fn ms(nanos: i64) -> f64 {
    nanos as f64 / 1e6
}

/// The test's name for the matrix files.
fn test_id(test: &str, version: &str) -> String {
    format!("redisson_jvm-{test}-{version}")
}

async fn java_release_wakes_a_redlatch_waiter(version: &str) {
    let id = test_id("java_wakes_redlatch", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let java = Jvm::start(version, &single(&server), "").await;
    // A 60 s lease: without the unlock message a waiter would sleep until it runs out.
    java.call("t1", "lock lock handoff 60000").await.ok();
    let client = client(&server).await;
    let lock = client.lock("handoff");
    let waiter = tokio::spawn(async move {
        let guard = lock.lock().await.unwrap();
        (mono_nanos(), guard)
    });
    assert!(
        eventually_async(Duration::from_secs(10), || numsub(
            &server,
            &channel("handoff")
        ) >= 1)
        .await,
        "the redlatch waiter never subscribed"
    );
    let released = java.call("t1", "unlock lock handoff").await;
    released.ok();
    let (at, guard) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter was not woken by Redisson's unlock message")
        .unwrap();
    let before = released.before.unwrap();
    println!(
        "Redisson {version}: Java unlock -> redlatch waiter acquired: {:.2} ms (from the call), {:.2} ms (from its return)",
        ms(at - before),
        ms(at - released.nanos)
    );
    assert!(at > before, "acquired before Java's unlock began");
    // Java sees the lock held by someone else now, not by its thread.
    assert!(java.call("t1", "islocked lock handoff").await.bool());
    assert!(!java.call("t1", "isheld lock handoff").await.bool());
    assert!(!java.call("t2", "trylock lock handoff 0").await.bool());
    guard.unlock().await.unwrap();
    assert!(!java.call("t1", "islocked lock handoff").await.bool());
    jvm::record(&id, "RLock", version, "standalone", "pass");
}

async fn redlatch_release_wakes_a_java_waiter(version: &str) {
    let id = test_id("redlatch_wakes_java", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let java = Jvm::start(version, &single(&server), "").await;
    let client = client(&server).await;
    // A 60 s lease: without our release message Java would wait until it runs out.
    let guard = (client.lock("handoff"))
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let scripts = |s: &RedisServer| common::calls(s, "eval") + common::calls(s, "evalsha");
    let before = scripts(&server);
    let mut waiting = java.send("t1", "lock lock handoff");
    assert!(
        eventually_async(Duration::from_secs(10), || numsub(
            &server,
            &channel("handoff")
        ) >= 1)
        .await,
        "the Java waiter never subscribed"
    );
    // Redisson tries, subscribes, tries again, then sleeps on its latch: wait for that
    // second try, so what wakes it is our release message.
    assert!(
        eventually_async(Duration::from_secs(10), || scripts(&server) >= before + 2).await,
        "Redisson never retried after subscribing"
    );
    assert!(
        waiting
            .answered_within(Duration::from_millis(200))
            .await
            .is_none(),
        "Java took a lock redlatch holds"
    );
    let released = mono_nanos();
    guard.unlock().await.unwrap();
    let got = waiting.reply().await;
    got.ok();
    println!(
        "Redisson {version}: redlatch unlock -> Java waiter acquired: {:.2} ms",
        ms(got.nanos - released)
    );
    assert!(got.nanos > released);
    assert!(java.call("t1", "isheld lock handoff").await.bool());
    let lock = client.lock("handoff");
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    java.call("t1", "unlock lock handoff").await.ok();
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_some());
    jvm::record(&id, "RLock", version, "standalone", "pass");
}

async fn reentry_and_refusal_across_the_two(version: &str) {
    let id = test_id("reentry", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let java = Jvm::start(version, &single(&server), "").await;
    let holder = java.holder("t1").await;
    let client = client(&server).await;
    let lock = client.lock("re");
    // The driver answers a command it does not know with an error, not silence.
    let e = java.call("t1", "frobnicate lock re").await;
    assert!(e.err().starts_with("IllegalArgumentException"), "{e:?}");

    // Java re-enters; redlatch and another Java thread are refused.
    java.call("t1", "lock lock re").await.ok();
    java.call("t1", "lock lock re").await.ok();
    assert_eq!(java.call("t1", "holdcount lock re").await.val(), "2");
    assert_eq!(server.cmd::<i64>(&["HGET", "re", &holder]), 2);
    assert!(!java.call("t2", "trylock lock re 0").await.bool());
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    java.call("t1", "unlock lock re").await.ok();
    assert!(
        lock.try_lock(Duration::ZERO).await.unwrap().is_none(),
        "one Java hold left"
    );
    // Another Java thread's unlock is refused and changes nothing.
    let e = java.call("t2", "unlock lock re").await;
    assert!(e.err().starts_with("IllegalMonitorStateException"), "{e:?}");
    assert_eq!(server.cmd::<i64>(&["HGET", "re", &holder]), 1);
    java.call("t1", "unlock lock re").await.ok();

    // redlatch re-enters; every Java thread is refused, Java's unlock too.
    let outer = lock.lock().await.unwrap();
    let inner = outer.scope(lock.lock()).await.unwrap(); // nested: in the guard's scope
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert_eq!(server.cmd::<i64>(&["HGET", "re", outer.holder()]), 2);
    assert!(!java.call("t1", "trylock lock re 0").await.bool());
    assert!(!java.call("t1", "trylock lock re 300").await.bool());
    assert!(java.call("t1", "islocked lock re").await.bool());
    assert!(!java.call("t1", "isheld lock re").await.bool());
    assert_eq!(java.call("t1", "holdcount lock re").await.val(), "0");
    let e = java.call("t1", "unlock lock re").await;
    assert!(e.err().starts_with("IllegalMonitorStateException"), "{e:?}");
    let ttl: i64 = java.call("t1", "ttl lock re").await.val().parse().unwrap();
    assert!(ttl > 0, "Java sees our lease: {ttl}");
    inner.unlock().await.unwrap();
    assert!(
        !java.call("t1", "trylock lock re 0").await.bool(),
        "one redlatch hold left"
    );
    outer.unlock().await.unwrap();
    assert!(java.call("t1", "trylock lock re 0").await.bool());
    java.call("t1", "unlock lock re").await.ok();

    // forceUnlock across: each side clears the other's hold.
    let held = lock.lock().await.unwrap();
    assert!(
        java.call("t1", "forceunlock lock re").await.bool(),
        "Java's forceUnlock deletes our hold"
    );
    assert!(!lock.is_locked().await.unwrap());
    drop(held);
    java.call("t1", "lock lock re").await.ok();
    assert!(lock.force_unlock().await.unwrap());
    assert!(!java.call("t1", "isheld lock re").await.bool());
    jvm::record(&id, "RLock", version, "standalone", "pass");
}

/// Redisson's watchdog lease in the lease tests: short, so the tests wait little.
const SHORT_WATCHDOG_MS: u64 = 2000;

async fn a_dead_jvms_lock_frees_by_its_lease_for_redlatch(version: &str) {
    let id = test_id("dead_jvm", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let opts = format!("watchdog={SHORT_WATCHDOG_MS}");
    let mut java = Jvm::start(version, &single(&server), &opts).await;
    // Watchdog-kept (no lease given): only the watchdog's renewals keep it.
    java.call("t1", "lock lock dead").await.ok();
    let client = client(&server).await;
    let lock = client.lock("dead");
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            (Instant::now(), g)
        })
    };
    assert!(
        eventually_async(Duration::from_secs(10), || numsub(
            &server,
            &channel("dead")
        ) >= 1)
        .await
    );
    // Held across several of Java's renewals while the JVM lives.
    tokio::time::sleep(Duration::from_millis(2 * SHORT_WATCHDOG_MS)).await;
    assert!(
        !waiter.is_finished(),
        "redlatch got a lock Java's watchdog keeps"
    );
    java.kill9();
    let killed = Instant::now();
    let (at, guard) = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the dead JVM's lock never freed")
        .unwrap();
    println!(
        "Redisson {version}: kill -9 of the JVM -> redlatch acquired after {:?} (lease {SHORT_WATCHDOG_MS} ms)",
        at - killed
    );
    guard.unlock().await.unwrap();
    jvm::record(&id, "RLock", version, "standalone", "pass");
}

/// Child-process mode of this test binary: `REDLATCH_JVM_HELPER=url|name|watchdog_ms|kind`
/// takes lock `name` with that watchdog (and a 1 s fair stale timeout), `kind` being
/// `plain`, `read` (the read lock of read-write lock `name`) or `fair`; prints
/// `locked HOLDER`, then sleeps until killed (a fair waiter may be killed while queued).
#[tokio::test]
#[ignore = "a helper process of the dead-holder tests (REDLATCH_JVM_HELPER)"]
async fn helper_redlatch_holder() {
    let Ok(spec) = std::env::var("REDLATCH_JVM_HELPER") else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let config = Config::single(parts[0])
        .watchdog_timeout(Duration::from_millis(parts[2].parse().unwrap()))
        .fair_stale_timeout(Duration::from_secs(1));
    let client = Client::connect(config).await.unwrap();
    let lock = match parts[3] {
        "read" => client.read_write_lock(parts[1]).read(),
        "fair" => client.fair_lock(parts[1]),
        _ => client.lock(parts[1]),
    };
    let guard = lock.lock().await.unwrap();
    println!("locked {}", guard.holder());
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// Starts this test binary as a redlatch holder of `name` (see helper_redlatch_holder);
/// returns once it holds the lock, with its holder id.
fn spawn_redlatch_holder(
    server: &RedisServer,
    name: &str,
    watchdog_ms: u64,
    kind: &str,
) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = start_helper(server, name, watchdog_ms, kind);
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    for line in out.lines() {
        if let Some(holder) = line.unwrap().strip_prefix("locked ") {
            return (child, holder.to_string());
        }
    }
    let status = child.wait();
    panic!("the redlatch helper process exited before locking: {status:?}");
}

fn start_helper(
    server: &RedisServer,
    name: &str,
    watchdog_ms: u64,
    kind: &str,
) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            redlatch_testkit::test_name!("helper_redlatch_holder").as_str(),
            "--ignored",
            "--nocapture",
        ])
        .env(
            "REDLATCH_JVM_HELPER",
            format!("{}|{name}|{watchdog_ms}|{kind}", server.url()),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn kill9(child: &mut std::process::Child) {
    // SAFETY: signalling our own child by PID.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
}

async fn a_dead_redlatch_process_frees_by_its_lease_for_java(version: &str) {
    let id = test_id("dead_redlatch", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let java = Jvm::start(version, &single(&server), "").await;
    let (mut holder, _) = spawn_redlatch_holder(&server, "dead", SHORT_WATCHDOG_MS, "plain");
    let mut waiting = java.send("t1", "lock lock dead");
    // Held across several of redlatch's renewals while the process lives.
    assert!(
        waiting
            .answered_within(Duration::from_millis(2 * SHORT_WATCHDOG_MS))
            .await
            .is_none(),
        "Java got a lock redlatch's watchdog keeps"
    );
    kill9(&mut holder);
    let killed = mono_nanos();
    let got = waiting.reply().await;
    got.ok();
    println!(
        "Redisson {version}: kill -9 of the redlatch process -> Java acquired after {:.0} ms (lease {SHORT_WATCHDOG_MS} ms)",
        ms(got.nanos - killed)
    );
    java.call("t1", "unlock lock dead").await.ok();
    jvm::record(&id, "RLock", version, "standalone", "pass");
}

async fn watchdogs_on_both_sides_keep_a_hold_past_the_lease(version: &str) {
    let id = test_id("watchdogs", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let opts = format!("watchdog={SHORT_WATCHDOG_MS}");
    let java = Jvm::start(version, &single(&server), &opts).await;
    let config =
        Config::single(server.url()).watchdog_timeout(Duration::from_millis(SHORT_WATCHDOG_MS));
    let client = Client::connect(config).await.unwrap();
    let lock = client.lock("long");
    // Two and a half leases: at least two renewals needed on each side.
    let hold = Duration::from_millis(5 * SHORT_WATCHDOG_MS / 2);

    // Java holds past its lease; redlatch keeps being refused.
    java.call("t1", "lock lock long").await.ok();
    let until = Instant::now() + hold;
    while Instant::now() < until {
        assert!(
            lock.try_lock(Duration::from_millis(300))
                .await
                .unwrap()
                .is_none(),
            "Java's watchdog let its hold lapse"
        );
    }
    assert!(java.call("t1", "isheld lock long").await.bool());
    java.call("t1", "unlock lock long").await.ok();

    // redlatch holds past its lease; Java keeps being refused.
    let guard = lock.lock().await.unwrap();
    let until = Instant::now() + hold;
    while Instant::now() < until {
        assert!(
            !java.call("t2", "trylock lock long 300").await.bool(),
            "redlatch's watchdog let its hold lapse"
        );
    }
    assert!(!guard.lost().is_cancelled());
    guard.unlock().await.unwrap();
    assert!(java.call("t2", "trylock lock long 0").await.bool());
    java.call("t2", "unlock lock long").await.ok();
    jvm::record(&id, "RLock", version, "standalone", "pass");
}

/// Read-lock renewal: Redisson before 4.4 renews every reader's `rwlock_timeout` keys, so a
/// `kill -9`ed redlatch reader's hold lives on while a Java 3.x reader holds; from 4.4 on
/// (as redlatch) each client renews only its own, and the dead hold lapses on its lease.
/// Either way a redlatch writer gets the lock once the Java reader leaves.
async fn a_dead_redlatch_reader_and_a_live_java_reader(version: &str) {
    let id = test_id("dead_reader", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let lease_ms = 1000;
    let java = Jvm::start(version, &single(&server), &format!("watchdog={lease_ms}")).await;
    java.call("t1", "lock read rw").await.ok();
    let (mut reader, holder) = spawn_redlatch_holder(&server, "rw", lease_ms, "read");
    let key = format!("{{rw}}:{holder}:rwlock_timeout:1");
    assert_eq!(server.cmd::<i64>(&["EXISTS", &key]), 1);
    kill9(&mut reader);
    // Three leases: Java's watchdog renewed its own keys about nine times meanwhile.
    tokio::time::sleep(Duration::from_millis(3 * lease_ms)).await;
    let alive = server.cmd::<i64>(&["EXISTS", &key]) == 1;
    let renews_everyone = version != jvm::V4;
    assert_eq!(
        alive, renews_everyone,
        "Redisson {version}: the dead redlatch reader's hold key {key} alive = {alive}"
    );
    let client = client(&server).await;
    let writer = {
        let w = client.read_write_lock("rw").write();
        tokio::spawn(async move { w.lock().await.unwrap() })
    };
    java.call("t1", "unlock read rw").await.ok();
    let g = tokio::time::timeout(Duration::from_secs(30), writer)
        .await
        .expect("the writer never got in after the Java reader left")
        .unwrap();
    g.unlock().await.unwrap();
    println!(
        "Redisson {version}: a dead redlatch reader's hold {} while a Java reader renewed",
        if alive {
            "lived on"
        } else {
            "lapsed on its lease"
        }
    );
    let result = if renews_everyone {
        "diff: 3.x renews every reader's rwlock_timeout keys: a dead reader lives on while a 3.x reader holds"
    } else {
        "pass"
    };
    jvm::record(&id, "RReadWriteLock", version, "standalone", result);
}

/// A redlatch fair waiter killed while queued ahead of a Java waiter and a live redlatch
/// waiter: the live redlatch client evicts it once its liveness lapses (1 s stale timeout
/// on both), wakes the Java waiter now at the head, and FIFO goes on: Java, then redlatch.
async fn a_dead_redlatch_fair_waiter_is_passed_over_for_java(version: &str) {
    let id = test_id("dead_fair_waiter", version);
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let java = Jvm::start(version, &single(&server), "").await;
    let queue = "redisson_lock_queue:{fq}";
    let queued = |n: i64| {
        let server = &server;
        async move {
            assert!(
                eventually_async(Duration::from_secs(10), || server
                    .cmd::<i64>(&["LLEN", queue])
                    == n)
                .await,
                "the queue never reached {n}"
            );
        }
    };
    java.call("h", "lock fair fq").await.ok();
    let mut dead = start_helper(&server, "fq", 30_000, "fair");
    queued(1).await;
    let java_waiter = java.send("j1", "lock fair fq");
    queued(2).await;
    let config = Config::single(server.url()).fair_stale_timeout(Duration::from_secs(1));
    let client = Client::connect(config).await.unwrap();
    let ours = {
        let lock = client.fair_lock("fq");
        tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            (mono_nanos(), g)
        })
    };
    queued(3).await;
    kill9(&mut dead);
    let released = java.call("h", "unlock fair fq").await;
    let got = java_waiter.reply().await;
    got.ok();
    assert!(
        !ours.is_finished(),
        "redlatch's waiter got in ahead of the Java waiter"
    );
    println!(
        "Redisson {version}: dead redlatch fair waiter passed over; the Java waiter behind it got the lock {:.0} ms after the holder's release",
        ms(got.nanos - released.before.unwrap())
    );
    java.call("j1", "unlock fair fq").await.ok();
    let (_, g) = tokio::time::timeout(Duration::from_secs(30), ours)
        .await
        .expect("redlatch's fair waiter starved")
        .unwrap();
    g.unlock().await.unwrap();
    assert_eq!(server.cmd::<i64>(&["LLEN", queue]), 0);
    jvm::record(&id, "RFairLock", version, "standalone", "pass");
}
