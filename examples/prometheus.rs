//! Exports redlatch's metrics in Prometheus text format (the `metrics` feature).
//!
//! Runs a short contended workload (three tasks, one lock) and prints what a
//! Prometheus scrape would read. In a service, serve `handle.render()` on `/metrics`
//! instead (or enable the exporter's `http-listener` feature).
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --features metrics --example prometheus`

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use redlatch::{Client, Config};

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .expect("no other metrics recorder is installed");
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config).await?;

    let workers: Vec<_> = (0..3)
        .map(|_| {
            let lock = client.lock("prometheus-example:job");
            tokio::spawn(async move {
                for _ in 0..10 {
                    let guard = lock.lock().await?;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    guard.unlock().await?;
                }
                redlatch::Result::Ok(())
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker panicked")?;
    }
    let busy = client.lock("prometheus-example:job").lock().await?;
    let other = Client::connect(client.config().clone()).await?;
    let contended = other.lock("prometheus-example:job");
    assert!(contended
        .try_lock(Duration::from_millis(10))
        .await?
        .is_none());
    busy.unlock().await?;

    handle.run_upkeep();
    print!("{}", handle.render());
    client.close(Duration::from_secs(1)).await;
    other.close(Duration::from_secs(1)).await;
    Ok(())
}
