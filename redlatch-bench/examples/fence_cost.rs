//! What the PostgreSQL fence costs (BENCHMARKS.md, "The fence's cost"): a single-row
//! UPDATE in a transaction, with and without `redlatch::fence::postgres::fence` before
//! the COMMIT, at 1 and 16 clients (each its own row and resource, a new token per
//! transaction: every check records a token). Rounds alternate the two variants, so
//! both see the same machine; the figures are the A/B in one run.
//!
//! ```sh
//! cargo run --release -p redlatch-bench --example fence_cost -- [SECONDS_PER_ROUND] [ROUNDS]
//! ```
//! Against `$REDLATCH_PG` (a libpq connection string) if set, else a private server
//! started here (redlatch-testkit: fsync and synchronous_commit off, so the figures are
//! the statements' CPU and round trips, not a disk's flushes).

use std::time::{Duration, Instant};

use redlatch::fence::{postgres, Token};
use redlatch_testkit::postgres::PgServer;

const CLIENTS: [usize; 2] = [1, 16];

async fn connect(conn: &str) -> tokio_postgres::Client {
    let (client, c) = tokio_postgres::connect(conn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(c);
    client
}

/// One client's round: transactions for `secs`; their latencies.
async fn client(conn: String, id: i32, fenced: bool, secs: Duration, first: u64) -> Vec<Duration> {
    let mut db = connect(&conn).await;
    let resource = format!("row:{id}");
    let mut lat = Vec::new();
    let end = Instant::now() + secs;
    let mut token = first;
    while Instant::now() < end {
        let t0 = Instant::now();
        let tx = db.transaction().await.unwrap();
        tx.execute("UPDATE bench_row SET n = n + 1 WHERE id = $1", &[&id])
            .await
            .unwrap();
        if fenced {
            token += 1;
            postgres::fence(
                &tx,
                &resource,
                &Token::new("bench", token).with_holder("bench"),
            )
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
        lat.push(t0.elapsed());
    }
    lat
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[i].as_secs_f64() * 1e6
}

#[tokio::main]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let secs = Duration::from_secs(*args.first().unwrap_or(&2));
    let rounds = *args.get(1).unwrap_or(&3);
    let server = match std::env::var("REDLATCH_PG") {
        Ok(_) => None,
        Err(_) => Some(PgServer::start_or_skip("fence_cost").expect("PostgreSQL installed")),
    };
    let conn = std::env::var("REDLATCH_PG").unwrap_or_else(|_| server.as_ref().unwrap().conn_str());
    let setup = connect(&conn).await;
    postgres::migrate(&setup).await.unwrap();
    setup
        .batch_execute(
            "DROP TABLE IF EXISTS bench_row; CREATE TABLE bench_row (id int PRIMARY KEY, n bigint NOT NULL);
             INSERT INTO bench_row SELECT g, 0 FROM generate_series(1, 16) g;
             DELETE FROM redlatch_fence WHERE resource LIKE 'row:%';",
        )
        .await
        .unwrap();
    println!("clients | guard | transactions/s | p50 µs | p99 µs   ({rounds} rounds of {secs:?} each, alternating)");
    let mut next_token = 0u64;
    for n in CLIENTS {
        let mut all: [(Vec<Duration>, Duration); 2] = Default::default();
        for _ in 0..rounds {
            for (v, fenced) in [false, true].into_iter().enumerate() {
                let tasks: Vec<_> = (1..=n as i32)
                    .map(|id| tokio::spawn(client(conn.clone(), id, fenced, secs, next_token)))
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
