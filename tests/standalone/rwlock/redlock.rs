//! The read-write lock over Redlock's three masters: both modes granted and refused by
//! a majority, also with one master down (part of `rwlock`).

use std::time::Duration;

use redlatch::Client;
use redlatch_testkit::{self as common, eventually_async};

#[tokio::test]
async fn under_redlock_read_and_write_locks_go_by_majority() {
    let mut servers = common::start_many(3);
    let config = common::redlock::config(&servers);
    let (a, b) = (
        Client::connect(config.clone()).await.unwrap(),
        Client::connect(config).await.unwrap(),
    );
    let r = a.read_write_lock("rl").read().lock().await.unwrap();
    let r2 = b
        .read_write_lock("rl")
        .read()
        .try_lock(Duration::ZERO)
        .await
        .unwrap();
    assert!(r2.is_some(), "readers share under Redlock too");
    // Both grants came from a majority; a master answering past the master timeout
    // (a loaded machine) runs the script just after.
    let both_read = |s: &common::RedisServer| {
        s.cmd::<Option<String>>(&["HGET", "rl", "mode"]).as_deref() == Some("read")
            && s.cmd::<i64>(&["HLEN", "rl"]) == 3
    };
    assert!(
        eventually_async(Duration::from_secs(5), || servers.iter().all(both_read)).await,
        "two readers on every master: {:?}",
        (servers.iter())
            .map(|s| s.cmd::<Vec<String>>(&["HKEYS", "rl"]))
            .collect::<Vec<_>>()
    );
    r2.unwrap().unlock().await.unwrap();
    assert!(b
        .read_write_lock("rl")
        .write()
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    r.unlock().await.unwrap();
    // One master down: a majority still grants and excludes.
    servers[2].kill();
    let w = a.read_write_lock("rl").write().lock().await.unwrap();
    assert!(b
        .read_write_lock("rl")
        .read()
        .try_lock(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    assert!(b.read_write_lock("rl").write().is_locked().await.unwrap());
    w.unlock().await.unwrap();
    let r = b
        .read_write_lock("rl")
        .read()
        .try_lock(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(r.is_some());
}
