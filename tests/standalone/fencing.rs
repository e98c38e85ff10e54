//! Fenced locks on one master: tokens grow with every acquisition, Redisson's counter key.

use redlatch_testkit as common;

use std::time::Duration;

use common::RedisServer;
use redlatch::{Client, Config};

#[tokio::test]
async fn every_acquisition_gets_a_larger_token_and_plain_locks_get_none() {
    let server = RedisServer::start();
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    let mut last = 0;
    for client in [&a, &b, &a, &b] {
        let g = client.fenced_lock("ledger").lock().await.unwrap();
        let token = g.fencing_token().expect("a fenced lock has a token");
        assert!(token > last, "{token} after {last}");
        // Re-entry hands out a larger token too: a token is never reused.
        let inner = g.scope(client.fenced_lock("ledger").lock()).await.unwrap();
        assert!(inner.fencing_token().unwrap() > token);
        last = inner.fencing_token().unwrap();
        inner.unlock().await.unwrap();
        g.unlock().await.unwrap();
    }
    // Redisson's RFencedLock counter, no expiry.
    assert_eq!(
        server.cmd::<u64>(&["GET", "redisson_lock_token:{ledger}"]),
        last
    );
    assert_eq!(
        server.cmd::<i64>(&["PTTL", "redisson_lock_token:{ledger}"]),
        -1
    );
    // The epoch is for Redlock only: on one master the keys are Redisson's alone.
    assert_eq!(
        server.cmd::<i64>(&["EXISTS", "redlatch_token_epoch:{ledger}"]),
        0
    );
    let plain = a.lock("plain").lock().await.unwrap();
    assert_eq!(plain.fencing_token(), None);
    plain.unlock().await.unwrap();
}

#[tokio::test]
async fn a_fenced_lock_excludes_a_plain_lock_of_the_same_name() {
    let server = RedisServer::start();
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    let g = a.fenced_lock("shared").lock().await.unwrap();
    assert!(b
        .lock("shared")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    let p = b.lock("shared").lock().await.unwrap();
    assert!(a
        .fenced_lock("shared")
        .try_lock(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    p.unlock().await.unwrap();
}
