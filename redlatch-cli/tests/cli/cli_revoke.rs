//! `redlatch unlock --ask NAME` and `redlatch run --revoke-signal` (issue 27.3): the
//! request reaches the running holder, which forwards it to CMD as the chosen signal;
//! CMD finishes, the lock is released; `none` ignores requests; a library holder that
//! never asked for requests is reached too (issue 49); a free lock or a holder that
//! does not listen (a Redisson one) gives exit 1.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{exists, output, read, redis_args, until_file, Bg, TempDir};
use common::{eventually, numsub, RedisServer};

fn run_args(name: &str, server: &RedisServer, opts: &[&str], script: &str) -> Vec<String> {
    cli_util::run_args(name, &[server], opts, script)
}

fn ask_args(name: &str, server: &RedisServer) -> Vec<String> {
    let mut args = vec!["unlock".to_string(), "--ask".into(), name.to_string()];
    args.extend(redis_args(&[server]));
    args
}

/// CMD: record the holder id, then idle until `$D/stop`, trapping `sig` to note it and
/// exit 0.
fn idle(sig: &str) -> String {
    format!(
        "trap 'echo {sig} > \"$D/got\"; exit 0' {sig}; echo $REDLATCH_HOLDER > \"$D/holder\"; {}",
        until_file("stop", 60)
    )
}

/// Waits until CMD started and its redlatch listens for requests; the holder id.
fn listening(server: &RedisServer, dir: &TempDir, name: &str) -> String {
    assert!(eventually(Duration::from_secs(20), || !read(
        &dir.file("holder")
    )
    .is_empty()));
    let holder = read(&dir.file("holder")).trim().to_string();
    let client = holder.split(':').next().unwrap().to_string();
    let _ = name;
    let channel = format!("redlatch_client__channel:{{{client}}}");
    assert!(
        eventually(Duration::from_secs(20), || numsub(server, &channel) == 1),
        "redlatch run does not listen on {channel}"
    );
    holder
}

#[test]
fn unlock_ask_reaches_run_which_sends_sigterm_to_cmd_and_releases() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let bg = Bg::start(
        &run_args("nightly", &server, &[], &idle("TERM")),
        &dir,
        "run",
    );
    let holder = listening(&server, &dir, "nightly");
    let out = output(&ask_args("nightly", &server), 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&holder) && text.contains("1 listening"),
        "{text}"
    );
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    assert_eq!(read(&dir.file("got")).trim(), "TERM");
    assert!(
        ended
            .stderr
            .contains("release of lock \"nightly\" requested"),
        "{}",
        ended.stderr
    );
    assert!(!exists(&server, "nightly"), "released after CMD ended");
}

#[test]
fn the_signal_is_the_users_choice_and_none_ignores_requests() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let bg = Bg::start(
        &run_args("usr1", &server, &["--revoke-signal", "USR1"], &idle("USR1")),
        &dir,
        "run",
    );
    listening(&server, &dir, "usr1");
    output(&ask_args("usr1", &server), 0);
    let ended = bg.wait(Duration::from_secs(20));
    assert_eq!(ended.code(), Some(0), "{}", ended.stderr);
    assert_eq!(read(&dir.file("got")).trim(), "USR1");

    // `none`: the runner's client hears the request (every client listens for its
    // holds), but nothing is forwarded: the request stands, CMD runs on.
    let dir = TempDir::new();
    let bg = Bg::start(
        &run_args("deaf", &server, &["--revoke-signal", "none"], &idle("TERM")),
        &dir,
        "run",
    );
    assert!(eventually(Duration::from_secs(20), || !read(
        &dir.file("holder")
    )
    .is_empty()));
    let out = output(&ask_args("deaf", &server), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 listening"));
    std::thread::sleep(Duration::from_millis(300));
    assert!(read(&dir.file("got")).is_empty(), "CMD was signalled");
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(bg.wait(Duration::from_secs(20)).code(), Some(0));

    // A free lock: nobody to ask.
    let out = output(&ask_args("free", &server), 1);
    assert!(String::from_utf8_lossy(&out.stdout).contains("not held"));
    // --ask and --force exclude each other.
    let mut both = ask_args("free", &server);
    both.push("--force".into());
    output(&both, 64);
}

/// A library holder whose code never called `revoke_requested()` is reached too: its
/// client listens on its one notice channel from connect on (issue 49). `--ask` says
/// one listening client was told and exits 0; the guard's token, asked for afterwards,
/// has fired; the lock is still held (a request releases nothing by itself).
#[test]
fn unlock_ask_reaches_a_library_holder_that_never_asked_for_requests() {
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = redlatch::Config::single(server.url());
    let (client, guard) = rt.block_on(async {
        let client = redlatch::Client::connect(config).await.unwrap();
        let guard = client.lock("lib").lock().await.unwrap();
        (client, guard)
    });
    let channel = format!("redlatch_client__channel:{{{}}}", client.id());
    assert!(eventually(Duration::from_secs(20), || numsub(
        &server, &channel
    ) == 1));
    let out = output(&ask_args("lib", &server), 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(guard.holder()) && text.contains("1 listening"),
        "{text}"
    );
    let fired = rt.block_on(async {
        let token = guard.revoke_requested();
        tokio::time::timeout(Duration::from_secs(10), token.cancelled())
            .await
            .is_ok()
    });
    assert!(fired, "the request did not reach the holder");
    assert!(exists(&server, "lib"), "a request released the lock");
    rt.block_on(async {
        guard.unlock().await.unwrap();
        client.close(Duration::from_secs(1)).await;
    });
}
