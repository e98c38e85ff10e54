//! The simple lock (the Redlock reference clients' `SET NX PX` lock) under Redlock over
//! 3 masters, beside a reference client in another process doing Redlock its way
//! (redlatch_testkit::peer: `SET NX PX` on each master, a majority wins): the token is
//! written on every master (a majority at once, the rest eventually); each side's
//! majority keeps the other out and its release lets the other in; a master holding a
//! foreign token is outvoted and keeps it; a master down leaves a majority to lock,
//! renew and release with.

use redlatch_testkit as common;

use std::time::Duration;

use common::peer::RedlockPeer;
use common::redlock::config;
use common::{eventually_async, start_many, RedisServer};
use redlatch::Client;

fn get(server: &RedisServer, name: &str) -> Option<String> {
    server.cmd(&["GET", name])
}

/// Masters whose key `name` holds `token`.
fn holding(servers: &[RedisServer], name: &str, token: &str) -> usize {
    (servers.iter())
        .filter(|s| get(s, name).as_deref() == Some(token))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redsync_style_peer_and_redlatch_exclude_each_other_over_three_masters() {
    let servers = start_many(3);
    let all: Vec<&RedisServer> = servers.iter().collect();
    let client = Client::connect(config(&servers)).await.unwrap();
    let name = "simple:redlock";
    let lock = client.simple_lock(name);

    // redlatch first: the token on a majority at once, on every master eventually.
    let guard = lock.lock().await.unwrap();
    let token = guard.holder().to_string();
    assert!(holding(&servers, name, &token) >= 2);
    let everywhere = eventually_async(Duration::from_secs(10), || {
        holding(&servers, name, &token) == 3
    })
    .await;
    assert!(everywhere, "the minority's grant never landed");
    // The peer finds every master taken, tries for a while and gives up.
    let refused = RedlockPeer::start(&all, name, Duration::from_secs(30), Duration::from_secs(1));
    assert_eq!(refused.held().await, None);
    // It waits; redlatch's release lets it in.
    let mut peer = RedlockPeer::start(&all, name, Duration::from_secs(30), Duration::from_secs(20));
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.unlock().await.unwrap();
    let theirs = peer
        .held()
        .await
        .expect("the peer takes it after the release");
    assert!(holding(&servers, name, &theirs) >= 2);

    // The peer first: redlatch waits by polling and gets it after the peer's release.
    assert!(lock
        .try_lock(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock(Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !waiter.is_finished(),
        "acquired while the peer held a majority"
    );
    assert!(peer.release().await >= 2);
    let guard = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("acquired after the release");
    assert!(holding(&servers, name, guard.holder()) >= 2);
    guard.unlock().await.unwrap();
    let gone = eventually_async(Duration::from_secs(10), || {
        servers.iter().all(|s| get(s, name).is_none())
    })
    .await;
    assert!(gone, "a released key stayed on some master");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_token_on_one_master_is_outvoted_and_a_master_down_leaves_a_majority() {
    let mut servers = start_many(3);
    let client = Client::connect(config(&servers).watchdog_timeout(Duration::from_millis(1500)))
        .await
        .unwrap();
    let name = "simple:minority";
    // Another client's token on master 0 only (its Redlock attempt lost there).
    let _: String = servers[0].cmd(&["SET", name, "foreign", "PX", "60000"]);
    let guard = client.simple_lock(name).lock().await.unwrap();
    assert_eq!(holding(&servers[1..], name, guard.holder()), 2);
    assert_eq!(get(&servers[0], name).as_deref(), Some("foreign"));
    guard.unlock().await.unwrap();
    // Its release deleted its own keys, never the foreign one.
    let released = eventually_async(Duration::from_secs(10), || {
        get(&servers[1], name).is_none() && get(&servers[2], name).is_none()
    })
    .await;
    assert!(released);
    assert_eq!(get(&servers[0], name).as_deref(), Some("foreign"));

    // With master 2 down, two masters are a majority: lock, renew past two leases,
    // and exclude a peer on the masters that answer.
    servers[2].kill();
    let name = "simple:degraded";
    let guard = client.simple_lock(name).lock().await.unwrap();
    let token = guard.holder().to_string();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(!guard.lost().is_cancelled(), "lost with a majority up");
    assert_eq!(holding(&servers[..2], name, &token), 2);
    // The peer is configured with all three (the dead one refuses its connection).
    let all: Vec<&RedisServer> = servers.iter().collect();
    let refused = RedlockPeer::start(
        &all,
        name,
        Duration::from_secs(30),
        Duration::from_millis(500),
    );
    assert_eq!(refused.held().await, None);
    guard.unlock().await.unwrap();
    assert_eq!(holding(&servers[..2], name, &token), 0);
}
