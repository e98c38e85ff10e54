//! `redlatch list` and `redlatch top` against real servers, the holders and waiters in
//! other `redlatch run` processes: the JSON parsed, the table read, and `top` driven
//! through a pseudo-terminal of 80x24.

use crate::cli_util;
use redlatch_testkit as common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cli_util::{bin, output, redis_args, run_args, Bg, TempDir};
use common::{eventually, RedisServer};
use serde_json::Value;

/// `redlatch list PATTERN --json` on `servers`, parsed, with its exit status.
fn list_json(servers: &[&RedisServer], pattern: &str, code: i32) -> Value {
    list_json_at(redis_args(servers), pattern, code)
}

/// `redlatch list PATTERN --json` with these `--redis` arguments.
fn list_json_at(redis: Vec<String>, pattern: &str, code: i32) -> Value {
    let mut args: Vec<String> = ["list", pattern, "--json"].map(String::from).into();
    args.extend(redis);
    let out = output(&args, code);
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

fn lock<'a>(doc: &'a Value, name: &str) -> &'a Value {
    (doc["locks"].as_array().unwrap().iter())
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {doc:#}"))
}

/// Starts `redlatch run NAME OPTS -- touch $D/TAG; sleep 60` and waits until CMD runs.
fn holder(server: &RedisServer, dir: &TempDir, name: &str, opts: &[&str], tag: &str) -> Bg {
    let script = format!("touch \"$D/{tag}\"; exec sleep 60");
    let bg = Bg::start(&run_args(name, &[server], opts, &script), dir, tag);
    assert!(
        eventually(Duration::from_secs(20), || dir.file(tag).exists()),
        "{tag} never ran"
    );
    bg
}

/// The listing of `cl:*`: `cl:a` (a holder with its record's fields, one waiter),
/// `cl:gpu` (one permit of three taken) and `cl:rw` (two readers), in name order and
/// complete; returns `cl:a`'s holder id.
fn assert_the_three_locks(doc: &Value) -> String {
    assert_eq!(doc["incomplete"], false, "{doc:#}");
    let names: Vec<&str> = (doc["locks"].as_array().unwrap().iter())
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cl:a", "cl:gpu", "cl:rw"], "{doc:#}");
    let a = lock(doc, "cl:a");
    assert_eq!(a["kind"], "lock");
    assert_eq!(a["waiters"], 1, "{a:#}");
    assert_eq!(a["holders"].as_array().unwrap().len(), 1);
    let id = a["holders"][0]["id"].as_str().unwrap().to_string();
    for field in ["host", "pid", "app", "since", "acquired"] {
        assert!(
            a["holders"][0].get(field).is_some(),
            "{field} missing: {a:#}"
        );
    }
    assert!(
        a["ttl_ms"].as_u64().is_some_and(|t| t > 0 && t <= 30_000),
        "{a:#}"
    );
    let rw = lock(doc, "cl:rw");
    assert_eq!(
        (rw["kind"].as_str(), rw["mode"].as_str()),
        (Some("read_write"), Some("read"))
    );
    assert_eq!(
        rw["holders"].as_array().unwrap().len(),
        2,
        "two reader processes: {rw:#}"
    );
    let gpu = lock(doc, "cl:gpu");
    // `run --permits` takes a permit of an expirable semaphore: two left, one taken.
    assert_eq!(
        (gpu["kind"].as_str(), gpu["count"].as_i64()),
        (Some("expirable_semaphore"), Some(2)),
        "{gpu:#}"
    );
    assert_eq!(gpu["holders"].as_array().unwrap().len(), 1, "{gpu:#}");
    id
}

#[test]
fn list_json_names_each_lock_its_holders_and_waiters_across_processes() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let _a = holder(&server, &dir, "cl:a", &[], "a");
    let _r1 = holder(&server, &dir, "cl:rw", &["--read"], "r1");
    let _r2 = holder(&server, &dir, "cl:rw", &["--read"], "r2");
    let _p = holder(&server, &dir, "cl:gpu", &["--permits", "3"], "p");
    // A waiter for cl:a, in a fourth process.
    let _w = Bg::start(
        &run_args("cl:a", &[&server], &["--wait", "60s"], "true"),
        &dir,
        "w",
    );
    let channel = "redisson_lock__channel:{cl:a}";
    assert!(eventually(Duration::from_secs(20), || common::numsub(
        &server, channel
    ) == 1));
    let _: () = server.cmd(&["SET", "other:x", "1"]);

    let doc = list_json(&[&server], "cl:*", 0);
    let id = assert_the_three_locks(&doc);

    // The holder's client record (as redlatch clients write it) resolves it.
    let uuid = id.split(':').next().unwrap();
    let key = format!("redlatch_client:{{{uuid}}}");
    let _: () = server.cmd(&[
        "HSET", &key, "host", "h-1", "pid", "77", "app", "billing", "version", "0.1.0", "since",
        "1",
    ]);
    let doc = list_json(&[&server], "cl:a", 0);
    let h = &lock(&doc, "cl:a")["holders"][0];
    assert_eq!(
        (h["host"].as_str(), h["pid"].as_u64(), h["app"].as_str()),
        (Some("h-1"), Some(77), Some("billing"))
    );
    assert_eq!(h["record"], true);

    // The table: one line per name with its kind and waiters.
    let mut args: Vec<String> = ["list", "cl:*"].map(String::from).into();
    args.extend(redis_args(&[&server]));
    let table = String::from_utf8(output(&args, 0).stdout).unwrap();
    let line = table
        .lines()
        .find(|l| l.starts_with("cl:a "))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.contains("lock") && line.contains("h-1 77 billing"),
        "{table}"
    );
    assert!(line.trim_end().ends_with('1'), "one waiter: {table}");
}

#[test]
fn list_flags_a_master_it_cannot_read_and_lists_the_others() {
    let servers = common::start_many(3);
    let mut dead = common::start_many(1);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let dir = TempDir::new();
    let script = "touch \"$D/held\"; exec sleep 60";
    let _h = Bg::start(&run_args("rl:x", &refs, &[], script), &dir, "held");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("held")
        .exists()));
    let doc = list_json(&refs, "rl:*", 0);
    assert_eq!(
        lock(&doc, "rl:x")["masters"].as_u64().map(|n| n >= 2),
        Some(true),
        "{doc:#}"
    );
    // Four masters, one of them down (killed): still listed, exit 69, the master named.
    let mut four = redis_args(&refs);
    four.extend(redis_args(&[&dead[0]]));
    let doc_ok = list_json_at(four.clone(), "rl:*", 0);
    assert_eq!(doc_ok["incomplete"], false);
    dead[0].kill();
    let doc = list_json_at(four, "rl:*", 69);
    assert_eq!(doc["incomplete"], true);
    assert_eq!(doc["unread"][0]["master"], dead[0].addr(), "{doc:#}");
    lock(&doc, "rl:x");
}

/// `top` in a pseudo-terminal of 80x24: it shows a lock another process holds, and `q`
/// quits with status 0.
#[test]
fn top_shows_a_lock_held_elsewhere_and_q_quits() {
    top_fits_80x24(Some(EIGHTY_BY_24));
}

/// `top` in a pseudo-terminal that reports no size (0x0, as `openpty` makes it and as
/// some CI runners and `docker exec -t` leave it): it draws 80x24 instead of nothing.
/// Before, it drew nothing and exited quietly.
#[test]
fn top_draws_80x24_on_a_terminal_without_a_size() {
    top_fits_80x24(None);
}

const EIGHTY_BY_24: nix::pty::Winsize = nix::pty::Winsize {
    ws_row: 24,
    ws_col: 80,
    ws_xpixel: 0,
    ws_ypixel: 0,
};

/// Runs `top` on a pseudo-terminal of `size` (`None`: no size) while another process
/// holds a lock, and checks what it draws fits 80x24 with the footer on row 24, and
/// that `q` quits and gives the terminal back.
fn top_fits_80x24(size: Option<nix::pty::Winsize>) {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let _h = holder(&server, &dir, "tp:held", &[], "held");
    let text = top_in_pty(size, &server, "tp:*", "tp:held");
    // It fits 80x24: no cursor move (ESC [ row ; col H) outside the screen.
    for (row, col) in cursor_moves(&text) {
        assert!(
            (1..=24).contains(&row) && (1..=80).contains(&col),
            "moved to {row};{col}"
        );
    }
    assert!(
        cursor_moves(&text).iter().any(|&(row, _)| row == 24),
        "the footer is on row 24"
    );
    // It gave the terminal back: the alternate screen was left.
    assert!(text.contains("\x1b[?1049l"), "{text:?}");
}

/// `redlatch top PATTERN` on `server` in a pseudo-terminal of 80x24 until it shows
/// `needle` (and its footer), then `q`: what the terminal got; it must quit with 0.
pub(crate) fn top_until(server: &RedisServer, pattern: &str, needle: &str) -> String {
    top_in_pty(Some(EIGHTY_BY_24), server, pattern, needle)
}

/// [`top_until`] on a pseudo-terminal of `size` (`None`: one that reports no size).
fn top_in_pty(
    size: Option<nix::pty::Winsize>,
    server: &RedisServer,
    pattern: &str,
    needle: &str,
) -> String {
    let pty = nix::pty::openpty(size.as_ref(), None).expect("a pseudo-terminal");
    // Close-on-exec, so that no other test's child holds the terminal open: its end is
    // what tells us top's last writes are read.
    for fd in [&pty.master, &pty.slave] {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).expect("close-on-exec");
    }
    let slave = std::fs::File::from(pty.slave);
    let mut args: Vec<String> = vec!["top".into(), pattern.into()];
    args.extend(redis_args(&[server]));
    let mut child = Command::new(bin())
        .args(&args)
        .env_remove("REDLATCH_REDIS")
        .env("TERM", "xterm-256color")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("cannot spawn redlatch top");
    let mut master = std::fs::File::from(pty.master);
    let screen = Arc::new(Mutex::new(Vec::<u8>::new()));
    let mut reader = master.try_clone().unwrap();
    let seen = screen.clone();
    let (drained, all_read) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            seen.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let _ = drained.send(());
    });
    let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    let shown = eventually(Duration::from_secs(20), || text().contains(needle));
    if !shown {
        let _ = child.kill();
        panic!("top never showed {needle}: {:?}", text());
    }
    // The footer's sort keys (the terminal gets its words one by one).
    assert!(text().contains("hand-overs/s"), "no footer: {:?}", text());
    master.write_all(b"q").unwrap();
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if asked.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("top did not quit on q: {:?}", text());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // What top wrote last (leaving the alternate screen) may still be unread when it
    // has exited: read to the end (the terminal's end once every slave side closed).
    assert!(
        all_read.recv_timeout(Duration::from_secs(10)).is_ok(),
        "the terminal was never read to its end: {:?}",
        text()
    );
    assert_eq!(status.code(), Some(0), "{:?}", text());
    text()
}

/// On a 3+3 cluster, holders in three processes, one name on each primary, and a waiter
/// in a fourth: `list --json` finds them all (each primary scanned) and counts the
/// waiter where it subscribed.
#[test]
fn list_on_a_cluster_reads_every_primary() {
    let cluster = common::cluster::shared_cluster();
    let dir = TempDir::new();
    let seed = [
        "--redis".to_string(),
        cluster.node(cluster.primaries()[0]).url(),
    ];
    let names: Vec<String> = (cluster.primaries().iter())
        .map(|&p| cluster.key_on(p, "clc:"))
        .collect();
    let mut holders = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let tag = format!("h{i}");
        let mut args: Vec<String> = ["run", name.as_str()].map(String::from).into();
        args.extend(seed.clone());
        let script = format!("touch \"$D/{tag}\"; exec sleep 60");
        args.extend(["--", "sh", "-c", script.as_str()].map(String::from));
        holders.push(Bg::start(&args, &dir, &tag));
        assert!(
            eventually(Duration::from_secs(20), || dir.file(&tag).exists()),
            "{tag} never ran"
        );
    }
    let mut wait: Vec<String> = ["run", names[1].as_str(), "--wait", "60s"]
        .map(String::from)
        .into();
    wait.extend(seed.clone());
    wait.extend(["--", "true"].map(String::from));
    let _w = Bg::start(&wait, &dir, "w");
    let channel = format!("redisson_lock__channel:{{{}}}", names[1]);
    assert!(eventually(Duration::from_secs(20), || cluster
        .channel_subscribers(&channel)
        == 1));
    // A holder that had to wait (a slow first attempt under load) is listed as waiting
    // until its client's ledger drops the wait, one round trip after it ended: read
    // until the listing settles, then check all of it.
    let mut doc = list_json_at(seed.to_vec(), "clc:*", 0);
    let settled = |doc: &Value| {
        (names.iter().enumerate()).all(|(i, n)| {
            let mut locks = doc["locks"].as_array().into_iter().flatten();
            locks.any(|l| l["name"] == n.as_str() && l["waiters"] == u64::from(i == 1))
        })
    };
    let started = std::time::Instant::now();
    while !settled(&doc) && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        doc = list_json_at(seed.to_vec(), "clc:*", 0);
    }
    assert_eq!(doc["incomplete"], false, "{doc:#}");
    let mut want = names.clone();
    want.sort();
    let got: Vec<&str> = (doc["locks"].as_array().unwrap().iter())
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(got, want, "{doc:#}");
    for name in &names {
        let l = lock(&doc, name);
        assert_eq!(
            (l["kind"].as_str(), l["holders"].as_array().map(Vec::len)),
            (Some("lock"), Some(1))
        );
    }
    assert_eq!(lock(&doc, &names[1])["waiters"], 1, "{doc:#}");
    assert_eq!(lock(&doc, &names[0])["waiters"], 0, "{doc:#}");
}

/// Every absolute cursor move `ESC [ row ; col H` in `text`.
fn cursor_moves(text: &str) -> Vec<(u32, u32)> {
    text.split("\x1b[")
        .skip(1)
        .filter_map(|seq| {
            let end = seq.find('H')?;
            let (row, col) = seq[..end].split_once(';')?;
            Some((row.parse().ok()?, col.parse().ok()?))
        })
        .collect()
}

/// Every redlatch waiter is named (issue 49): a plain lock's waiter, found in its
/// client's ledger, is listed under `waiting` beside the count with its host, pid, app
/// and since when it waits, as a holder is; a fair lock's queue the same way. The table
/// shows each on a line of its own. Before, only the count (`"waiters": 1`) and bare
/// queue ids were shown.
#[test]
fn list_names_each_waiter_with_host_pid_app_and_wait() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    for (name, opts) in [("wn:plain", &[][..]), ("wn:fair", &["--fair"][..])] {
        let tag = name.replace(':', "-");
        let _h = holder(&server, &dir, name, opts, &format!("{tag}-h"));
        let mut wopts = vec!["--wait", "60s"];
        wopts.extend(opts);
        let _w = Bg::start(
            &run_args(name, &[&server], &wopts, "true"),
            &dir,
            &format!("{tag}-w"),
        );
        // The waiter's ledger (since when it waits) is flushed within a second of its
        // wait's start; a fair queue shows its entry at once.
        let named = || {
            let doc = list_json(&[&server], name, 0);
            let l = lock(&doc, name).clone();
            let waiting = l["waiting"].as_array().unwrap();
            let dated = waiting.iter().all(|w| w["waiting_since"].is_i64());
            (!waiting.is_empty() && dated).then_some(l)
        };
        assert!(
            eventually(Duration::from_secs(20), || named().is_some()),
            "{name}: no waiter named"
        );
        let l = named().unwrap();
        assert_eq!(l["waiters"], 1, "{name}: {l:#}");
        let waiting = l["waiting"].as_array().unwrap();
        assert_eq!(waiting.len(), 1, "{name}: {l:#}");
        let (w, h) = (&waiting[0], &l["holders"][0]);
        assert!(
            w["host"].as_str().is_some_and(|s| !s.is_empty()),
            "{name}: {l:#}"
        );
        let (wpid, hpid) = (w["pid"].as_u64(), h["pid"].as_u64());
        assert!(
            wpid.is_some() && wpid != hpid,
            "{name}: the waiter's own process: {l:#}"
        );
        assert!(w["app"].as_str().is_some(), "{name}: {l:#}");
        let now = cli_util_now_ms();
        assert!(
            w["waiting_since"]
                .as_i64()
                .is_some_and(|s| s <= now && s > now - 60_000),
            "{name}: {l:#}"
        );
        assert_ne!(w["id"], h["id"], "{name}: {l:#}");
        // The table: the waiter on its own line, named like the holder.
        let mut args: Vec<String> = ["list", name].map(String::from).into();
        args.extend(redis_args(&[&server]));
        let table = String::from_utf8(output(&args, 0).stdout).unwrap();
        let line = format!("{} {} ", w["host"].as_str().unwrap(), wpid.unwrap());
        assert!(
            table
                .lines()
                .any(|l| l.contains("1. ") && l.contains(&line) && l.contains("waiting")),
            "{name}: {table}"
        );
    }
}

/// Now, in ms since the epoch.
fn cli_util_now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as i64)
}

/// `redlatch status NAME` names each waiter too (issue 49): `waiting` in every master's
/// entry of the JSON (host, pid, app, since when), and a line per waiter in the table,
/// for a plain lock (from the waiter's ledger) and a fair one (its queue resolved).
/// Before: `waiters: 1 (clients subscribed to its channel, at least)` and bare ids.
#[test]
fn status_names_each_waiter_with_host_pid_app_and_wait() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    for (name, opts) in [("sn:plain", &[][..]), ("sn:fair", &["--fair"][..])] {
        let tag = name.replace(':', "-");
        let _h = holder(&server, &dir, name, opts, &format!("{tag}-h"));
        let mut wopts = vec!["--wait", "60s"];
        wopts.extend(opts);
        let _w = Bg::start(
            &run_args(name, &[&server], &wopts, "true"),
            &dir,
            &format!("{tag}-w"),
        );
        let mut args: Vec<String> = ["status", name, "--json"].map(String::from).into();
        args.extend(redis_args(&[&server]));
        let named = || {
            let doc: Value = serde_json::from_slice(&output(&args, 0).stdout).unwrap();
            let m = doc["masters"][0].clone();
            let waiting = m["waiting"].as_array().cloned().unwrap_or_default();
            let dated = waiting.iter().all(|w| w["waiting_since"].is_i64());
            (waiting.len() == 1 && dated).then_some(m)
        };
        assert!(
            eventually(Duration::from_secs(20), || named().is_some()),
            "{name}: no waiter named"
        );
        let m = named().unwrap();
        let w = &m["waiting"][0];
        let pid = w["pid"].as_u64().expect("the waiter's pid");
        assert!(
            w["host"].as_str().is_some_and(|h| !h.is_empty()),
            "{name}: {m:#}"
        );
        assert!(w["app"].as_str().is_some(), "{name}: {m:#}");
        assert_ne!(
            Some(pid),
            m["holder_info"][0]["pid"].as_u64(),
            "{name}: {m:#}"
        );
        let table_args: Vec<String> = args.iter().filter(|a| *a != "--json").cloned().collect();
        let table = String::from_utf8(output(&table_args, 0).stdout).unwrap();
        assert!(
            table
                .lines()
                .any(|l| l.contains(&format!(" {pid} ")) && l.contains("waiting")),
            "{name}: {table}"
        );
    }
}

/// `top` draws each waiter of a lock on a row of its own under the lock's (issue 49):
/// `└ wait <pid>`, its app, host and how long it has waited; the waiter is another
/// `redlatch run` process, its pid read from `list --json`.
#[test]
fn top_shows_each_waiter_on_a_row_of_its_own() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let _h = holder(&server, &dir, "tw:held", &[], "held");
    let waiter_args = run_args("tw:held", &[&server], &["--wait", "60s"], "true");
    let _w = Bg::start(&waiter_args, &dir, "waiter");
    let waiter_pid = || {
        let doc = list_json(&[&server], "tw:held", 0);
        lock(&doc, "tw:held")["waiting"][0]["pid"].as_u64()
    };
    assert!(eventually(Duration::from_secs(20), || waiter_pid().is_some()));
    let pid = waiter_pid().unwrap().to_string();
    // Each word is its own write: the pid, then the row's other words.
    let text = top_in_pty(Some(EIGHTY_BY_24), &server, "tw:*", &pid);
    assert!(
        text.contains('└') && text.contains("wait"),
        "no waiter row: {text:?}"
    );
}
