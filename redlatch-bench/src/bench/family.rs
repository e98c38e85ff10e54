//! The lock family's workloads: read-lock throughput (R1: 64 readers on one name),
//! semaphore acquire/release pairs (S1: 64 tasks, 64 permits), and the wait of writers
//! under a steady stream of readers (RW), with and without writer preference.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::simple::pairs;
use super::stats::Samples;
use super::{Ctx, Report};

const TASKS: usize = 64;
const LEASE: Duration = Duration::from_secs(10);
/// RW: readers whose holds overlap, so the lock is never free on its own.
const RW_READERS: usize = 16;
const RW_READ_HOLD: Duration = Duration::from_millis(5);
/// RW: how long one writer attempt may wait before it counts as starved.
const RW_WRITER_WAIT: Duration = Duration::from_secs(2);

/// R1: 64 tasks take and release the read lock of one name for the run time.
pub async fn r1(ctx: &Ctx) -> redlatch::Result<Report> {
    let rw = ctx.client.read_write_lock(ctx.key("r1"));
    let started = Instant::now();
    let ops = (0..TASKS).map(|_| {
        let read = rw.read();
        move || {
            let read = read.clone();
            async move { read.lock_with_lease(LEASE).await?.unlock().await }
        }
    });
    let mut all = pairs(started + ctx.duration, ops.collect()).await?;
    let mut r = ctx.report("R1", all.len() as u64, started.elapsed(), &mut all);
    r.insert("tasks".into(), json!(TASKS));
    Ok(r)
}

/// S1: 64 tasks acquire and release one permit each of a 64-permit semaphore.
pub async fn s1(ctx: &Ctx) -> redlatch::Result<Report> {
    let sem = ctx.client.semaphore(ctx.key("s1"));
    if let Err(e) = sem.set_permits(TASKS as i64).await {
        if matches!(e, redlatch::Error::Unsupported { .. }) {
            let mut r = ctx.report("S1", 0, Duration::ZERO, &mut Samples::default());
            r.insert("skipped".into(), json!(e.to_string()));
            return Ok(r);
        }
        return Err(e);
    }
    let started = Instant::now();
    let ops = (0..TASKS).map(|_| {
        let sem = sem.clone();
        move || {
            let sem = sem.clone();
            async move { sem.acquire().await?.release().await }
        }
    });
    let mut all = pairs(started + ctx.duration, ops.collect()).await?;
    let mut r = ctx.report("S1", all.len() as u64, started.elapsed(), &mut all);
    r.insert("tasks".into(), json!(TASKS));
    r.insert("permits".into(), json!(TASKS));
    Ok(r)
}

/// RW: 16 readers keep the read lock of one name busy (5 ms holds that overlap) while
/// one writer takes the write lock over and over; reports the writer's waits (p50/p99,
/// attempts that waited 2 s in vain as `starved`), with writer preference (`RW`) and
/// with Redisson's semantics (`RW-nopref`).
pub async fn rw(ctx: &Ctx, prefer: bool) -> redlatch::Result<Report> {
    let name = ctx.key(if prefer { "rw" } else { "rw-nopref" });
    let stop = Arc::new(AtomicBool::new(false));
    let readers_client = ctx.connect_with(|c| c).await?;
    let readers: Vec<_> = (0..RW_READERS)
        .map(|i| {
            let read = readers_client.read_write_lock(name.clone()).read();
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RW_READ_HOLD * i as u32 / RW_READERS as u32).await;
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = read.lock_with_lease(LEASE).await?;
                    tokio::time::sleep(RW_READ_HOLD).await;
                    g.unlock().await?;
                    reads += 1;
                }
                Ok::<_, redlatch::Error>(reads)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rw = ctx.client.read_write_lock(name).prefer_writers(prefer);
    let write = rw.write();
    let (mut waits, mut starved) = (Samples::default(), 0u64);
    let started = Instant::now();
    let until = started + ctx.duration;
    while Instant::now() < until {
        let t = Instant::now();
        match write.try_lock_with_lease(RW_WRITER_WAIT, LEASE).await? {
            Some(g) => {
                waits.push(t.elapsed());
                tokio::time::sleep(Duration::from_millis(1)).await;
                g.unlock().await?;
            }
            None => starved += 1,
        }
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        reads += r.await.expect("bench task panicked")?;
    }
    let workload = if prefer { "RW" } else { "RW-nopref" };
    let mut r = ctx.report(workload, waits.len() as u64, took, &mut waits);
    r.insert("writer_wait_p50_us".into(), json!(waits.percentile(50.0)));
    r.insert("writer_wait_p99_us".into(), json!(waits.percentile(99.0)));
    r.insert("starved".into(), json!(starved));
    r.insert("reads".into(), json!(reads));
    r.insert("readers".into(), json!(RW_READERS));
    Ok(r)
}
