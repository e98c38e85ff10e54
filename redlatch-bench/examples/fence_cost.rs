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

mod fence_ab;

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

#[tokio::main]
async fn main() {
    let (secs, rounds) = fence_ab::args();
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
    fence_ab::alternate(
        &CLIENTS,
        rounds,
        secs,
        "transactions",
        |id, fenced, first| client(conn.clone(), id as i32, fenced, secs, first),
    )
    .await;
}
