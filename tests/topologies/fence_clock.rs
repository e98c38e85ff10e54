//! Kleppmann's clock case under Redlock, end to end with a real PostgreSQL server (and
//! the same with an S3 object on a real moto server, the `s3_` tests): five
//! masters A-E; holder 1 takes A, B and C while D and E do not answer it; C's clock
//! jumps forward (redlatch_testkit::clock, a preload shim) so its key expires; holder 2 takes C, D and E. Two
//! holders at once, both within their validity: the lock cannot tell. The fencing
//! token can: holder 2's is larger (C's counter carried holder 1's token, written back
//! to A, B, C), so the resource refuses holder 1's write after holder 2's. With the
//! guard off, holder 1's write commits over holder 2's.

use redlatch_testkit as common;

use std::time::Duration;

use common::clock::FakeClock;
use common::moto::MotoServer;
use common::postgres::{assert_outcome, write_doc, Ledger};
use common::redlock::{config, cut_off, holders, reconnect};
use common::{eventually_async, RedisServer};
use redlatch::fence::HasToken;
use redlatch::Client;

const LEASE: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(10);

/// The resource: a PostgreSQL table or an S3 object.
enum Store {
    Pg(Ledger),
    S3(MotoServer),
}

async fn clock_jump(s3: bool, fenced: bool, test: &str) {
    let store = match s3 {
        false => Ledger::start_or_skip(test).await.map(Store::Pg),
        true => MotoServer::start_or_skip(test).map(Store::S3),
    };
    let Some(store) = store else {
        return;
    };
    let Some(clock) = FakeClock::new_or_skip(test) else {
        return;
    };
    let env = clock.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let servers: Vec<RedisServer> = (0..5)
        .map(|i| match i {
            2 => RedisServer::start_with_env(&env, &[]),
            _ => RedisServer::start(),
        })
        .collect();
    let connect = || Client::connect(config(&servers));
    let (one, two) = (connect().await.unwrap(), connect().await.unwrap());
    let lock = one.fenced_lock("doc");
    // A first acquisition on all five: every master is current for the name (a new
    // name's fenced lock needs them all, docs/deployments.md), its counter at t0.
    let first = lock.try_lock(WAIT).await.unwrap().expect("a free lock");
    first.unlock().await.unwrap();
    let free = || servers.iter().all(|s| holders(s, "doc").is_empty());
    assert!(
        eventually_async(WAIT, free).await,
        "the first hold was not released everywhere"
    );

    // D and E do not answer holder 1; A, B, C grant it.
    cut_off(&servers[3]);
    cut_off(&servers[4]);
    let g1 = lock
        .try_lock_with_lease(WAIT, LEASE)
        .await
        .unwrap()
        .expect("A, B and C grant holder 1");
    reconnect(&servers[3]);
    reconnect(&servers[4]);
    let h1 = vec![g1.holder().to_string()];
    let held_by_1 = || servers[..3].iter().all(|s| holders(s, "doc") == h1);
    assert!(eventually_async(WAIT, held_by_1).await);

    // C's clock jumps past the lease: its key expires there.
    clock.set_offset(2 * LEASE.as_secs() as i64);
    let expired = || servers[2].cmd::<i64>(&["EXISTS", "doc"]) == 0;
    assert!(
        eventually_async(WAIT, expired).await,
        "C's clock did not jump"
    );

    let g2 = two
        .fenced_lock("doc")
        .try_lock_with_lease(WAIT, LEASE)
        .await
        .unwrap()
        .expect("C, D and E grant holder 2");
    // Two holders at once, each on a majority as far as it knows.
    let h2 = vec![g2.holder().to_string()];
    for (i, s) in servers.iter().enumerate() {
        let want = if i < 2 { &h1 } else { &h2 };
        assert_eq!(&holders(s, "doc"), want, "master {i}");
    }
    assert!(g1.validity() > Duration::ZERO && g2.validity() > Duration::ZERO);

    let (stale, fresh) = (g1.token().unwrap(), g2.token().unwrap());
    match &store {
        Store::Pg(ledger) => {
            let mut db = ledger.pg.connect().await;
            write_doc(&mut db, "fresh", &fresh, fenced).await.unwrap();
            let said = write_doc(&mut db, "stale", &stale, fenced).await;
            assert_outcome(ledger, fenced, stale.value(), fresh.value(), &said).await;
        }
        Store::S3(moto) => {
            let fence = moto.fence();
            common::moto::write_doc(&fence, "fresh", &fresh, fenced)
                .await
                .unwrap();
            let said = common::moto::write_doc(&fence, "stale", &stale, fenced).await;
            common::moto::assert_outcome(&fence, fenced, stale.value(), fresh.value(), &said).await;
        }
    }
    clock.set_offset(0);
}

#[tokio::test]
async fn two_holders_after_a_masters_clock_jump_and_the_older_token_is_refused() {
    clock_jump(false, true, "fence_clock::fenced").await;
}

#[tokio::test]
async fn unfenced_two_holders_after_a_clock_jump_and_the_older_holder_overwrites() {
    clock_jump(false, false, "fence_clock::unfenced").await;
}

#[tokio::test]
async fn s3_two_holders_after_a_masters_clock_jump_and_the_older_tokens_put_is_refused() {
    clock_jump(true, true, "fence_clock::s3_fenced").await;
}

#[tokio::test]
async fn s3_unfenced_two_holders_after_a_clock_jump_and_the_older_holder_overwrites_the_object() {
    clock_jump(true, false, "fence_clock::s3_unfenced").await;
}
