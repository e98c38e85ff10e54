//! The blocking API (`redlatch::blocking`): the same locks for synchronous code, held
//! per OS thread as Redisson's `RLock` is per Java thread. No `#[tokio::main]`.
//!
//! Three threads share one client and contend for one lock; each re-enters it once on
//! its own thread (hold count 2) while the others wait.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example blocking`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::{Duration, Instant};

use redlatch::blocking::Client;
use redlatch::Config;

const NAME: &str = "examples:blocking:billing-run";

fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config)?;
    let started = Instant::now();

    let threads: Vec<_> = (1..=3)
        .map(|i| {
            let lock = client.lock(NAME);
            std::thread::spawn(move || -> redlatch::Result<()> {
                let outer = lock.lock()?;
                // Same thread, same lock: re-enters instead of waiting.
                let inner = lock.lock()?;
                println!(
                    "{:>7.1?} thread {i}: holding, hold count {}",
                    started.elapsed(),
                    lock.hold_count()?
                );
                std::thread::sleep(Duration::from_millis(200));
                inner.unlock()?;
                outer.unlock()?; // released before unlock() returns
                println!("{:>7.1?} thread {i}: released", started.elapsed());
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread panicked")?;
    }

    // A bounded wait from another thread while this one holds the lock.
    let lock = client.lock(NAME);
    let guard = lock.lock()?;
    let other = client.lock(NAME);
    let got = std::thread::spawn(move || {
        other
            .try_lock(Duration::from_millis(200))
            .map(|g| g.is_some())
    })
    .join()
    .expect("thread panicked")?;
    println!("blocking: try_lock from another thread while held = {got}");
    guard.unlock()?;
    client.close(Duration::from_secs(5));
    Ok(())
}
