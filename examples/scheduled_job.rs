//! A fleet-wide scheduled job: every node runs the same cron schedule (parsed by the
//! `croner` crate), and for each tick exactly one node runs the job. The others are told
//! it runs elsewhere or is done already, whatever their clocks say within the period.
//! The lock is ShedLock's (`job-lock:default:<name>`), so Java services scheduling the
//! same name with `@SchedulerLock` join the same fleet (docs/jobs.md).
//!
//! Here the "fleet" is three nodes in one process (three clients, as three machines
//! would have), each firing the schedule `* * * * * *` (every second) three times.
//!
//! `REDLATCH_REDIS=redis://127.0.0.1:6379 cargo run --example scheduled_job`
//! (`REDLATCH_REDIS` defaults to redis://127.0.0.1:6379.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::Utc;
use croner::Cron;
use redlatch::{Client, Config, JobOutcome};

const NAME: &str = "examples:scheduled:report";
const TICKS: usize = 3;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::from_env_or(Config::single("redis://127.0.0.1:6379"))?;
    let schedule: Cron = "* * * * * *".parse()?;
    let ran: Arc<Mutex<BTreeMap<SystemTime, Vec<usize>>>> = Default::default();
    let mut nodes = Vec::new();
    for node in 1..=3 {
        let client = Client::connect(config.clone()).await?;
        let (schedule, ran) = (schedule.clone(), ran.clone());
        nodes.push(tokio::spawn(async move {
            for _ in 0..TICKS {
                // The next instant of the schedule, by this node's clock.
                let next = schedule.find_next_occurrence(&Utc::now(), false)?;
                let wait = (next - Utc::now()).to_std().unwrap_or_default();
                tokio::time::sleep(wait).await;
                let tick = SystemTime::from(next);
                let job = (client.job(NAME))
                    .at_most(Duration::from_secs(30)) // lockAtMostFor
                    .at_least(Duration::from_millis(200)) // lockAtLeastFor
                    .tick(tick);
                let outcome = job
                    .run_with(|_, missed| async move {
                        // The report for `tick` (and the missed ticks first, if any).
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        missed.count
                    })
                    .await?;
                match outcome {
                    JobOutcome::Ran(run) => {
                        println!("node {node}: ran the tick {next} in {:?}", run.took);
                        ran.lock().unwrap().entry(tick).or_default().push(node);
                    }
                    JobOutcome::Skipped { holder, .. } => {
                        println!("node {node}: tick {next} runs on {:?}", holder.host)
                    }
                    JobOutcome::AlreadyDone { .. } => println!("node {node}: tick {next} done"),
                    other => println!("node {node}: {}", other.label()),
                }
            }
            client.close(Duration::from_secs(5)).await;
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for node in nodes {
        node.await?.map_err(|e| e.to_string())?;
    }
    let ran = ran.lock().unwrap();
    let once = ran.values().all(|nodes| nodes.len() == 1);
    println!("scheduled_job: {} ticks, each run once = {once}", ran.len());
    assert!(once && ran.len() >= TICKS, "{ran:?}");
    Ok(())
}
