//! Leader election: three candidates campaign for "scheduler"; one leads at a time, each
//! new leader with a greater term, while an observer prints every change once.
//!
//! Each candidate is its own client (as separate processes would be): it campaigns,
//! leads for a moment, advertises a new value with `proclaim`, then resigns, which
//! elects the next one at once (a crashed leader would be replaced when its lease ran
//! out).
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example election`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::time::Duration;

use redlatch::{ChangeKind, Client, Config};

const NAME: &str = "examples:election:scheduler";

#[tokio::main]
async fn main() -> redlatch::Result<()> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let watcher = Client::connect(config.clone()).await?;
    let election = watcher.election(NAME);
    let mut observer = election.observe().await?;

    let mut candidates = Vec::new();
    for name in ["alpha", "beta", "gamma"] {
        let client = Client::connect(config.clone()).await?;
        candidates.push(tokio::spawn(async move {
            let election = client.election(NAME);
            let mut leading = election.campaign(format!("{name}:8080")).await?;
            println!("{name}: leading in term {}", leading.term());
            tokio::time::sleep(Duration::from_millis(100)).await;
            leading.proclaim(format!("{name}:9090")).await?; // same term, new value
            leading.resign().await?;
            redlatch::Result::Ok(())
        }));
    }
    for c in candidates {
        c.await.expect("candidate task")?;
    }

    // Three terms, each elected, proclaimed and resigned: nine changes, in order.
    let mut terms = Vec::new();
    for _ in 0..9 {
        let change = observer.next().await?;
        println!(
            "observer: {:?} term {} value {}",
            change.kind, change.term, change.value
        );
        if change.kind == ChangeKind::Elected {
            terms.push(change.term);
        }
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]));
    println!(
        "observer: {} leaders, terms growing: {terms:?}",
        terms.len()
    );
    println!("leader now: {:?}", election.leader().await?);
    watcher.close(Duration::from_secs(5)).await;
    Ok(())
}
