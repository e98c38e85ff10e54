//! Listing locks for an operator: who holds what, for how long, and who waits.
//!
//! One client takes a lock and a fair lock; a second client queues behind the fair lock
//! and a third waits on the plain lock. `Client::list` then finds both names with their
//! holders, leases and waiters, the way `redlatch list` and `redlatch top` show them.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example list`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::Duration;

use redlatch::{Client, Config};

const PREFIX: &str = "examples:list:";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let holder = Client::connect(config.clone()).await?;
    let queued = Client::connect(config.clone()).await?;
    let waiter = Client::connect(config).await?;
    let plain = holder.lock(format!("{PREFIX}billing")).lock().await?;
    let fair = holder.fair_lock(format!("{PREFIX}queue")).lock().await?;
    let fair_waiter = queued.fair_lock(format!("{PREFIX}queue"));
    let in_queue = tokio::spawn(async move { fair_waiter.lock().await.map(drop) });
    let plain_waiter = waiter.lock(format!("{PREFIX}billing"));
    let waiting = tokio::spawn(async move { plain_waiter.lock().await.map(drop) });

    // Until both waiters show (each subscribes or queues in its own time), 10 s at most.
    let mut listing = holder.list(&format!("{PREFIX}*")).await?;
    for _ in 0..200 {
        if listing.locks.len() == 2 && listing.locks.iter().all(|l| l.waiters == 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        listing = holder.list(&format!("{PREFIX}*")).await?;
    }
    for lock in &listing.locks {
        let holders: Vec<&str> = lock.holders.iter().map(|h| h.holder.id.as_str()).collect();
        println!(
            "{} ({}): held by {holders:?}, ttl {:?}, {} waiting",
            lock.name,
            lock.kind.as_str(),
            lock.ttl,
            lock.waiters
        );
    }
    println!(
        "listed {} locks, complete: {}",
        listing.locks.len(),
        !listing.incomplete
    );
    drop(plain);
    drop(fair);
    waiting.await.expect("the waiter ran")?;
    in_queue.await.expect("the fair waiter ran")?;
    Ok(())
}
