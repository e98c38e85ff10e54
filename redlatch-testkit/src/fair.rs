//! Helpers shared by the fair-lock tests: Redisson's queue keys, spawning queued
//! waiters and waiting for them to appear in the queue.

use std::time::Duration;

use redlatch::{Lock, LockGuard, Owner};
use tokio::task::JoinHandle;

use super::{eventually_async, numsub, RedisServer};

pub const SEC: Duration = Duration::from_secs(1);

pub fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

pub fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

pub fn waiter_channel(name: &str, holder: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}:{holder}")
}

/// The fair queue of `name`, head first.
pub fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    server.cmd(&["LRANGE", &queue_key(name), "0", "-1"])
}

/// Number of waiter deadlines of `name`.
pub fn zcard(server: &RedisServer, name: &str) -> i64 {
    server.cmd(&["ZCARD", &timeout_key(name)])
}

pub fn dbsize(server: &RedisServer) -> i64 {
    server.dbsize()
}

/// The holder id of `owner`'s acquisitions through `lock`'s client.
pub fn holder_of(lock: &Lock, owner: Owner) -> String {
    format!("{}:{}", lock.client().id(), owner.number())
}

/// `lock` acquired by a new explicit owner (so its holder id is known before it
/// queues), and that holder id.
pub fn owned(lock: &Lock) -> (Lock, String) {
    let owner = lock.client().owner();
    (lock.owned_by(owner), holder_of(lock, owner))
}

/// Runs `lock.lock()` in a new task for a new owner; returns its holder id and handle.
pub fn spawn_lock(lock: &Lock) -> (String, JoinHandle<LockGuard>) {
    let (l, holder) = owned(lock);
    let task = tokio::spawn(async move { l.lock().await.unwrap() });
    (holder, task)
}

/// Spawns two `lock()` calls on `lock`, the second once the first is queued at the
/// tail of `name`'s queue, and waits for the second too: [(holder id, task); 2].
pub async fn queue_two(
    server: &RedisServer,
    lock: &Lock,
    name: &str,
) -> [(String, JoinHandle<LockGuard>); 2] {
    let first = spawn_lock(lock);
    wait_queued(server, name, &first.0).await;
    let second = spawn_lock(lock);
    wait_queued(server, name, &second.0).await;
    [first, second]
}

/// Waits until `holder` is the last entry of the queue and listens on its channel.
pub async fn wait_queued(server: &RedisServer, name: &str, holder: &str) {
    let tail = || queue(server, name).last().map(String::as_str) == Some(holder);
    assert!(
        eventually_async(5 * SEC, tail).await,
        "{holder} never reached the tail of {:?}",
        queue(server, name)
    );
    let channel = waiter_channel(name, holder);
    assert!(eventually_async(5 * SEC, || numsub(server, &channel) == 1).await);
}

/// Awaits a task, failing the test if it takes longer than `within` or panicked.
pub async fn join<T>(task: JoinHandle<T>, within: Duration) -> T {
    tokio::time::timeout(within, task)
        .await
        .expect("the task did not finish in time")
        .expect("the task panicked")
}

/// Runs the test `helper` (its full name: [`crate::test_name!`]) of the current test
/// binary as a separate process with the environment variable `env` set, for a waiter
/// that is then killed; returns the process once it printed `QUEUED <holder>`, and that
/// holder.
pub async fn queued_helper(
    helper: &str,
    (var, value): (&str, String),
) -> (tokio::process::Child, String) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", helper, "--nocapture"])
        .arg("--test-threads=1")
        .env(var, value)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let holder = tokio::time::timeout(20 * SEC, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            // libtest prints `test <name> ... ` on the same line first.
            if let Some((_, h)) = line.split_once("QUEUED ") {
                return h.trim().to_string();
            }
        }
        panic!("the helper exited without queueing");
    })
    .await
    .expect("the helper never queued");
    (child, holder)
}
