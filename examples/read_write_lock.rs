//! Read-write lock: readers share it, a writer excludes everyone; a writer may
//! downgrade to a read lock, a reader may not upgrade.
//!
//! Two readers (two clients) hold the read lock at the same time, a writer waits until
//! both have left, then downgrades inside its guard's scope. Same keys and messages as
//! Redisson's `RReadWriteLock`.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example read_write_lock`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error};
use tokio::sync::Barrier;

const NAME: &str = "examples:rw:catalog";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config.clone()).await?;
    let started = Instant::now();
    let readers_inside = Arc::new(AtomicUsize::new(0));
    // Both readers wait here while holding the read lock: they pass only if they hold
    // it at the same time.
    let both_in = Arc::new(Barrier::new(2));

    let mut readers = Vec::new();
    for who in ["reader-1", "reader-2"] {
        let reader = Client::connect(config.clone()).await?;
        let (inside, both_in) = (readers_inside.clone(), both_in.clone());
        readers.push(tokio::spawn(async move {
            let guard = reader.read_write_lock(NAME).read().lock().await?;
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            println!("{:>7.1?} {who}: reading ({now} inside)", started.elapsed());
            tokio::time::timeout(Duration::from_secs(30), both_in.wait())
                .await
                .expect("readers share the read lock");
            tokio::time::sleep(Duration::from_millis(300)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            println!("{:>7.1?} {who}: done reading", started.elapsed());
            guard.unlock().await?;
            reader.close(Duration::from_secs(5)).await;
            redlatch::Result::Ok(())
        }));
    }

    // The writer asks while the readers read, and gets in only after both have left.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rw = client.read_write_lock(NAME);
    println!(
        "{:>7.1?} writer: waiting for the readers",
        started.elapsed()
    );
    let write = rw.write().lock().await?;
    println!(
        "{:>7.1?} writer: got the write lock with {} readers inside",
        started.elapsed(),
        readers_inside.load(Ordering::SeqCst)
    );
    for r in readers {
        r.await.expect("reader panicked")?;
    }

    // Downgrade: inside the write guard's scope the read lock is granted; releasing
    // the write lock then leaves us reading, and other readers can join.
    let read = write.scope(rw.read().lock()).await?;
    write.unlock().await?;
    println!(
        "downgrade: write lock released, still reading (write locked: {})",
        rw.write().is_locked().await?
    );

    // Upgrade: inside a read guard's scope the write lock is refused, not waited for.
    match read
        .scope(rw.write().try_lock(Duration::from_secs(1)))
        .await
    {
        Err(Error::Upgrade { .. }) => println!("upgrade refused: release the read lock first"),
        other => println!("upgrade: unexpected {other:?}"),
    }
    read.unlock().await?;
    client.close(Duration::from_secs(5)).await;
    Ok(())
}
