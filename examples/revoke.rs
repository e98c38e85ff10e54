//! Cooperative revocation: a holder listens for release requests, and another client
//! asks it to let go instead of waiting for it or breaking the lock.
//!
//! The worker holds "reports:nightly" and works in batches, checking between batches
//! whether its release was requested; the operator (another client) asks with
//! `request_release()` and then waits for the lock, which the worker hands back after
//! finishing its current batch. (From the shell: `redlatch unlock --ask NAME`; `redlatch
//! run` forwards the request to its command as SIGTERM.)
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example revoke`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::Duration;

use redlatch::{Client, Config};

const NAME: &str = "examples:revoke:reports";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let (worker, operator) = (
        Client::connect(config.clone()).await?,
        Client::connect(config).await?,
    );

    let guard = worker.lock(NAME).lock().await?;
    let revoke = guard.revoke_requested();
    let work = tokio::spawn(async move {
        let mut batches = 0;
        while !revoke.is_cancelled() && batches < 500 {
            tokio::time::sleep(Duration::from_millis(10)).await; // one batch
            batches += 1;
        }
        println!("worker: release requested, stopping after batch {batches}");
        guard.unlock().await?;
        redlatch::Result::Ok(batches)
    });

    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = operator.lock(NAME).request_release().await?;
    println!("operator: asked {} holder(s)", asked.holders.len());
    let taken = operator.lock(NAME).lock().await?; // the worker hands it back
    let batches = work.await.expect("worker task")?;
    assert!(
        batches < 500,
        "the worker finished without hearing the request"
    );
    println!("operator: got the lock after the worker stopped");
    taken.unlock().await?;
    Ok(())
}
