//! Fencing tokens under Redlock across master restarts (issue 11, defect 3): a token is
//! handed out only when a quorum of the granting masters is *current* (not restarted
//! since their counter was last written back), or when every master granted; otherwise
//! the attempt fails safe as an outage instead of handing out a smaller token.

use redlatch_testkit as common;

use std::time::Duration;

use common::redlock::{config, cut_off, holders, reconnect, reconnected};
use common::{eventually_async, start_many, RedisServer};
use redis::Script;
use redlatch::{Client, Error, Lock};

/// Master timeout for these tests: paused masters cost this much per call.
const MASTER_TIMEOUT: Duration = Duration::from_millis(200);
/// Wait of an acquisition that must fail safe (it keeps retrying meanwhile).
const FAIL_WAIT: Duration = Duration::from_millis(1500);
/// Wait of an acquisition that must succeed (generous: the machine may be loaded).
const OK_WAIT: Duration = Duration::from_secs(10);

async fn connect(servers: &[RedisServer]) -> Client {
    Client::connect(config(servers).master_timeout(MASTER_TIMEOUT))
        .await
        .unwrap()
}

/// Takes and releases `lock` once; returns its token.
async fn token(lock: &Lock) -> u64 {
    let g = lock
        .try_lock(OK_WAIT)
        .await
        .unwrap_or_else(|e| panic!("fenced lock: {e}"))
        .expect("the lock is free");
    let t = g.fencing_token().expect("a fenced lock carries a token");
    g.unlock().await.unwrap();
    t
}

/// A fenced acquisition that must fail safe. One attempt (`try_lock(ZERO)`: every
/// answering master replies within the master timeout) gives the exact (current
/// grants, quorum) returned. A wait of `FAIL_WAIT` retries and still ends with the
/// unavailable error; its last attempt may run out of the wait before every master
/// answers, so it promises fewer grants than the quorum, not the same count.
async fn fails_safe(lock: &Lock) -> (usize, usize) {
    let once = match lock.try_lock(Duration::ZERO).await {
        Err(Error::NoQuorum {
            acquired, needed, ..
        }) => (acquired, needed),
        other => refused(other),
    };
    match lock.try_lock(FAIL_WAIT).await {
        Err(Error::NoQuorum {
            acquired, needed, ..
        }) if acquired < needed => assert_eq!(needed, once.1),
        other => refused(other),
    }
    once
}

fn refused(r: Result<Option<redlatch::LockGuard>, Error>) -> ! {
    match r {
        Err(e) => panic!("expected NoQuorum, got {e}"),
        Ok(Some(g)) => panic!("a token was handed out: {:?}", g.fencing_token()),
        Ok(None) => panic!("expected NoQuorum, got a busy lock"),
    }
}

fn counter(server: &RedisServer, name: &str) -> Option<u64> {
    server.cmd(&["GET", &format!("redisson_lock_token:{{{name}}}")])
}

fn epoch(server: &RedisServer, name: &str) -> Option<String> {
    server.cmd(&["GET", &format!("redlatch_token_epoch:{{{name}}}")])
}

fn run_id(server: &RedisServer) -> String {
    let info: String = server.cmd(&["INFO", "server"]);
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .expect("INFO server has a run_id")
        .trim()
        .to_string()
}

/// True when `server` is current for `name`: its epoch is its own run_id.
fn is_current(server: &RedisServer, name: &str) -> bool {
    epoch(server, name) == Some(run_id(server))
}

/// Lets the calls to a paused master that the client still queues drain after it
/// resumed. Releases of failed attempts go through group commit, which may send one up
/// to 2 × master_timeout after it was submitted, after a later fenced acquire of the
/// same holder (sent directly): it would take that acquisition's hold on the master
/// away before its write-back, and the master would not become current. Then waits
/// until no script call has reached any master for 500 ms (> 2 × master_timeout), as
/// a loaded machine can send the last one later than the fixed delay.
async fn drained(servers: &[RedisServer]) {
    tokio::time::sleep(4 * MASTER_TIMEOUT + Duration::from_millis(200)).await;
    for s in servers {
        common::settled_calls(s, &["evalsha", "eval"]).await;
    }
}

/// Waits until no master of `idx` shows a holder of `name`: a failed attempt is undone.
async fn free_on(servers: &[RedisServer], idx: &[usize], name: &str) {
    let free = || idx.iter().all(|&i| holders(&servers[i], name).is_empty());
    assert!(
        eventually_async(Duration::from_secs(5), free).await,
        "a failed attempt left its lock behind"
    );
}

/// The sequence of the issue: five masters; D and E cut off while tokens are issued; A
/// restarted empty; B and C cut off. The granting majority A, D, E has only 2 current
/// masters (A restarted, D and E missed the write-backs) and its largest counter is
/// smaller than the last token: before the fix that smaller token was handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_never_go_backwards_when_a_restart_and_a_partition_leave_no_current_quorum() {
    let name = "issue-11-3";
    let mut servers = start_many(5);
    let client = connect(&servers).await;
    let lock = client.fenced_lock(name);

    // Bootstrap with every master up: all five are current.
    let mut tokens = vec![token(&lock).await];
    assert!(servers.iter().all(|s| is_current(s, name)));

    // D and E cut off: A, B, C grant and take the write-backs.
    cut_off(&servers[3]);
    cut_off(&servers[4]);
    for _ in 0..3 {
        let t = token(&lock).await;
        assert!(t > *tokens.last().unwrap(), "{t} after {tokens:?}");
        tokens.push(t);
    }
    let last = *tokens.last().unwrap();
    assert_eq!(counter(&servers[1], name), Some(last));
    assert!(
        counter(&servers[3], name) < Some(last),
        "D missed the tokens"
    );

    // A restarts empty (nobody holds the lock, so no lease is cut short); D and E
    // are back; B and C are cut off (paused).
    servers[0].restart();
    assert_eq!(counter(&servers[0], name), None, "A lost its counter");
    reconnect(&servers[3]);
    reconnect(&servers[4]);
    reconnected(&lock, 0).await;
    servers[1].pause();
    servers[2].pause();

    // A, D and E grant, but only D and E are current: no token is safe.
    let counters_before: Vec<Option<u64>> = [0, 3, 4]
        .iter()
        .map(|&i| counter(&servers[i], name))
        .collect();
    assert!(
        counters_before.iter().all(|c| c.unwrap_or(0) + 1 < last),
        "the old rule would hand out a token <= {last}: {counters_before:?}"
    );
    assert_eq!(fails_safe(&lock).await, (2, 3));
    free_on(&servers, &[0, 3, 4], name).await;
    assert!(!is_current(&servers[0], name), "A is not made current");

    // B and C are back: every later token is larger than every earlier one.
    servers[1].resume();
    servers[2].resume();
    drained(&servers).await;
    let t = token(&lock).await;
    assert!(t > last, "token {t} after {tokens:?}");
    let after = token(&lock).await;
    assert!(after > t, "token {after} after {t}");
    assert!(servers.iter().all(|s| is_current(s, name)));
}

/// A alone restarts empty: B..E are a current quorum, so the next token is larger; A
/// takes the write-back and is current again, so a majority with A in it (D and E
/// paused) hands out tokens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_restarted_empty_is_current_again_after_the_next_acquisition() {
    let name = "restart-a";
    let mut servers = start_many(5);
    let client = connect(&servers).await;
    let lock = client.fenced_lock(name);
    let mut last = 0;
    for _ in 0..3 {
        let t = token(&lock).await;
        assert!(t > last, "{t} after {last}");
        last = t;
    }
    servers[0].restart();
    assert!(!is_current(&servers[0], name));
    reconnected(&lock, 0).await;

    let t = token(&lock).await;
    assert!(t > last, "token {t} after {last}");
    last = t;
    assert!(
        is_current(&servers[0], name),
        "the write-back made A current"
    );
    assert_eq!(counter(&servers[0], name), Some(t));

    // A, B, C: three current masters.
    servers[3].pause();
    servers[4].pause();
    let t = token(&lock).await;
    assert!(t > last, "token {t} after {last}");
    servers[3].resume();
    servers[4].resume();
}

/// No master is current for a name never used: the first fenced acquisition needs every
/// master. With one paused it fails safe (and leaves nothing behind); once the master
/// is back it goes through, and from then on a majority is enough again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_name_needs_every_master_once_then_a_majority() {
    let name = "brand-new";
    let servers = start_many(3);
    let client = connect(&servers).await;
    let lock = client.fenced_lock(name);

    servers[2].pause();
    assert_eq!(fails_safe(&lock).await, (0, 2));
    free_on(&servers, &[0, 1], name).await;
    assert!(servers[..2].iter().all(|s| epoch(s, name).is_none()));
    servers[2].resume();
    drained(&servers).await;

    let first = token(&lock).await;
    // Granted by every master; the write-backs that make them current are answered
    // by a majority before the call returns, by the last one eventually.
    let all_current = || servers.iter().all(|s| is_current(s, name));
    assert!(eventually_async(Duration::from_secs(5), all_current).await);
    servers[2].pause();
    let second = token(&lock).await;
    assert!(second > first, "{second} after {first}");
    servers[2].resume();
}

/// The scripts themselves: without the epoch key they are Redisson's (three replies,
/// no epoch written); with it, fenced_acquire.lua says whether the server is current
/// and fenced_sync.lua marks it current only for a holder of the lock.
#[test]
fn the_scripts_read_and_write_the_epoch_only_when_given_its_key() {
    let server = RedisServer::start();
    let mut conn = server.conn();
    let acquire = Script::new(include_str!("../../lua/fenced_acquire.lua"));
    let sync = Script::new(include_str!("../../lua/fenced_sync.lua"));
    let (lock, counter_key, epoch_key) =
        ("s", "redisson_lock_token:{s}", "redlatch_token_epoch:{s}");
    let single: Vec<i64> = acquire
        .key(lock)
        .key(counter_key)
        .arg(10_000)
        .arg("h:1")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(single, [1, 1, 1]);
    let _: i64 = server.cmd(&["DEL", lock]);

    let redlock = |conn: &mut redis::Connection, holder: &str| -> Vec<i64> {
        acquire
            .key(lock)
            .key(counter_key)
            .key(epoch_key)
            .arg(10_000)
            .arg(holder)
            .invoke(conn)
            .unwrap()
    };
    assert_eq!(
        redlock(&mut conn, "h:1"),
        [1, 1, 2, 0],
        "no epoch: not current"
    );
    let busy = redlock(&mut conn, "h:2");
    assert_eq!((busy.len(), busy[0], busy[2]), (3, 0, 0), "held: {busy:?}");

    // A write-back from someone who does not hold the lock raises the counter only.
    let synced: u64 = sync
        .key(counter_key)
        .key(epoch_key)
        .key(lock)
        .arg(5)
        .arg("h:2")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(synced, 5);
    assert_eq!(epoch(&server, "s"), None);
    // The holder's write-back makes the server current.
    let synced: u64 = sync
        .key(counter_key)
        .key(epoch_key)
        .key(lock)
        .arg(3)
        .arg("h:1")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(synced, 5, "the counter never decreases");
    assert_eq!(epoch(&server, "s"), Some(run_id(&server)));
    assert_eq!(redlock(&mut conn, "h:1"), [2, 2, 6, 1], "current");
    // Another epoch (a restarted server's) is not current.
    let _: () = server.cmd(&["SET", epoch_key, "0123abcd"]);
    assert_eq!(redlock(&mut conn, "h:1"), [2, 3, 7, 0]);

    // Without the epoch key, fenced_sync.lua is as before.
    let synced: u64 = sync.key(counter_key).arg(9).invoke(&mut conn).unwrap();
    assert_eq!(synced, 9);
    assert_eq!(epoch(&server, "s").as_deref(), Some("0123abcd"));
}
