//! Processes: contenders in child processes of this test binary never share a value
//! with each other or with this process, and a killed holder's values are free after
//! its lease (part of `faster_multi_lock`).

use std::time::Duration;

use redlatch::{Client, Config};
use redlatch_testkit::{self as common, RedisServer};

use super::client;

/// Counts holders of `set` in Redis itself (one counter per value, shared by every
/// process): the count must be 1 right after taking the lock.
async fn hold_and_count(con: &mut redis::aio::MultiplexedConnection, set: &[String]) {
    for v in set {
        let n: i64 = redis::cmd("INCR")
            .arg(format!("inside:{v}"))
            .query_async(con)
            .await
            .unwrap();
        assert_eq!(n, 1, "{v} held twice");
    }
    tokio::time::sleep(Duration::from_millis(2)).await;
    for v in set {
        let _: i64 = redis::cmd("DECR")
            .arg(format!("inside:{v}"))
            .query_async(con)
            .await
            .unwrap();
    }
}

/// Not a test of its own: the body of a contender process (run by
/// `overlapping_sets_from_several_processes_never_share_a_value`).
#[tokio::test]
async fn child_process_contender() {
    let (Ok(url), Ok(set)) = (
        std::env::var("REDLATCH_CHILD_URL"),
        std::env::var("REDLATCH_CHILD_SET"),
    ) else {
        return;
    };
    let set: Vec<String> = set.split(',').map(str::to_string).collect();
    let c = Client::connect(Config::single(url.clone())).await.unwrap();
    let mut con = common::conn::async_conn(url.as_str()).await;
    let lock = c.faster_multi_lock("procs", &set).unwrap();
    for _ in 0..15 {
        let g = lock.lock().await.unwrap();
        hold_and_count(&mut con, &set).await;
        g.unlock().await.unwrap();
    }
    println!("DONE");
}

fn spawn_child(test: &str, url: &str, set: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            redlatch_testkit::test_name!(test).as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("REDLATCH_CHILD_URL", url)
        .env("REDLATCH_CHILD_SET", set)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_from_several_processes_never_share_a_value() {
    let server = RedisServer::start();
    let sets = ["a,b", "b,c", "c,d,a", "d"];
    let children: Vec<_> = sets
        .iter()
        .map(|s| spawn_child("child_process_contender", &server.url(), s))
        .collect();
    // This process contends too, on two clients.
    let mut tasks = Vec::new();
    for set in [["a", "c"], ["b", "d"]] {
        let c = client(&server).await;
        let url = server.url();
        tasks.push(tokio::spawn(async move {
            let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
            let mut con = common::conn::async_conn(url.as_str()).await;
            let lock = c.faster_multi_lock("procs", &set).unwrap();
            for _ in 0..15 {
                let g = lock.lock().await.unwrap();
                hold_and_count(&mut con, &set).await;
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .expect("a task never finished")
            .unwrap();
    }
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert!(out.status.success(), "a contender process failed");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("DONE"),
            "the child ran the contender"
        );
    }
    let left: i64 = server.cmd(&["EXISTS", "procs"]);
    assert_eq!(left, 0, "everything released");
}

/// Not a test of its own: a process that holds values under a 1 s watchdog lease
/// until it is killed (run by `a_killed_process_frees_its_values_after_its_lease`).
#[tokio::test]
async fn child_process_group_holder() {
    let (Ok(url), Ok(set)) = (
        std::env::var("REDLATCH_CHILD_URL"),
        std::env::var("REDLATCH_CHILD_SET"),
    ) else {
        return;
    };
    let config = Config::single(url).watchdog_timeout(Duration::from_secs(1));
    let c = Client::connect(config).await.unwrap();
    let _g = c
        .faster_multi_lock("killed", set.split(','))
        .unwrap()
        .lock()
        .await
        .unwrap();
    println!("LOCKED");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test]
async fn a_killed_process_frees_its_values_after_its_lease() {
    use std::io::BufRead;
    let server = RedisServer::start();
    let mut child = spawn_child("child_process_group_holder", &server.url(), "x,y");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("LOCKED") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child exited before locking"
        );
    }
    let c = client(&server).await;
    let lock = c.faster_multi_lock("killed", ["y", "z"]).unwrap();
    // Alive: its watchdog keeps the values past its 1 s lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(lock.try_lock(Duration::ZERO).await.unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
    let g = tokio::time::timeout(Duration::from_secs(10), lock.lock())
        .await
        .expect("free after its lease")
        .unwrap();
    g.unlock().await.unwrap();
}
