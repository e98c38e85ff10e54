//! Scheduled jobs given bad input or a Redis that cannot take the lock: bad settings,
//! names and foreign keys, a read-only replica and a server gone, each a typed error
//! with nothing run and nothing taken (part of `jobs`).

use std::time::Duration;

use redlatch::Error;
use redlatch_testkit::RedisServer;

use super::{client, MIN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_and_keys_are_typed_errors() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let run = |j: redlatch::Job| async move { j.run(async {}).await.map(|o| o.label()) };
    let lease = |r: Result<&str, Error>| matches!(r, Err(Error::InvalidLease(_)));
    assert!(lease(run(client.job("j")).await), "at_most is required");
    assert!(lease(run(client.job("j").at_most(Duration::ZERO)).await));
    assert!(lease(
        run(client.job("j").at_most(Duration::from_secs(400 * 86_400))).await
    ));
    assert!(lease(
        run(client.job("j").at_most(MIN).at_least(2 * MIN)).await
    ));
    assert!(lease(
        run(client.job("j").at_most(MIN).once_per(Duration::ZERO)).await
    ));
    assert!(lease(
        run(client
            .job("j")
            .at_most(MIN)
            .once_per(Duration::from_secs(u64::MAX)))
        .await
    ));
    assert!(lease(
        run(client.job("j").at_most(MIN).wait(Duration::MAX)).await
    ));
    let name = |r: Result<&str, Error>| matches!(r, Err(Error::InvalidName(_)));
    assert!(name(run(client.job("").at_most(MIN)).await));
    assert!(name(run(client.job("x".repeat(70_000)).at_most(MIN)).await));
    // A foreign hash at the job's key, and at its record.
    let _: () = server.cmd(&["HSET", "job-lock:default:h", "a", "1"]);
    let e = run(client.job("h").at_most(MIN)).await.unwrap_err();
    assert!(
        matches!(&e, Error::WrongType { name, .. } if name == "job-lock:default:h"),
        "{e}"
    );
    let _: () = server.cmd(&["SET", "redlatch_job:{job-lock:default:r}", "x"]);
    let e = run(client.job("r").at_most(MIN)).await.unwrap_err();
    assert!(matches!(e, Error::WrongType { .. }), "{e}");
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "job-lock:default:r"]),
        0,
        "nothing taken"
    );
    assert_eq!(
        server.cmd::<String>(&["TYPE", "job-lock:default:h"]),
        "hash",
        "left alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_read_only_or_down_is_an_error_and_nothing_runs() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let mut replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let ro = client(&replica).await;
    let e = ro
        .job("ro")
        .at_most(MIN)
        .run(async { unreachable!() })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("read only replica"), "{e}");
    replica.kill();
    let e = ro
        .job("ro")
        .at_most(MIN)
        .run(async { unreachable!() })
        .await
        .unwrap_err();
    assert!(e.is_unavailable(), "{e}");
}
