//! Kleppmann's cases against one master, end to end with a real PostgreSQL server and a
//! real S3-compatible one (moto): (a) a holder SIGSTOPped past its lease while another
//! takes the lock and writes, then resumed; (c) a holder's write delayed in the network
//! until after the next holder's. Each runs fenced (the stale write is refused, typed,
//! nothing of it commits) and with the guard off (the stale write commits over the
//! fresh one: the case can fail), on each store. Case (b), a master's clock jumping
//! under Redlock, is tests/topologies/fence_clock.rs.

use redlatch_testkit as common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::moto::MotoServer;
use common::postgres::{assert_outcome, write_doc, Ledger};
use common::proxy::DelayProxy;
use common::RedisServer;
use redlatch::fence::s3::S3Fence;
use redlatch::fence::{HasToken, Token};
use redlatch::{Client, Config, Error};

/// The paused holder's watchdog lease: short, so the pause outlives it soon.
const CHILD_LEASE: Duration = Duration::from_secs(1);
/// How long the next holder may wait for a lease to run out (a loaded machine).
const TAKE_OVER: Duration = Duration::from_secs(30);

/// The resource of a case: a PostgreSQL table or an S3 object.
enum Store {
    Pg(Ledger),
    S3(MotoServer),
}

impl Store {
    /// `s3` false: PostgreSQL; true: moto. `None` (said) when it is not installed.
    async fn start_or_skip(s3: bool, test: &str) -> Option<Store> {
        match s3 {
            false => Ledger::start_or_skip(test).await.map(Store::Pg),
            true => MotoServer::start_or_skip(test).map(Store::S3),
        }
    }

    /// What the child holder is told about the store: (variable, value).
    fn env(&self) -> (&'static str, String) {
        match self {
            Store::Pg(ledger) => ("REDLATCH_KLEPP_PG", ledger.pg.conn_str()),
            Store::S3(moto) => (
                "REDLATCH_KLEPP_S3",
                format!("{} {} {}", moto.endpoint(), moto.key_id(), moto.secret()),
            ),
        }
    }

    /// The fresh holder's write, straight to the store.
    async fn write(&self, body: &str, token: &Token, fenced: bool) -> redlatch::Result<()> {
        match self {
            Store::Pg(ledger) => {
                write_doc(&mut ledger.pg.connect().await, body, token, fenced).await
            }
            Store::S3(moto) => common::moto::write_doc(&moto.fence(), body, token, fenced).await,
        }
    }

    async fn assert_outcome(
        &self,
        fenced: bool,
        stale: u64,
        fresh: u64,
        said: &redlatch::Result<()>,
    ) {
        match self {
            Store::Pg(ledger) => assert_outcome(ledger, fenced, stale, fresh, said).await,
            Store::S3(moto) => {
                common::moto::assert_outcome(&moto.fence(), fenced, stale, fresh, said).await
            }
        }
    }
}

/// The holder of case (a), in a child process: runs only with REDLATCH_KLEPP_REDIS set.
/// Takes the fenced lock "doc" (watchdog lease `CHILD_LEASE`), says HOLDING <token>,
/// waits for a line on stdin (it is SIGSTOPped meanwhile), then writes "stale" with its
/// token and says what happened.
#[tokio::test]
async fn paused_holder_child() {
    let Ok(url) = std::env::var("REDLATCH_KLEPP_REDIS") else {
        return;
    };
    let fenced = std::env::var("REDLATCH_KLEPP_FENCED").as_deref() == Ok("1");
    let client = Client::connect(Config::single(url).watchdog_timeout(CHILD_LEASE))
        .await
        .unwrap();
    let guard = client.fenced_lock("doc").lock().await.unwrap();
    let token = guard.token().unwrap();
    let mut db = None;
    let mut s3 = None;
    if let Ok(pg) = std::env::var("REDLATCH_KLEPP_PG") {
        let (client, conn) = tokio_postgres::connect(&pg, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        db = Some(client);
    } else {
        let env = std::env::var("REDLATCH_KLEPP_S3").unwrap();
        let [endpoint, key, secret]: [&str; 3] =
            env.split(' ').collect::<Vec<_>>().try_into().unwrap();
        let fence = S3Fence::new(
            endpoint,
            common::moto::BUCKET,
            common::moto::REGION,
            key,
            secret,
        );
        s3 = Some(fence.unwrap().timeout(TAKE_OVER));
    }
    println!("HOLDING {}", token.value());
    let _go = tokio::task::spawn_blocking(|| std::io::stdin().lines().next()).await;
    // Resumed: the holder carries on with the work it was doing, as a paused process does.
    let wrote = match (&mut db, &s3) {
        (Some(db), _) => write_doc(db, "stale", &token, fenced).await,
        (_, Some(fence)) => common::moto::write_doc(fence, "stale", &token, fenced).await,
        _ => unreachable!(),
    };
    match wrote {
        Ok(()) => println!("VERDICT committed"),
        Err(Error::Fenced { newest, .. }) => println!("VERDICT fenced {newest}"),
        Err(e) => println!("VERDICT error {e}"),
    }
}

/// The child's verdict ("committed", "fenced N", "error ..."), as a result.
fn verdict(line: &str, stale: u64, resource: &str) -> redlatch::Result<()> {
    match line.trim() {
        "committed" => Ok(()),
        v if v.starts_with("fenced ") => Err(Error::Fenced {
            resource: resource.to_string(),
            lock: "doc".into(),
            presented: stale,
            newest: v["fenced ".len()..].parse().unwrap(),
        }),
        _ => panic!("the paused holder said {line:?}"),
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, sig) }, 0);
}

/// The state letter of process `pid` (`T`: stopped).
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat.rsplit(") ").next().unwrap().chars().next().unwrap()
}

async fn paused_holder(s3: bool, fenced: bool, test: &str) {
    let Some(store) = Store::start_or_skip(s3, test).await else {
        return;
    };
    let (var, value) = store.env();
    let server = RedisServer::start();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &redlatch_testkit::test_name!("paused_holder_child"),
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env("REDLATCH_KLEPP_REDIS", server.url())
        .env(var, value)
        .env("REDLATCH_KLEPP_FENCED", if fenced { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let stale = loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the holder exited");
        // (The harness may print "test NAME ... " first, on the same line.)
        if let Some((_, t)) = line.trim().split_once("HOLDING ") {
            break t.parse::<u64>().unwrap();
        }
    };
    // The pause: a GC pause or a stalled VM, as far as the lock can tell.
    signal(child.id(), libc::SIGSTOP);
    assert!(common::eventually(Duration::from_secs(5), || state(
        child.id()
    ) == 'T'));
    let paused = Instant::now();
    let next = Client::connect(Config::single(server.url())).await.unwrap();
    let guard = next
        .fenced_lock("doc")
        .try_lock(TAKE_OVER)
        .await
        .unwrap()
        .expect("the paused holder's lease runs out");
    assert!(paused.elapsed() <= TAKE_OVER);
    let fresh = guard.token().unwrap();
    store.write("fresh", &fresh, fenced).await.unwrap();
    // Resumed, the old holder writes at once.
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    signal(child.id(), libc::SIGCONT);
    let said = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the holder exited without a verdict"
        );
        if let Some((_, v)) = line.split_once("VERDICT ") {
            let resource = if s3 {
                common::moto::DOC
            } else {
                common::postgres::DOC
            };
            break verdict(v, stale, resource);
        }
    };
    child.wait().unwrap();
    store
        .assert_outcome(fenced, stale, fresh.value(), &said)
        .await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_holder_paused_past_its_lease_cannot_commit_when_resumed() {
    paused_holder(false, true, "fence_kleppmann::paused").await;
}

#[tokio::test]
async fn unfenced_a_holder_paused_past_its_lease_overwrites_the_next_holder() {
    paused_holder(false, false, "fence_kleppmann::paused_unfenced").await;
}

#[tokio::test]
async fn s3_a_holder_paused_past_its_lease_cannot_put_when_resumed() {
    paused_holder(true, true, "fence_kleppmann::s3_paused").await;
}

#[tokio::test]
async fn s3_unfenced_a_holder_paused_past_its_lease_overwrites_the_next_holders_object() {
    paused_holder(true, false, "fence_kleppmann::s3_paused_unfenced").await;
}

async fn delayed_write(fenced: bool, test: &str) {
    let Some(ledger) = Ledger::start_or_skip(test).await else {
        return;
    };
    let server = RedisServer::start();
    let proxy = DelayProxy::start(&format!("127.0.0.1:{}", ledger.pg.port()));
    let conn = format!(
        "host=127.0.0.1 port={} user=postgres dbname=postgres",
        proxy.port()
    );
    let (mut slow, c) = tokio_postgres::connect(&conn, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(c);
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    // An explicit lease: nothing renews it, it ends 2 s after the grant.
    let held = a
        .fenced_lock("doc")
        .try_lock_with_lease(TAKE_OVER, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    let stale = held.token().unwrap();
    // The holder sends its write while its lease is valid; the network holds it.
    proxy.hold();
    assert!(held.validity() > Duration::ZERO);
    let token = stale.clone();
    let write = tokio::spawn(async move { write_doc(&mut slow, "stale", &token, fenced).await });
    assert!(
        common::eventually_async(Duration::from_secs(10), || proxy.waiting() > 0).await,
        "the write never reached the network"
    );
    // The lease ends; the next holder takes the lock and writes.
    let guard = b
        .fenced_lock("doc")
        .try_lock(TAKE_OVER)
        .await
        .unwrap()
        .expect("the lease ends");
    let fresh = guard.token().unwrap();
    let mut db = ledger.pg.connect().await;
    write_doc(&mut db, "fresh", &fresh, fenced).await.unwrap();
    // The delayed write arrives.
    proxy.release();
    let said = tokio::time::timeout(TAKE_OVER, write)
        .await
        .expect("the delayed write ends")
        .unwrap();
    assert_outcome(&ledger, fenced, stale.value(), fresh.value(), &said).await;
    guard.unlock().await.unwrap();
    drop(held);
}

#[tokio::test]
async fn a_write_delayed_in_the_network_past_the_next_holders_is_refused() {
    delayed_write(true, "fence_kleppmann::delayed").await;
}

#[tokio::test]
async fn unfenced_a_write_delayed_in_the_network_overwrites_the_next_holder() {
    delayed_write(false, "fence_kleppmann::delayed_unfenced").await;
}

/// Case (c) on an S3 object: the stale holder's guarded PUT passed its check (the
/// `HEAD`) while the lease was valid and is held in the network; the next holder
/// writes; the held PUT arrives with an `If-Match` of the object it read, which the
/// next holder's write replaced: 412, read again, refused by the newer token.
async fn s3_delayed_write(fenced: bool, test: &str) {
    let Some(moto) = MotoServer::start_or_skip(test) else {
        return;
    };
    let server = RedisServer::start();
    let proxy = DelayProxy::start(&format!("127.0.0.1:{}", moto.port()));
    let slow = moto.fence_at(&format!("http://{}", proxy.addr()), TAKE_OVER);
    let (a, b) = (
        Client::connect(Config::single(server.url())).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    // An explicit lease: nothing renews it, it ends 2 s after the grant.
    let held = a
        .fenced_lock("doc")
        .try_lock_with_lease(TAKE_OVER, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    let stale = held.token().unwrap();
    common::moto::write_doc(&slow, "initial", &stale, fenced)
        .await
        .unwrap();
    // The holder sends its write while its lease is valid; the network holds its PUT.
    proxy.hold_from(b"PUT ");
    assert!(held.validity() > Duration::ZERO);
    let token = stale.clone();
    let write =
        tokio::spawn(async move { common::moto::write_doc(&slow, "stale", &token, fenced).await });
    assert!(
        common::eventually_async(Duration::from_secs(10), || proxy.waiting() > 0).await,
        "the write never reached the network"
    );
    // The lease ends; the next holder takes the lock and writes.
    let guard = b
        .fenced_lock("doc")
        .try_lock(TAKE_OVER)
        .await
        .unwrap()
        .expect("the lease ends");
    let fresh = guard.token().unwrap();
    common::moto::write_doc(&moto.fence(), "fresh", &fresh, fenced)
        .await
        .unwrap();
    // The delayed write arrives.
    proxy.release();
    let said = tokio::time::timeout(TAKE_OVER, write)
        .await
        .expect("the delayed write ends")
        .unwrap();
    let fence = moto.fence();
    common::moto::assert_outcome(&fence, fenced, stale.value(), fresh.value(), &said).await;
    // Fenced, the held PUT met its If-Match condition broken: the store said 412 (in
    // moto's access log; some werkzeug versions colour the request with ANSI codes).
    let refused = moto
        .log()
        .lines()
        .any(|l| l.contains("PUT /fence/doc/1 HTTP") && l.contains("\" 412 "));
    assert_eq!(refused, fenced, "a 412 for the held PUT:\n{}", moto.log());
    guard.unlock().await.unwrap();
    drop(held);
}

#[tokio::test]
async fn s3_a_put_delayed_in_the_network_past_the_next_holders_is_refused() {
    s3_delayed_write(true, "fence_kleppmann::s3_delayed").await;
}

#[tokio::test]
async fn s3_unfenced_a_put_delayed_in_the_network_overwrites_the_next_holders_object() {
    s3_delayed_write(false, "fence_kleppmann::s3_delayed_unfenced").await;
}
