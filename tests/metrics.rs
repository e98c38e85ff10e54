//! The `metrics` feature: counters and histograms after a contended run, read back in
//! Prometheus text format (as examples/prometheus.rs exports them).
//!
//! One test only: the recorder is process-global and the counters are not per lock
//! (its last phase, lock names as labels, counts what it adds to the unlabelled series).
#![cfg(feature = "metrics")]

use redlatch_testkit as common;

use std::time::Duration;

use common::{eventually_async, RedisServer};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redlatch::{Client, Config};

/// The value of the sample `series` (name with labels, as rendered), 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            (name == series).then(|| value.parse().unwrap())
        })
        .unwrap_or(0.0)
}

fn render(handle: &PrometheusHandle) -> String {
    handle.run_upkeep();
    handle.render()
}

/// Tasks that take the lock of [`contend`].
const CONTENDERS: usize = 4;
/// How many times each of them takes it.
const ROUNDS: usize = 5;

/// [`CONTENDERS`] tasks take one lock [`ROUNDS`] times each, holding it a little: they
/// contend.
async fn contend(client: &Client) {
    let tasks: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            let lock = client.lock("metrics:contended");
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    guard.unlock().await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// The counters and histograms after the run: `acquired` plain acquisitions (each
/// waited for), contention and wake-ups, one time-out, one fair hold, one lost, every
/// hold ended, an error on `server`.
fn assert_counts(text: &str, server: &RedisServer, acquired: f64) {
    let plain = |name: &str| sample(text, &format!("{name}{{kind=\"plain\"}}"));
    assert_eq!(plain("redlatch_acquired_total"), acquired, "{text}");
    assert_eq!(
        plain("redlatch_acquire_wait_seconds_count"),
        acquired,
        "{text}"
    );
    assert!(plain("redlatch_contended_total") >= 1.0, "{text}");
    assert!(plain("redlatch_woken_total") >= 1.0, "{text}");
    assert_eq!(plain("redlatch_timed_out_total"), 1.0, "{text}");
    assert_eq!(
        sample(text, "redlatch_acquired_total{kind=\"fair\"}"),
        1.0,
        "{text}"
    );
    assert_eq!(sample(text, "redlatch_lost_total"), 1.0, "{text}");
    // Every hold ended: the plain ones released, the fair one lost.
    assert_eq!(
        sample(text, "redlatch_hold_seconds_count"),
        acquired + 1.0,
        "{text}"
    );
    let errors = format!("redlatch_errors_total{{master=\"{}\"}}", server.addr());
    assert!(sample(text, &errors) >= 1.0, "{text}");
    assert!(text.contains("# HELP redlatch_acquired_total"), "{text}");
}

/// Replica sync: per primary, how many replicas each acquisition waited for.
async fn replicas_waited(handle: &PrometheusHandle, server: &RedisServer) {
    let port = server.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let up = eventually_async(Duration::from_secs(10), || {
        let info: String = replica.cmd(&["INFO", "replication"]);
        info.contains("master_link_status:up")
    })
    .await;
    assert!(up, "the replica never synced");
    server.set_replicated("metrics:warm", "1", 1);
    let synced = Client::connect(Config::single(server.url())).await.unwrap();
    let g = synced.lock("metrics:synced").lock().await.unwrap();
    g.unlock().await.unwrap();
    let text = render(handle);
    let primary = format!("{{primary=\"{}\"}}", server.addr());
    let count = sample(&text, &format!("redlatch_replicas_waited_count{primary}"));
    let sum = sample(&text, &format!("redlatch_replicas_waited_sum{primary}"));
    assert!(count >= 1.0, "{text}");
    assert!(
        sum >= 1.0,
        "the acquisition did not wait for the replica: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_histograms_after_a_contended_run() {
    let handle = PrometheusBuilder::new().install_recorder().unwrap();
    let server = RedisServer::start();
    // Renewed every 0.5 s: no hold is lost to a renewal a loaded machine delays.
    let config = Config::single(server.url()).watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(config).await.unwrap();

    // Four tasks take one lock five times each, holding it a little: they contend.
    contend(&client).await;
    // The other client's lock below counts too: the recorder is the process's.
    let acquired = (CONTENDERS * ROUNDS + 1) as f64;

    // One try_lock that gives up, on a lock held by another client.
    let other = Client::connect(Config::single(server.url())).await.unwrap();
    let held = other.lock("metrics:busy").lock().await.unwrap();
    let busy = client.lock("metrics:busy");
    assert!(busy
        .try_lock(Duration::from_millis(20))
        .await
        .unwrap()
        .is_none());

    // A hold the watchdog renews, then loses when its key is deleted.
    let kept = client.fair_lock("metrics:kept").lock().await.unwrap();
    let renewed = eventually_async(Duration::from_secs(10), || {
        sample(&render(&handle), "redlatch_renewals_total") >= 1.0
    })
    .await;
    assert!(renewed, "{}", render(&handle));
    server.cmd::<i64>(&["DEL", "metrics:kept"]);
    tokio::time::timeout(Duration::from_secs(10), kept.lost().cancelled())
        .await
        .expect("the watchdog reports the deleted lock lost");

    // Errors are counted per master: a lock on a key of another type fails there.
    server.cmd::<String>(&["SET", "metrics:string", "x"]);
    assert!(client.lock("metrics:string").lock().await.is_err());

    held.unlock().await.unwrap();
    let text = render(&handle);
    assert_counts(&text, &server, acquired);
    // Gauges (issue 26): every hold ended and no call waits; the client subscribed to
    // channels while it waited.
    assert_eq!(sample(&text, "redlatch_held_locks"), 0.0, "{text}");
    assert_eq!(sample(&text, "redlatch_waiters"), 0.0, "{text}");
    assert!(text.contains("redlatch_subscriptions{master="), "{text}");
    let one = client.lock("metrics:gauge").lock().await.unwrap();
    assert_eq!(sample(&render(&handle), "redlatch_held_locks"), 1.0);
    one.unlock().await.unwrap();
    assert_eq!(sample(&render(&handle), "redlatch_held_locks"), 0.0);

    replicas_waited(&handle, &server).await;

    by_name(&handle, &server).await;
    jobs(&handle, &server).await;
}

/// Scheduled jobs: runs by outcome, missed ticks, overruns and run durations; a job
/// name `metrics_names` allows gets its own `job` series. (Only this phase runs jobs.)
async fn jobs(handle: &PrometheusHandle, server: &RedisServer) {
    let config = Config::single(server.url()).metrics_names(["metrics:job:named"]);
    let client = Client::connect(config).await.unwrap();
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let min = Duration::from_secs(60);
    let job = |t| client.job("metrics:job").at_most(min).tick(t);
    // A run that dies (forgotten) leaves its tick missed.
    assert!(job(at).run(async {}).await.unwrap().ran());
    let short = client
        .job("metrics:job")
        .at_most(Duration::from_millis(100));
    let dying = short.tick(at + Duration::from_secs(60));
    let mut dying = Box::pin(dying.run(std::future::pending::<()>()));
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut dying)
        .await
        .is_err());
    std::mem::forget(dying);
    let overrun = client
        .job("metrics:job")
        .at_most(Duration::from_millis(100));
    let out = overrun.tick(at + Duration::from_secs(120));
    let out = out
        .run(tokio::time::sleep(Duration::from_millis(250)))
        .await
        .unwrap();
    assert!(out.ran());
    assert_eq!(job(at).run(async {}).await.unwrap().label(), "already_done");
    let named = client.job("metrics:job:named").at_most(min);
    let held = named
        .run(async { named.run(async {}).await.unwrap().label() })
        .await
        .unwrap();
    assert_eq!(held.value(), Some("skipped"));
    let fragile = client.job("metrics:job:p").at_most(min);
    let panicked = fragile.run(async { panic!("x") }).await.unwrap();
    assert_eq!(panicked.label(), "panicked");
    let text = render(handle);
    let runs = |o: &str| {
        sample(
            &text,
            &format!("redlatch_job_runs_total{{outcome=\"{o}\"}}"),
        )
    };
    // The forgotten run counts as nothing: its process "died".
    assert_eq!(runs("ran"), 2.0, "{text}");
    assert_eq!(runs("already_done"), 1.0, "{text}");
    assert_eq!(runs("panicked"), 1.0, "{text}");
    let named_runs = |o: &str| {
        let series =
            format!("redlatch_job_runs_total{{outcome=\"{o}\",job=\"metrics:job:named\"}}");
        sample(&text, &series)
    };
    assert_eq!(
        (named_runs("ran"), named_runs("skipped")),
        (1.0, 1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "redlatch_job_missed_total"), 1.0, "{text}");
    assert_eq!(sample(&text, "redlatch_job_overruns_total"), 1.0, "{text}");
    assert_eq!(
        sample(&text, "redlatch_job_run_seconds_count"),
        3.0,
        "{text}"
    );
}

/// `Config::metrics_names`: the allowed names (exact, or by a `*` prefix) get their own
/// `lock` series of the acquisition counter and the wait and hold histograms; any
/// other name adds to the unlabelled series, and nothing names it.
async fn by_name(handle: &PrometheusHandle, server: &RedisServer) {
    let bad = Config::single(server.url()).metrics_names(["metrics:*:x"]);
    let Err(err) = Client::connect(bad).await else {
        panic!("a '*' inside is refused")
    };
    assert!(matches!(err, redlatch::Error::Config { .. }), "{err:?}");
    assert!(err.to_string().contains("metrics_names"), "{err}");

    let before = render(handle);
    let unlabelled = |text: &str| {
        (
            sample(text, "redlatch_acquired_total{kind=\"plain\"}"),
            sample(text, "redlatch_acquire_wait_seconds_count{kind=\"plain\"}"),
            sample(text, "redlatch_hold_seconds_count"),
        )
    };
    let (acq, wait, hold) = unlabelled(&before);
    let config = Config::single(server.url()).metrics_names(["metrics:named:hot", "metrics:pfx:*"]);
    let client = Client::connect(config).await.unwrap();
    for name in [
        "metrics:named:hot",
        "metrics:named:hot",
        "metrics:pfx:a",
        "metrics:named:cold",
    ] {
        let guard = client.lock(name).lock().await.unwrap();
        guard.unlock().await.unwrap();
    }
    let text = render(handle);
    let labelled = |lock: &str| {
        let with_kind = format!("{{kind=\"plain\",lock=\"{lock}\"}}");
        (
            sample(&text, &format!("redlatch_acquired_total{with_kind}")),
            sample(
                &text,
                &format!("redlatch_acquire_wait_seconds_count{with_kind}"),
            ),
            sample(
                &text,
                &format!("redlatch_hold_seconds_count{{lock=\"{lock}\"}}"),
            ),
        )
    };
    assert_eq!(labelled("metrics:named:hot"), (2.0, 2.0, 2.0), "{text}");
    assert_eq!(labelled("metrics:pfx:a"), (1.0, 1.0, 1.0), "{text}");
    // The name not allowed is in the unlabelled series, and named nowhere.
    assert_eq!(
        unlabelled(&text),
        (acq + 1.0, wait + 1.0, hold + 1.0),
        "{text}"
    );
    assert!(!text.contains("metrics:named:cold"), "{text}");
    // The first client allowed no name: none of its locks is a label.
    assert!(!text.contains("metrics:contended"), "{text}");
    client.close(Duration::from_secs(5)).await;
}
