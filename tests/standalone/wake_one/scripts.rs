//! The hand-over scripts themselves, as the library sends them to a single server
//! (lua/acquire.lua, release.lua, unwait.lua and force_release.lua after the prelude),
//! run on a plain connection (part of `wake_one`).

use std::time::Duration;

use redis::Script;
use redlatch_testkit::{self as common, RedisServer};

use super::registry_key;

const PRELUDE: &str = concat!(
    include_str!("../../../lua/dialect_classic.lua"),
    include_str!("../../../lua/pass_on.lua")
);

fn script(file: &str) -> Script {
    let body = match file {
        "acquire" => include_str!("../../../lua/acquire.lua"),
        "release" => include_str!("../../../lua/release.lua"),
        "force" => concat!(
            include_str!("../../../lua/tell_holders.lua"),
            include_str!("../../../lua/force_release.lua")
        ),
        _ => include_str!("../../../lua/unwait.lua"),
    };
    Script::new(&format!("{PRELUDE}{body}"))
}

/// A lock `name` held by `holder` for 60 s.
fn held(server: &RedisServer, name: &str, holder: &str) {
    let _: i64 = server.cmd(&["HSET", name, holder, "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", name, "60000"]);
}

/// `client`'s wake channel for lock `name`.
fn wake_channel(name: &str, client: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}:{client}")
}

fn release(conn: &mut redis::Connection, name: &str, holder: &str) -> Option<i64> {
    script("release")
        .key(name)
        .key(registry_key(name))
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg("0")
        .arg(60000)
        .arg(holder)
        .invoke(conn)
        .unwrap()
}

fn acquire(conn: &mut redis::Connection, name: &str, holder: &str, ticket: &str) -> (i64, i64) {
    let reply: String = script("acquire")
        .key(name)
        .key(registry_key(name))
        .arg(5000)
        .arg(holder)
        .arg(ticket)
        .invoke(conn)
        .unwrap();
    common::acquire_answer(&reply)
}

fn unwait(conn: &mut redis::Connection, name: &str, ticket: &str) -> i64 {
    script("unwait")
        .key(name)
        .key(registry_key(name))
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg(ticket)
        .invoke(conn)
        .unwrap()
}

/// Lock `name` held by `x:1` with `ticket` first in its registry and `listener` on
/// the ticket's client channel; releases it (so it is handed over) and returns the
/// connection the release used.
fn hand_over_to(
    server: &RedisServer,
    listener: &mut redis::PubSub,
    name: &str,
    ticket: &str,
) -> redis::Connection {
    held(server, name, "x:1");
    let client = ticket.split(':').next().unwrap();
    listener.subscribe(wake_channel(name, client)).unwrap();
    let _: i64 = server.cmd(&["ZADD", &registry_key(name), "1", ticket]);
    let mut conn = server.conn();
    assert_eq!(release(&mut conn, name, "x:1"), Some(1));
    conn
}

#[test]
fn an_attempt_that_finds_the_lock_handed_to_its_ticket_claims_it_once() {
    let server = RedisServer::start();
    let ticket = "c0ffee:7:1:5000";
    let mut listening = server.conn();
    let mut listener = listening.as_pubsub();
    let mut conn = hand_over_to(&server, &mut listener, "s", ticket);
    let msg = listener.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), format!("{ticket}|s"));
    assert_eq!(
        server.cmd::<Option<i64>>(&["HGET", "s", "c0ffee:7"]),
        Some(1)
    );
    let pttl: i64 = server.cmd(&["PTTL", "s"]);
    assert!((1..=5000).contains(&pttl), "the ticket's lease: {pttl}");
    // The waiter's attempt raced the release: it claims the hand-over, count stays 1.
    assert_eq!(acquire(&mut conn, "s", "c0ffee:7", ticket), (1, 1));
    assert_eq!(
        server.cmd::<Option<i64>>(&["HGET", "s", "c0ffee:7"]),
        Some(1)
    );
    // Claimed: the same ticket now re-enters, and leaving changes nothing.
    assert_eq!(acquire(&mut conn, "s", "c0ffee:7", ticket), (2, 2));
    assert_eq!(unwait(&mut conn, "s", ticket), 0);
    assert_eq!(
        server.cmd::<Option<i64>>(&["HGET", "s", "c0ffee:7"]),
        Some(2)
    );
}

#[test]
fn leaving_disowns_an_unclaimed_hand_over_and_passes_it_to_the_next_ticket() {
    let server = RedisServer::start();
    let (first, second) = ("c0ffee:7:1:5000", "beef:3:2:9000");
    held(&server, "u", "x:1");
    let (mut a_conn, mut b_conn) = (server.conn(), server.conn());
    let mut a = a_conn.as_pubsub();
    a.subscribe(wake_channel("u", "c0ffee")).unwrap();
    let mut b = b_conn.as_pubsub();
    b.subscribe(wake_channel("u", "beef")).unwrap();
    let _: i64 = server.cmd(&["ZADD", &registry_key("u"), "1", first, "2", second]);
    let mut conn = server.conn();
    assert_eq!(release(&mut conn, "u", "x:1"), Some(1));
    assert_eq!(
        server.cmd::<Option<i64>>(&["HGET", "u", "c0ffee:7"]),
        Some(1)
    );
    // The first waiter left before taking it: the lock was freed and went on to the
    // second.
    assert_eq!(unwait(&mut conn, "u", first), 1);
    let holders: Vec<String> = server.cmd(&["HKEYS", "u"]);
    assert_eq!(holders, vec!["beef:3".to_string()]);
    let msg = b.get_message().unwrap();
    assert_eq!(msg.get_payload::<String>().unwrap(), format!("{second}|u"));
    let pttl: i64 = server.cmd(&["PTTL", "u"]);
    assert!(
        (5001..=9000).contains(&pttl),
        "the second ticket's lease: {pttl}"
    );
    // Leaving twice, or after the lock moved on, changes nothing.
    assert_eq!(unwait(&mut conn, "u", first), 0);
    assert_eq!(server.cmd::<Vec<String>>(&["HKEYS", "u"]), holders);
}

#[test]
fn a_hand_over_message_is_published_only_with_a_hand_over() {
    let server = RedisServer::start();
    held(&server, "p", "x:1");
    // A pattern subscriber (not counted by NUMSUB, but by PUBLISH's answer), as a
    // monitoring tool or a replica's subscriber would see the message: a ticket whose
    // client does not listen must get neither the lock nor a message.
    let mut watching = server.conn();
    let mut watcher = watching.as_pubsub();
    watcher.psubscribe("redisson_lock__channel:{p}:*").unwrap();
    watcher
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let _: i64 = server.cmd(&["ZADD", &registry_key("p"), "1", "dead:1:1:5000"]);
    let mut conn = server.conn();
    assert_eq!(release(&mut conn, "p", "x:1"), Some(1));
    assert_eq!(server.cmd::<i64>(&["EXISTS", "p"]), 0, "handed to nobody");
    assert!(
        watcher.get_message().is_err(),
        "a message without a hand-over"
    );
}

#[test]
fn a_force_unlock_forgets_an_unclaimed_hand_over() {
    let server = RedisServer::start();
    let ticket = "c0ffee:7:1:5000";
    let mut listening = server.conn();
    let mut listener = listening.as_pubsub();
    let mut conn = hand_over_to(&server, &mut listener, "f", ticket);
    let forced: i64 = script("force")
        .key("f")
        .key(registry_key("f"))
        .arg("redisson_lock__channel:{f}")
        .arg("0")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(forced, 1);
    // The same task takes the lock again in a later wait before the first one's
    // leaving runs: that leaving must not take the new hold.
    assert_eq!(
        acquire(&mut conn, "f", "c0ffee:7", "c0ffee:7:2:5000"),
        (1, 1)
    );
    assert_eq!(unwait(&mut conn, "f", ticket), 0);
    assert_eq!(
        server.cmd::<Option<i64>>(&["HGET", "f", "c0ffee:7"]),
        Some(1)
    );
}
