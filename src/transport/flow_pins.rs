//! What the lock lane's order takes from redis-rs, each behaviour pinned by a test of its
//! own against a real server, so that a redis-rs upgrade that changes one fails here by
//! name rather than as a rare leaked grant (flow.rs invariants 1 and 2, standalone.rs
//! invariant 5):
//!
//! 1. A request is in the connection's queue by the end of its first poll (when the
//!    queue has room and the poll has tokio's budget): the ticket is released right
//!    after it.
//! 2. The queue holds as many requests as `set_pipeline_buffer_size` says ([`QUEUE`]):
//!    the [`Flow`](super::Flow)'s bound keeps it from ever filling only if so.
//! 3. The connection's task takes requests from the queue in their order and writes
//!    them in it, and one whose caller gave up leaves the queue with the others: when a
//!    request is answered, every request queued before it is gone from the queue,
//!    cancelled ones included (the count of unanswered requests rests on this).
//!
//! Each test queues its requests from one task of a current-thread runtime, polling
//! each once, so the connection's task cannot run in between; `RPUSH` numbers them and
//! the list on the server is the order they were written in.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use redlatch_testkit::RedisServer;

use super::QUEUE;

type Call = Pin<Box<dyn Future<Output = redis::RedisResult<i64>>>>;

/// A connection configured as `Standalone::new` configures the lock lane's.
async fn lock_lane_conn(server: &RedisServer) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(30)))
        .set_response_timeout(None)
        .set_pipeline_buffer_size(QUEUE);
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap()
}

/// `RPUSH order n`, not yet polled.
fn push(conn: &MultiplexedConnection, n: usize) -> Call {
    let mut conn = conn.clone();
    Box::pin(async move {
        redis::cmd("RPUSH")
            .arg("order")
            .arg(n)
            .query_async(&mut conn)
            .await
    })
}

/// Polls `call` once, as the lane's first poll does (no waker will be used: the test
/// awaits it later).
fn first_poll(call: &mut Call) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    call.as_mut().poll(&mut cx).is_pending()
}

/// The numbers on the server, in the order they were written.
fn written(server: &RedisServer) -> Vec<usize> {
    let order: Vec<String> = server.cmd(&["LRANGE", "order", "0", "-1"]);
    order.iter().map(|n| n.parse().unwrap()).collect()
}

/// Awaits `calls` last first, bounded: a request left out of the queue by its first poll
/// waits for room no call of this test makes, so it shows as a timeout.
async fn finish_last_first(calls: Vec<Call>, behaviour: &str) {
    let all = async {
        for call in calls.into_iter().rev() {
            call.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .unwrap_or_else(|_| panic!("redis-rs changed: {behaviour}"));
}

#[tokio::test]
async fn redis_rs_queues_a_request_in_its_first_poll() {
    let server = RedisServer::start();
    let conn = lock_lane_conn(&server).await;
    let mut calls = vec![push(&conn, 1), push(&conn, 2)];
    tokio::task::unconstrained(async {
        for call in &mut calls {
            assert!(
                first_poll(call),
                "answered before the connection's task ran"
            );
        }
    })
    .await;
    // The second is awaited first: it goes out after the first only if the first was
    // queued by its first poll.
    finish_last_first(calls, "a request is not queued by its first poll").await;
    assert_eq!(
        written(&server),
        [1, 2],
        "redis-rs changed: a request is not queued by its first poll"
    );
}

#[tokio::test]
async fn redis_rs_queue_holds_the_configured_pipeline_buffer_size() {
    let server = RedisServer::start();
    let conn = lock_lane_conn(&server).await;
    let mut calls: Vec<Call> = (0..QUEUE).map(|n| push(&conn, n)).collect();
    tokio::task::unconstrained(async {
        for call in &mut calls {
            assert!(
                first_poll(call),
                "answered before the connection's task ran"
            );
        }
    })
    .await;
    let behaviour =
        format!("its queue holds fewer than set_pipeline_buffer_size ({QUEUE}) requests");
    finish_last_first(calls, &behaviour).await;
    assert_eq!(
        written(&server),
        (0..QUEUE).collect::<Vec<_>>(),
        "redis-rs changed: {behaviour}"
    );
}

#[tokio::test]
async fn redis_rs_writes_in_queue_order_and_an_answer_means_everything_before_it_left_the_queue() {
    let server = RedisServer::start();
    let conn = lock_lane_conn(&server).await;
    // A full queue: the first QUEUE - 1 requests cancelled after their first poll, the
    // last one awaited.
    let mut calls: Vec<Call> = (0..QUEUE).map(|n| push(&conn, n)).collect();
    tokio::task::unconstrained(async {
        for call in &mut calls {
            assert!(
                first_poll(call),
                "answered before the connection's task ran"
            );
        }
    })
    .await;
    let last = calls.pop().unwrap();
    drop(calls);
    tokio::time::timeout(Duration::from_secs(60), last)
        .await
        .expect("the last request was never answered")
        .unwrap();
    // Its answer came: the cancelled requests before it left the queue (written or
    // skipped), so the queue has room for QUEUE again, which the second round's first
    // polls need (else it times out or comes out of order).
    let mut calls: Vec<Call> = (QUEUE..2 * QUEUE).map(|n| push(&conn, n)).collect();
    tokio::task::unconstrained(async {
        for call in &mut calls {
            assert!(
                first_poll(call),
                "answered before the connection's task ran"
            );
        }
    })
    .await;
    let behaviour = "an answered request's predecessors were still in the queue";
    finish_last_first(calls, behaviour).await;
    let order = written(&server);
    // Whatever was written was written in queue order, the awaited request after every
    // cancelled one that was written.
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "redis-rs changed: requests were written out of their queue order"
    );
    assert!(
        order.ends_with(&(QUEUE - 1..2 * QUEUE).collect::<Vec<_>>()),
        "redis-rs changed: {behaviour}"
    );
}
