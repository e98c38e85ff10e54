//! Scheduled jobs beside ShedLock's real Redis `LockProvider` (shedlock-provider-redis-spring
//! 7.10.1 over Spring Data Redis and Lettuce, in a JVM: interop/shedlock/), on one name
//! and a standalone Redis: each side skips while the other runs and runs once it gave the
//! job back; `lockAtLeastFor` / `at_least` holds both ways; `list` and `status` show
//! ShedLock's holder as a job with its host and start; and under contention from both sides no two runs
//! overlap, both sides running. Skipped without java and mvn, unless
//! REDLATCH_REQUIRE_JAVA=1.

use redlatch_testkit as common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::jvm::{self, mono_nanos};
use common::shedlock::ShedLock;
use common::RedisServer;
use redlatch::{Client, Config, JobOutcome, ListedKind};

const MIN: Duration = Duration::from_secs(60);

async fn setup() -> Option<(RedisServer, ShedLock, Client)> {
    if !jvm::available() {
        return None;
    }
    let server = RedisServer::start();
    let java = ShedLock::start(&server.addr(), "default", "job-lock").await;
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    Some((server, java, client))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedlock_and_a_redlatch_job_skip_while_the_other_runs_both_ways() {
    let Some((_server, java, client)) = setup().await else {
        return;
    };
    let job = client.job("billing").at_most(MIN);
    // ShedLock runs: redlatch skips, naming ShedLock's host and start.
    let before = SystemTime::now() - Duration::from_secs(1);
    let held = java
        .lock("billing", MIN, Duration::ZERO)
        .await
        .expect("free");
    let out = job.run(async { unreachable!() }).await.unwrap();
    let JobOutcome::Skipped { holder, until } = out else {
        panic!("{out:?}")
    };
    assert_eq!(
        holder.host.as_deref(),
        Some(java.hostname.as_str()),
        "{holder:?}"
    );
    let since = holder.since.unwrap();
    assert!(since >= before && since <= SystemTime::now(), "{holder:?}");
    assert!(until.unwrap() > SystemTime::now() + Duration::from_secs(50));
    let listing = client.list("job-lock:*").await.unwrap();
    let listed = &listing.locks[0];
    assert_eq!(
        (listed.name.as_str(), listed.kind),
        ("job-lock:default:billing", ListedKind::Job)
    );
    assert_eq!(
        listed.holders[0].holder.host.as_deref(),
        Some(java.hostname.as_str())
    );
    assert!(listed.holders[0].holder.acquired.is_some());
    let status = client
        .simple_lock("job-lock:default:billing")
        .status()
        .await
        .unwrap();
    let who = &status[0].holder_info[0];
    assert_eq!(
        who.host.as_deref(),
        Some(java.hostname.as_str()),
        "{status:?}"
    );
    assert_eq!(who.acquired, listed.holders[0].holder.acquired);
    java.unlock(held).await;
    assert!(
        job.run(async {}).await.unwrap().ran(),
        "runs once ShedLock gave it back"
    );
    // redlatch runs: ShedLock is refused until the run ends.
    let out = job
        .run(async { java.lock("billing", MIN, Duration::ZERO).await })
        .await
        .unwrap();
    assert_eq!(out.value(), Some(None), "ShedLock busy while redlatch runs");
    let again = java.lock("billing", MIN, Duration::ZERO).await;
    assert!(again.is_some(), "ShedLock runs once redlatch gave it back");
    java.unlock(again.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_holds_both_ways() {
    let Some((_server, java, client)) = setup().await else {
        return;
    };
    let keep = Duration::from_millis(1500);
    // ShedLock's lockAtLeastFor keeps redlatch out after a short run.
    let started = std::time::Instant::now();
    let ran = java
        .run("nightly", MIN, keep, Duration::from_millis(10))
        .await;
    assert!(ran.is_some());
    let job = client.job("nightly").at_most(MIN);
    let mut first_run = None;
    for _ in 0..200 {
        if job.run(async {}).await.unwrap().ran() {
            first_run = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_run = first_run.expect("redlatch never ran after ShedLock's lockAtLeastFor");
    assert!(
        first_run >= keep - Duration::from_millis(100),
        "ran {first_run:?} after, at_least {keep:?}"
    );
    // redlatch's at_least keeps ShedLock out the same way.
    let job = client.job("nightly").at_most(MIN).at_least(keep);
    let started = std::time::Instant::now();
    assert!(job.run(async {}).await.unwrap().ran());
    let mut shed = None;
    for _ in 0..200 {
        if let Some(h) = java.lock("nightly", MIN, Duration::ZERO).await {
            shed = Some((started.elapsed(), h));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (after, handle) = shed.expect("ShedLock never ran after redlatch's at_least");
    assert!(
        after >= keep - Duration::from_millis(100),
        "ShedLock in {after:?}, at_least {keep:?}"
    );
    java.unlock(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_from_both_sides_never_overlap() {
    let Some((server, java, _)) = setup().await else {
        return;
    };
    let java = Arc::new(java);
    let rounds = 40;
    let hold = Duration::from_millis(15);
    let mut sides = Vec::new();
    for _ in 0..2 {
        let java = java.clone();
        sides.push(tokio::spawn(async move {
            let mut runs = Vec::new();
            for _ in 0..rounds {
                if let Some(span) = java.run("mixed", MIN, Duration::ZERO, hold).await {
                    runs.push(span);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            runs
        }));
    }
    for _ in 0..2 {
        let client = Client::connect(Config::single(server.url())).await.unwrap();
        sides.push(tokio::spawn(async move {
            let job = client.job("mixed").at_most(MIN);
            let mut runs = Vec::new();
            for _ in 0..rounds {
                let out = job
                    .run(async {
                        let start = mono_nanos();
                        tokio::time::sleep(hold).await;
                        (start, mono_nanos())
                    })
                    .await
                    .unwrap();
                runs.extend(out.value());
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            runs
        }));
    }
    let mut all: Vec<(i64, i64, usize)> = Vec::new();
    for (i, side) in sides.into_iter().enumerate() {
        all.extend(side.await.unwrap().into_iter().map(|(a, b)| (a, b, i / 2)));
    }
    all.sort();
    for pair in all.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "runs overlap: {pair:?}");
    }
    let java_runs = all.iter().filter(|r| r.2 == 0).count();
    let ours = all.len() - java_runs;
    assert!(
        java_runs > 0 && ours > 0,
        "both sides run: ShedLock {java_runs}, redlatch {ours}"
    );
    assert_eq!(
        server.dbsize(),
        1,
        "only redlatch's record is left: {:?}",
        server.lock_keys("*")
    );
}
