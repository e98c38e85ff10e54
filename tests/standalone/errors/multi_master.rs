//! Several masters failing: a Redis Cluster that is down keeps a call's bound and says
//! CLUSTERDOWN; a Redlock quorum error keeps every master's own error (part of `errors`).

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error};

/// The error and, under a quorum error, its first master's.
fn cause(err: &Error) -> &Error {
    match err {
        Error::NoQuorum { errors, .. } if !errors.is_empty() => cause(&errors[0].error),
        e => e,
    }
}

/// Slack over a bound for scheduling on a loaded machine (2 cores, other builds).
const SLACK: Duration = Duration::from_millis(1500);

/// A Redis Cluster that lost a primary and its replica answers CLUSTERDOWN on every
/// node: a bounded call keeps its bound (its wait, or `unavailable_timeout`, plus one
/// master timeout) and fails with `ClusterDown` naming the node, not "timed out".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_is_down_says_so_within_the_bound() {
    let mut cluster = common::cluster::RedisCluster::start(3, 1);
    let primaries = cluster.primaries();
    let (gone, up) = (primaries[0], primaries[1]);
    let name = cluster.key_on(up, "down-");
    let master_timeout = Duration::from_millis(500);
    let unavailable = Duration::from_secs(2);
    let config = Config::cluster(vec![cluster.node(up).url()])
        .master_timeout(master_timeout)
        .unavailable_timeout(unavailable);
    let client = Client::connect(config).await.unwrap();
    client
        .lock(name.clone())
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    cluster.take_down_shard(gone);
    let lock = client.lock(name.clone());
    let wait = Duration::from_secs(2);
    let started = Instant::now();
    let err = lock.try_lock(wait).await.unwrap_err();
    let took = started.elapsed();
    eprintln!("try_lock({wait:?}) took {took:?}: {err}");
    assert!(
        took <= wait + master_timeout + SLACK,
        "try_lock({wait:?}) took {took:?}"
    );
    assert!(matches!(cause(&err), Error::ClusterDown { .. }), "{err:?}");
    assert!(err.is_unavailable() && !err.is_permanent(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("CLUSTERDOWN") && text.contains("127.0.0.1:"),
        "{text}"
    );
    let started = Instant::now();
    let err = lock.lock().await.unwrap_err();
    let took = started.elapsed();
    eprintln!("lock() with unavailable_timeout({unavailable:?}) took {took:?}: {err}");
    assert!(
        took <= unavailable + master_timeout + SLACK,
        "lock() took {took:?}"
    );
    assert!(matches!(cause(&err), Error::ClusterDown { .. }), "{err:?}");
}

/// Redlock over three masters where each fails a read for its own reason: one killed,
/// one whose ACL user may not run `HGET`, one whose key holds a string. The quorum
/// error keeps every master's error, each with its address, in the masters' order.
#[tokio::test]
async fn a_quorum_failure_names_every_masters_error() {
    let mut servers = common::start_many(3);
    let acl_url = common::acl::user(&servers[1], &["+hget"]);
    let urls = [servers[0].url(), acl_url, servers[2].url()];
    let config = Config::redlock(urls).master_timeout(Duration::from_millis(500));
    let client = Client::connect(config).await.unwrap();
    let lock = client.lock("every-cause");
    servers[0].kill();
    let addr = |i: usize| servers[i].addr();

    // Two masters fail, one answers: 1 of 2.
    let err = lock.hold_count().await.unwrap_err();
    let Error::NoQuorum {
        acquired: 1,
        needed: 2,
        errors,
    } = &err
    else {
        panic!("expected NoQuorum 1 of 2, got {err:?}");
    };
    let at: Vec<&str> = errors.iter().map(|m| m.addr.as_str()).collect();
    assert_eq!(at, [addr(0), addr(1)], "{err}");
    assert!(errors[0].error.is_unavailable(), "{err}");
    assert!(
        matches!(&errors[1].error, Error::PermissionDenied { detail, .. } if detail.contains("hget")),
        "{err}"
    );
    // Retrying can cure the killed master: not permanent, worth retrying later.
    assert!(!err.is_permanent() && err.is_unavailable(), "{err}");

    // The third master's key is not a lock: all three fail, each for its reason.
    let _: String = servers[2].cmd(&["SET", "every-cause", "x"]);
    let err = lock.hold_count().await.unwrap_err();
    let Error::NoQuorum {
        acquired: 0,
        needed: 2,
        errors,
    } = &err
    else {
        panic!("expected NoQuorum 0 of 2, got {err:?}");
    };
    let at: Vec<&str> = errors.iter().map(|m| m.addr.as_str()).collect();
    assert_eq!(at, [addr(0), addr(1), addr(2)], "{err}");
    assert!(
        matches!(&errors[2].error, Error::WrongType { name, .. } if name == "every-cause"),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("no quorum: 0 of 2 needed masters agreed; "),
        "{text}"
    );
    for i in 0..3 {
        assert_eq!(text.matches(&addr(i)).count(), 1, "{i}: {text}");
    }
    for cause in ["permission denied", "hget", "holds a value of another type"] {
        assert!(text.contains(cause), "{cause}: {text}");
    }
    assert!(
        !text.contains('\n') && !text.contains(common::acl::PASSWORD),
        "{text}"
    );
    // The chain: the list, then the first master's error.
    let first = std::error::Error::source(&err).and_then(std::error::Error::source);
    let first = first
        .and_then(|e| e.downcast_ref::<Error>())
        .expect("a master's error");
    assert!(first.to_string().contains(&addr(0)), "{first}");
}
