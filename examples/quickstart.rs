//! Quickstart: nested locking, then two workers contending for one lock.
//!
//! Run against any Redis: `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example quickstart`
//! (scripts/demo.sh runs it against throwaway masters).

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config).await?;
    println!("client {} on {:?}", client.id(), client.masters());

    // 1. Reentrancy: inside the guard's scope a nested lock() re-enters; the hold
    //    count goes up. (Outside it, every call is its own holder and would wait.)
    let lock = client.lock("quickstart:report");
    let outer = lock.lock().await?;
    outer
        .scope(async {
            let inner = lock.lock().await?;
            println!(
                "nested: hold count {}, ttl {:?} (watchdog lease), holder {}",
                lock.hold_count().await?,
                lock.remaining_ttl().await?,
                inner.holder()
            );
            inner.unlock().await
        })
        .await?;
    println!("after one unlock: hold count {}", lock.hold_count().await?);
    outer.unlock().await?;
    println!("after both: locked = {}", lock.is_locked().await?);

    // 2. Two workers contend; the second waits for the first's unlock message.
    let started = Instant::now();
    let workers: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|who| {
            let lock = client.lock("quickstart:billing-run");
            tokio::spawn(async move {
                let guard = lock.lock().await?;
                println!("{:>6.1?} {who}: got the lock, working", started.elapsed());
                tokio::time::sleep(Duration::from_millis(300)).await;
                println!("{:>6.1?} {who}: done, unlocking", started.elapsed());
                guard.unlock().await
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker panicked")?;
    }

    // 3. try_lock gives up after its wait; a lease without watchdog expires on its own.
    let held = lock.lock_with_lease(Duration::from_secs(2)).await?;
    let other = client.lock("quickstart:report");
    let attempt = tokio::spawn(async move { other.try_lock(Duration::from_millis(200)).await });
    println!(
        "try_lock while held: {:?}",
        attempt.await.expect("task").map(|g| g.is_some())
    );
    held.unlock().await?;
    client.close(Duration::from_secs(5)).await; // waits for background releases
    Ok(())
}
