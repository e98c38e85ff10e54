//! Semaphore: at most N holders at once across processes (Redisson's `RSemaphore`).
//!
//! Two permits, five workers on two clients: never more than two inside at once; the
//! others wait for a release (woken by pub/sub, no polling). Nothing records who took
//! a permit, so a holder that dies keeps it: see the `permits` example for permits
//! that come back.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example semaphore`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::{Client, Config};

const NAME: &str = "examples:semaphore:gpu-slots";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let clients = [
        Client::connect(config.clone()).await?,
        Client::connect(config).await?,
    ];
    // set_permits overwrites whatever an earlier run left; try_set_permits is the way
    // to set one up from several processes (only the first one sets it).
    clients[0].semaphore(NAME).set_permits(2).await?;
    let started = Instant::now();
    let (inside, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

    let workers: Vec<_> = (0..5)
        .map(|i| {
            let slots = clients[i % 2].semaphore(NAME);
            let (inside, most) = (inside.clone(), most.clone());
            tokio::spawn(async move {
                let permit = slots.acquire().await?; // given back if this task fails
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                println!(
                    "{:>7.1?} worker {i}: got a permit ({now} inside)",
                    started.elapsed()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                permit.release().await
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker panicked")?;
    }
    let slots = clients[0].semaphore(NAME);
    println!(
        "semaphore: 5 workers done, at most {} inside at once, {} permits available",
        most.load(Ordering::SeqCst),
        slots.available().await?
    );
    // A bounded wait: with both permits taken, try_acquire gives up.
    let both = slots.acquire_many(2).await?;
    let got = clients[1]
        .semaphore(NAME)
        .try_acquire(Duration::from_millis(200))
        .await?;
    println!(
        "try_acquire while both permits are taken: {}",
        got.is_some()
    );
    both.release().await?;

    for c in clients {
        c.close(Duration::from_secs(5)).await;
    }
    Ok(())
}
