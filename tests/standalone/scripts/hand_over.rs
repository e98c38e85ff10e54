//! A batch of distinct locks (batch.lua's short path) answers, hands over to a
//! registered waiter and tells listeners exactly as the single scripts do, on twin keys;
//! then the per-operation path the same (part of `scripts`).

use redis::{Script, Value};
use redlatch_testkit::{self as common, RedisServer};

use super::{batch, lease, members, single, state, waking, Op, ACQUIRE, BATCH, LEASE};

/// The waiter registry of lock `p` + `name`.
fn registry(p: &str, name: &str) -> String {
    format!("redlatch_lock_waiters:{{{p}{name}}}")
}

/// The shared wake channel of lock `p` + `name`.
fn channel(p: &str, name: &str) -> String {
    format!("redisson_lock__channel:{{{p}{name}}}")
}

/// The releases of [`a_batch_of_distinct_locks_answers_and_hands_over_as_the_single_scripts_do`].
const RELEASES: [&str; 6] = ["held1", "held2", "queued", "heard", "stale", "nothere"];

/// Twin locks under prefixes `single:` and `batch:`: held by `h:1` (held2 twice), a
/// live waiter queued on `queued` and a dead one on `stale`, a waiter's ticket on the
/// registry of the free `new2`; `sub` listens as the queued waiter's client (its own
/// channel and the marker) and as a Redisson-like waiter on the shared channel of
/// `heard`.
fn twin_locks_with_waiters(conn: &mut redis::Connection, sub: &mut redis::PubSub) {
    for p in ["single:", "batch:"] {
        for (name, holds) in [
            ("held1", 1),
            ("held2", 2),
            ("queued", 1),
            ("heard", 1),
            ("stale", 1),
        ] {
            for _ in 0..holds {
                let (status, _) = single(conn, (true, &format!("{p}{name}"), "h:1"));
                assert!(status > 0, "{p}{name}");
            }
        }
        let zadd = |conn: &mut redis::Connection, key: String, ticket: &str| {
            let _: () = redis::cmd("ZADD")
                .arg(key)
                .arg(1)
                .arg(ticket)
                .query(conn)
                .unwrap();
        };
        zadd(conn, registry(p, "queued"), "c0ffee:7:1:10000");
        zadd(conn, registry(p, "stale"), "dead:1:1:10000");
        zadd(conn, registry(p, "new2"), "c1:6:1:10000");
        sub.subscribe(&[
            format!("{}:c0ffee", channel(p, "queued")),
            format!("{}:redlatch-waiters", channel(p, "queued")),
            channel(p, "heard"),
        ])
        .unwrap();
    }
    sub.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
}

/// On the `single:` twins, one call each: `new1` and `new2` (with its waiter's ticket)
/// acquired, then [`RELEASES`] released by `h:1`.
fn single_calls(conn: &mut redis::Connection) -> Vec<(i64, i64)> {
    let mut singles = vec![
        single(conn, (true, "single:new1", "h:5")),
        common::acquire_answer(
            &Script::new(ACQUIRE)
                .key("single:new2")
                .key(registry("single:", "new2"))
                .arg(LEASE)
                .arg("c1:6")
                .arg("c1:6:1:10000")
                .invoke::<String>(conn)
                .unwrap(),
        ),
    ];
    for name in RELEASES {
        singles.push(single(conn, (false, &format!("single:{name}"), "h:1")));
    }
    singles
}

/// The same operations as [`single_calls`] on the `batch:` twins, in one batch call.
fn one_batch_call(conn: &mut redis::Connection) -> Vec<(i64, i64)> {
    let script = Script::new(&waking(BATCH));
    let mut inv = script.prepare_invoke();
    let mut argv = Vec::new();
    for (name, ticket) in [("new1", ""), ("new2", "c1:6:1:10000")] {
        let holder = if ticket.is_empty() { "h:5" } else { "c1:6" };
        inv.key(format!("batch:{name}"))
            .key(registry("batch:", name));
        argv.push(('a', lease(), vec![holder.to_string(), ticket.to_string()]));
    }
    for name in RELEASES {
        inv.key(format!("batch:{name}"))
            .key(registry("batch:", name));
        argv.push((
            'r',
            lease(),
            vec!["h:1".to_string(), channel("batch:", name)],
        ));
    }
    inv.arg(common::batch_argv(&argv));
    let batched = common::batch_integers(&inv.invoke::<String>(conn).unwrap());
    batched.chunks(2).map(|c| (c[0], c[1])).collect()
}

/// Each twin lock and its registry alike; "queued" went to the waiter's holder, with
/// the hand-over recorded for its claim, in both runs.
fn assert_twins_alike_and_queued_handed_over(conn: &mut redis::Connection) {
    for name in [
        "new1", "new2", "held1", "held2", "queued", "heard", "stale", "nothere",
    ] {
        assert_eq!(
            state(conn, &format!("single:{name}")),
            state(conn, &format!("batch:{name}")),
            "{name}"
        );
        assert_eq!(
            members(conn, registry("single:", name)),
            members(conn, registry("batch:", name)),
            "registry of {name}"
        );
    }
    let (_, fields, _) = state(conn, "batch:queued");
    assert_eq!(
        fields,
        Value::Array(vec![
            Value::BulkString(b"c0ffee:7".to_vec()),
            Value::BulkString(b"1".to_vec())
        ])
    );
    for p in ["single:", "batch:"] {
        let handed: Option<String> = redis::cmd("GET")
            .arg(format!("{}:handed", registry(p, "queued")))
            .query(conn)
            .unwrap();
        assert_eq!(handed.as_deref(), Some("c0ffee:7:1:10000"), "{p}");
    }
}

/// Per run: the hand-over message on the waiter's own channel and "0" for the
/// listener of "heard"; nothing else (the dead waiter's "0" reaches nobody here).
fn assert_messages_heard(sub: &mut redis::PubSub) {
    let mut heard = Vec::new();
    for _ in 0..4 {
        let msg = sub.get_message().unwrap();
        heard.push((
            msg.get_channel_name().to_string(),
            msg.get_payload::<String>().unwrap(),
        ));
    }
    heard.sort();
    let mut expected = Vec::new();
    for p in ["batch:", "single:"] {
        expected.push((channel(p, "heard"), "0".to_string()));
        expected.push((
            format!("{}:c0ffee", channel(p, "queued")),
            format!("c0ffee:7:1:10000|{p}queued"),
        ));
    }
    expected.sort();
    assert_eq!(heard, expected);
}

/// The per-operation path: one acquisition meets a held lock ("held2", h:1 still
/// holds it once), so the batch's acquisitions are each checked with TYPE; the answers
/// and the state left are the single scripts'.
fn assert_per_operation_path_alike(conn: &mut redis::Connection) {
    let ops: Vec<Op> = vec![
        (true, "held2", "h:9"),
        (true, "new3", "h:5"),
        (false, "new1", "h:5"),
    ];
    let singles: Vec<(i64, i64)> = ops
        .iter()
        .map(|&(a, name, h)| single(conn, (a, &format!("single:{name}"), h)))
        .collect();
    let mut batched = batch(conn, &ops, "batch:");
    assert!(batched[0].0 == 0 && batched[0].1 > 0, "{batched:?}");
    batched[0].1 = singles[0].1;
    assert_eq!(batched, singles);
    assert_eq!(singles[1..], [(1, 1), (1, 0)]);
    for name in ["held2", "new3", "new1"] {
        assert_eq!(
            state(conn, &format!("single:{name}")),
            state(conn, &format!("batch:{name}")),
            "{name}"
        );
    }
}

/// A batch of distinct locks takes batch.lua's short path (one EXISTS for the
/// acquisitions, one DEL, NUMSUB and EXISTS for the releases): it must still answer and
/// leave behind exactly what the single scripts do, hand-over to a registered waiter,
/// "0" for a listener that is not one, a dead waiter's ticket dropped, included. Then a
/// batch whose acquisitions meet a held lock (the per-operation path) does the same.
#[test]
fn a_batch_of_distinct_locks_answers_and_hands_over_as_the_single_scripts_do() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let mut sub = server.conn();
    let mut sub = sub.as_pubsub();
    twin_locks_with_waiters(&mut conn, &mut sub);
    let singles = single_calls(&mut conn);
    let batched = one_batch_call(&mut conn);
    assert_eq!(batched, singles);
    assert_eq!(
        singles,
        [
            (1, 1),
            (1, 1),
            (1, 0),
            (0, 0),
            (1, 0),
            (1, 0),
            (1, 0),
            (-1, 0)
        ]
    );
    assert_twins_alike_and_queued_handed_over(&mut conn);
    assert_messages_heard(&mut sub);
    assert_per_operation_path_alike(&mut conn);
}
