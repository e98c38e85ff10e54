//! The floor under W1: the same acquire + release pair (the project's own scripts,
//! EVALSHA, the same keys and arguments) sent with bare redis-rs multiplexed
//! connections on the same runtime, to every master at once and done at the first
//! majority of replies (as the library is; the other replies are dropped), with none of
//! the library's work (no holds, gate, timeouts or batching). W1 / floor is what the library
//! adds; floor / EVALSHA p50 is what a Rust client on tokio costs here over
//! redis-benchmark's C event loop.

use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::Script;

use super::stats::Samples;
use super::{Ctx, Report};

const PAIRS: usize = 3_000;
const WARMUP: usize = 200;

pub async fn run(ctx: &Ctx) -> Result<Report, String> {
    let mut conns: Vec<MultiplexedConnection> = Vec::new();
    for url in &ctx.urls {
        let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
        conns.push(
            client
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| format!("{url}: {e}"))?,
        );
    }
    let (acquire_src, release_src) = (super::ACQUIRE_LUA, super::RELEASE_LUA);
    let (acquire, release) = (Script::new(acquire_src), Script::new(release_src));
    let name = ctx.key("floor");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let holder = format!("{}:1", uuid::Uuid::new_v4());
    let pair = |conns: Vec<MultiplexedConnection>| {
        let (acquire, release, name, channel, holder) =
            (&acquire, &release, &name, &channel, &holder);
        async move {
            let need = conns.len() / 2 + 1;
            let acquired: Vec<_> = FuturesUnordered::from_iter(conns.iter().map(|c| {
                let mut c = c.clone();
                async move {
                    acquire
                        .key(name)
                        .arg(10_000)
                        .arg(holder)
                        .invoke_async::<(i64, i64)>(&mut c)
                        .await
                }
            }))
            .take(need)
            .collect()
            .await;
            let released: Vec<_> = FuturesUnordered::from_iter(conns.iter().map(|c| {
                let mut c = c.clone();
                async move {
                    release
                        .key(name)
                        .key(redlatch::wire::waiter_registry(name))
                        .arg(channel)
                        .arg("0")
                        .arg(10_000)
                        .arg(holder)
                        .invoke_async::<Option<i64>>(&mut c)
                        .await
                }
            }))
            .take(need)
            .collect()
            .await;
            for r in acquired {
                r.map_err(|e| e.to_string())?;
            }
            for r in released {
                r.map_err(|e| e.to_string())?;
            }
            Ok::<_, String>(())
        }
    };
    for _ in 0..WARMUP {
        pair(conns.clone()).await?;
    }
    let mut samples = Samples::with_capacity(PAIRS);
    let started = Instant::now();
    for _ in 0..PAIRS {
        let t = Instant::now();
        pair(conns.clone()).await?;
        samples.push(t.elapsed());
    }
    let mut r = ctx.report("floor", PAIRS as u64, started.elapsed(), &mut samples);
    r.insert("lib".into(), "redis-rs".into());
    Ok(r)
}
