//! Redis Cluster: locks routed by hash slot, waiters woken by sharded pub/sub on
//! Redis 7 (as Redisson does there), the primary of each slot followed across
//! failovers and resharding.
//!
//! Environment (read by this example):
//! - `REDLATCH_CLUSTER`: comma-separated seed nodes, e.g.
//!   `redis://127.0.0.1:30001,redis://127.0.0.1:30002` (any reachable node is enough;
//!   the others are found through it);
//! - else `REDLATCH_REDIS`, its URLs taken as seeds (elsewhere a list there means
//!   Redlock; one cluster node's URL is detected as a cluster by any program);
//! - else redis://127.0.0.1:30001 (the first node of Redis's `utils/create-cluster`).
//!
//! `REDLATCH_CLUSTER=redis://127.0.0.1:30001 cargo run --example cluster`

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let seeds: Vec<String> = std::env::var("REDLATCH_CLUSTER")
        .or_else(|_| std::env::var(redlatch::ENV_VAR))
        .unwrap_or_else(|_| "redis://127.0.0.1:30001".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let config = Config::cluster(seeds);
    let client = Client::connect(config.clone()).await?;
    let other = Client::connect(config).await?;
    println!("connected: {:?}", client.masters());
    let started = Instant::now();

    // Names in different slots (so, in general, on different primaries), each
    // contended by one task of each client.
    let mut tasks = Vec::new();
    for name in [
        "examples:cluster:orders",
        "examples:cluster:invoices",
        "examples:cluster:stock",
    ] {
        for (who, c) in [("client-1", &client), ("client-2", &other)] {
            let lock = c.lock(name);
            tasks.push(tokio::spawn(async move {
                let guard = lock.lock().await?;
                println!("{:>7.1?} {who}: holds {name}", started.elapsed());
                tokio::time::sleep(Duration::from_millis(100)).await;
                guard.unlock().await
            }));
        }
    }
    for t in tasks {
        t.await.expect("task panicked")?;
    }

    // A multi-lock across slots works too: each part goes to its own primary.
    let both = client.multi_lock(["examples:cluster:orders", "examples:cluster:stock"]);
    let guard = both.lock().await?;
    let busy = other
        .lock("examples:cluster:stock")
        .try_lock(Duration::from_millis(200))
        .await?
        .is_some();
    println!("cluster: multi-lock over two slots held; other client got one part = {busy}");
    guard.unlock().await?;

    client.close(Duration::from_secs(5)).await;
    other.close(Duration::from_secs(5)).await;
    Ok(())
}
