//! Futures polled concurrently by one task are separate holders: `join!`, `select!`
//! and `for_each_concurrent` never let two of them inside one lock. Nested calls
//! re-enter only in a guard's scope (`LockGuard::scope`, `Lock::with`).

use redlatch_testkit as common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::inside::Inside;
use common::{eventually_async, RedisServer};
use futures_util::stream::{self, StreamExt};
use redlatch::{Client, Config, Error};

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

#[tokio::test]
async fn two_joined_futures_of_one_task_never_both_enter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("orders:42");
    let inside = Inside::default();
    // The test body runs in `block_on` (not a task), as `#[tokio::main]`'s does.
    tokio::join!(inside.section(&lock), inside.section(&lock));
    assert_eq!(inside.most(), 1);
    assert_eq!(inside.sections(), 2);
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_futures_inside_a_spawned_task_never_both_enter() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("orders:43");
    let inside = Arc::new(Inside::default());
    let (l, i) = (lock.clone(), inside.clone());
    tokio::spawn(async move {
        tokio::join!(i.section(&l), i.section(&l), i.section(&l));
    })
    .await
    .unwrap();
    assert_eq!(inside.most(), 1);
    assert_eq!(inside.sections(), 3);
}

#[tokio::test]
async fn select_racing_two_acquisitions_lets_one_in_and_leaves_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("raced");
    let inside = Inside::default();
    // Both branches are polled by this one future; each holds the lock for a while
    // once in. The first to finish its section wins and the other is dropped.
    tokio::select! {
        _ = inside.section(&lock) => {}
        _ = inside.section(&lock) => {}
    }
    assert_eq!(inside.most(), 1);
    // The losing branch was cancelled while waiting (or just granted): its hold, if
    // any, is released in the background.
    assert!(eventually_async(Duration::from_secs(10), || !server_has(&server, "raced")).await);
    client.close(Duration::from_secs(5)).await;
}

fn server_has(server: &RedisServer, key: &str) -> bool {
    server.cmd::<i64>(&["EXISTS", key]) == 1
}

#[tokio::test]
async fn for_each_concurrent_over_duplicate_ids_keeps_each_id_exclusive() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let ids = [0, 1, 0, 2, 0, 1, 2, 0];
    let per_id: HashMap<u32, Inside> = [0, 1, 2].map(|i| (i, Inside::default())).into();
    stream::iter(ids)
        .for_each_concurrent(8, |id| {
            let (client, per_id) = (&client, &per_id);
            async move {
                let lock = client.lock(format!("order:{id}"));
                per_id[&id].section(&lock).await;
            }
        })
        .await;
    for (id, inside) in &per_id {
        assert_eq!(inside.most(), 1, "order {id}");
    }
    let sections: usize = per_id.values().map(|i| i.sections()).sum();
    assert_eq!(sections, ids.len());
}

#[tokio::test]
async fn a_sequential_second_call_outside_any_scope_is_another_holder() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("seq");
    let first = lock.lock().await.unwrap();
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    first.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn nested_calls_in_a_guard_scope_reenter_while_a_sibling_future_waits() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("scoped");
    let guard = lock.lock().await.unwrap();
    let holder = guard.holder().to_string();
    let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
    let nested = guard.scope(async {
        let inner = lock.lock().await.unwrap();
        assert_eq!(inner.holder(), holder);
        assert_eq!(lock.hold_count().await.unwrap(), 2);
        assert_eq!(server.cmd::<i64>(&["HGET", "scoped", &holder]), 2);
        // A third level, through `with`.
        let third = lock.with(|| lock.hold_count()).await.unwrap().unwrap();
        inner.unlock().await.unwrap();
        gate_rx.await.unwrap();
        third
    });
    let sibling = async {
        // Not in the scope: another holder, so it is refused while the guard lives.
        let refused = lock.try_lock(Duration::ZERO).await.unwrap().is_none();
        gate_tx.send(()).unwrap();
        refused
    };
    let (third, refused) = tokio::join!(nested, sibling);
    assert_eq!(third, 3);
    assert!(refused);
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    guard.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_scope_covers_its_own_name_and_client_only() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let guard = a.lock("mine").lock().await.unwrap();
    guard
        .scope(async {
            // Another client's lock of the same name is another holder.
            assert!(b
                .lock("mine")
                .try_lock(Duration::ZERO)
                .await
                .unwrap()
                .is_none());
            // Another name in the scope: a fresh holder; two joined calls exclude.
            let inside = Inside::default();
            let other = a.lock("theirs");
            tokio::join!(inside.section(&other), inside.section(&other));
            assert_eq!(inside.most(), 1);
            // A task spawned in the scope is outside it.
            let lock = a.lock("mine");
            let spawned = tokio::spawn(async move { lock.try_lock(Duration::ZERO).await });
            assert!(spawned.await.unwrap().unwrap().is_none());
        })
        .await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn read_write_scopes_allow_the_downgrade_and_refuse_the_upgrade() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let rw = client.read_write_lock("catalog");
    let w = rw.write().lock().await.unwrap();
    // Outside the write guard's scope a read waits like anyone else's.
    assert!(rw.read().try_lock(Duration::ZERO).await.unwrap().is_none());
    let r = w.scope(rw.read().lock()).await.unwrap();
    w.unlock().await.unwrap();
    let upgrade = r.scope(rw.write().lock()).await;
    assert!(matches!(upgrade, Err(Error::Upgrade { .. })), "{upgrade:?}");
    // Two joined readers share it; a joined writer waits for both.
    let read = rw.read();
    let (r2, r3) = tokio::join!(read.lock(), read.lock());
    let (r2, r3) = (r2.unwrap(), r3.unwrap());
    assert_ne!(r2.holder(), r3.holder());
    assert!(rw.write().try_lock(Duration::ZERO).await.unwrap().is_none());
    for g in [r, r2, r3] {
        g.unlock().await.unwrap();
    }
    assert!(!rw.read().is_locked().await.unwrap());
}

#[tokio::test]
async fn joined_fair_and_fenced_acquisitions_exclude_and_tokens_grow() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for lock in [
        client.fair_lock("fair-in-task"),
        client.fenced_lock("fenced-in-task"),
    ] {
        let inside = Inside::default();
        tokio::join!(
            inside.section(&lock),
            inside.section(&lock),
            inside.section(&lock)
        );
        assert_eq!(inside.most(), 1, "{:?}", lock.kind());
    }
    let fenced = client.fenced_lock("tokens");
    let (a, b) = tokio::join!(
        async {
            let g = fenced.lock().await.unwrap();
            let t = g.fencing_token().unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.unlock().await.unwrap();
            t
        },
        async {
            let g = fenced.lock().await.unwrap();
            let t = g.fencing_token().unwrap();
            g.unlock().await.unwrap();
            t
        }
    );
    assert_ne!(a, b, "two holds, two tokens");
}

#[tokio::test]
async fn a_multi_guard_scope_reenters_each_part() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let g = client.multi_lock(["m1", "m2"]).lock().await.unwrap();
    let counts = g
        .scope(async {
            let (a, b) = (client.lock("m1"), client.lock("m2"));
            let ga = a.lock().await.unwrap();
            let gb = b.lock().await.unwrap();
            let counts = (a.hold_count().await.unwrap(), b.hold_count().await.unwrap());
            ga.unlock().await.unwrap();
            gb.unlock().await.unwrap();
            counts
        })
        .await;
    assert_eq!(counts, (2, 2));
    g.unlock().await.unwrap();
}

#[test]
fn the_blocking_api_reenters_per_thread() {
    let server = RedisServer::start();
    let client = redlatch::blocking::Client::connect(Config::single(server.url())).unwrap();
    let lock = client.lock("blocking-nest");
    let outer = lock.lock().unwrap();
    let inner = lock.lock().unwrap();
    assert_eq!(inner.holder(), outer.holder());
    assert_eq!(lock.hold_count().unwrap(), 2);
    let other = std::thread::scope(|s| {
        s.spawn(|| lock.try_lock(Duration::ZERO).map(|g| g.is_none()))
            .join()
            .unwrap()
    });
    assert!(other.unwrap(), "another thread is another holder");
    drop(inner);
    drop(outer);
    assert!(!lock.is_locked().unwrap());
}

/// The WARN events of the current thread while it is alive (the tests below run on
/// the current-thread runtime, so the waiting calls log on this thread).
#[derive(Clone, Default)]
struct Warnings(Arc<parking_lot::Mutex<Vec<String>>>);

struct Text<'a>(&'a mut String);

impl tracing::field::Visit for Text<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push_str(&format!(" {}={value}", field.name()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::WARN {
            let mut text = String::new();
            event.record(&mut Text(&mut text));
            self.0.lock().push(text);
        }
    }
}

impl Warnings {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        use tracing_subscriber::layer::SubscriberExt;
        let warnings = Warnings::default();
        let subscriber = tracing_subscriber::registry().with(warnings.clone());
        (warnings, tracing::subscriber::set_default(subscriber))
    }

    /// The WARNs about waiting for one's own hold.
    fn self_waits(&self) -> Vec<String> {
        let all = self.0.lock();
        all.iter()
            .filter(|w| w.contains("guard.scope"))
            .cloned()
            .collect()
    }
}

/// `let g = lock.lock().await?; helper().await` where `helper` takes the lock again
/// outside `g.scope(...)`: the nested call waits for its own task's hold (forever with
/// `lock()`). After a few seconds with nothing else of the task running it is told,
/// once, with the lock's name and the way out.
#[tokio::test]
async fn a_call_waiting_for_its_own_tasks_hold_is_told_once() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let (warnings, _guard) = Warnings::capture();
    let lock = client.lock("self-wait");
    let guard = lock.lock().await.unwrap();
    let helper = || async { lock.try_lock(Duration::from_secs(11)).await };
    // Past two windows of 5 s: one WARN per wait, not one per window.
    assert!(helper().await.unwrap().is_none(), "it waits for itself");
    let said = warnings.self_waits();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("lock=self-wait"), "{said:?}");
    // In the guard's scope the same call re-enters at once, and says nothing.
    let inner = guard.scope(helper()).await.unwrap().unwrap();
    inner.unlock().await.unwrap();
    guard.unlock().await.unwrap();
    assert_eq!(warnings.self_waits().len(), 1);
}

/// Two futures of one task contending on purpose keep their semantics (they exclude
/// each other, the second enters when the first leaves) and no WARN: `join!` with a
/// holder that stays busy past the WARN's 5 s (its task keeps running), and
/// `for_each_concurrent` over items that hold it briefly.
#[tokio::test]
async fn siblings_contending_in_one_task_are_not_told_they_wait_for_themselves() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let (warnings, _guard) = Warnings::capture();
    let lock = client.lock("siblings");
    let released = std::sync::atomic::AtomicBool::new(false);
    let taken = tokio::sync::Notify::new();
    let busy_holder = async {
        let guard = lock.lock().await.unwrap();
        taken.notify_one();
        for _ in 0..70 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        guard.unlock().await.unwrap();
    };
    let waiter = async {
        taken.notified().await; // after the holder took it
        let guard = lock.lock().await.unwrap();
        assert!(
            released.load(std::sync::atomic::Ordering::SeqCst),
            "entered while held"
        );
        guard.unlock().await.unwrap();
    };
    tokio::join!(busy_holder, waiter);
    let inside = Inside::default();
    stream::iter(0..6)
        .for_each_concurrent(6, |_| inside.section(&lock))
        .await;
    assert_eq!(inside.most(), 1);
    assert_eq!(warnings.self_waits(), Vec::<String>::new());
}
