//! Redisson 4.7's newer semaphore methods against the real Java client (a JVM per test,
//! redlatch-testkit/src/jvm.rs), both ways: RSemaphore drainPermits, releaseIfExists and
//! trySetPermits with a time to live; RPermitExpirableSemaphore acquire(n),
//! tryRelease(List) all or nothing, getLeaseTime, updateLeaseTime, setPermits and
//! getPermits, and the wake-ups their messages give across the two. 4.7 only: the
//! methods are newer than 3.27.

use redlatch_testkit as common;

use std::time::Duration;

use common::jvm::{self, addr_of, Deployment, Jvm};
use common::{eventually_async, RedisServer};
use redlatch::{Client, Config, PermitExpirableSemaphore};

struct Setup {
    server: RedisServer,
    java: Jvm,
    client: Client,
}

async fn setup() -> Option<Setup> {
    if !jvm::available() {
        return None;
    }
    let server = RedisServer::start();
    let java = Jvm::start(jvm::V4, &Deployment::Single(addr_of(&server.url())), "").await;
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    Some(Setup {
        server,
        java,
        client,
    })
}

async fn until_subscribed(server: &RedisServer, channel: &str, n: i64) {
    assert!(
        eventually_async(Duration::from_secs(10), || common::numsub(server, channel)
            >= n)
        .await,
        "fewer than {n} subscribers on {channel}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_drain_release_if_exists_and_ttl_both_ways() {
    let Some(s) = setup().await else { return };
    let (java, server) = (&s.java, &s.server);
    // Our time to live, seen by Java; Java's, seen by us.
    let ours = s.client.semaphore("ttl-ours");
    assert!(ours
        .try_set_permits_with_ttl(3, Duration::from_secs(60))
        .await
        .unwrap());
    assert!(!java.call("j", "sem ttl-ours trysetpermits 9").await.bool());
    assert_eq!(java.call("j", "sem ttl-ours available").await.val(), "3");
    assert!(java
        .call("j", "sem ttl-java trysetpermitsttl 2 60000")
        .await
        .bool());
    let theirs = s.client.semaphore("ttl-java");
    assert!(!theirs
        .try_set_permits_with_ttl(9, Duration::from_secs(1))
        .await
        .unwrap());
    assert_eq!(theirs.available().await.unwrap(), 2);
    let pttl: i64 = server.cmd(&["PTTL", "ttl-java"]);
    assert!(pttl > 0 && pttl <= 60_000, "{pttl}");
    // Drains, both ways.
    assert_eq!(java.call("j", "sem ttl-ours drain").await.val(), "3");
    assert_eq!(ours.available().await.unwrap(), 0);
    assert_eq!(theirs.drain_permits().await.unwrap(), 2);
    assert_eq!(java.call("j", "sem ttl-java available").await.val(), "0");
    // releaseIfExists: nothing created on either side.
    assert!(!java.call("j", "sem absent releaseifexists 2").await.bool());
    assert!(!s
        .client
        .semaphore("absent")
        .release_if_exists(2)
        .await
        .unwrap());
    assert_eq!(server.cmd::<i64>(&["EXISTS", "absent"]), 0);
    // Java's releaseIfExists wakes our waiter for two.
    let waiting = {
        let sem = s.client.semaphore("ttl-ours");
        tokio::spawn(async move { sem.acquire_many(2).await.unwrap().forget() })
    };
    until_subscribed(server, "redisson_sc:{ttl-ours}", 1).await;
    assert!(java
        .call("j", "sem ttl-ours releaseifexists 2")
        .await
        .bool());
    tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("Java's releaseIfExists did not wake us")
        .unwrap();
    // Ours wakes a Java waiter.
    let call = java.send("w", "sem ttl-ours acquire 1");
    until_subscribed(server, "redisson_sc:{ttl-ours}", 1).await;
    assert!(ours.release_if_exists(1).await.unwrap());
    call.reply().await.ok();
    assert_eq!(ours.available().await.unwrap(), 0);
}

/// A permit id nobody holds.
const BOGUS: &str = "00112233445566778899aabbccddeeff";

/// Our two permits, given back by Java's tryRelease(List): all or none.
async fn java_releases_our_list_all_or_none(java: &Jvm, sem: &PermitExpirableSemaphore) {
    let ours = sem.acquire_many(2).await.unwrap();
    let ids: Vec<String> = ours.iter().map(|p| p.id().to_string()).collect();
    assert_eq!(java.call("j", "xsem xs acquired").await.val(), "2");
    let left = java
        .call("j", &format!("xsem xs leasetime {}", ids[0]))
        .await;
    let left: i64 = left.val().parse().unwrap();
    assert!(
        left > 0,
        "a watchdog-kept permit has a lease in Redis: {left}"
    );
    let none = java
        .call("j", &format!("xsem xs tryreleaselist {},{BOGUS}", ids[0]))
        .await;
    assert_eq!(none.val(), "0", "Java released part of a list");
    assert_eq!(sem.acquired().await.unwrap(), 2);
    let both = java
        .call("j", &format!("xsem xs tryreleaselist {}", ids.join(",")))
        .await;
    assert_eq!(both.val(), "2");
    assert_eq!(sem.available().await.unwrap(), 4);
    for p in ours {
        assert!(p.release().await.unwrap_err().is_not_held());
    }
}

/// Java's two, leased: we read and change their leases and give them back.
async fn we_read_change_and_release_javas_leases(java: &Jvm, sem: &PermitExpirableSemaphore) {
    let reply = java.call("j", "xsem xs acquiren 2 5000").await;
    let java_ids: Vec<String> = reply.val().split(',').map(str::to_string).collect();
    assert_eq!(java_ids.len(), 2);
    let left = sem.lease_time(&java_ids[0]).await.unwrap().expect("leased");
    assert!(left <= Duration::from_secs(5), "{left:?}");
    assert!(sem
        .update_lease_time(&java_ids[0], Duration::from_secs(60))
        .await
        .unwrap());
    let seen: i64 = java
        .call("j", &format!("xsem xs leasetime {}", java_ids[0]))
        .await
        .val()
        .parse()
        .unwrap();
    assert!(seen > 50_000, "Java sees our update: {seen}");
    assert!(java
        .call("j", &format!("xsem xs updatelease {} 30000", java_ids[1]))
        .await
        .bool());
    let ours_seen = sem.lease_time(&java_ids[1]).await.unwrap().unwrap();
    assert!(ours_seen > Duration::from_secs(25), "{ours_seen:?}");
    assert!(!sem
        .release_many(&[java_ids[0].as_str(), BOGUS])
        .await
        .unwrap());
    assert_eq!(java.call("j", "xsem xs acquired").await.val(), "2");
    assert!(sem.release_many(&java_ids).await.unwrap());
    assert_eq!(java.call("j", "xsem xs available").await.val(), "4");
}

/// A Java permit without a lease never expires: None for us; setPermits counts the
/// acquired ones on both sides.
async fn unleased_permits_and_set_permits(java: &Jvm, sem: &PermitExpirableSemaphore) {
    let forever = java.call("j", "xsem xs acquire").await;
    assert_eq!(sem.lease_time(forever.val()).await.unwrap(), None);
    // setPermits counts the acquired ones on both sides: 1 acquired.
    java.call("j", "xsem xs setpermits 2").await.ok();
    assert_eq!(
        (sem.available().await.unwrap(), sem.permits().await.unwrap()),
        (1, 2)
    );
    sem.set_permits(3).await.unwrap();
    assert_eq!(java.call("j", "xsem xs permits").await.val(), "3");
    assert_eq!(java.call("j", "xsem xs available").await.val(), "2");
    assert!(sem.release(forever.val()).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_many_permits_leases_and_lists_both_ways() {
    let Some(s) = setup().await else { return };
    let (java, server) = (&s.java, &s.server);
    let sem = s.client.permit_expirable_semaphore("xs");
    assert!(java.call("j", "xsem xs trysetpermits 4").await.bool());
    java_releases_our_list_all_or_none(java, &sem).await;
    we_read_change_and_release_javas_leases(java, &sem).await;
    unleased_permits_and_set_permits(java, &sem).await;

    // Wake-ups: Java's list release wakes our acquire_many(2); ours wakes Java's acquire(2).
    let held = sem.acquire_many(3).await.unwrap();
    let waiting = {
        let sem = s.client.permit_expirable_semaphore("xs");
        tokio::spawn(async move { sem.acquire_many(2).await.unwrap() })
    };
    until_subscribed(server, "redisson_sc:{xs}", 1).await;
    let held_ids: Vec<&str> = held.iter().map(|p| p.id()).collect();
    let released = java
        .call(
            "j",
            &format!("xsem xs tryreleaselist {}", held_ids[..2].join(",")),
        )
        .await;
    assert_eq!(released.val(), "2");
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("Java's list release did not wake us")
        .unwrap();
    let call = java.send("w", "xsem xs acquiren 2 10000");
    until_subscribed(server, "redisson_sc:{xs}", 1).await;
    let got_ids: Vec<&str> = got.iter().map(|p| p.id()).collect();
    assert!(sem.release_many(&got_ids).await.unwrap());
    let theirs = call.reply().await;
    assert_eq!(theirs.val().split(',').count(), 2, "{}", theirs.val());
    drop(held);
}
