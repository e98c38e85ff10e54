//! Scheduled jobs (`Client::job`, docs/jobs.md) against a real redis-server: the lock
//! is ShedLock's string key and value, released or kept for `at_least`; a tick recorded
//! as done is never run again; a held job is skipped naming its holder (a ShedLock
//! value written as ShedLock writes it); a run that dies leaves its tick missed for the
//! next; panics and cancellations give the lock back; `wait` and `keep_alive`; the
//! record beside the lock; `list` and `jobs`; and the bad inputs, each a typed error.

use redlatch_testkit as common;

use std::future::pending;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::RedisServer;
use redlatch::{Client, Config, JobOutcome, ListedKind};

mod errors;

async fn client(server: &RedisServer) -> Client {
    Client::connect(Config::single(server.url())).await.unwrap()
}

fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.cmd(&["PTTL", key])
}

const MIN: Duration = Duration::from_secs(60);

/// A ShedLock value as ShedLock 5+ writes it.
fn shedlock_value(host: &str, at: &str) -> String {
    format!("ADDED:{at}@{host}:0c1d7a4e-8f9b-4a1e-9a51-2b8e2c7d4f10")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_holds_shedlocks_key_and_value_for_at_most_and_release_deletes_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let job = client.job("report").at_most(MIN);
    assert_eq!(job.key(), "job-lock:default:report");
    let seen = job
        .run(async {
            let value: String = server.cmd(&["GET", "job-lock:default:report"]);
            (value, pttl(&server, "job-lock:default:report"))
        })
        .await
        .unwrap();
    let JobOutcome::Ran(run) = seen else {
        panic!("{seen:?}")
    };
    assert!(
        !run.overrun && !run.lost && run.release_error.is_none(),
        "{run:?}"
    );
    let (value, ttl) = run.value;
    assert!(
        value.starts_with("ADDED:") && value.contains('@'),
        "{value}"
    );
    assert!(ttl > 50_000 && ttl <= 60_000, "PX at_most: {ttl}");
    let exists: i64 = server.cmd(&["EXISTS", "job-lock:default:report"]);
    assert_eq!(exists, 0, "released by a compare-and-delete");
    // Prefix and env as ShedLock's RedisLockProvider(factory, env, prefix).
    let other = client
        .job("report")
        .prefix("locks")
        .env("prod")
        .at_most(MIN);
    assert_eq!(other.key(), "locks:prod:report");
    assert!(other.run(async {}).await.unwrap().ran());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_keeps_the_lock_after_a_short_run_so_other_nodes_skip() {
    let server = RedisServer::start();
    let a = Client::connect(Config::single(server.url()).app("billing"))
        .await
        .unwrap();
    let b = client(&server).await;
    let job = |c: &Client| {
        c.job("nightly")
            .at_most(MIN)
            .at_least(Duration::from_secs(5))
    };
    let since = Instant::now();
    assert!(job(&a).run(async {}).await.unwrap().ran());
    let ttl = pttl(&server, "job-lock:default:nightly");
    let what = "kept for what is left of at_least";
    common::assert_lease_left(ttl, Duration::from_secs(5), since, what);
    let skipped = job(&b).run(async { unreachable!() }).await.unwrap();
    let JobOutcome::Skipped { holder, until } = skipped else {
        panic!("{skipped:?}")
    };
    assert!(
        holder.host.is_some() && holder.since.is_some(),
        "{holder:?}"
    );
    assert_eq!(
        holder.app.as_deref(),
        Some("billing"),
        "the record names the app"
    );
    assert!(until.unwrap() > SystemTime::now());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shedlock_holder_is_skipped_with_its_host_and_start() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let value = shedlock_value("java-node-3", "2026-12-02T00:41:07.250Z");
    let _: () = server.cmd(&[
        "SET",
        "job-lock:default:export",
        &value,
        "NX",
        "PX",
        "30000",
    ]);
    let out = client
        .job("export")
        .at_most(MIN)
        .run(async {})
        .await
        .unwrap();
    let JobOutcome::Skipped { holder, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(holder.value, value);
    assert_eq!(holder.host.as_deref(), Some("java-node-3"));
    assert_eq!(holder.app, None);
    let since = holder.since.unwrap().duration_since(UNIX_EPOCH).unwrap();
    assert_eq!(since.as_millis(), 1_796_172_067_250);
    // list shows it as a job, with its host and start.
    let listing = client.list("job-lock:*").await.unwrap();
    let job = &listing.locks[0];
    assert_eq!(job.kind, ListedKind::Job);
    assert_eq!(job.holders[0].holder.host.as_deref(), Some("java-node-3"));
    assert_eq!(job.holders[0].holder.acquired, Some(1_796_172_067_250));
    let states = client
        .jobs("job-lock:*", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].name, "export");
    assert_eq!(
        states[0].running.as_ref().unwrap().host.as_deref(),
        Some("java-node-3")
    );
    assert!(states[0].last.is_none(), "ShedLock keeps no record");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_runs_once_whichever_of_many_nodes_fires_it_and_is_done_after() {
    let server = RedisServer::start();
    let tick = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let mut nodes = Vec::new();
    for _ in 0..8 {
        let c = client(&server).await;
        nodes.push(tokio::spawn(async move {
            let job = c.job("tick").at_most(MIN).tick(tick);
            job.run(tokio::time::sleep(Duration::from_millis(50)))
                .await
                .unwrap()
                .label()
        }));
    }
    let mut labels = Vec::new();
    for n in nodes {
        labels.push(n.await.unwrap());
    }
    assert_eq!(
        labels.iter().filter(|l| **l == "ran").count(),
        1,
        "{labels:?}"
    );
    // A node whose clock lags arrives after the run: told it is done, not run again.
    let late = client(&server).await;
    let again = late
        .job("tick")
        .at_most(MIN)
        .tick(tick)
        .run(async {})
        .await
        .unwrap();
    assert!(
        matches!(again, JobOutcome::AlreadyDone { tick: t } if t == tick),
        "{again:?}"
    );
    // So is an earlier tick; the next one runs.
    let earlier = tick - Duration::from_secs(60);
    let out = late
        .job("tick")
        .at_most(MIN)
        .tick(earlier)
        .run(async {})
        .await
        .unwrap();
    assert!(matches!(out, JobOutcome::AlreadyDone { .. }), "{out:?}");
    let next = late
        .job("tick")
        .at_most(MIN)
        .tick(tick + Duration::from_secs(60));
    assert!(next.run(async {}).await.unwrap().ran());
    let state = next.state().await.unwrap();
    assert_eq!(state.done, Some(tick + Duration::from_secs(60)));
    assert_eq!(state.runs, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_dies_leaves_its_tick_missed_for_the_next_run() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let period = Duration::from_secs(3600);
    let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000 / 3600 * 3600);
    let job = |t| {
        client
            .job("hourly")
            .at_most(Duration::from_millis(300))
            .tick(t)
    };
    assert!(job(t0).run(async {}).await.unwrap().ran());
    // The run of t0+1h begins, then its process "dies": the future is forgotten, so
    // nothing is released and the lease runs out.
    let (began, mut begun) = tokio::sync::mpsc::channel::<()>(1);
    let dying_job = job(t0 + period);
    let mut dying = Box::pin(dying_job.run(async move {
        began.send(()).await.unwrap();
        pending::<()>().await
    }));
    tokio::select! {
        _ = &mut dying => unreachable!(),
        _ = begun.recv() => {}
    }
    std::mem::forget(dying);
    // The next tick's run waits out the dead run's lease.
    let next = client.job("hourly").at_most(MIN).tick(t0 + 2 * period);
    let out = next
        .wait(Duration::from_secs(10))
        .run(async {})
        .await
        .unwrap();
    let JobOutcome::Ran(run) = out else {
        panic!("{out:?}")
    };
    assert_eq!(run.missed.count, 1, "{run:?}");
    assert_eq!(run.missed.ticks, [t0 + period]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_period_every_tick_since_the_last_completed_one_is_missed() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let period = Duration::from_millis(100);
    let job = client.job("often").at_most(MIN).once_per(period);
    let first = job.run(async {}).await.unwrap();
    assert!(first.ran(), "{first:?}");
    tokio::time::sleep(Duration::from_millis(450)).await;
    let JobOutcome::Ran(run) = job.run(async {}).await.unwrap() else {
        panic!()
    };
    assert!((3..=5).contains(&run.missed.count), "{run:?}");
    assert_eq!(run.missed.ticks.len() as u64, run.missed.count);
    let state = job.state().await.unwrap();
    assert_eq!(state.period, Some(period));
    assert_eq!(state.last.unwrap().missed, run.missed.count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_run_gives_the_lock_back_after_at_least_and_leaves_its_tick_undone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let tick = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let job = client
        .job("fragile")
        .at_most(MIN)
        .at_least(Duration::from_secs(3))
        .tick(tick);
    let since = Instant::now();
    let out = job.run(async { panic!("disk full") }).await.unwrap();
    let JobOutcome::Panicked(run) = out else {
        panic!("{out:?}")
    };
    assert_eq!(run.value, "disk full");
    let ttl = pttl(&server, "job-lock:default:fragile");
    common::assert_lease_left(ttl, Duration::from_secs(3), since, "kept for at_least");
    let state = job.state().await.unwrap();
    assert_eq!(state.done, None, "a panicked tick is not done");
    assert_eq!(state.last.unwrap().outcome, "panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_gives_the_lock_back_and_is_recorded() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let job = client.job("cancelled").at_most(MIN);
    let cut = tokio::time::timeout(Duration::from_millis(200), job.run(pending::<()>())).await;
    assert!(cut.is_err());
    let mut state = job.state().await.unwrap();
    for _ in 0..100 {
        if state.running.is_none() && state.last.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        state = job.state().await.unwrap();
    }
    assert!(state.running.is_none(), "{state:?}");
    assert_eq!(state.last.unwrap().outcome, "cancelled");
    assert!(job.run(async {}).await.unwrap().ran());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_runs_after_the_current_run_or_finds_its_tick_done() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let hold = Duration::from_millis(300);
    let first = tokio::spawn({
        let a = a.clone();
        async move {
            a.job("w")
                .at_most(MIN)
                .run(tokio::time::sleep(hold))
                .await
                .unwrap()
                .label()
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let skip = b.job("w").at_most(MIN).run(async {}).await.unwrap();
    assert_eq!(skip.label(), "skipped");
    let waited = b
        .job("w")
        .at_most(MIN)
        .wait(Duration::from_secs(10))
        .run(async {})
        .await;
    assert_eq!(waited.unwrap().label(), "ran");
    assert_eq!(first.await.unwrap(), "ran");
    // With a tick, the waiter finds it done by the run it waited for.
    let tick = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let first = tokio::spawn({
        let a = a.clone();
        async move {
            a.job("wt")
                .at_most(MIN)
                .tick(tick)
                .run(tokio::time::sleep(hold))
                .await
                .unwrap()
                .label()
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let waited = b
        .job("wt")
        .at_most(MIN)
        .tick(tick)
        .wait(Duration::from_secs(10))
        .run(async {})
        .await;
    assert_eq!(waited.unwrap().label(), "already_done");
    assert_eq!(first.await.unwrap(), "ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_lets_a_run_outlive_at_most_and_without_it_the_overrun_is_reported() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let lease = Duration::from_millis(300);
    let long = a.job("long").at_most(lease).keep_alive(true);
    let run = long.run(async {
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let other = b.job("long").at_most(lease).run(async {}).await.unwrap();
            assert_eq!(other.label(), "skipped", "kept alive past at_most");
        }
    });
    let JobOutcome::Ran(r) = run.await.unwrap() else {
        panic!()
    };
    assert!(!r.overrun && !r.lost, "{r:?}");
    let short = a.job("short").at_most(lease);
    let out = short.run(tokio::time::sleep(Duration::from_millis(600)));
    let JobOutcome::Ran(r) = out.await.unwrap() else {
        panic!()
    };
    assert!(r.overrun && r.lost, "{r:?}");
}

#[test]
fn the_blocking_job_runs_a_closure_once_per_tick() {
    let server = RedisServer::start();
    let client = redlatch::blocking::Client::connect(Config::single(server.url())).unwrap();
    let tick = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let job = client.job("b").at_most(MIN).tick(tick);
    assert_eq!(job.run(|| 1).unwrap().value(), Some(1));
    assert_eq!(job.run(|| 2).unwrap().label(), "already_done");
    let out = client.job("p").at_most(MIN).run(|| panic!("boom")).unwrap();
    assert_eq!(out.label(), "panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_a_waiting_run_through_the_simple_locks_wake_channel() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let channel = "redisson_lock__channel:{job-lock:default:wk}:redlatch-simple";
    // Someone else listening too: the release's "0" is on the wire.
    let mut conn = server.conn();
    let mut listener = conn.as_pubsub();
    listener.subscribe(channel).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn(async move {
        let job = a.job("wk").at_most(MIN);
        job.run(async { released.await.unwrap() })
            .await
            .unwrap()
            .label()
    });
    // The holder runs first (spawned tasks start in no set order: a waiter that won the
    // race would run at once and never listen).
    let held = common::eventually_async(Duration::from_secs(30), || {
        server.cmd::<i64>(&["EXISTS", "job-lock:default:wk"]) == 1
    })
    .await;
    assert!(held, "the holder never took the job's lock");
    let waiter = tokio::spawn(async move {
        let job = b.job("wk").at_most(MIN).wait(Duration::from_secs(60));
        job.run(async {}).await.unwrap().label()
    });
    // The waiting run listens (besides our listener) once refused.
    let listening = common::eventually_async(Duration::from_secs(30), || {
        common::numsub(&server, channel) == 2
    })
    .await;
    assert!(listening, "the waiting run never subscribed");
    release.send(()).unwrap();
    let msg = listener.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), "0");
    assert_eq!(holder.await.unwrap(), "ran");
    assert_eq!(waiter.await.unwrap(), "ran");
}
