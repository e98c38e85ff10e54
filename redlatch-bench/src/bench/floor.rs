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

use super::server::Probe;
use super::stats::Tally;
use super::{Ctx, Report};

const PAIRS: usize = 3_000;
const WARMUP: usize = 200;

/// The floor's W1 line in the peers run.
pub const LIB: &str = "script-floor";

pub async fn run(ctx: &Ctx) -> Result<Report, String> {
    let mut run = W1Run::warm(ctx, &ctx.urls).await?;
    run.block(PAIRS).await?;
    let mut r = run.report(ctx);
    r.insert("workload".into(), "floor".into());
    r.insert("lib".into(), "redis-rs".into());
    Ok(r)
}

/// The floor's W1 pairs run in blocks ([`Tally`]) on the masters of `urls`, warmed up.
pub struct W1Run {
    conns: Vec<MultiplexedConnection>,
    acquire: Script,
    release: Script,
    name: String,
    channel: String,
    holder: String,
    tally: Tally,
}

impl W1Run {
    pub async fn warm(ctx: &Ctx, urls: &[String]) -> Result<Self, String> {
        let mut conns: Vec<MultiplexedConnection> = Vec::new();
        for url in urls {
            let probe = Probe::open(url.as_str()).await;
            conns.push(probe.map_err(|e| format!("{url}: {e}"))?.conn());
        }
        let name = ctx.key("floor");
        let run = W1Run {
            conns,
            acquire: Script::new(super::ACQUIRE_LUA),
            release: Script::new(super::RELEASE_LUA),
            channel: format!("redisson_lock__channel:{{{name}}}"),
            name,
            holder: format!("{}:1", uuid::Uuid::new_v4()),
            tally: Tally::default(),
        };
        for _ in 0..WARMUP {
            run.pair().await?;
        }
        Ok(run)
    }

    /// `pairs` timed pairs.
    pub async fn block(&mut self, pairs: usize) -> Result<(), String> {
        let mark = self.tally.begin();
        for _ in 0..pairs {
            let t = Instant::now();
            self.pair().await?;
            self.tally.samples.push(t.elapsed());
        }
        self.tally.end(mark);
        Ok(())
    }

    /// A W1 line (`lib` "script-floor").
    pub fn report(mut self, ctx: &Ctx) -> Report {
        let (n, took) = (self.tally.samples.len() as u64, self.tally.took);
        let mut r = ctx.report("W1", n, took, &mut self.tally.samples);
        r.insert("lib".into(), LIB.into());
        r.insert(
            "client_cpu_us_per_pair".into(),
            self.tally.cpu_us_per_pair().into(),
        );
        r
    }

    /// One acquire + release, each done at the first majority of replies.
    async fn pair(&self) -> Result<(), String> {
        let (acquire, release, name) = (&self.acquire, &self.release, &self.name);
        let (channel, holder) = (&self.channel, &self.holder);
        let need = self.conns.len() / 2 + 1;
        let acquired: Vec<_> = FuturesUnordered::from_iter(self.conns.iter().map(|c| {
            let mut c = c.clone();
            async move {
                acquire
                    .key(name)
                    .arg(10_000)
                    .arg(holder)
                    .invoke_async::<String>(&mut c)
                    .await
            }
        }))
        .take(need)
        .collect()
        .await;
        let released: Vec<_> = FuturesUnordered::from_iter(self.conns.iter().map(|c| {
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
        Ok(())
    }
}
