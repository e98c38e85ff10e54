//! Fenced lock: every acquisition carries a larger token, so storage can refuse a
//! write from a holder whose lease ran out while it was paused.
//!
//! Worker A takes the lock with a short lease and "pauses" (a GC pause, a stalled VM)
//! past it; worker B (another client) gets the lock with a larger token and writes;
//! when A wakes up and writes with its old token, the storage refuses it. The storage
//! here is an in-memory stand-in for a database that keeps the largest token it saw.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example fenced_lock`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlatch::{Client, Config, Error};
use tokio::sync::oneshot;

const NAME: &str = "examples:fenced:ledger";

/// What a fencing-aware store does: refuse a write tagged with an older token than the
/// newest it has accepted.
#[derive(Default)]
struct Storage {
    newest_token: Mutex<u64>,
}

impl Storage {
    fn write(&self, who: &str, token: u64) {
        let mut newest = self.newest_token.lock().unwrap();
        if token < *newest {
            println!("storage: rejected write from {who} (token {token} < {newest})");
        } else {
            *newest = token;
            println!("storage: accepted write from {who} (token {token})");
        }
    }
}

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let (client_a, client_b) = (
        Client::connect(config.clone()).await?,
        Client::connect(config).await?,
    );
    let storage = Arc::new(Storage::default());
    let (b_wrote, b_has_written) = oneshot::channel();

    // A: a 300 ms lease and no watchdog, then a pause longer than the lease.
    let a_guard = client_a
        .fenced_lock(NAME)
        .lock_with_lease(Duration::from_millis(300))
        .await?;
    let a_token = a_guard
        .fencing_token()
        .expect("a fenced lock's guard has a token");
    println!("A: got the lock, token {a_token}, then pauses past its 300 ms lease");

    // B waits for the lock: it is free once A's lease has run out.
    let store = storage.clone();
    let b = tokio::spawn(async move {
        let guard = client_b.fenced_lock(NAME).lock().await?;
        let token = guard.fencing_token().expect("token");
        println!("B: got the lock after A's lease ran out, token {token}");
        store.write("B", token);
        let _ = b_wrote.send(());
        guard.unlock().await?;
        client_b.close(Duration::from_secs(5)).await;
        redlatch::Result::Ok(())
    });

    // A wakes up only after B wrote (the unlucky order a pause can produce).
    b_has_written.await.expect("B wrote");
    storage.write("A", a_token);
    match a_guard.unlock().await {
        Err(Error::NotHeld { .. }) => println!("A: unlock says the lock was no longer held"),
        other => println!("A: unlock returned {other:?}"),
    }
    b.await.expect("B panicked")?;
    client_a.close(Duration::from_secs(5)).await;
    Ok(())
}
