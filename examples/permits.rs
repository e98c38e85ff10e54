//! Expirable permits: a concurrency limit whose permits come back when a holder dies
//! (Redisson's `RPermitExpirableSemaphore`).
//!
//! One permit. A "crashing" holder takes it with a 1 s lease and never releases it
//! (as a killed process would not); a second client waits and gets the permit once
//! the lease has run out. Then two clients share the permit with watchdog-kept permits
//! (renewed while held, given back by `release()` or drop).
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example permits`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

const NAME: &str = "examples:permits:builds";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let (crashing, survivor) = (
        Client::connect(config.clone()).await?,
        Client::connect(config).await?,
    );
    crashing
        .permit_expirable_semaphore(NAME)
        .set_permits(1)
        .await?;
    let started = Instant::now();

    let doomed = crashing
        .permit_expirable_semaphore(NAME)
        .acquire_with_lease(Duration::from_secs(1))
        .await?;
    println!(
        "crashing holder: took permit {} (1 s lease), then dies",
        doomed.id()
    );
    std::mem::forget(doomed); // never released, as by a killed process

    let builds = survivor.permit_expirable_semaphore(NAME);
    let permit = builds
        .try_acquire(Duration::from_secs(10))
        .await?
        .expect("the dead holder's permit comes back when its lease ends");
    println!(
        "{:>7.1?} survivor: got permit {}: the one of the dead holder came back when its lease ended",
        started.elapsed(),
        permit.id()
    );
    permit.release().await?;

    // Two live clients share the one permit, each kept by its client's watchdog.
    let turns: Vec<_> = [("crashing", &crashing), ("survivor", &survivor)]
        .into_iter()
        .map(|(who, c)| {
            let builds = c.permit_expirable_semaphore(NAME);
            tokio::spawn(async move {
                for _ in 0..3 {
                    let permit = builds.acquire().await?;
                    println!(
                        "{:>7.1?} {who}: building with permit {}",
                        started.elapsed(),
                        permit.id()
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    permit.release().await?;
                }
                redlatch::Result::Ok(())
            })
        })
        .collect();
    for t in turns {
        t.await.expect("builder panicked")?;
    }
    println!(
        "permits: 6 builds done, {} available",
        builds.available().await?
    );
    crashing.close(Duration::from_secs(5)).await;
    survivor.close(Duration::from_secs(5)).await;
    Ok(())
}
