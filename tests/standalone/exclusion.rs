//! Mutual exclusion: a GET-then-SET counter stays exact under contention.

use redlatch_testkit as common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::RedisServer;
use redis::AsyncCommands;
use redlatch::{Client, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_with_eight_tasks_each_never_overlap() {
    let server = RedisServer::start();
    let counter = redis::Client::open(server.url()).unwrap();
    const ROUNDS: i64 = 25;
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let client = Client::connect(Config::single(server.url())).await.unwrap();
        for _ in 0..8 {
            let (lock, inside) = (client.lock("counter-lock"), inside.clone());
            let counter = counter.clone();
            tasks.push(tokio::spawn(async move {
                let mut conn = counter
                    .get_multiplexed_async_connection_with_config(&common::conn::async_config())
                    .await
                    .unwrap();
                for _ in 0..ROUNDS {
                    let g = lock.lock().await.unwrap();
                    // Both clients live in this process: an in-process flag catches overlap.
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    // An error fails here, by name: read as 0 it would show as a lost update.
                    let n: Option<i64> = conn.get("counter").await.unwrap();
                    let n = n.unwrap_or(0);
                    tokio::task::yield_now().await;
                    let _: () = conn.set("counter", n + 1).await.unwrap();
                    inside.store(false, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(server.cmd::<i64>(&["GET", "counter"]), 2 * 8 * ROUNDS);
    assert_eq!(server.cmd::<i64>(&["EXISTS", "counter-lock"]), 0);
}
