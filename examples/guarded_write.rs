//! Writes guarded by the lock: Redis itself refuses a write from a holder whose lease
//! ran out while it was paused, with no token-checking store.
//!
//! Worker A takes the fenced lock with a short lease and "pauses" (a GC pause, a stalled
//! VM) past it; worker B (another client) takes the lock and writes the ledger through
//! its guard; when A wakes up and writes through its own guard, Redis refuses the write,
//! because A no longer holds the lock. Keys carry the lock's hash tag (`{ledger}`) so the
//! check and the write run in one script in one hash slot.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example guarded_write`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::Duration;

use redlatch::{Client, Config, Error};

const LOCK: &str = "examples:{ledger}";
const KEY: &str = "examples:{ledger}:owner";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let (client_a, client_b) = (
        Client::connect(config.clone()).await?,
        Client::connect(config).await?,
    );

    // A: a 300 ms lease (no watchdog), then a pause longer than the lease.
    let a = client_a
        .fenced_lock(LOCK)
        .lock_with_lease(Duration::from_millis(300))
        .await?;
    a.guarded().set(KEY, "A").await?;
    println!(
        "A: wrote while holding the lock (token {:?})",
        a.fencing_token()
    );
    tokio::time::sleep(Duration::from_millis(600)).await; // the pause

    // B took over meanwhile: its guarded write lands.
    let b = client_b.fenced_lock(LOCK).lock().await?;
    b.guarded().set(KEY, "B").await?;
    println!("B: wrote with token {:?}", b.fencing_token());

    // A wakes up and writes: refused by Redis, B's value stays.
    match a.guarded().set(KEY, "A (late)").await {
        Err(Error::NotHeld { .. }) => println!("A: late write refused: the lock is not held"),
        other => panic!("A's late write was not refused: {other:?}"),
    }
    let total = b.guarded().incr_by("examples:{ledger}:writes", 1).await?;
    println!("ledger owner is B, writes counted: {total}");
    b.unlock().await?;
    Ok(())
}
