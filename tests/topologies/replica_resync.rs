//! Replica sync waits only for the replicas that could take over
//! (transport/replicas.rs): a replica in its full resync or loading its snapshot is not
//! waited for, so locks keep working while it resyncs, on a standalone primary, a
//! cluster and Sentinel; `status` says how many replicas were waited for.
//!
//! The resync is made long on any machine by per-key delays (the primary's
//! `rdb-key-save-delay` while it streams its snapshot, the replica's `key-load-delay`
//! while it loads it), not by the machine's speed: each lock below is taken while the
//! replica is seen in that phase.

use redlatch_testkit as common;

use std::time::Duration;

use common::cluster::RedisCluster;
use common::sentinel::SentinelSet;
use common::{eventually, info_field, RedisServer};
use redlatch::{Client, Config, Error, SyncReplicas};

/// Filler keys written on the primary: with their size, about 200 MB that a restarted
/// replica must copy and load.
const FILLER_KEYS: usize = 50_000;
const FILLER_BYTES: usize = 4000;
/// Microseconds per key added to the snapshot's streaming and loading: 2 s at least each
/// (a sleep per key: in practice about three times longer).
const DELAY_US: &str = "40";
/// Bound of each wait for a resync phase.
const PHASE: Duration = Duration::from_secs(60);

/// Writes the filler keys on `primary` (MSET batches; `{tag}` keeps them in the
/// primary's slot on a cluster).
fn fill(primary: &RedisServer, tag: &str) {
    let mut conn = primary.conn();
    let value = "x".repeat(FILLER_BYTES);
    for batch in 0..FILLER_KEYS / 250 {
        let mut mset = redis::cmd("MSET");
        for i in 0..250 {
            mset.arg(format!("filler:{{{tag}}}:{batch}:{i}"))
                .arg(&value);
        }
        let _: () = mset.query(&mut conn).unwrap();
    }
}

fn replication(server: &RedisServer) -> String {
    server
        .try_cmd(Duration::from_secs(5), &["INFO", "replication"])
        .unwrap_or_default()
}

/// Where a replica is in its sync, as its primary lists it (`slaveN:` of `INFO
/// replication`; a loading replica itself hardly answers).
#[derive(Debug, PartialEq)]
enum Phase {
    /// Not listed: not connected.
    Absent,
    /// Receiving the snapshot (`wait_bgsave`, `send_bulk`).
    Transfer,
    /// `online` but nothing acknowledged: loading the snapshot.
    Loading,
    /// Online and acknowledging.
    Streaming,
}

fn phase(primary: &RedisServer, replica_port: u16) -> Phase {
    let info = replication(primary);
    let port = format!("port={replica_port}");
    let Some(line) = info
        .lines()
        .find(|l| l.starts_with("slave") && l.split(',').any(|f| f == port))
    else {
        return Phase::Absent;
    };
    let field = |name: &str| {
        line.trim()
            .split(',')
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or("")
    };
    match (field("state"), field("offset")) {
        ("online", "0") => Phase::Loading,
        ("online", _) => Phase::Streaming,
        _ => Phase::Transfer,
    }
}

/// Takes `name` on `client` and releases it: must succeed however the replicas sync.
async fn lock_now(client: &Client, name: &str) {
    match client.lock(name).lock().await {
        Ok(g) => g.unlock().await.unwrap(),
        Err(e) => panic!("lock {name:?} failed while a replica resynced: {e}"),
    }
}

/// Three clients contending on `name`, one section each: all get in.
async fn contend(clients: &[Client], name: &str) {
    let all = clients.iter().map(|c| lock_now(c, name));
    futures_util::future::join_all(all).await;
}

/// Every name alone, then the first contended: each lock must succeed.
async fn lock_all(clients: &[Client], names: &[String]) {
    for name in names {
        lock_now(&clients[0], name).await;
    }
    contend(clients, &names[0]).await;
}

/// Fills `primary` (keys tagged `tag`) and slows its snapshot: a replica restarted now
/// (it comes back empty) takes seconds to resync.
fn prepare(primary: &RedisServer, tag: &str) {
    fill(primary, tag);
    let _: () = primary.cmd(&["CONFIG", "SET", "rdb-key-save-delay", DELAY_US]);
}

/// After [`prepare`] and a restart of the replica on `port`: locks every name while the
/// replica receives its snapshot, then while it loads it; returns once the replica is
/// caught up again.
async fn lock_through_a_resync(
    clients: &[Client],
    names: &[String],
    primary: &RedisServer,
    port: u16,
) {
    let receiving = eventually(PHASE, || phase(primary, port) == Phase::Transfer);
    assert!(receiving, "the replica never started its full sync");
    let mut replica = common::conn::sync_conn(format!("redis://127.0.0.1:{port}"));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("key-load-delay")
        .arg(DELAY_US)
        .query(&mut replica)
        .unwrap();
    lock_all(clients, names).await;
    assert_eq!(
        phase(primary, port),
        Phase::Transfer,
        "the transfer ended before the locks were taken: the delays are too short"
    );
    let loading = eventually(PHASE, || phase(primary, port) == Phase::Loading);
    assert!(loading, "the replica never loaded its snapshot");
    lock_all(clients, names).await;
    assert_eq!(
        phase(primary, port),
        Phase::Loading,
        "the load ended before the locks were taken: the delays are too short"
    );
    let _: () = primary.cmd(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    let synced = eventually(PHASE, || phase(primary, port) == Phase::Streaming);
    assert!(synced, "the replica never finished its resync");
}

/// Once the replica is caught up, acquisitions wait for it again (`status` says 1).
async fn waits_for_it_again(client: &Client, name: &str) {
    let lock = client.lock(name);
    let mut waited = None;
    for _ in 0..100 {
        lock.lock().await.unwrap().unlock().await.unwrap();
        waited = lock.status().await.unwrap()[0]
            .replicas
            .and_then(|r| r.waited);
        if waited == Some(1) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the caught-up replica is not waited for again: last waited {waited:?}");
}

async fn clients(config: &Config) -> Vec<Client> {
    let mut out = Vec::new();
    for _ in 0..3 {
        out.push(Client::connect(config.clone()).await.unwrap());
    }
    out
}

#[tokio::test]
async fn a_standalone_primary_locks_while_its_replica_resyncs() {
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port().to_string();
    let mut replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let up = eventually(Duration::from_secs(10), || {
        info_field(&replication(&replica), "master_link_status") == Some("up")
    });
    assert!(up, "the replica never synced");
    primary.set_replicated("warm", "1", 1);
    let config =
        Config::single(primary.url()).sync_replicas(SyncReplicas::Auto, Duration::from_secs(1));
    let clients = clients(&config).await;
    // Caught up: waited for.
    let lock = clients[0].lock("job");
    let g = lock.lock().await.unwrap();
    let ty: String = replica.cmd(&["TYPE", "job"]);
    assert_eq!(ty, "hash", "lock() returned before the replica had it");
    let seen = lock.status().await.unwrap()[0].replicas.unwrap();
    assert_eq!(
        (seen.connected, seen.eligible, seen.waited),
        (1, 1, Some(1))
    );
    g.unlock().await.unwrap();

    prepare(&primary, "f");
    replica.restart();
    let names = ["job".to_string(), "other".to_string()];
    lock_through_a_resync(&clients, &names, &primary, replica.port()).await;
    let seen = lock.status().await.unwrap()[0].replicas.unwrap();
    assert_eq!(seen.connected, 1, "{seen:?}");
    waits_for_it_again(&clients[0], "job").await;
}

#[tokio::test]
async fn a_paused_replica_stops_being_waited_for_once_its_lag_shows() {
    let primary = RedisServer::start();
    let port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let up = eventually(Duration::from_secs(10), || {
        info_field(&replication(&replica), "master_link_status") == Some("up")
    });
    assert!(up, "the replica never synced");
    primary.set_replicated("warm", "1", 1);
    let config =
        Config::single(primary.url()).sync_replicas(SyncReplicas::Auto, Duration::from_millis(300));
    let c = Client::connect(config).await.unwrap();
    c.lock("a").lock().await.unwrap().unlock().await.unwrap();
    replica.pause();
    // The primary reports the replica's lag once it stops acknowledging; from then on
    // it is not waited for (Sentinel would not promote a replica that does not answer).
    let lagging = eventually(Duration::from_secs(30), || {
        let info = replication(&primary);
        info.lines()
            .find(|l| l.starts_with("slave0:"))
            .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("lag=")))
            .and_then(|lag| lag.trim().parse::<u64>().ok())
            .is_some_and(|lag| lag > 3)
    });
    assert!(lagging, "the paused replica's lag never grew");
    let mut result = Err(None);
    for _ in 0..20 {
        match c.lock("b").lock().await {
            Ok(g) => {
                g.unlock().await.unwrap();
                result = Ok(());
                break;
            }
            Err(e @ Error::NotReplicated { .. }) => result = Err(Some(e)),
            Err(e) => panic!("{e}"),
        }
    }
    replica.resume();
    result.unwrap_or_else(|e| panic!("a lagging replica is still waited for: {e:?}"));
}

#[tokio::test]
async fn a_new_cluster_locks_at_once_and_through_a_replica_resync() {
    let mut cluster = RedisCluster::start(3, 1);
    let config =
        Config::cluster(cluster.urls()).sync_replicas(SyncReplicas::Auto, Duration::from_secs(1));
    let clients = clients(&config).await;
    let names: Vec<String> = (cluster.primaries().iter())
        .map(|&p| cluster.key_on(p, "orders"))
        .collect();
    // Right after creation: on every primary, alone and contended.
    for name in &names {
        lock_now(&clients[0], name).await;
        contend(&clients, name).await;
    }
    let primary = cluster.primaries()[0];
    let replica = cluster.replica_of(primary);
    let name = cluster.key_on(primary, "resync");
    prepare(cluster.node(primary), &cluster.key_on(primary, "tag"));
    cluster.restart(replica);
    let names = [name.clone(), names[1].clone()];
    let port = cluster.node(replica).port();
    lock_through_a_resync(&clients, &names, cluster.node(primary), port).await;
    waits_for_it_again(&clients[0], &name).await;
}

#[tokio::test]
async fn a_sentinel_primary_locks_while_its_replica_resyncs() {
    let mut set = SentinelSet::start("resync");
    let config = Config::sentinel(set.master_name(), set.sentinel_urls())
        .sync_replicas(SyncReplicas::Auto, Duration::from_secs(1));
    let p = set.primary_index();
    set.server(p).set_replicated("warm", "1", 1);
    let clients = clients(&config).await;
    lock_now(&clients[0], "job").await;
    prepare(set.server(p), "f");
    let r = 1 - p;
    set.server_mut(r).restart();
    let names = ["job".to_string(), "other".to_string()];
    lock_through_a_resync(&clients, &names, set.server(p), set.server(r).port()).await;
    waits_for_it_again(&clients[0], "job").await;
}
