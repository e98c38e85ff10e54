//! Count-down latch: wait until N workers (anywhere) are ready (Redisson's
//! `RCountDownLatch`).
//!
//! A coordinator sets the count to 3 and waits; three workers on their own clients
//! count down as they finish starting up; the coordinator wakes when the count reaches
//! zero (by pub/sub, no polling). The key is deleted at zero, so the latch can be set
//! again.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example latch`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let coordinator = Client::connect(config.clone()).await?;
    // One latch per run: a run killed half-way leaves its count behind, and
    // try_set_count refuses to set a latch that is still counting.
    let name = format!("examples:latch:workers-ready:{}", coordinator.id());
    let ready = coordinator.count_down_latch(&name);
    assert!(ready.try_set_count(3).await?, "a fresh latch");
    let started = Instant::now();

    let mut workers = Vec::new();
    for i in 1..=3u64 {
        let client = Client::connect(config.clone()).await?;
        let name = name.clone();
        workers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150 * i)).await; // starting up
            let left = client.count_down_latch(&name).count_down().await?;
            println!(
                "{:>7.1?} worker {i}: ready ({left} to go)",
                started.elapsed()
            );
            client.close(Duration::from_secs(5)).await;
            redlatch::Result::Ok(())
        }));
    }

    let early = ready.wait_timeout(Duration::from_millis(50)).await?;
    println!(
        "coordinator: after 50 ms, all ready = {early} (count {})",
        ready.count().await?
    );
    let done = ready.wait_timeout(Duration::from_secs(30)).await?;
    println!(
        "{:>7.1?} coordinator: all 3 workers ready = {done}",
        started.elapsed()
    );
    for w in workers {
        w.await.expect("worker panicked")?;
    }
    coordinator.close(Duration::from_secs(5)).await;
    Ok(())
}
