//! The A/B driver of the fence cost examples (fence_cost.rs, fence_s3_cost.rs): rounds
//! alternating the guard off and on at each client count, then one table line per
//! variant (throughput, p50, p99).

use std::future::Future;
use std::time::Duration;

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[i].as_secs_f64() * 1e6
}

/// For each count in `clients`, `rounds` rounds of `secs` per variant, alternating;
/// `client(id, fenced, first_token)` runs one client's round and returns its latencies
/// (each round's clients get tokens above `first_token`, fresh per round).
pub async fn alternate<F, Fut>(
    clients: &[usize],
    rounds: u64,
    secs: Duration,
    what: &str,
    client: F,
) where
    F: Fn(usize, bool, u64) -> Fut,
    Fut: Future<Output = Vec<Duration>> + Send + 'static,
{
    println!("clients | guard | {what}/s | p50 µs | p99 µs   ({rounds} rounds of {secs:?} each, alternating)");
    let mut next_token = 0u64;
    for &n in clients {
        let mut all: [(Vec<Duration>, Duration); 2] = Default::default();
        for _ in 0..rounds {
            for (v, fenced) in [false, true].into_iter().enumerate() {
                let tasks: Vec<_> = (1..=n)
                    .map(|id| tokio::spawn(client(id, fenced, next_token)))
                    .collect();
                next_token += 10_000_000;
                for t in tasks {
                    all[v].0.extend(t.await.unwrap());
                }
                all[v].1 += secs;
            }
        }
        for (v, (lat, spent)) in all.iter_mut().enumerate() {
            lat.sort();
            let tps = lat.len() as f64 / spent.as_secs_f64();
            println!(
                "{n:>7} | {:>5} | {tps:>14.0} | {:>6.0} | {:>6.0}",
                if v == 1 { "on" } else { "off" },
                pct(lat, 0.50),
                pct(lat, 0.99)
            );
        }
    }
}

/// `[SECONDS_PER_ROUND] [ROUNDS]` from the command line (default 2 s, 3 rounds).
pub fn args() -> (Duration, u64) {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    (
        Duration::from_secs(*args.first().unwrap_or(&2)),
        *args.get(1).unwrap_or(&3),
    )
}
