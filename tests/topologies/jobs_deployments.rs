//! Scheduled jobs (`Client::job`) beyond one server: on Redis Cluster the lock and its
//! record share a slot; on Sentinel a tick done survives a failover (the record was
//! acknowledged by the replica); under Redlock a run takes a majority of the masters,
//! outvotes a minority held by ShedLock, is refused by a majority, and a tick done on any
//! master is done.

use redlatch_testkit as common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::cluster::{key_slot, shared_cluster};
use common::redlock::config;
use common::sentinel::SentinelSet;
use common::{start_many, RedisServer};
use redlatch::{Client, Config, Error, JobOutcome, SyncReplicas};

const MIN: Duration = Duration::from_secs(60);

fn tick() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_jobs_lock_and_record_share_a_slot() {
    let cluster = shared_cluster();
    let client = Client::connect(Config::cluster(cluster.urls()))
        .await
        .unwrap();
    for name in [
        format!("jc-{}", std::process::id()),
        format!("{{jt{}}}:x", std::process::id()),
    ] {
        let job = client.job(name.clone()).at_most(MIN).tick(tick());
        assert!(job.run(async {}).await.unwrap().ran(), "{name}");
        let key = job.key();
        let record = match key.contains('{') {
            true => format!("redlatch_job:{key}"),
            false => format!("redlatch_job:{{{key}}}"),
        };
        assert_eq!(
            key_slot(record.as_bytes()),
            key_slot(key.as_bytes()),
            "{record}"
        );
        let node = cluster.node(cluster.primary_for_key(&record));
        assert_eq!(node.cmd::<i64>(&["EXISTS", &record]), 1, "{record}");
        let again = job.run(async {}).await.unwrap();
        assert!(matches!(again, JobOutcome::AlreadyDone { .. }), "{again:?}");
        let _: i64 = node.cmd(&["DEL", &record]);
    }
    // A '}' without a '{' would put the record in another slot.
    let e = client
        .job("a}b")
        .at_most(MIN)
        .run(async {})
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidName(_)), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sentinel_a_tick_done_stays_done_across_a_failover() {
    let mut set = SentinelSet::start("jobs");
    let config = Config::sentinel(set.master_name(), set.sentinel_urls())
        .unavailable_timeout(Duration::from_secs(25))
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2));
    let client = Client::connect(config).await.unwrap();
    let job = client.job("failover").at_most(MIN).tick(tick());
    assert!(job.run(async {}).await.unwrap().ran());
    let old = set.kill_primary();
    let new = set.wait_for_switch(&old);
    assert_ne!(old, new);
    let mut outcome = None;
    for _ in 0..200 {
        match job.run(async {}).await {
            Ok(o) => {
                outcome = Some(o);
                break;
            }
            Err(e) => {
                eprintln!("run during the failover: {e} (retrying)");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let outcome = outcome.expect("the job never answered after the failover");
    assert!(
        matches!(outcome, JobOutcome::AlreadyDone { .. }),
        "{outcome:?}"
    );
}

fn shedlock_value() -> String {
    "ADDED:2026-12-02T00:41:07.250Z@java-node:0c1d7a4e-8f9b-4a1e-9a51-2b8e2c7d4f10".into()
}

fn foreign(server: &RedisServer, key: &str) {
    let _: () = server.cmd(&["SET", key, &shedlock_value(), "PX", "60000"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_redlock_a_run_takes_a_majority_and_a_tick_done_anywhere_is_done() {
    let servers = start_many(3);
    let client = Client::connect(config(&servers)).await.unwrap();
    let key = "job-lock:default:rl";
    // ShedLock (which locks one server) holds one master: outvoted, and left alone.
    foreign(&servers[0], key);
    let job = client.job("rl").at_most(MIN);
    let seen = job
        .run(async {
            servers
                .iter()
                .filter(|s| s.cmd::<Option<String>>(&["GET", key]).is_some())
                .count()
        })
        .await
        .unwrap();
    assert_eq!(seen.value(), Some(3), "a majority of ours and ShedLock's");
    assert_eq!(
        servers[0].cmd::<Option<String>>(&["GET", key]),
        Some(shedlock_value())
    );
    assert_eq!(servers[1].cmd::<i64>(&["EXISTS", key]), 0, "released");
    // Two of three held: skipped, and nothing of ours left.
    foreign(&servers[1], key);
    let out = job.run(async { unreachable!() }).await.unwrap();
    let JobOutcome::Skipped { holder, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(holder.host.as_deref(), Some("java-node"));
    assert_eq!(
        servers[2].cmd::<i64>(&["EXISTS", key]),
        0,
        "the minority's grant undone"
    );
    for s in &servers[..2] {
        let _: i64 = s.cmd(&["DEL", key]);
    }
    // A tick recorded as done on one master only is done.
    let ticked = client.job("rl").at_most(MIN).tick(tick());
    assert!(ticked.run(async {}).await.unwrap().ran());
    for s in &servers[1..] {
        let _: i64 = s.cmd(&["DEL", "redlatch_job:{job-lock:default:rl}"]);
    }
    let again = ticked.run(async { unreachable!() }).await.unwrap();
    assert!(matches!(again, JobOutcome::AlreadyDone { .. }), "{again:?}");
    assert!(
        servers.iter().all(|s| s.cmd::<i64>(&["EXISTS", key]) == 0),
        "grants undone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_redlock_a_master_down_leaves_a_majority_to_run_with() {
    let mut servers = start_many(3);
    let client = Client::connect(config(&servers)).await.unwrap();
    servers[2].kill();
    let job = client
        .job("down")
        .at_most(MIN)
        .at_least(Duration::from_secs(5));
    let since = Instant::now();
    let out = job.run(async {}).await.unwrap();
    let JobOutcome::Ran(run) = out else {
        panic!("{out:?}")
    };
    assert!(run.release_error.is_none() && !run.lost, "{run:?}");
    for s in &servers[..2] {
        let ttl: i64 = s.cmd(&["PTTL", "job-lock:default:down"]);
        let what = "kept for at_least on the live majority";
        common::assert_lease_left(ttl, Duration::from_secs(5), since, what);
    }
    servers[1].kill();
    let e = client
        .job("down2")
        .at_most(MIN)
        .run(async { unreachable!() })
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e}");
}
