//! `lua/batch.lua` (group commit) answers every operation exactly as `lua/acquire.lua`
//! and `lua/release.lua` do on their own, and leaves the same state behind: the same
//! sequence of operations runs once through the single scripts and once through one
//! batch call, on twin keys of a real Redis.

mod common;

use common::RedisServer;
use redis::{Script, Value};

const LEASE: &str = "10000";
/// The scripts as the library sends them on a single server: the classic dialect's
/// prelude first, and lua/pass_on.lua before the scripts that free plain locks.
const ACQUIRE: &str = concat!(
    include_str!("../lua/dialect_classic.lua"),
    include_str!("../lua/acquire.lua")
);
const RELEASE: &str = include_str!("../lua/release.lua");
const BATCH: &str = include_str!("../lua/batch.lua");

/// A script that frees plain locks, after the prelude and lua/pass_on.lua.
fn waking(script: &str) -> String {
    format!(
        "{}{}{script}",
        include_str!("../lua/dialect_classic.lua"),
        include_str!("../lua/pass_on.lua")
    )
}

/// One operation: acquire (`true`) or release, on a lock name, by a holder.
type Op = (bool, &'static str, &'static str);

/// The single scripts' answer in batch.lua's terms: (status, value).
fn single(conn: &mut redis::Connection, (acquire, name, holder): (bool, &str, &str)) -> (i64, i64) {
    if acquire {
        let r: redis::RedisResult<(i64, i64)> = Script::new(ACQUIRE)
            .key(name)
            .arg(LEASE)
            .arg(holder)
            .invoke(conn);
        return r.unwrap_or_else(|e| {
            assert!(e.to_string().contains("WRONGTYPE"), "{e}");
            (3, 0)
        });
    }
    let r: redis::RedisResult<Option<i64>> = Script::new(&waking(RELEASE))
        .key(name)
        .key(format!("redlatch_lock_waiters:{{{name}}}"))
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg("0")
        .arg(LEASE)
        .arg(holder)
        .invoke(conn);
    match r {
        Ok(v) => (v.unwrap_or(-1), 0),
        Err(e) => {
            assert!(e.to_string().contains("WRONGTYPE"), "{e}");
            (3, 0)
        }
    }
}

fn batch(conn: &mut redis::Connection, ops: &[Op], prefix: &str) -> Vec<(i64, i64)> {
    let script = Script::new(&waking(BATCH));
    let mut inv = script.prepare_invoke();
    for &(acquire, name, holder) in ops {
        let name = format!("{prefix}{name}");
        inv.key(&name)
            .key(format!("redlatch_lock_waiters:{{{name}}}"))
            .arg(if acquire { "a" } else { "r" })
            .arg(LEASE)
            .arg(holder);
        match acquire {
            true => inv.arg(""),
            false => inv.arg(format!("redisson_lock__channel:{{{name}}}")),
        };
        inv.arg("");
    }
    let v: Vec<i64> = inv.invoke(conn).unwrap();
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

#[test]
fn a_batch_answers_and_changes_exactly_what_the_single_scripts_do() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let ops: Vec<Op> = vec![
        (true, "a", "h:1"),  // fresh
        (true, "a", "h:1"),  // re-entered, count 2
        (true, "a", "h:2"),  // busy
        (false, "a", "h:2"), // not held
        (false, "a", "h:1"), // still held
        (false, "a", "h:1"), // released
        (false, "a", "h:1"), // not held any more
        (true, "s", "h:1"),  // a string key: WRONGTYPE
        (false, "s", "h:1"), // WRONGTYPE on release too
        (true, "b", "h:3"),  // fresh, left held
    ];
    for prefix in ["single:", "batch:"] {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}s"))
            .arg("x")
            .query(&mut conn)
            .unwrap();
    }
    let mut sub = server.conn();
    let mut sub = sub.as_pubsub();
    // A listener that is not a registered redlatch waiter (as a Redisson JVM waiting
    // on these locks): every full release wakes it with "0" on the shared channel.
    sub.subscribe(&[
        "redisson_lock__channel:{single:a}",
        "redisson_lock__channel:{batch:a}",
    ])
    .unwrap();
    sub.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let singles: Vec<(i64, i64)> = ops
        .iter()
        .map(|&(a, name, h)| single(&mut conn, (a, &format!("single:{name}"), h)))
        .collect();
    let mut batched = batch(&mut conn, &ops, "batch:");
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
            (1, 1)
        ]
    );
    assert!(
        singles[2].1 > 0 && singles[2].1 <= 10_000,
        "busy: the holder's pttl"
    );
    for name in ["a", "s", "b"] {
        assert_eq!(
            state(&mut conn, &format!("single:{name}")),
            state(&mut conn, &format!("batch:{name}")),
            "{name}"
        );
    }
    // Each release of the last hold published "0" on its lock's channel, once.
    let mut channels = Vec::new();
    for _ in 0..2 {
        let msg = sub.get_message().unwrap();
        assert_eq!(msg.get_payload::<String>().unwrap(), "0");
        channels.push(msg.get_channel_name().to_string());
    }
    assert_eq!(
        channels,
        [
            "redisson_lock__channel:{single:a}",
            "redisson_lock__channel:{batch:a}"
        ]
    );
}
