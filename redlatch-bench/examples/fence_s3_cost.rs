//! What the S3 fence costs (BENCHMARKS.md, "The S3 fence's cost"): a small object PUT
//! with and without `redlatch::fence::s3::S3Fence::put`'s check (`put_unfenced` is the
//! same signed PUT with no `HEAD` and no condition), at 1 and 16 clients (each its own
//! object, a new token per write). Rounds alternate the two variants, so both see the
//! same machine; the figures are the A/B in one run.
//!
//! ```sh
//! cargo run -p redlatch-bench --example fence_s3_cost -- [SECONDS_PER_ROUND] [ROUNDS]
//! ```
//! Against a private moto server started here (redlatch-testkit; authentication on, so
//! every request's signature is checked): the figures are round trips to a Python
//! server, not S3's; the ratio is what carries over.

use std::time::{Duration, Instant};

use redlatch::fence::s3::S3Fence;
use redlatch::fence::Token;
use redlatch_testkit::moto::MotoServer;

mod fence_ab;

const CLIENTS: [usize; 2] = [1, 16];

/// One client's round: writes for `secs`; their latencies.
async fn client(
    fence: S3Fence,
    id: usize,
    fenced: bool,
    secs: Duration,
    first: u64,
) -> Vec<Duration> {
    let key = format!("bench/{id}");
    let mut lat = Vec::new();
    let end = Instant::now() + secs;
    let mut token = first;
    while Instant::now() < end {
        token += 1;
        let t = Token::new("bench", token).with_holder("bench");
        let body = format!("row {id} token {token}");
        let t0 = Instant::now();
        match fenced {
            true => fence.put(&key, body, &t).await.map(|_| ()),
            false => fence.put_unfenced(&key, body, &t).await.map(|_| ()),
        }
        .unwrap();
        lat.push(t0.elapsed());
    }
    lat
}

#[tokio::main]
async fn main() {
    let (secs, rounds) = fence_ab::args();
    let server = MotoServer::start_or_skip("fence_s3_cost").expect("moto installed");
    let fence = server.fence();
    fence_ab::alternate(&CLIENTS, rounds, secs, "writes", |id, fenced, first| {
        client(fence.clone(), id, fenced, secs, first)
    })
    .await;
}
