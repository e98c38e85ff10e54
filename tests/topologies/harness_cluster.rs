//! Self-tests of the Cluster and Sentinel harness in redlatch-testkit/ (cluster.rs, sentinel.rs).
//! Start-up and failover times are printed (see them with `--no-capture`).
//!
//! Tests on [`shared_cluster`] only read the topology; the others change it and start their
//! own cluster.

use redlatch_testkit as common;

use common::cluster::{entry, key_in_slot, key_slot, shared_cluster, RedisCluster, Role, SLOTS};
use common::eventually_every;
use common::sentinel::SentinelSet;
use std::collections::HashSet;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence/permission.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// The `(addr, slot)` a command on node `i` is redirected with (MOVED or ASK per `kind`),
/// or the reply if it is not redirected.
fn redirect(
    cluster: &RedisCluster,
    i: usize,
    args: &[&str],
) -> Result<Option<String>, (String, String, u16)> {
    let mut conn = cluster.node(i).conn();
    match redis::cmd(args[0])
        .arg(&args[1..])
        .query::<Option<String>>(&mut conn)
    {
        Ok(reply) => Ok(reply),
        Err(e) => {
            let code = e.code().unwrap_or("?").to_string();
            let (addr, slot) = e
                .redirect_node()
                .unwrap_or_else(|| panic!("{args:?} on node {i}: not a redirect: {e}"));
            Err((code, addr.to_string(), slot))
        }
    }
}

/// GET on replica `i` (READONLY connection).
fn replica_get(cluster: &RedisCluster, i: usize, key: &str) -> Option<String> {
    let mut conn = cluster.node(i).conn();
    let _: () = redis::cmd("READONLY").query(&mut conn).unwrap();
    redis::cmd("GET").arg(key).query(&mut conn).unwrap()
}

#[test]
fn cluster_starts_settled_and_is_stopped_on_drop() {
    let cluster = RedisCluster::start(3, 1);
    println!("cluster 3x1 start-up: {:?}", cluster.startup_time());
    let view = cluster.nodes();
    assert_eq!(view.len(), 6, "{view:#?}");
    let ports: HashSet<u16> = view.iter().map(|n| n.port).collect();
    assert_eq!(ports.len(), 6);
    assert!(!ports.contains(&6379));
    for n in &view {
        assert_eq!(n.id.len(), 40, "{n:?}");
        assert_eq!(n.id, cluster.id(n.index));
        assert_eq!(n.port, cluster.node(n.index).port());
        assert!(!n.is_failing(), "{n:?}");
        let info: String = cluster.node(n.index).cmd(&["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "{info}");
        assert!(info.contains("cluster_known_nodes:6"), "{info}");
    }
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3);
    let slots: u32 = primaries
        .iter()
        .flat_map(|&p| entry(&view, p).unwrap().slots.clone())
        .map(|(a, b)| u32::from(b - a) + 1)
        .sum();
    assert_eq!(slots, u32::from(SLOTS));
    for &p in &primaries {
        let r = cluster.replica_of(p);
        assert_eq!(cluster.replicas_of(p), vec![r]);
        assert_eq!(entry(&view, r).unwrap().role, Role::Replica);
        let info: String = cluster.node(p).cmd(&["INFO", "replication"]);
        assert!(info.contains("connected_slaves:1"), "{info}");
    }
    assert_eq!(
        cluster.urls(),
        (0..6).map(|i| cluster.node(i).url()).collect::<Vec<_>>()
    );

    let nodes: Vec<(u32, u16, PathBuf)> = (0..6)
        .map(|i| {
            let n = cluster.node(i);
            (n.pid(), n.port(), n.dir().to_path_buf())
        })
        .collect();
    drop(cluster);
    for (pid, port, dir) in nodes {
        assert!(!process_exists(pid), "node {pid} survived drop");
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
        assert!(!dir.exists(), "{} not removed", dir.display());
    }
}

#[test]
fn key_slot_agrees_with_cluster_keyslot() {
    let cluster = shared_cluster();
    let keys = [
        "",
        "foo",
        "123456789",
        "lock:orders",
        "{user1000}.following",
        "{user1000}.followers",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "foo{bar}{zap}",
        "{",
        "}{",
        "x{y",
        "ключ",
        "a{b}c{d}",
    ];
    for key in keys {
        let server: u16 = cluster.node(0).cmd(&["CLUSTER", "KEYSLOT", key]);
        assert_eq!(key_slot(key.as_bytes()), server, "slot of {key:?}");
    }
    assert_eq!(key_slot(b"123456789"), 0x31C3 % SLOTS);
    assert_eq!(
        key_slot(b"{user1000}.following"),
        key_slot(b"{user1000}.followers")
    );
    for slot in [0, 1, 5460, 5461, 12182, SLOTS - 1] {
        let key = key_in_slot(slot, "k");
        assert_eq!(key_slot(key.as_bytes()), slot);
    }
}

#[test]
fn a_key_is_moved_to_its_primary_and_found_there() {
    let cluster = shared_cluster();
    let key = "harness:moved";
    let owner = cluster.primary_for_key(key);
    let owner_addr = cluster.node(owner).addr();
    let slot = key_slot(key.as_bytes());
    for other in cluster.primaries().into_iter().filter(|&p| p != owner) {
        let (code, addr, moved_slot) =
            redirect(cluster, other, &["SET", key, "v"]).expect_err("SET on a non-owner");
        assert_eq!(
            (code.as_str(), addr, moved_slot),
            ("MOVED", owner_addr.clone(), slot)
        );
    }
    assert_eq!(
        redirect(cluster, owner, &["SET", key, "v"]),
        Ok(Some("OK".into()))
    );
    let found: Option<String> = cluster.node(owner).cmd(&["GET", key]);
    assert_eq!(found.as_deref(), Some("v"));
    // Every primary owns the key it is said to own.
    for p in cluster.primaries() {
        let k = cluster.key_on(p, "harness:on:");
        assert_eq!(cluster.primary_for_key(&k), p);
        assert_eq!(redirect(cluster, p, &["GET", &k]), Ok(None));
    }
}

#[test]
fn every_replica_replicates_its_primary() {
    let cluster = shared_cluster();
    for p in cluster.primaries() {
        let key = cluster.key_on(p, "harness:repl:");
        let value = format!("from-{p}");
        let _: () = cluster.node(p).cmd(&["SET", &key, &value]);
        for r in cluster.replicas_of(p) {
            let seen = eventually_every(Duration::from_secs(5), Duration::from_millis(20), || {
                replica_get(cluster, r, &key).as_deref() == Some(value.as_str())
            });
            assert!(
                seen,
                "replica {r} of {p} lacks {key}\n{}",
                cluster.diagnostics()
            );
        }
    }
}

#[test]
fn kill_9_of_a_primary_promotes_its_replica() {
    let mut cluster = RedisCluster::start(3, 1);
    println!("cluster 3x1 start-up: {:?}", cluster.startup_time());
    let old = cluster.primaries()[0];
    let replica = cluster.replica_of(old);
    let key = cluster.key_on(old, "harness:failover:");
    cluster.node(old).set_replicated(&key, "kept", 1);

    cluster.kill(old);
    let killed = Instant::now();
    let promoted = cluster.wait_for_failover(old);
    println!(
        "failover after kill -9 of a primary: {:?} (node timeout {:?})",
        killed.elapsed(),
        common::cluster::NODE_TIMEOUT
    );
    assert_eq!(promoted, replica);
    assert_eq!(cluster.primary_for_key(&key), replica);
    let found: Option<String> = cluster.node(replica).cmd(&["GET", &key]);
    assert_eq!(found.as_deref(), Some("kept"));
    let other = cluster
        .primaries()
        .into_iter()
        .find(|&p| p != replica)
        .unwrap();
    let (code, addr, _) = redirect(&cluster, other, &["GET", &key]).expect_err("moved");
    assert_eq!(
        (code.as_str(), addr),
        ("MOVED", cluster.node(replica).addr())
    );

    // The old primary comes back with its nodes.conf, as a replica of its successor.
    cluster.restart(old);
    let view = cluster.wait_until_settled();
    let back = entry(&view, old).unwrap();
    assert_eq!((back.role, back.primary), (Role::Replica, Some(replica)));
}

#[test]
fn manual_failover_swaps_primary_and_replica() {
    let cluster = RedisCluster::start(3, 1);
    println!("cluster 3x1 start-up: {:?}", cluster.startup_time());
    let old = cluster.primaries()[1];
    let replica = cluster.replica_of(old);
    let started = Instant::now();
    cluster.failover(replica);
    println!("manual failover: {:?}", started.elapsed());
    let view = cluster.nodes();
    assert_eq!(entry(&view, replica).unwrap().role, Role::Primary);
    assert_eq!(cluster.replicas_of(replica), vec![old]);
}

#[test]
fn a_slot_migration_moves_its_keys_step_by_step() {
    let cluster = RedisCluster::start(3, 1);
    println!("cluster 3x1 start-up: {:?}", cluster.startup_time());
    let key = "harness:migrating";
    let slot = key_slot(key.as_bytes());
    let from = cluster.primary_for_slot(slot);
    let to = *cluster.primaries().iter().find(|&&p| p != from).unwrap();
    let _: () = cluster.node(from).cmd(&["SET", key, "v", "PX", "60000"]);

    cluster.begin_migration(slot, from, to);
    // Still served by the source for the keys it has; a new key of the slot is asked to
    // the target, which takes it after ASKING.
    assert_eq!(cluster.primary_for_slot(slot), from);
    assert_eq!(
        redirect(&cluster, from, &["GET", key]),
        Ok(Some("v".into()))
    );
    let new_key = key_in_slot(slot, "harness:new:");
    let (code, addr, asked_slot) =
        redirect(&cluster, from, &["SET", &new_key, "n"]).expect_err("ASK");
    assert_eq!(
        (code.as_str(), addr, asked_slot),
        ("ASK", cluster.node(to).addr(), slot)
    );
    let mut conn = cluster.node(to).conn();
    let _: () = redis::cmd("ASKING").query(&mut conn).unwrap();
    let _: () = redis::cmd("SET")
        .arg(&new_key)
        .arg("n")
        .query(&mut conn)
        .unwrap();

    assert_eq!(cluster.move_slot_keys(slot, from, to), 1);
    let (code, _, _) = redirect(&cluster, from, &["GET", key]).expect_err("ASK after the move");
    assert_eq!(code, "ASK");

    cluster.finish_migration(slot, from, to);
    assert_eq!(cluster.primary_for_slot(slot), to);
    assert_eq!(redirect(&cluster, to, &["GET", key]), Ok(Some("v".into())));
    let ttl: i64 = cluster.node(to).cmd(&["PTTL", key]);
    assert!(ttl > 0, "the TTL moved with the key: {ttl}");
    assert_eq!(
        redirect(&cluster, to, &["GET", &new_key]),
        Ok(Some("n".into()))
    );
    let (code, addr, _) = redirect(&cluster, from, &["GET", key]).expect_err("MOVED");
    assert_eq!((code.as_str(), addr), ("MOVED", cluster.node(to).addr()));

    // And back in one call.
    assert_eq!(cluster.migrate_slot(slot, to, from), 2);
    assert_eq!(cluster.primary_for_slot(slot), from);
}

#[test]
fn sentinels_elect_a_new_primary_when_the_primary_is_killed() {
    let mut set = SentinelSet::start("harness-master");
    println!("sentinel set start-up: {:?}", set.startup_time());
    assert_eq!(set.master_name(), "harness-master");
    assert_eq!(set.sentinel_urls().len(), 3);
    let old = set.primary_addr();
    assert_eq!(old, set.server(0).addr());
    assert_eq!(set.primary_index(), 0);
    set.server(0).set_replicated("k", "kept", 1);

    let killed_addr = set.kill_primary();
    assert_eq!(killed_addr, old);
    let killed = Instant::now();
    let new = set.wait_for_switch(&old);
    println!(
        "sentinel failover after kill -9 of the primary: {:?}",
        killed.elapsed()
    );
    assert_eq!(new, set.server(1).addr());
    assert_eq!(set.primary_addr(), new);
    let found: Option<String> = set.server(1).cmd(&["GET", "k"]);
    assert_eq!(found.as_deref(), Some("kept"));
    let pids: Vec<u32> = (0..3).map(|i| set.sentinel(i).pid()).collect();
    drop(set);
    for pid in pids {
        assert!(!process_exists(pid), "sentinel {pid} survived drop");
    }
}
