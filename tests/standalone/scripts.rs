//! `lua/batch.lua` (group commit) answers every operation exactly as `lua/acquire.lua`
//! and `lua/release.lua` do on their own, and leaves the same state behind: the same
//! sequence of operations runs once through the single scripts and once through one
//! batch call, on twin keys of a real Redis.

use redlatch_testkit as common;

use common::RedisServer;
use redis::{Script, Value};

mod hand_over;

const LEASE: &str = "10000";

fn lease() -> u64 {
    LEASE.parse().unwrap()
}
/// The scripts as the library sends them on a single server: the classic dialect's
/// prelude first, and lua/pass_on.lua before the scripts that free plain locks.
const ACQUIRE: &str = concat!(
    include_str!("../../lua/dialect_classic.lua"),
    include_str!("../../lua/acquire.lua")
);
const RELEASE: &str = include_str!("../../lua/release.lua");
const BATCH: &str = concat!(
    include_str!("../../lua/acquire_op.lua"),
    include_str!("../../lua/batch.lua")
);

/// A script that frees plain locks, after the prelude and lua/pass_on.lua.
fn waking(script: &str) -> String {
    format!(
        "{}{}{script}",
        include_str!("../../lua/dialect_classic.lua"),
        include_str!("../../lua/pass_on.lua")
    )
}

/// One operation: acquire (`true`) or release, on a lock name, by a holder.
type Op = (bool, &'static str, &'static str);

/// The single scripts' answer in batch.lua's terms: (status, value).
fn single(conn: &mut redis::Connection, (acquire, name, holder): (bool, &str, &str)) -> (i64, i64) {
    if acquire {
        let r: redis::RedisResult<String> = Script::new(ACQUIRE)
            .key(name)
            .arg(LEASE)
            .arg(holder)
            .invoke(conn);
        return r.map(|r| common::acquire_answer(&r)).unwrap_or_else(|e| {
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
    let mut argv = Vec::new();
    for &(acquire, name, holder) in ops {
        let name = format!("{prefix}{name}");
        inv.key(&name)
            .key(format!("redlatch_lock_waiters:{{{name}}}"));
        let extra = match acquire {
            true => String::new(),
            false => format!("redisson_lock__channel:{{{name}}}"),
        };
        let code = if acquire { 'a' } else { 'r' };
        argv.push((code, lease(), vec![holder.to_string(), extra]));
    }
    inv.arg(common::batch_argv(&argv));
    let v = common::batch_integers(&inv.invoke::<String>(conn).unwrap());
    v.chunks(2).map(|c| (c[0], c[1])).collect()
}

/// The members of a sorted set (a waiter registry), in order.
fn members(conn: &mut redis::Connection, key: impl redis::ToRedisArgs) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(conn)
        .unwrap()
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

/// Leases that differ: ARGV[2] is "" and each operation carries its own, which a fresh
/// lock takes and a re-entry or a partial release extends the lease to; a call whose
/// arguments do not match its codes is refused and changes nothing.
#[test]
fn a_batch_of_different_leases_gives_each_lock_its_own_and_a_malformed_call_is_refused() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let script = Script::new(&waking(BATCH));
    let mut inv = script.prepare_invoke();
    let mut argv = Vec::new();
    // Two fresh locks (the fast path), then a re-entry and a partial release of the
    // first (the per-operation path: it is named more than once).
    for (code, name, lease) in [
        ('a', "short", 20_000),
        ('a', "long", 600_000),
        ('a', "short", 90_000),
        ('r', "short", 150_000),
    ] {
        inv.key(name)
            .key(format!("redlatch_lock_waiters:{{{name}}}"));
        let extra = match code {
            'r' => format!("redisson_lock__channel:{{{name}}}"),
            _ => String::new(),
        };
        argv.push((code, lease, vec!["h:1".to_string(), extra]));
    }
    let argv = common::batch_argv(&argv);
    assert_eq!(argv[..2], ["aaar", ""], "{argv:?}");
    inv.arg(&argv);
    let answers = common::batch_integers(&inv.invoke::<String>(&mut conn).unwrap());
    assert_eq!(answers, [1, 1, 1, 1, 2, 2, 0, 0]);
    let pttl = |conn: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("PTTL").arg(key).query(conn).unwrap()
    };
    // "short" went to the re-entry's lease, then the partial release's; "long" kept its
    // own.
    let (short, long) = (pttl(&mut conn, "short"), pttl(&mut conn, "long"));
    assert!((120_000..=150_000).contains(&short), "{short}");
    assert!((500_000..=600_000).contains(&long), "{long}");

    // A call whose arguments do not match its codes changes nothing.
    let mut bad = script.prepare_invoke();
    bad.key("other")
        .key("redlatch_lock_waiters:{other}")
        .arg("aa")
        .arg("10000")
        .arg("h:1")
        .arg("");
    let e = bad.invoke::<String>(&mut conn).unwrap_err();
    assert!(e.to_string().contains("batch.lua"), "{e}");
    let exists: i64 = redis::cmd("EXISTS").arg("other").query(&mut conn).unwrap();
    assert_eq!(exists, 0);
}

/// A lock()'s first attempt marks its ticket new (acquire.lua's ARGV[4], batch.lua's op
/// "A"): no attempt carried it before, so a grant leaves the registry alone (no ZREM, no
/// claim), while a refusal still registers it. The registry here holds the very ticket,
/// which a first attempt never meets in use: a grant that looked would remove it.
#[test]
fn a_first_attempt_leaves_the_registry_alone_and_still_registers_when_refused() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let registry = |name: &str| format!("redlatch_lock_waiters:{{{name}}}");
    let ticket = "c1:6:1:10000";
    for (name, first) in [("free-first", true), ("free-again", false)] {
        let _: () = redis::cmd("ZADD")
            .arg(registry(name))
            .arg(1)
            .arg(ticket)
            .query(&mut conn)
            .unwrap();
        let script = Script::new(ACQUIRE);
        let mut acquire = script.prepare_invoke();
        acquire
            .key(name)
            .key(registry(name))
            .arg(LEASE)
            .arg("c1:6")
            .arg(ticket);
        if first {
            acquire.arg("1");
        }
        let got = common::acquire_answer(&acquire.invoke::<String>(&mut conn).unwrap());
        assert_eq!(got, (1, 1), "{name}");
        let left = members(&mut conn, registry(name));
        assert_eq!(left.is_empty(), !first, "{name}: {left:?}");
    }
    // Refused: the new ticket is registered, by acquire.lua and by a batch alike.
    assert!(single(&mut conn, (true, "busy", "h:1")).0 > 0);
    let script = Script::new(ACQUIRE);
    let mut acquire = script.prepare_invoke();
    acquire
        .key("busy")
        .key(registry("busy"))
        .arg(LEASE)
        .arg("c1:6")
        .arg(ticket)
        .arg("1");
    let (status, _) = common::acquire_answer(&acquire.invoke::<String>(&mut conn).unwrap());
    assert_eq!(status, 0);
    assert_eq!(members(&mut conn, registry("busy")), [ticket]);
    let batch_ticket = "c2:7:2:10000";
    let script = Script::new(&waking(BATCH));
    let mut inv = script.prepare_invoke();
    let mut argv = Vec::new();
    for (name, holder, t) in [
        ("busy", "c2:7", batch_ticket),
        ("free-batch", "c2:8", "c2:8:3:10000"),
    ] {
        inv.key(name).key(registry(name));
        argv.push(('A', lease(), vec![holder.to_string(), t.to_string()]));
    }
    inv.arg(common::batch_argv(&argv));
    let answers = common::batch_integers(&inv.invoke::<String>(&mut conn).unwrap());
    assert_eq!(answers[0], 0, "busy: refused");
    assert_eq!(answers[2..], [1, 1], "free-batch: granted");
    assert_eq!(members(&mut conn, registry("busy")), [ticket, batch_ticket]);
    assert!(members(&mut conn, registry("free-batch")).is_empty());
}
