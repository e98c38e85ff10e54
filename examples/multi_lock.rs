//! Multi-lock: several locks taken as one, all or none, without deadlock.
//!
//! Two transfers run at once on overlapping accounts, named in opposite orders (the
//! classic deadlock); then a try_lock of the pair while another client holds one of
//! them shows "all or none". Redisson's `RedissonMultiLock`.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example multi_lock`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::{Duration, Instant};

use redlatch::{Client, Config};

const A: &str = "examples:multi:account-1";
const B: &str = "examples:multi:account-2";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let client = Client::connect(config.clone()).await?;
    let other = Client::connect(config).await?;
    let started = Instant::now();

    // A -> B on one client, B -> A on the other, ten transfers each.
    let transfers: Vec<_> = [(&client, [A, B], "A->B"), (&other, [B, A], "B->A")]
        .into_iter()
        .map(|(c, names, label)| {
            let pair = c.multi_lock(names);
            tokio::spawn(async move {
                for _ in 0..10 {
                    let guard = pair.lock().await?;
                    tokio::time::sleep(Duration::from_millis(5)).await; // move the money
                    guard.unlock().await?;
                }
                println!("{:>7.1?} {label}: 10 transfers done", started.elapsed());
                redlatch::Result::Ok(())
            })
        })
        .collect();
    for t in transfers {
        t.await.expect("transfer panicked")?;
    }
    println!("no deadlock: 20 transfers in {:.1?}", started.elapsed());

    // All or none: the other client holds account 2, so the pair cannot be had, and
    // account 1 is left free while we wait.
    let held = other.lock(B).lock().await?;
    let pair = client.multi_lock([A, B]);
    let got = pair.try_lock(Duration::from_millis(300)).await?;
    println!(
        "all or none: pair acquired = {}, {A} locked = {}",
        got.is_some(),
        client.lock(A).is_locked().await?
    );
    held.unlock().await?;
    let guard = pair.lock().await?;
    println!("after the release: holding {:?}", guard.names());
    guard.unlock().await?;

    client.close(Duration::from_secs(5)).await;
    other.close(Duration::from_secs(5)).await;
    Ok(())
}
