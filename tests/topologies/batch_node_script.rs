//! `lua/batch_node.lua` (group commit per cluster node) on a real Redis 7 cluster: one
//! call over locks of several hash slots of one primary answers every operation exactly
//! as `lua/acquire.lua` and `lua/release.lua` do on their own and leaves the same state;
//! an operation whose slot the node does not serve, or whose slot is being migrated,
//! answers "not here" (4) and writes nothing, and so does every later operation of the
//! same lock in the call, while its neighbours run.

use redlatch_testkit as common;

use common::cluster::{key_slot, RedisCluster};
use redis::{Script, Value};

const LEASE: &str = "10000";
const SHARDED: &str = include_str!("../../lua/dialect_sharded.lua");
const PASS_ON: &str = include_str!("../../lua/pass_on.lua");

/// The scripts as the library sends them on a Redis 7 cluster.
fn acquire_script() -> String {
    format!("{SHARDED}{}", include_str!("../../lua/acquire.lua"))
}
fn release_script() -> String {
    format!(
        "{SHARDED}{PASS_ON}{}",
        include_str!("../../lua/release.lua")
    )
}
fn node_script() -> String {
    format!(
        "{}{SHARDED}{PASS_ON}{}{}",
        include_str!("../../lua/cross_slot_flags.lua"),
        include_str!("../../lua/acquire_op.lua"),
        include_str!("../../lua/batch_node.lua")
    )
}

fn registry(name: &str) -> String {
    format!("redlatch_lock_waiters:{{{name}}}")
}
fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// One operation: acquire (`true`) or release, on a lock name, by a holder.
type Op = (bool, String, &'static str);

/// The single scripts' answer in batch.lua's terms: (status, value).
fn single(conn: &mut redis::Connection, (acquire, name, holder): &Op) -> (i64, i64) {
    if *acquire {
        let r: redis::RedisResult<String> = Script::new(&acquire_script())
            .key(name)
            .arg(LEASE)
            .arg(*holder)
            .invoke(conn);
        return r.map(|r| common::acquire_answer(&r)).unwrap_or_else(|e| {
            assert!(e.to_string().contains("WRONGTYPE"), "{e}");
            (3, 0)
        });
    }
    let r: redis::RedisResult<Option<i64>> = Script::new(&release_script())
        .key(name)
        .key(registry(name))
        .arg(channel(name))
        .arg("0")
        .arg(LEASE)
        .arg(*holder)
        .invoke(conn);
    match r {
        Ok(v) => (v.unwrap_or(-1), 0),
        Err(e) => {
            assert!(e.to_string().contains("WRONGTYPE"), "{e}");
            (3, 0)
        }
    }
}

/// One batch_node.lua call, routed by `route` (a name the node serves), every
/// operation with the lease `LEASE`.
fn node_batch(conn: &mut redis::Connection, route: &str, ops: &[Op]) -> Vec<(i64, i64)> {
    let leases = vec![LEASE.parse().unwrap(); ops.len()];
    node_batch_leased(conn, route, ops, &leases)
}

/// The same with a lease per operation.
fn node_batch_leased(
    conn: &mut redis::Connection,
    route: &str,
    ops: &[Op],
    leases: &[u64],
) -> Vec<(i64, i64)> {
    let script = Script::new(&node_script());
    let mut inv = script.prepare_invoke();
    inv.key(route);
    let argv: Vec<_> = (ops.iter().zip(leases))
        .map(|((acquire, name, holder), &lease)| {
            let extra = if *acquire {
                String::new()
            } else {
                channel(name)
            };
            let args = vec![holder.to_string(), name.to_string(), registry(name), extra];
            (if *acquire { 'a' } else { 'r' }, lease, args)
        })
        .collect();
    inv.arg(common::batch_argv(&argv));
    let v = common::batch_integers(&inv.invoke::<String>(conn).unwrap());
    v.chunks(2).map(|c| (c[0], c[1])).collect()
}

/// What a key holds: its type, hash fields and whether it expires within the lease.
fn state(conn: &mut redis::Connection, key: &str) -> (String, Value, bool) {
    let kind: String = redis::cmd("TYPE").arg(key).query(conn).unwrap();
    let fields: Value = if kind == "hash" {
        redis::cmd("HGETALL").arg(key).query(conn).unwrap()
    } else {
        Value::Nil
    };
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(conn).unwrap();
    (kind, fields, pttl > 0 && pttl <= 10_000)
}

/// Twin names on primary `p`, for the single scripts and for the batch (`a`, a string
/// key `s`, `b`); every name in its own slot.
fn twin_names(cluster: &RedisCluster, p: usize) -> (Vec<String>, Vec<String>) {
    let names = |prefix: &str| -> Vec<String> {
        ["a", "s", "b"]
            .iter()
            .map(|n| cluster.key_on(p, &format!("{prefix}{n}-")))
            .collect()
    };
    let (singles_names, batch_names) = (names("single-"), names("batch-"));
    let mut slots: Vec<u16> = (singles_names.iter().chain(&batch_names))
        .map(|n| key_slot(n.as_bytes()))
        .collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), 6, "every name in its own slot");
    (singles_names, batch_names)
}

/// The operations run on each twin set `n` (`a`, `s`, `b`), each commented with what it meets.
fn every_answer(n: &[String]) -> Vec<Op> {
    let (a, s, b) = (n[0].clone(), n[1].clone(), n[2].clone());
    vec![
        (true, a.clone(), "h:1"),  // fresh
        (true, a.clone(), "h:1"),  // re-entered, count 2
        (true, a.clone(), "h:2"),  // busy
        (false, a.clone(), "h:2"), // not held
        (false, a.clone(), "h:1"), // still held
        (false, a.clone(), "h:1"), // released
        (false, a.clone(), "h:1"), // not held any more
        (true, s.clone(), "h:1"),  // a string key: WRONGTYPE
        (false, s, "h:1"),         // WRONGTYPE on release too
        (true, b.clone(), "h:3"),  // fresh, left held
        (true, b, "h:3"),          // re-entered
    ]
}

/// [`every_answer`]'s operations once through the single scripts and once in one node
/// batch, on twin names of primary `p`: the same answers and the same state left.
fn assert_twins_answer_alike(cluster: &RedisCluster, p: usize, conn: &mut redis::Connection) {
    let (singles_names, batch_names) = twin_names(cluster, p);
    for n in [&singles_names, &batch_names] {
        let _: () = redis::cmd("SET").arg(&n[1]).arg("x").query(conn).unwrap();
    }
    let singles: Vec<(i64, i64)> = every_answer(&singles_names)
        .iter()
        .map(|op| single(conn, op))
        .collect();
    let mut batched = node_batch(conn, &batch_names[0], &every_answer(&batch_names));
    // The busy answer carries the holder's PTTL, which ticks between the two runs.
    assert!(batched[2].1 > 0 && batched[2].1 <= 10_000, "{batched:?}");
    batched[2].1 = singles[2].1;
    assert_eq!(batched, singles);
    assert_eq!(
        singles,
        vec![
            (1, 1),
            (2, 2),
            (0, singles[2].1),
            (-1, 0),
            (0, 0),
            (1, 0),
            (-1, 0),
            (3, 0),
            (3, 0),
            (1, 1),
            (2, 2)
        ]
    );
    for (s, b) in singles_names.iter().zip(&batch_names) {
        assert_eq!(state(conn, s), state(conn, b), "{s} / {b}");
    }
}

/// Leases that differ (ARGV[2] is "", each operation carries its own): a fresh lock
/// takes its own; a re-entry and a partial release extend the lease to theirs.
fn assert_each_operation_has_its_lease(
    cluster: &RedisCluster,
    p: usize,
    conn: &mut redis::Connection,
) {
    let (short, long) = (cluster.key_on(p, "short-"), cluster.key_on(p, "long-"));
    let leased = node_batch_leased(
        conn,
        &short,
        &[
            (true, short.clone(), "h:1"),
            (true, long.clone(), "h:1"),
            (true, short.clone(), "h:1"),
            (false, short.clone(), "h:1"),
        ],
        &[20_000, 600_000, 90_000, 150_000],
    );
    assert_eq!(leased, [(1, 1), (1, 1), (2, 2), (0, 0)]);
    let pttl = |conn: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("PTTL").arg(key).query(conn).unwrap()
    };
    let (s, l) = (pttl(conn, &short), pttl(conn, &long));
    assert!((120_000..=150_000).contains(&s), "{s}");
    assert!((500_000..=600_000).contains(&l), "{l}");
}

/// A lock of another primary, and one in a slot of `p` being migrated to `other`:
/// "not here" for every operation of theirs, nothing written; their neighbours run.
fn assert_other_slots_are_not_here(
    cluster: &RedisCluster,
    [p, other]: [usize; 2],
    conn: &mut redis::Connection,
) {
    let away = cluster.key_on(other, "away-");
    let moving = cluster.key_on(p, "moving-");
    let fresh = cluster.key_on(p, "fresh-");
    let slot = key_slot(moving.as_bytes());
    // Held before the migration starts: its key is here, the slot is not settled.
    assert_eq!(
        single(conn, &(true, moving.clone(), "h:9")),
        (1, 1),
        "{moving}"
    );
    cluster.begin_migration(slot, p, other);
    let answers = node_batch(
        conn,
        &fresh,
        &[
            (true, away.clone(), "h:1"),
            (true, fresh.clone(), "h:1"),
            (false, moving.clone(), "h:9"),
            (true, moving.clone(), "h:9"),
            (false, away.clone(), "h:1"),
        ],
    );
    assert_eq!(answers, [(4, 0), (1, 1), (4, 0), (4, 0), (4, 0)]);
    // The held lock is untouched (one hold, h:9's), the fresh one taken.
    let held: Option<i64> = redis::cmd("HGET")
        .arg(&moving)
        .arg("h:9")
        .query(conn)
        .unwrap();
    assert_eq!(held, Some(1));
    assert_eq!(state(conn, &fresh).0, "hash");
    let mut away_conn = cluster.node(other).conn();
    assert_eq!(state(&mut away_conn, &away).0, "none");
}

#[test]
fn a_node_batch_answers_each_operation_as_the_single_scripts_do() {
    if common::older_than(7, "batch_node.lua (allow-cross-slot-keys)") {
        return;
    }
    let cluster = RedisCluster::start(3, 0);
    let [p, other] = [cluster.primaries()[0], cluster.primaries()[1]];
    let mut conn = cluster.node(p).conn();
    assert_twins_answer_alike(&cluster, p, &mut conn);
    assert_each_operation_has_its_lease(&cluster, p, &mut conn);
    assert_other_slots_are_not_here(&cluster, [p, other], &mut conn);
}

/// The next message a classic subscription hears (within its read timeout), if any.
fn next_message(sub: &mut redis::PubSub<'_>) -> Option<(String, String)> {
    let msg = sub.get_message().ok()?;
    Some((msg.get_channel_name().to_string(), msg.get_payload().ok()?))
}

/// A node batch that frees several locks counts each one's classic listeners apart
/// (one PUBSUB NUMSUB for all of them, channels and markers): "0" goes out on the channel
/// of a lock a Redisson-like classic subscriber listens on, both ways, and nothing on
/// the channel of a lock only a redlatch twin (its channel and marker) listens on, nor on
/// a lock nobody listens on.
#[test]
fn a_node_batch_publishes_for_each_freed_lock_with_a_classic_listener_only() {
    if common::older_than(7, "batch_node.lua (allow-cross-slot-keys)") {
        return;
    }
    let cluster = RedisCluster::start(3, 0);
    let p = cluster.primaries()[0];
    let mut conn = cluster.node(p).conn();
    let names: Vec<String> = ["quiet-", "java-", "twin-", "java2-"]
        .iter()
        .map(|n| cluster.key_on(p, n))
        .collect();
    for n in &names {
        assert_eq!(single(&mut conn, &(true, n.clone(), "h:1")), (1, 1), "{n}");
    }
    let (java, twin, java2) = (&names[1], &names[2], &names[3]);
    let mut java_conn = cluster.node(p).conn();
    let mut java_sub = java_conn.as_pubsub();
    java_sub
        .subscribe(&[channel(java), channel(java2)])
        .unwrap();
    java_sub
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut twin_conn = cluster.node(p).conn();
    let mut twin_sub = twin_conn.as_pubsub();
    let marker = format!("{}:redlatch-waiters", channel(twin));
    twin_sub.subscribe(&[channel(twin), marker]).unwrap();
    twin_sub
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let ops: Vec<Op> = names.iter().map(|n| (false, n.clone(), "h:1")).collect();
    assert_eq!(node_batch(&mut conn, &names[0], &ops), vec![(1, 0); 4]);
    // The Java-like subscriber hears "0" for each of its two locks, in the batch's order.
    assert_eq!(
        next_message(&mut java_sub),
        Some((channel(java), "0".into()))
    );
    assert_eq!(
        next_message(&mut java_sub),
        Some((channel(java2), "0".into()))
    );
    // The twin heard nothing: the first message it gets is the one sent now.
    let _: i64 = redis::cmd("PUBLISH")
        .arg(channel(twin))
        .arg("probe")
        .query(&mut conn)
        .unwrap();
    assert_eq!(
        next_message(&mut twin_sub),
        Some((channel(twin), "probe".into()))
    );
    for n in &names {
        let exists: i64 = redis::cmd("EXISTS").arg(n).query(&mut conn).unwrap();
        assert_eq!(exists, 0, "{n} freed");
    }
}
