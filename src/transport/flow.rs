//! [`Flow`]: what keeps the requests of the ordered connection (the lock lane,
//! standalone.rs invariant 5) in the order they took their tickets, also when many
//! are outstanding.
//!
//! A request is handed to redis-rs's connection task through a bounded queue. A
//! request that finds the queue full waits for room, and the requests that waited are
//! put in the queue in the order their tasks happen to run again, not in the order
//! they started to wait. A request that "was written" in the first poll of its call
//! may then reach Redis after a later one: a storm of cancelled `lock()` calls (about
//! 170 waiter-registry leaves and releases at once) had an undoing release run before
//! the acquire it undid, which left that grant on the server. So is a first poll that
//! tokio's cooperative budget cuts short.
//!
//! Invariants:
//! 1. The queue never fills: it holds [`QUEUE`] requests, and no more than
//!    [`MAX_UNANSWERED`] requests of the ordered connection are unanswered at a time
//!    (plus at most one probe, 3), so every request is in the queue by the end of the
//!    first poll of its call (made without a budget, see standalone.rs).
//! 2. A request counts as answered once a request written after it was: the queue
//!    and the connection keep their order, so everything written before an answered
//!    request has been taken from the queue (sent, or dropped by redis-rs because its
//!    caller gave up). A cancelled request is never answered itself; the next answer
//!    accounts for it.
//! 3. When [`MAX_UNANSWERED`] are unanswered, the next request waits (holding the
//!    ticket, so no later one passes it) until an answer or its write deadline. So that
//!    a queue of cancelled requests, which no answer will ever account for, cannot
//!    stall the connection, the first waiter writes a `PING` of its own (at most one in
//!    flight, each bounded by the request timeout) whose answer accounts for them all.
//!    So the queue's memory is bounded while Redis does not answer: unanswered requests
//!    wait for the bound instead of piling up in it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Requests redis-rs's queue of one connection holds (the connection settings'
/// pipeline buffer): above [`MAX_UNANSWERED`] plus a probe (invariant 1).
pub(crate) const QUEUE: usize = MAX_UNANSWERED as usize + 64;

/// Unanswered requests of the ordered connection, at most (invariant 3).
pub(crate) const MAX_UNANSWERED: u64 = 4096;

/// The count of one ordered connection's requests (invariants 2, 3).
#[derive(Default)]
pub(crate) struct Flow {
    /// Requests admitted, numbered from 1; written only under the lane's ticket.
    admitted: AtomicU64,
    /// The highest number answered (invariant 2).
    answered: AtomicU64,
    /// A request waits for an answer (invariant 3).
    waiting: AtomicBool,
    /// A probe is in flight (invariant 3).
    probing: AtomicBool,
    answers: Notify,
}

impl Flow {
    /// Admits the next request, to be written now by the caller, who holds the lane's
    /// ticket; its number, to [`answered`](Self::answered) when it is answered. `None`
    /// when the connection stays full until `until` (invariant 3).
    pub(crate) async fn admit(
        self: &Arc<Self>,
        conn: &MultiplexedConnection,
        until: Instant,
        probe_timeout: Duration,
    ) -> Option<u64> {
        loop {
            if let Some(n) = self.try_admit() {
                return Some(n);
            }
            let answered = self.answers.notified();
            let mut answered = std::pin::pin!(answered);
            answered.as_mut().enable();
            self.waiting.store(true, Ordering::SeqCst);
            // Checked again after `waiting` is set: an answer in between is not missed.
            if let Some(n) = self.try_admit() {
                return Some(n);
            }
            if !self.probing.swap(true, Ordering::AcqRel) {
                self.probe(conn, probe_timeout);
            }
            tokio::time::timeout_at(until, answered).await.ok()?;
        }
    }

    fn try_admit(&self) -> Option<u64> {
        let admitted = self.admitted.load(Ordering::Relaxed);
        let unanswered = admitted - self.answered.load(Ordering::SeqCst);
        (unanswered < MAX_UNANSWERED).then(|| {
            self.admitted.store(admitted + 1, Ordering::Relaxed);
            admitted + 1
        })
    }

    /// Request `n` was answered: it and every request admitted before it have left
    /// the queue (invariant 2).
    pub(crate) fn answered(&self, n: u64) {
        self.answered.fetch_max(n, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.waiting.store(false, Ordering::SeqCst);
            self.answers.notify_waiters();
        }
    }

    /// Writes a `PING` now (under the caller's ticket) whose answer accounts for every
    /// request before it; finished in the background (invariant 3).
    fn probe(self: &Arc<Self>, conn: &MultiplexedConnection, timeout: Duration) {
        let n = self.admitted.load(Ordering::Relaxed) + 1;
        self.admitted.store(n, Ordering::Relaxed);
        let (mut conn, flow) = (conn.clone(), self.clone());
        // Without a budget: a spent one would leave the PING out of the queue.
        let ping = tokio::task::unconstrained(async move {
            let ping = redis::cmd("PING");
            let answer = tokio::time::timeout(timeout, ping.query_async::<redis::Value>(&mut conn));
            if answer.await.is_ok() {
                flow.answered(n);
            }
            flow.probing.store(false, Ordering::Release);
        });
        let mut ping: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(ping);
        // The first poll puts the PING in the queue (invariant 1).
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        if ping.as_mut().poll(&mut cx).is_pending() {
            tokio::spawn(ping);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_bound_and_an_answer_accounts_for_everything_before_it() {
        let flow = Flow::default();
        for want in 1..=MAX_UNANSWERED {
            assert_eq!(flow.try_admit(), Some(want));
        }
        assert_eq!(flow.try_admit(), None, "full");
        // Request 10's answer: 1..=10 have left the queue, cancelled ones included.
        flow.answered(10);
        assert_eq!(flow.try_admit(), Some(MAX_UNANSWERED + 1));
        // An older answer arriving late changes nothing.
        flow.answered(3);
        assert_eq!(flow.answered.load(Ordering::SeqCst), 10);
    }

    /// Invariant 3 against a real server: with the bound reached by requests nobody
    /// will answer (cancelled), a waiting request writes one `PING`; while the server
    /// is paused it waits only until its deadline, and once the server is back the
    /// `PING`'s answer lets it in.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_connection_probes_once_and_its_answer_lets_the_next_request_in() {
        let server = redlatch_testkit::RedisServer::start();
        // As the library's own connections: no response timeout (redis-rs's 500 ms
        // default would fail the probe to the paused server under a loaded machine).
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(redlatch_testkit::conn::IO_TIMEOUT))
            .set_response_timeout(None);
        let client = redis::Client::open(server.url()).unwrap();
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        let flow = Arc::new(Flow::default());
        for _ in 0..MAX_UNANSWERED {
            flow.try_admit().unwrap();
        }
        server.pause();
        let probe_timeout = Duration::from_secs(10);
        let started = Instant::now();
        let until = started + Duration::from_millis(300);
        assert_eq!(flow.admit(&conn, until, probe_timeout).await, None);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "waited past its deadline"
        );
        // One probe is in flight; a second waiter writes none.
        assert!(flow.probing.load(Ordering::SeqCst));
        assert_eq!(flow.admitted.load(Ordering::SeqCst), MAX_UNANSWERED + 1);
        let later = Instant::now() + Duration::from_millis(100);
        assert_eq!(flow.admit(&conn, later, probe_timeout).await, None);
        assert_eq!(flow.admitted.load(Ordering::SeqCst), MAX_UNANSWERED + 1);
        server.resume();
        let until = Instant::now() + Duration::from_secs(5);
        let admitted = flow.admit(&conn, until, probe_timeout).await;
        assert_eq!(
            admitted,
            Some(MAX_UNANSWERED + 2),
            "the probe's answer let it in"
        );
    }
}
