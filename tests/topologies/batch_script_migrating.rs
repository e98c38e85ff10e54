//! `lua/batch.lua` (group commit per hash slot: what a Redis < 7 cluster gets) on a slot
//! being migrated. The script runs on the source node only while every key it declares
//! is still there; the `"<registry>:handed"` keys it does not declare may be missing, and
//! a command naming a missing key of such a slot is refused inside a script. The script
//! must then neither fail half-way (its earlier operations done, the caller told they
//! failed) nor leave a hand-over record behind: each operation answers as on a settled
//! slot. Runs on whatever `redis-server` is on the PATH (7.0 in CI; 6.2 by putting its
//! binaries first on the PATH).

use redlatch_testkit as common;

use common::cluster::{key_slot, RedisCluster};
use redis::Script;

const LEASE: &str = "10000";

/// batch.lua as the library sends it per slot: classic dialect, pass_on, acquire_op.
fn batch_script() -> String {
    concat!(
        include_str!("../../lua/dialect_classic.lua"),
        include_str!("../../lua/pass_on.lua"),
        include_str!("../../lua/acquire_op.lua"),
        include_str!("../../lua/batch.lua")
    )
    .to_string()
}

/// `prefix:{name}`, or `prefix:name` for a name with a hash tag (as the library).
fn derived(prefix: &str, name: &str) -> String {
    match name.contains('{') {
        true => format!("{prefix}:{name}"),
        false => format!("{prefix}:{{{name}}}"),
    }
}

fn registry(name: &str) -> String {
    derived("redlatch_lock_waiters", name)
}

/// One batch.lua call of plain operations (acquire or release, holder, ticket) on `names`.
fn batch(
    conn: &mut redis::Connection,
    ops: &[(bool, &str, &str, &str)],
) -> redis::RedisResult<Vec<i64>> {
    let script = Script::new(&batch_script());
    let mut inv = script.prepare_invoke();
    let mut argv = Vec::new();
    for &(acquire, name, holder, ticket) in ops {
        inv.key(name).key(registry(name));
        let extra = match acquire {
            true => ticket.to_string(),
            false => derived("redisson_lock__channel", name),
        };
        let code = if acquire { 'a' } else { 'r' };
        argv.push((
            code,
            LEASE.parse().unwrap(),
            vec![holder.to_string(), extra],
        ));
    }
    inv.arg(common::batch_argv(&argv));
    let reply: String = inv.invoke(conn)?;
    Ok(common::batch_integers(&reply))
}

/// The keys of `slot` on the node of `conn` (EXISTS would answer ASK for a missing key
/// of a slot being migrated).
fn keys_in(conn: &mut redis::Connection, slot: u16) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(conn)
        .unwrap();
    keys.sort();
    keys
}

#[test]
fn a_batch_on_a_slot_being_migrated_answers_every_operation_and_leaves_no_hand_over() {
    let cluster = RedisCluster::start(3, 0);
    let [p, other] = [cluster.primaries()[0], cluster.primaries()[1]];
    let mut conn = cluster.node(p).conn();
    // Two locks of one slot of p (one hash tag), held by h:1, each with a waiter's
    // ticket registered (a waiter whose process is gone: nobody listens for it). No
    // hand-over record exists.
    let name = cluster.key_on(p, "moving-");
    let (a, b) = (format!("{{{name}}}:a"), format!("{{{name}}}:b"));
    assert_eq!(key_slot(a.as_bytes()), key_slot(b.as_bytes()));
    for lock in [&a, &b] {
        assert_eq!(
            batch(&mut conn, &[(true, lock, "h:1", "")]).unwrap(),
            [1, 1],
            "{lock}"
        );
        let _: () = redis::cmd("ZADD")
            .arg(registry(lock))
            .arg(1)
            .arg("dead:1:1:10000")
            .query(&mut conn)
            .unwrap();
    }
    let slot = key_slot(a.as_bytes());
    let mut before = vec![a.clone(), b.clone(), registry(&a), registry(&b)];
    before.sort();
    assert_eq!(keys_in(&mut conn, slot), before);
    cluster.begin_migration(slot, p, other);

    // Re-entry by a waiter that carries a ticket: the claim check reads the missing
    // "<registry>:handed" key; a re-entry, not a failure.
    assert_eq!(
        batch(&mut conn, &[(true, &a, "h:1", "h:1:5:10000")]).unwrap(),
        [2, 2]
    );
    // The partial release, then the last holds of both locks in one call: the locks
    // deleted together, their missing "<registry>:handed" keys asked to go too.
    assert_eq!(batch(&mut conn, &[(false, &a, "h:1", "")]).unwrap(), [0, 0]);
    assert_eq!(
        batch(&mut conn, &[(false, &a, "h:1", ""), (false, &b, "h:1", "")]).unwrap(),
        [1, 0, 1, 0]
    );
    // Both locks released, the dead waiter's tickets tried and dropped (nobody
    // listened for them), no hand-over record: nothing of the slot is left here.
    assert_eq!(keys_in(&mut conn, slot), Vec::<String>::new());
}
