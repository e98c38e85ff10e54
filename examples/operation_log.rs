//! One log line per lock operation with a plain `fmt` subscriber (docs/observability.md):
//! the library's `lock`, `try_lock` and `unlock` spans are at INFO, and
//! `FmtSpan::CLOSE` prints each span once, when it ends, with its fields (`outcome`,
//! `elapsed_ms`, the lock name) and its duration. The filter `redlatch=info` leaves out
//! the DEBUG spans (renewals, hand-overs) and the DEBUG event each span also ends with.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example operation_log`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::Duration;

use redlatch::{Client, Config};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::prelude::*;

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let filter: Targets = "redlatch=info".parse().expect("a valid filter");
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_span_events(FmtSpan::CLOSE) // one line per span, when it ends
                .with_ansi(false)
                .with_writer(std::io::stdout),
        )
        .with(filter)
        .init();

    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config).await?;
    let lock = client.lock("examples:operation-log");

    let guard = lock.lock().await?; // line 1: lock, outcome=acquired
    let busy = client.lock("examples:operation-log");
    let second = busy.try_lock(Duration::from_millis(100)).await?; // line 2: timed_out
    assert!(second.is_none());
    guard.unlock().await?; // line 3: unlock, outcome=released
    if let Some(guard) = lock.try_lock(Duration::from_secs(1)).await? {
        guard.unlock().await?; // lines 4 and 5: try_lock acquired, unlock released
    }
    client.close(Duration::from_secs(5)).await;
    println!("operations: 5");
    Ok(())
}
