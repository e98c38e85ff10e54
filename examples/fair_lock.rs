//! Fair (FIFO) lock: waiters are served in the order they asked, across processes.
//!
//! A holder keeps the lock while three services (three clients, as three processes
//! would be) ask for it one after the other; each release wakes only the next one in
//! the Redis-side queue (the same queue Redisson's `RFairLock` uses).
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example fair_lock`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

const NAME: &str = "examples:fair:nightly-report";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let holder = Client::connect(config.clone()).await?;
    let started = Instant::now();

    let first = holder.fair_lock(NAME).lock().await?;
    println!("{:>7.1?} holder: got {NAME}", started.elapsed());

    // Three services ask one after the other (200 ms apart, so the queue order is the
    // order they asked in); none gets the lock while the holder keeps it.
    let mut services = Vec::new();
    for who in ["alpha", "beta", "gamma"] {
        let client = Client::connect(config.clone()).await?;
        let lock = client.fair_lock(NAME);
        services.push(tokio::spawn(async move {
            println!("{:>7.1?} {who}: waiting in the queue", started.elapsed());
            let guard = lock.lock().await?;
            println!("{:>7.1?} {who}: got the lock", started.elapsed());
            tokio::time::sleep(Duration::from_millis(100)).await;
            guard.unlock().await?;
            client.close(Duration::from_secs(5)).await;
            redlatch::Result::Ok(who)
        }));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    println!("{:>7.1?} holder: releasing", started.elapsed());
    first.unlock().await?;
    let mut order = Vec::new();
    for service in services {
        order.push(service.await.expect("service panicked")?);
    }
    println!("fair lock served: {}", order.join(" -> "));
    holder.close(Duration::from_secs(5)).await;
    Ok(())
}
