//! The `tracing` spans of issue 10: lock, try_lock, unlock, hand-over, renewal rounds
//! and pub/sub reconnects, with what they are about, their outcome and elapsed time.
//!
//! A small `Layer` records every closed span with its fields. The tests run on the
//! current-thread runtime, so the thread-local subscriber sees the client's background
//! tasks too.

use redlatch_testkit as common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{eventually_async, RedisServer};
use parking_lot::Mutex;
use redlatch::{Client, Config};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// A closed span: its name and fields, values as text.
#[derive(Clone, Debug)]
struct Closed {
    name: &'static str,
    fields: HashMap<String, String>,
}

impl Closed {
    fn get(&self, field: &str) -> &str {
        self.fields.get(field).map_or("", String::as_str)
    }
}

#[derive(Clone, Default)]
struct Recorder {
    open: Arc<Mutex<HashMap<Id, Closed>>>,
    closed: Arc<Mutex<Vec<Closed>>>,
    /// Every event's fields, with its `level`.
    events: Arc<Mutex<Vec<HashMap<String, String>>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let mut span = Closed {
            name: attrs.metadata().name(),
            fields: HashMap::new(),
        };
        attrs.record(&mut Fields(&mut span.fields));
        self.open.lock().insert(id.clone(), span);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(span) = self.open.lock().get_mut(id) {
            values.record(&mut Fields(&mut span.fields));
        }
    }
    fn on_close(&self, id: Id, _: Context<'_, S>) {
        if let Some(span) = self.open.lock().remove(&id) {
            self.closed.lock().push(span);
        }
    }
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        fields.insert("level".into(), event.metadata().level().to_string());
        self.events.lock().push(fields);
    }
}

impl Recorder {
    fn install(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tracing_subscriber::registry().with(self.clone()))
    }

    fn named(&self, name: &str) -> Vec<Closed> {
        let closed = self.closed.lock();
        closed.iter().filter(|s| s.name == name).cloned().collect()
    }

    fn has(&self, name: &str, outcome: &str) -> bool {
        self.named(name).iter().any(|s| s.get("outcome") == outcome)
    }
}

fn elapsed_ms(span: &Closed) -> f64 {
    span.get("elapsed_ms").parse().unwrap_or(-1.0)
}

#[tokio::test]
async fn lock_try_lock_unlock_and_hand_over_are_spans_with_outcome_and_elapsed() {
    let server = RedisServer::start();
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let lock = client.lock("spans:a");

    let guard = lock.lock().await.unwrap();
    let busy = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock(Duration::from_millis(30)).await.unwrap() }
    });
    assert!(busy.await.unwrap().is_none());
    // Another task of the same client waits; the unlock hands the lock to it once its
    // attempt after subscribing was refused (no script call for 500 ms) and it has
    // had time to post its offer (in this process: Redis cannot show it). A fixed
    // 50 ms from its subscription was too short for that attempt on a loaded machine.
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap().unlock().await.unwrap() }
    });
    assert!(eventually_async(Duration::from_secs(5), || client.subscriptions() > 0).await);
    common::settled_calls(&server, &["evalsha", "eval"]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.unlock().await.unwrap();
    waiter.await.unwrap();

    let locks = recorder.named("lock");
    assert_eq!(locks.len(), 2, "{locks:?}");
    for span in &locks {
        assert_eq!(span.get("lock"), "spans:a");
        assert_eq!(span.get("kind"), "plain");
        assert_eq!(span.get("masters"), "1");
        assert_eq!(span.get("outcome"), "acquired");
        assert!(elapsed_ms(span) >= 0.0, "{span:?}");
    }
    // The waiter waited for the unlock: its span is at least as long as the hold.
    assert!(locks.iter().any(|s| elapsed_ms(s) >= 50.0), "{locks:?}");

    let tries = recorder.named("try_lock");
    assert_eq!(tries.len(), 1, "{tries:?}");
    assert_eq!(tries[0].get("outcome"), "timed_out");
    assert!(elapsed_ms(&tries[0]) >= 30.0, "{tries:?}");

    let unlocks = recorder.named("unlock");
    assert_eq!(unlocks.len(), 2, "{unlocks:?}");
    assert!(unlocks.iter().all(|s| s.get("outcome") == "released"));
    assert!(
        recorder.has("hand_over", "handed_over"),
        "{:?}",
        recorder.named("hand_over")
    );

    // A release of a lock that is gone is a "not_held" unlock.
    let guard = lock.lock().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(guard.unlock().await.is_err());
    assert!(recorder.has("unlock", "not_held"));
}

#[tokio::test]
async fn an_error_is_the_outcome_of_the_span() {
    let server = RedisServer::start();
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    server.cmd::<String>(&["SET", "spans:string", "x"]);
    assert!(client.lock("spans:string").lock().await.is_err());
    let span = &recorder.named("lock")[0];
    assert_eq!(span.get("outcome"), "error");
}

#[tokio::test]
async fn renewal_rounds_and_pubsub_reconnects_are_spans() {
    let server = RedisServer::start();
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(600));
    let client = Client::connect(config).await.unwrap();
    let lock = client.lock("spans:renewed");
    let guard = lock.lock().await.unwrap();
    // Holds younger than a sixth of the lease wait for the next round.
    tokio::time::sleep(Duration::from_millis(150)).await;
    client.renew_now().await;
    let rounds = recorder.named("renewal_round");
    assert!(
        rounds
            .iter()
            .any(|s| s.get("renewed") == "1" && s.get("outcome") == "renewed"),
        "{rounds:?}"
    );

    // A waiter keeps a subscription; killing the pub/sub connection makes the client
    // reconnect, which ends a `pubsub_reconnect` span.
    let waiting = tokio::spawn({
        let lock = client.lock("spans:renewed");
        async move { lock.try_lock(Duration::from_secs(20)).await }
    });
    // The server has the subscription (the client's own count comes before that).
    let channel = "redisson_lock__channel:{spans:renewed}";
    assert!(
        eventually_async(Duration::from_secs(5), || common::numsub(&server, channel)
            >= 1)
        .await
    );
    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(killed >= 1);
    let reconnected = eventually_async(Duration::from_secs(10), || {
        recorder.has("pubsub_reconnect", "reconnected")
    })
    .await;
    assert!(reconnected, "{:?}", recorder.named("pubsub_reconnect"));
    let span = &recorder.named("pubsub_reconnect")[0];
    assert_eq!(span.get("master"), server.addr());
    guard.unlock().await.unwrap();
    let got = waiting.await.unwrap().unwrap();
    assert!(got.is_some());
}

/// Issue 26: spans carry OpenTelemetry's database-client fields, a failed call its
/// `error.type`, and a lost lock is a WARN event with its reason, said before `lost()`
/// fires.
#[tokio::test]
async fn spans_carry_opentelemetry_fields_and_a_lost_lock_is_a_warning_first() {
    let server = RedisServer::start();
    let rec = Recorder::default();
    let _guard = rec.install();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let lock = client.lock("otel");
    let guard = lock.lock().await.unwrap();
    let lost = guard.lost();
    // Seen at the instant lost() fires: was the warning already there?
    let events = rec.events.clone();
    let warned_first = tokio::spawn(async move {
        lost.cancelled().await;
        let events = events.lock();
        events.iter().any(|e| {
            e.get("message").is_some_and(|m| m == "lock lost")
                && e.get("level").is_some_and(|l| l == "WARN")
        })
    });
    assert!(lock.force_unlock().await.unwrap());
    assert!(warned_first.await.unwrap(), "no WARN before lost() fired");
    let reason = {
        let events = rec.events.lock();
        let lost = events
            .iter()
            .find(|e| e.get("message").is_some_and(|m| m == "lock lost"));
        lost.and_then(|e| e.get("reason").cloned())
            .unwrap_or_default()
    };
    assert!(reason.contains("force"), "{reason}");
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_not_held(), "{err}");
    server.cmd::<String>(&["SET", "otel-string", "x"]);
    assert!(client.lock("otel-string").lock().await.is_err());
    let spans = rec.named("lock");
    assert!(!spans.is_empty());
    for span in &spans {
        assert_eq!(span.get("db.system.name"), "redis", "{span:?}");
        assert_eq!(span.get("server.address"), server.addr(), "{span:?}");
    }
    let failed = spans
        .iter()
        .find(|s| s.get("outcome") == "error")
        .expect("a failed lock span");
    assert_eq!(failed.get("error.type"), "WrongType", "{failed:?}");
}
