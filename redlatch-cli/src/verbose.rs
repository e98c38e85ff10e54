//! `redlatch run -v`: what it waits for, who holds the lock and for how long, and (on a
//! terminal) how long it has waited so far.

use std::convert::Infallible;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::duration::human;
use crate::held::Wanted;

/// How often a wait on a terminal says it is still waiting.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Says what the wait is for and, for a lock, who holds it now and for how much
/// longer (one status query; nothing is said if it fails: the wait reports errors).
pub async fn before_wait(wanted: &Wanted, name: &str, wait: Option<Duration>) {
    let bound = match wait {
        None => "as long as it takes".to_string(),
        Some(d) if d.is_zero() => "one try".to_string(),
        Some(d) => format!("at most {}", human(d)),
    };
    eprintln!("redlatch: waiting for {} {name:?} ({bound})", wanted.label);
    let Some(lock) = &wanted.lock else {
        return;
    };
    let Ok(status) = lock.status().await else {
        return;
    };
    for master in status.iter().filter(|m| m.error.is_none()) {
        let ttl = master.ttl.map(human).unwrap_or_else(|| "no expiry".into());
        match master.holders.as_slice() {
            [] => eprintln!("redlatch:   {}: free", master.master),
            holders => {
                let who: Vec<String> = (holders.iter())
                    .map(|(h, n)| format!("{h} (x{n})"))
                    .collect();
                eprintln!(
                    "redlatch:   {}: held by {}, lease left {ttl}",
                    master.master,
                    who.join(", ")
                );
            }
        }
    }
}

/// Never completes; with `-v` and stderr on a terminal, says every few seconds how long
/// the wait has lasted.
pub async fn progress(verbose: bool, what: &str, name: &str) -> Infallible {
    if !verbose || !std::io::stderr().is_terminal() {
        return std::future::pending().await;
    }
    let started = Instant::now();
    let mut tick = tokio::time::interval(PROGRESS_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        eprintln!(
            "redlatch: still waiting for {what} {name:?} ({})",
            human(started.elapsed())
        );
    }
}
