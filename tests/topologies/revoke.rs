//! Cooperative revocation (issue 27.3) on real servers: a request reaches the holder's
//! client on its one notice channel (issue 49: every client listens there for its life,
//! for all its holds) and fires its guard's `revoke_requested()`, also when the guard
//! asks for it only later; a pub/sub reconnect is not taken for a request; a later
//! holder is not asked by an earlier request; a Redisson-style holder is asked but
//! nobody hears it; it works on a cluster (classic PUBLISH across the bus).

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::shared_cluster;
use common::{eventually_async, RedisServer};
use redlatch::{Client, Config};

async fn client(url: String) -> Client {
    Client::connect(Config::single(url)).await.unwrap()
}

async fn fired(token: &tokio_util::sync::CancellationToken, within: Duration) -> bool {
    tokio::time::timeout(within, token.cancelled())
        .await
        .is_ok()
}

#[tokio::test]
async fn a_request_reaches_the_holder_and_listening_ends_with_the_hold() {
    let server = RedisServer::start();
    let (holder, asker) = (client(server.url()).await, client(server.url()).await);
    let lock = holder.lock("job");
    let guard = lock.lock().await.unwrap();
    let revoke = guard.revoke_requested();
    // Listening: the holder's client listens on its notice channel (from connect on).
    let channel = format!("redlatch_client__channel:{{{}}}", holder.id());
    assert!(
        eventually_async(Duration::from_secs(10), || {
            common::numsub(&server, &channel) == 1
        })
        .await
    );
    assert!(!revoke.is_cancelled());
    let asked = asker.lock("job").request_release().await.unwrap();
    assert_eq!(asked.holders, [guard.holder().to_string()]);
    assert_eq!(asked.listeners, 1);
    assert!(
        fired(&revoke, Duration::from_secs(10)).await,
        "the request was not heard"
    );
    guard.unlock().await.unwrap();
    // One subscription per client, not per hold: no waiter's channel is left, and the
    // notice channel stays for the client's next holds.
    assert_eq!(holder.subscriptions(), 0);
    assert_eq!(common::numsub(&server, &channel), 1);
    // A free lock: nobody to ask.
    let asked = asker.lock("job").request_release().await.unwrap();
    assert!(asked.holders.is_empty() && asked.listeners == 0);
}

#[tokio::test]
async fn a_request_made_before_listening_is_seen_and_a_reconnect_is_not_a_request() {
    let server = RedisServer::start();
    let (holder, asker) = (client(server.url()).await, client(server.url()).await);
    // A request before the guard asks for requests: its client heard it already (and
    // logged it), and the guard's token fires as soon as it is asked for.
    let early = holder.lock("early").lock().await.unwrap();
    let asked = asker.lock("early").request_release().await.unwrap();
    assert_eq!((asked.holders.len(), asked.listeners), (1, 1));
    assert!(fired(&early.revoke_requested(), Duration::from_secs(10)).await);
    early.unlock().await.unwrap();

    // A reconnect wakes every subscription; it must not look like a request.
    let guard = holder.lock("quiet").lock().await.unwrap();
    let revoke = guard.revoke_requested();
    let channel = format!("redlatch_client__channel:{{{}}}", holder.id());
    assert!(
        eventually_async(Duration::from_secs(10), || {
            common::numsub(&server, &channel) == 1
        })
        .await
    );
    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(killed >= 1);
    assert!(
        eventually_async(Duration::from_secs(10), || {
            common::numsub(&server, &channel) == 1
        })
        .await,
        "not resubscribed"
    );
    assert!(
        !fired(&revoke, Duration::from_millis(500)).await,
        "a reconnect fired it"
    );
    // A later holder is not asked by a request made to an earlier one.
    asker.lock("quiet").request_release().await.unwrap();
    assert!(fired(&revoke, Duration::from_secs(10)).await);
    guard.unlock().await.unwrap();
    let next = holder.lock("quiet").lock().await.unwrap();
    assert!(!fired(&next.revoke_requested(), Duration::from_millis(500)).await);
    next.unlock().await.unwrap();
}

/// A reconnect wakes the watch but is not a message: it renews nothing (an early
/// renewal during a failover could fail and put a sound hold at risk). The lease's end
/// is unchanged after the reconnect, while a renewal would have moved it seconds on.
#[tokio::test]
async fn a_reconnect_renews_nothing() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(120); // the watchdog's round: every 40 s
    let holder = Client::connect(Config::single(server.url()).watchdog_timeout(watchdog))
        .await
        .unwrap();
    let guard = holder.lock("steady").lock().await.unwrap();
    let ends_by = std::time::Instant::now() + watchdog;
    let revoke = guard.revoke_requested();
    let channel = format!("redlatch_client__channel:{{{}}}", holder.id());
    assert!(
        eventually_async(Duration::from_secs(10), || {
            common::numsub(&server, &channel) == 1
        })
        .await
    );
    // Long enough that a renewal now would move the lease's end beyond the slack.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    assert!(killed >= 1);
    assert!(
        eventually_async(Duration::from_secs(10), || {
            common::numsub(&server, &channel) == 1
        })
        .await,
        "not resubscribed"
    );
    tokio::time::sleep(Duration::from_millis(500)).await; // an early renewal's time
    let pttl: i64 = server.cmd(&["PTTL", "steady"]);
    let left = ends_by.saturating_duration_since(std::time::Instant::now());
    assert!(
        pttl <= left.as_millis() as i64 + 1000,
        "the reconnect renewed the lease: {pttl} ms left, at most {left:?} expected"
    );
    assert!(guard.at_risk().borrow().is_none() && !guard.lost().is_cancelled());
    assert!(!revoke.is_cancelled());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_redisson_holder_is_asked_but_does_not_hear_it_and_a_lost_hold_stops_listening() {
    let server = RedisServer::start();
    let c = client(server.url()).await;
    // A Java client's hold, as Redisson writes it.
    let java = "6b1c2c54-5b0e-4a53-9b3a-1d2c3e4f5a6b:1";
    let _: i64 = server.cmd(&["HSET", "java-job", java, "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", "java-job", "30000"]);
    let asked = c.lock("java-job").request_release().await.unwrap();
    assert_eq!(asked.holders, [java]);
    assert_eq!(asked.listeners, 0, "nobody listens for a Redisson holder");
    assert!(
        c.lock("java-job").is_locked().await.unwrap(),
        "a request releases nothing"
    );

    let lock = c.lock("ours");
    let guard = lock.lock().await.unwrap();
    let revoke = guard.revoke_requested();
    lock.force_unlock().await.unwrap();
    guard.lost().cancelled().await;
    assert_eq!(c.subscriptions(), 0, "a waiter's channel is left");
    assert!(!revoke.is_cancelled());
}

#[tokio::test]
async fn on_a_cluster_the_request_travels_by_pubsub_on_the_slots_primary() {
    let cluster = shared_cluster();
    let config = || Config::cluster(cluster.urls());
    let (holder, asker) = (
        Client::connect(config()).await.unwrap(),
        Client::connect(config()).await.unwrap(),
    );
    let name = format!("revoke-{}", std::process::id());
    let guard = holder.fenced_lock(name.clone()).lock().await.unwrap();
    let revoke = guard.revoke_requested();
    // Listening: its notice channel subscribed on the primary serving the channel's slot
    // (sharded and classic on Redis >= 7); the request's classic PUBLISH crosses the
    // bus to it, and the count is read there.
    let channel = format!("redlatch_client__channel:{{{}}}", holder.id());
    assert!(
        eventually_async(Duration::from_secs(10), || {
            cluster.channel_subscribers(&channel) == 1
        })
        .await,
        "not subscribed on the primary serving {channel}"
    );
    let asked = asker.lock(name).request_release().await.unwrap();
    assert_eq!(asked.holders, [guard.holder().to_string()]);
    assert_eq!(asked.listeners, 1, "{asked:?}");
    assert!(fired(&revoke, Duration::from_secs(10)).await);
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn under_redlock_the_request_reaches_every_master_and_the_holder() {
    let servers = common::start_many(3);
    let config = common::redlock::config(&servers);
    let (holder, asker) = (
        Client::connect(config.clone()).await.unwrap(),
        Client::connect(config).await.unwrap(),
    );
    let guard = holder.lock("rl-job").lock().await.unwrap();
    let revoke = guard.revoke_requested();
    let asked = asker.lock("rl-job").request_release().await.unwrap();
    assert_eq!(asked.holders, [guard.holder().to_string()]);
    assert!(fired(&revoke, Duration::from_secs(10)).await);
    // request_release() waited for each master at most the master timeout: one that
    // answered later (a loaded machine) writes its marker just after.
    let marked = |s: &RedisServer| {
        s.cmd::<i64>(&["HEXISTS", "redlatch_revoke:{rl-job}", guard.holder()]) == 1
    };
    assert!(eventually_async(Duration::from_secs(5), || servers.iter().all(marked)).await);
    guard.unlock().await.unwrap();
}

/// A force-unlock by another client tells the holder's listening client (the revoke
/// channel, without a request): it renews at once, finds the hold gone and declares
/// it lost, well before the next renewal round (a third of the 30 s watchdog). Not a
/// release request: `revoke_requested()` does not fire. A fair lock the same.
#[tokio::test]
async fn a_force_unlock_elsewhere_is_noticed_at_once_by_a_listening_holder() {
    let server = RedisServer::start();
    let (holder, other) = (client(server.url()).await, client(server.url()).await);
    for lock in [holder.lock("forced"), holder.fair_lock("forced-fair")] {
        let guard = lock.lock().await.unwrap();
        let revoke = guard.revoke_requested();
        let channel = format!("redlatch_client__channel:{{{}}}", holder.id());
        assert!(
            eventually_async(Duration::from_secs(10), || {
                common::numsub(&server, &channel) == 1
            })
            .await
        );
        let forced = match lock.kind() {
            redlatch::Kind::Fair => other.fair_lock(lock.name()),
            _ => other.lock(lock.name()),
        };
        assert!(forced.force_unlock().await.unwrap());
        // The round would come up to 10 s later; 5 s is slack for a loaded machine.
        assert!(
            fired(&guard.lost(), Duration::from_secs(5)).await,
            "{}: the force-unlock was not noticed at once",
            lock.name()
        );
        let reason = guard.lost_reason();
        assert!(
            matches!(reason, Some(redlatch::LostReason::ExpiredOrDeleted)),
            "{}: {reason:?}",
            lock.name()
        );
        assert!(!revoke.is_cancelled(), "a force-unlock is not a request");
    }
}
