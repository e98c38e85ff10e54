//! `guard.at_risk()` (issue 21 item 6): `Some(end of validity)` once the renewals failed
//! on a majority, before the lock is lost; `None` again after a renewal that counts.
//! Masters are paused with SIGSTOP; each renewal round is run with `renew_now()`, so
//! what is asserted follows from the rounds, not from the machine's speed.

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::{start_many, RedisServer};
use redlatch::{Client, Config, LockGuard, LostReason};

/// Watchdog lease: a round's renewal waits at most a third of it (1.5 s) for a paused
/// master, well within the validity (4.5 s less the drift).
const LEASE: Duration = Duration::from_millis(4500);

/// Lets the round skip nothing: holds renewed less than LEASE/6 ago wait a round.
async fn past_young() {
    tokio::time::sleep(LEASE / 6 + Duration::from_millis(50)).await;
}

/// The at-risk state now.
fn risk(guard: &LockGuard) -> Option<Instant> {
    *guard.at_risk().borrow()
}

/// Pauses `paused`, waits (on the watch) until the guard is at risk, and checks it
/// carries the end of its validity and came before the loss; resumes them, runs a
/// round, and checks the risk is cleared.
async fn at_risk_then_cleared(client: &Client, guard: &LockGuard, paused: &[&RedisServer]) {
    assert_eq!(risk(guard), None, "at risk before any failure");
    // Renewed just now: a full validity ahead.
    past_young().await;
    client.renew_now().await;
    let mut watch = guard.at_risk();
    watch.mark_unchanged();
    for s in paused {
        s.pause();
    }
    let valid_until = guard.valid_until();
    // The next round (the watchdog's, every third of the lease) fails on the paused
    // majority (timeouts after a third of the lease) and flags the risk.
    let flagged = tokio::time::timeout(2 * LEASE, watch.wait_for(|r| r.is_some())).await;
    let flagged = flagged.is_ok_and(|r| r.is_ok());
    let end = risk(guard);
    let (now_valid, lost) = (guard.valid_until(), guard.lost().is_cancelled());
    for s in paused {
        s.resume();
    }
    assert!(flagged, "never at risk");
    assert!(
        !lost,
        "lost before a round could flag the risk: {:?}",
        guard.lost_reason()
    );
    assert_eq!(end, Some(now_valid), "at risk with the end of the validity");
    assert!(now_valid >= valid_until);
    // The masters answer again: the next round renews and clears the risk.
    past_young().await;
    client.renew_now().await;
    assert_eq!(risk(guard), None, "still at risk after a renewal counted");
    assert!(guard.valid_until() > valid_until, "the renewal counted");
    assert!(!guard.lost().is_cancelled());
}

#[tokio::test]
async fn a_paused_standalone_master_puts_the_lock_at_risk_until_renewed() {
    let server = RedisServer::start();
    let config = Config::single(server.url()).watchdog_timeout(LEASE);
    let client = Client::connect(config).await.unwrap();
    let guard = client.lock("risky").lock().await.unwrap();
    at_risk_then_cleared(&client, &guard, &[&server]).await;
    // Twice: it rises and clears again.
    at_risk_then_cleared(&client, &guard, &[&server]).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn under_redlock_a_paused_majority_puts_it_at_risk_and_a_minority_does_not() {
    let servers = start_many(3);
    let config = Config::redlock(servers.iter().map(RedisServer::url).collect::<Vec<_>>())
        .watchdog_timeout(LEASE);
    let client = Client::connect(config).await.unwrap();
    let guard = client.lock("risky").lock().await.unwrap();
    // One of three paused: the other two still renew it; never at risk.
    past_young().await;
    let before = guard.valid_until();
    servers[0].pause();
    client.renew_now().await;
    let end = risk(&guard);
    servers[0].resume();
    assert_eq!(end, None, "a minority's failure put it at risk");
    assert!(guard.valid_until() > before, "the majority renewed it");
    // Two of three: at risk, then cleared.
    at_risk_then_cleared(&client, &guard, &[&servers[1], &servers[2]]).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_lock_at_risk_that_is_never_renewed_is_lost_at_the_announced_end() {
    let server = RedisServer::start();
    let config = Config::single(server.url()).watchdog_timeout(LEASE);
    let client = Client::connect(config).await.unwrap();
    let guard = client.lock("doomed").lock().await.unwrap();
    let mut watch = guard.at_risk();
    server.pause();
    let end = tokio::time::timeout(2 * LEASE, watch.wait_for(|r| r.is_some()))
        .await
        .expect("never at risk")
        .unwrap()
        .unwrap();
    let lost = tokio::time::timeout(2 * LEASE, guard.lost().cancelled()).await;
    let lost_at = Instant::now();
    server.resume();
    assert!(lost.is_ok(), "never lost");
    assert!(lost_at >= end, "lost before the announced end");
    assert!(
        matches!(guard.lost_reason(), Some(LostReason::NotRenewed)),
        "{:?}",
        guard.lost_reason()
    );
    assert_eq!(guard.validity(), Duration::ZERO);
}
