//! Tracing as JSON lines, one object per event with its span and fields: the shape an
//! OpenTelemetry collector's log pipeline (or Loki, Elasticsearch, Vector) ingests.
//!
//! Two clients contend for one lock; then the lock is force-unlocked behind its
//! holder's back and the watchdog reports it lost (a WARN event; `guard.lost()`
//! fires). Every `lock`/`try_lock`/`unlock`/`hand_over`/`renewal_round` span of the
//! library (target `redlatch`) is printed when it closes, with its duration.
//! `RUST_LOG` chooses what is shown (default `redlatch=debug,tracing_json=info`).
//! The same events go to an OpenTelemetry exporter by swapping the fmt layer for
//! `tracing-opentelemetry`'s; counters and histograms: the `prometheus` example.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example tracing_json`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::Duration;

use redlatch::{Client, Config};
use tracing::info;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const NAME: &str = "examples:tracing:report";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            "redlatch=debug,tracing_json=info"
                .parse()
                .expect("a valid filter")
        });
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .with_span_list(false) // the event's own span, with its fields, is enough here
                .with_span_events(FmtSpan::CLOSE) // one line per span, with its duration
                .with_writer(std::io::stdout),
        )
        .with(filter)
        .init();

    // A 3 s watchdog: the lease is renewed every second, so a lost lock shows soon.
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?
        .watchdog_timeout(Duration::from_secs(3));
    let client = Client::connect(config.clone()).await?;
    let other = Client::connect(config).await?;

    // Contention: the second client waits and is handed the lock on release.
    let guard = client.lock(NAME).lock().await?;
    let lock = other.lock(NAME);
    let waiter = tokio::spawn(async move {
        let guard = lock.lock().await?;
        guard.unlock().await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    info!(
        held_locks = client.held_locks(),
        subscriptions = other.subscriptions(),
        "gauges while contended"
    );
    guard.unlock().await?;
    waiter.await.expect("waiter panicked")?;

    // A lost lock: force-unlocked by someone else; the next renewal finds it gone.
    let guard = client.lock(NAME).lock().await?;
    other.lock(NAME).force_unlock().await?;
    let lost = tokio::time::timeout(Duration::from_secs(30), guard.lost().cancelled())
        .await
        .is_ok();
    info!(lost, "the watchdog reported the force-unlocked lock");
    drop(guard);

    client.close(Duration::from_secs(5)).await;
    other.close(Duration::from_secs(5)).await;
    Ok(())
}
