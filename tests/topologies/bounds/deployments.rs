//! The bounds' rows on deployments of several servers: a Sentinel failover, a Redlock
//! majority killed or hung, a Cluster primary killed and a whole Cluster down (part of
//! `bounds`, whose module docs state the matrix and its bounds).

use std::time::Duration;

use redlatch::Config;
use redlatch_testkit::cluster::RedisCluster;
use redlatch_testkit::sentinel::SentinelSet;
use redlatch_testkit::{self as common, RedisServer};

use super::{row, Fault, MASTER_TIMEOUT};

/// A Sentinel failover: the primary is killed; the sentinels promote the replica after
/// their down-after time (1 s) and an election. Calls during the switch may fail or,
/// once the new primary is known, succeed: only the bounds are asserted. An
/// acquisition there waits for the replica too, so one request's bound is the master
/// timeout plus the replica sync timeout (1 s each, the defaults).
#[test]
fn a_sentinel_failover() {
    let mut set = SentinelSet::start("bounds");
    let per_request = MASTER_TIMEOUT + Duration::from_secs(1);
    for wait in [300, 1000, 4000].map(Duration::from_millis) {
        let config =
            Config::sentinel(set.master_name(), set.sentinel_urls()).unavailable_timeout(wait);
        let old = set.primary_addr();
        let mut killed = None;
        row(
            "Sentinel failover",
            config,
            wait,
            per_request,
            false,
            || killed = Some(set.kill_primary()),
        );
        let new = set.wait_for_switch(&old);
        eprintln!("switched from {old} to {new}");
        // The next round starts clean: no lock, latch or semaphore left from this one.
        let primary = set.server(set.server_index(&new).unwrap());
        let _: String = primary.cmd(&["FLUSHALL"]);
        // The next round fails over back: restart the old primary as a replica.
        let i = set.server_index(&old).unwrap();
        set.server_mut(i).restart();
        set.wait_until_ready();
    }
}

/// Redlock over three masters, two of them (a majority) killed or hung: the master
/// timeout is 50 ms there. (Semaphores and latches live on one master: under Redlock
/// they fail at once, which the bound allows.)
#[test]
fn a_redlock_majority_killed_or_hung() {
    for (fault, wait) in [
        (Fault::Killed, Duration::from_millis(300)),
        (Fault::Hung, Duration::from_secs(1)),
    ] {
        let mut servers = common::start_many(3);
        let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
        let config = Config::redlock(urls).unavailable_timeout(wait);
        let strike = || {
            for s in &mut servers[..2] {
                match fault {
                    Fault::Killed => s.kill(),
                    _ => s.pause(),
                }
            }
        };
        let per_request = Duration::from_millis(50);
        row(
            &format!("Redlock, 2 of 3 {fault:?}"),
            config,
            wait,
            per_request,
            true,
            strike,
        );
        for s in servers.iter().filter(|s| s.is_paused()) {
            s.resume();
        }
    }
}

/// One request's bound on a Cluster or Sentinel primary: the master timeout, plus the
/// replicas' wait of an acquisition (both 1 s by default).
fn with_replicas(config: &Config) -> Duration {
    config.effective_master_timeout() + config.replica_sync().1
}

/// A Cluster primary killed: the keys of its slots are unreachable until the cluster
/// promotes its replica (after the node timeout, 1.5 s here), the others are served
/// throughout. Calls may fail or succeed: only the bounds are asserted.
#[test]
fn a_cluster_primary_killed() {
    for wait in [300, 4000].map(Duration::from_millis) {
        let mut cluster = RedisCluster::start(3, 1);
        let config = Config::cluster(cluster.urls()).unavailable_timeout(wait);
        let per_request = with_replicas(&config);
        let victim = cluster.primary_for_key("bounds:plain");
        row(
            "Cluster primary killed",
            config,
            wait,
            per_request,
            false,
            || cluster.kill(victim),
        );
    }
}

/// A whole Cluster down: a shard and its replica killed, every node answers
/// `CLUSTERDOWN` (the default full coverage). Nothing can be acquired: every
/// acquisition must fail, within its bound, not wait for the cluster to come back.
#[test]
fn a_cluster_down() {
    let mut cluster = RedisCluster::start(3, 1);
    let wait = Duration::from_secs(1);
    let config = Config::cluster(cluster.urls()).unavailable_timeout(wait);
    let per_request = with_replicas(&config);
    let shard = cluster.primary_for_key("bounds:plain");
    row("Cluster down", config, wait, per_request, true, || {
        cluster.take_down_shard(shard)
    });
}
