//! Redis Sentinel: the primary found through the sentinels and followed across
//! failovers (waiters resubscribe on the new primary).
//!
//! Environment (read by this example; `REDLATCH_REDIS` cannot name sentinels):
//! - `REDLATCH_SENTINELS`: comma-separated sentinel URLs (default
//!   `redis://127.0.0.1:26379`); credentials in them are the sentinels';
//! - `REDLATCH_SENTINEL_MASTER`: the name the sentinels monitor the primary under
//!   (default `mymaster`);
//! - `REDLATCH_MASTER_PASSWORD` (optional): the primary's password, when it differs
//!   from the sentinels' (`REDLATCH_MASTER_USER` for an ACL user).
//!
//! `REDLATCH_SENTINELS=redis://127.0.0.1:26379 REDLATCH_SENTINEL_MASTER=mymaster cargo run --example sentinel`

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let sentinels: Vec<String> = std::env::var("REDLATCH_SENTINELS")
        .unwrap_or_else(|_| "redis://127.0.0.1:26379".into())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let master = std::env::var("REDLATCH_SENTINEL_MASTER").unwrap_or_else(|_| "mymaster".into());
    let mut config = Config::sentinel(master.clone(), sentinels);
    if let Ok(password) = std::env::var("REDLATCH_MASTER_PASSWORD") {
        let user = std::env::var("REDLATCH_MASTER_USER").ok();
        config = config.master_auth(user.as_deref(), &password);
    }
    let client = Client::connect(config.clone()).await?;
    let other = Client::connect(config).await?;
    println!("connected: {:?}", client.masters());
    let started = Instant::now();

    // Two clients, two workers each, one lock.
    let workers: Vec<_> = [("client-1", &client), ("client-2", &other)]
        .into_iter()
        .flat_map(|(who, c)| {
            [
                (who, c.lock("examples:sentinel:job")),
                (who, c.lock("examples:sentinel:job")),
            ]
        })
        .enumerate()
        .map(|(i, (who, lock))| {
            tokio::spawn(async move {
                let guard = lock.lock().await?;
                println!(
                    "{:>7.1?} {who} worker {i}: holds the job lock",
                    started.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
                guard.unlock().await
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker panicked")?;
    }
    println!("sentinel: 4 turns done on the primary of {master}");
    client.close(Duration::from_secs(5)).await;
    other.close(Duration::from_secs(5)).await;
    Ok(())
}
