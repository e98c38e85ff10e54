//! The README's Quickstart, as it stands there (tests/standalone/readme.rs keeps the two the same;
//! tests/standalone/examples.rs runs it): `cargo run --example readme_quickstart`.

use redlatch::{Client, Config};
use std::time::Duration;

#[rustfmt::skip] // laid out as in the README
#[tokio::main]
async fn main() -> redlatch::Result<()> {
    // REDLATCH_REDIS (and REDLATCH_MODE for cluster or sentinel) if set, else a local
    // Redis; a variable set but invalid is an error, not a fallback.
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config).await?;
    let lock = client.lock("orders:42");

    let guard = lock.lock().await?;              // waits; watchdog lease (30 s, renewed)
    println!("locked {} as {}", lock.name(), guard.holder());
    guard.scope(async {                          // nested calls re-enter only in a scope
        let nested = lock.lock().await?;         // hold count 2
        println!("re-entered: hold count {}", lock.hold_count().await?);
        nested.unlock().await                    // count back to 1
    }).await?;
    let lost = guard.lost();
    tokio::select! {
        _ = lost.cancelled() => eprintln!("lock lost: stop writing"),
        _ = tokio::time::sleep(Duration::from_millis(100)) => { /* critical work */ }
    }
    guard.unlock().await?;                       // explicit release reports errors
    println!("unlocked; locked now: {}", lock.is_locked().await?);

    if let Some(g) = lock.try_lock(Duration::from_secs(3)).await? {   // bounded wait
        println!("locked again within 3 s");
        g.unlock().await?;
    }
    client.close(Duration::from_secs(5)).await;  // waits for background releases
    Ok(())
}
