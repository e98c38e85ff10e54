//! Group commit: operations bound for one deployment are coalesced into one call while
//! earlier calls to it are in flight. Generic over how a batch is sent ([`Flight`]):
//! the engine sends plain lock acquires and releases through it as one `batch.lua`
//! call.
//!
//! Invariants:
//! 1. An operation that finds fewer than [`MAX_DIRECT`] calls in flight, none of them a
//!    flusher's, and nothing queued is sent at once by its caller (no task hop, no added
//!    latency when lightly loaded), as the single-operation script. While a flusher
//!    works the queue the load is high: an operation sent alone then would cost the
//!    server a whole script call, and split the batch its neighbours form (W2: 2–3 % of
//!    operations flew alone and batches averaged 20 operations; queued, 30).
//! 2. Other operations queue up. While fewer than [`MAX_FLIGHTS`] calls are in flight,
//!    the first one queued starts a flusher task, which yields once (so the callers
//!    woken in the same tick queue too) and sends everything queued as one batch; when
//!    a flight lands, its caller or flusher sends what queued meanwhile, batch after
//!    batch, until the queue is empty. So a burst goes out as soon as the client is
//!    done producing it, and several batches overlap: Redis runs one while the client
//!    answers the callers of another.
//! 3. A queued operation never depends on another caller's future: if the caller that
//!    started a flight is dropped, the flusher takes over the queue.
//! 4. Order is kept: a caller only flies directly when nothing is queued and every call
//!    in flight has been polled once (written to the connection's request channel,
//!    which keeps the order; `unsent` counts those that have not), and a flusher writes
//!    what it drained in the same poll, before any later drain: it drains only while
//!    `unsent` is 0 (on a multi-threaded runtime another flusher's poll may be running,
//!    preempted, between its drain and its write). That first poll is not cut short by
//!    tokio's cooperative budget (a spent budget makes timers, mutexes and channels
//!    answer Pending before the request is written). An operation that timed out in
//!    the queue (invariant 7), or whose caller was dropped, before it was drained is
//!    never sent, so it cannot run late, after the caller's next operation.
//! 5. Every operation's outcome is exactly what [`Flight::one`] would have returned
//!    for it alone; a batch only saves round trips and per-call work in Redis.
//! 6. A request sent to the same deployment outside the batcher (a fair or fenced
//!    script) waits for [`Batcher::drained`] first, so it cannot overtake operations
//!    submitted before it (a fenced acquire overtaking the release of the same
//!    holder's earlier attempt would lose that new hold).
//! 7. A queued operation waits at most [`Flight::timeout`] + 10 ms in the queue (its
//!    deadline: the call ahead of it may take one timeout), then is answered
//!    [`Error::Timeout`] and dropped from the queue, never sent. One watcher task per
//!    batcher, running while anything is queued, sleeps until the oldest deadline, so
//!    neither a hung flight nor one slower than its timeout holds the queue past it;
//!    each drain also drops what expired first (a watcher woken late cannot let an
//!    expired operation fly). No timer per operation (its registration and
//!    cancellation were ~1.1k instructions of a W2 pair's ~31.8k): once drained, an
//!    operation is bounded by its flight, so it is answered within 2 timeouts + 10 ms
//!    when its flight keeps to [`Flight::timeout`] (see there).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::BoxFuture;
use crate::error::{Error, Result};

/// Operations per batch call, at most. Smaller batches overlap: with 64 busy callers
/// (W2), 32 keeps two batches going, one run by Redis while the client answers the
/// other's callers; measured on one master: 64 -> 45-60 k pairs/s, 32 -> 78-117 k,
/// 16 -> 74-82 k, 48 -> 57 k. A flight whose batches are split over several servers
/// (a cluster's primaries) takes this many per server ([`Flight::servers`]).
pub(crate) const MAX_BATCH: usize = 32;

/// Operations per batch, at most, however many servers a batch is split over.
const MAX_SPLIT_BATCH: usize = 8 * MAX_BATCH;

/// Calls in flight per master. More than one keeps a hand-over (one task's release,
/// the next one's acquire) from waiting on each other, and lets batches overlap.
const MAX_FLIGHTS: usize = 4;

/// Calls in flight below which an operation flies directly (invariant 1). Two, not
/// one: under Redlock the call of the master that answered last is often still in
/// flight (a majority was enough), and the same holder's next operation should not pay
/// a task hop for it (W1 with 3 masters: 264-279 -> 245-250 us p50, the bare redis-rs
/// floor being 230-244 us).
const MAX_DIRECT: usize = 2;

/// `now + d`, saturated thirty years ahead (a timeout the user set to `Duration::MAX`
/// must not overflow an `Instant`).
fn deadline_after(d: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
    Instant::now() + d.min(FAR)
}

/// How a [`Batcher`]'s operations are sent: alone, or several in one call.
pub(crate) trait Flight: Send + Sync + 'static {
    /// One operation.
    type Op: Send + Sync + 'static;
    /// Its answer.
    type Reply: Send + 'static;

    /// Sends one operation alone.
    fn one<'a>(&'a self, op: &'a Self::Op) -> BoxFuture<'a, Result<Self::Reply>>;

    /// Sends several operations in one call (or one per hash slot of a cluster): one reply
    /// per operation, in order.
    fn many<'a>(&'a self, ops: &'a [&'a Self::Op]) -> BoxFuture<'a, Vec<Result<Self::Reply>>>;

    /// Where the operations go, for errors.
    fn addr(&self) -> &str;

    /// How long one call may take, a synced call's wait for replicas included.
    /// [`one`](Self::one) and [`many`](Self::many) must return within it: the batcher
    /// times out operations in its queue (invariant 7), not in flight, so a queued
    /// operation is answered within twice it + 10 ms. (A cluster node's batch that
    /// resends operations the node does not serve adds one call's time.)
    fn timeout(&self) -> Duration;

    /// Over how many servers [`many`](Self::many) splits a batch, one call each (a
    /// cluster's primaries): a batch takes up to [`MAX_BATCH`] operations per server,
    /// so each call is as large as one server's would be.
    fn servers(&self) -> usize {
        1
    }
}

struct Pending<F: Flight> {
    op: F::Op,
    tx: oneshot::Sender<Result<F::Reply>>,
    /// Answered with a timeout if still queued then (invariant 7). Taken under the
    /// queue's lock, so deadlines never decrease along the queue.
    deadline: Instant,
}

struct Queue<F: Flight> {
    ops: Vec<Pending<F>>,
    flying: usize,
    /// A flusher was started and has not drained yet (invariant 2).
    starting: bool,
    /// Calls that took a flight slot and have not been polled once yet, i.e. may not
    /// be written to the connection yet (invariant 4).
    unsent: usize,
    /// Flusher tasks started and not yet returned (invariant 1).
    flushers: usize,
    /// The watcher task runs (invariant 7).
    watching: bool,
}

/// One deployment's group-commit queue.
pub(crate) struct Batcher<F: Flight> {
    flight: F,
    queue: parking_lot::Mutex<Queue<F>>,
    /// Signalled whenever the queue or the unsent count shrinks (invariant 6).
    progress: tokio::sync::Notify,
}

impl<F: Flight> Batcher<F> {
    /// A batcher sending through `flight`.
    pub(crate) fn new(flight: F) -> Self {
        Batcher {
            flight,
            queue: parking_lot::Mutex::new(Queue {
                ops: Vec::new(),
                flying: 0,
                starting: false,
                unsent: 0,
                flushers: 0,
                watching: false,
            }),
            progress: tokio::sync::Notify::new(),
        }
    }

    /// Waits until every operation submitted so far has been written to the connection
    /// (invariant 6): nothing queued, nothing taken and not yet polled.
    pub(crate) async fn drained(&self) {
        loop {
            let progress = self.progress.notified();
            {
                let q = self.queue.lock();
                if q.ops.iter().all(|p| p.tx.is_closed()) && q.unsent == 0 {
                    return;
                }
            }
            progress.await;
        }
    }

    /// Runs one operation, alone or as part of a batch.
    pub(crate) async fn submit(self: &Arc<Self>, op: F::Op) -> Result<F::Reply> {
        let op = {
            let mut q = self.queue.lock();
            if q.flying < MAX_DIRECT && q.flushers == 0 && q.ops.is_empty() && q.unsent == 0 {
                q.flying += 1;
                q.unsent += 1;
                Ok(op)
            } else {
                let (tx, rx) = oneshot::channel();
                let deadline = deadline_after(self.queue_bound());
                q.ops.push(Pending { op, tx, deadline });
                let start = q.flying < MAX_FLIGHTS && !q.starting;
                if start {
                    q.flying += 1;
                    q.flushers += 1;
                    q.starting = true;
                }
                let watch = !std::mem::replace(&mut q.watching, true);
                Err((rx, start, watch.then_some(deadline)))
            }
        };
        let op = match op {
            Ok(op) => op,
            Err((rx, start, watch)) => {
                if start {
                    let b = self.clone();
                    tokio::spawn(async move {
                        tokio::task::yield_now().await;
                        b.flush().await
                    });
                }
                if let Some(at) = watch {
                    tokio::spawn(Self::watch(Arc::downgrade(self), at));
                }
                // Invariant 7: no timer of our own. A dropped sender (the flusher or
                // the batcher gone: the runtime shut down) is a timeout too.
                return rx.await.unwrap_or_else(|_| Err(self.late()));
            }
        };
        // Invariants 1 and 3: fly our own operation; whatever happens to this future,
        // the queue is handed to a flusher afterwards.
        let _land = scopeguard::guard(self.clone(), |b| b.land());
        self.sent(self.flight.one(&op)).await
    }

    /// Polls a call once (which writes it to the connection's request queue), counts it
    /// as sent (invariant 4), then awaits its reply.
    async fn sent<Fut: std::future::Future>(&self, call: Fut) -> Fut::Output {
        let mut call = std::pin::pin!(call);
        let unsent = scopeguard::guard((), |()| {
            self.queue.lock().unsent -= 1;
            self.progress.notify_waiters();
        });
        let once = std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx)));
        let first = tokio::task::unconstrained(once).await;
        drop(unsent);
        match first {
            std::task::Poll::Ready(out) => out,
            std::task::Poll::Pending => call.await,
        }
    }

    /// How long an operation may wait in the queue (invariant 7): the call ahead of it
    /// may take up to a timeout.
    fn queue_bound(&self) -> Duration {
        self.flight
            .timeout()
            .saturating_add(Duration::from_millis(10))
    }

    /// The answer of an operation that waited out its deadline in the queue.
    fn late(&self) -> Error {
        Error::Timeout {
            addr: self.flight.addr().to_string(),
            after: self.queue_bound(),
        }
    }

    /// Takes the queued operations whose deadline has passed (invariant 7): a prefix,
    /// deadlines never decreasing along the queue. Empty without allocating if none.
    fn expired(q: &mut Queue<F>) -> Vec<Pending<F>> {
        let now = Instant::now();
        let n = q.ops.partition_point(|p| p.deadline <= now);
        q.ops.drain(..n).collect()
    }

    /// Answers operations taken by [`expired`](Self::expired) with a timeout, outside
    /// the queue's lock; the queue shrank (invariant 6).
    fn answer_late(&self, expired: Vec<Pending<F>>) {
        if expired.is_empty() {
            return;
        }
        for p in expired {
            let _ = p.tx.send(Err(self.late()));
        }
        self.progress.notify_waiters();
    }

    /// Invariant 7: until the queue is found empty, sleeps until its oldest deadline and
    /// answers what expired. Holds the batcher weakly: once it is dropped, so are the
    /// queued operations' senders (their callers get a timeout).
    async fn watch(batcher: std::sync::Weak<Self>, mut at: Instant) {
        loop {
            tokio::time::sleep_until(at).await;
            let Some(b) = batcher.upgrade() else { return };
            let mut q = b.queue.lock();
            let expired = Self::expired(&mut q);
            let next = q.ops.first().map(|p| p.deadline);
            q.watching = next.is_some();
            drop(q);
            b.answer_late(expired);
            match next {
                Some(next) => at = next,
                None => return,
            }
        }
    }

    /// A flight landed: free its slot, or hand it to a flusher for what queued meanwhile.
    fn land(self: Arc<Self>) {
        let mut q = self.queue.lock();
        if q.ops.is_empty() {
            q.flying -= 1;
            return;
        }
        q.flushers += 1;
        drop(q);
        tokio::spawn(async move { self.flush().await });
    }

    /// Invariant 2: send everything queued, batch after batch, until the queue is empty.
    async fn flush(self: Arc<Self>) {
        loop {
            // Invariant 4: wait while a drained batch (or a direct call) is unwritten;
            // enabled before the check, so its progress is not missed.
            let progress = self.progress.notified();
            let mut progress = std::pin::pin!(progress);
            progress.as_mut().enable();
            let (batch, expired): (Option<Vec<Pending<F>>>, _) = {
                let mut q = self.queue.lock();
                q.ops.retain(|p| !p.tx.is_closed());
                // Invariant 7: what waited out its deadline is answered, not sent.
                let expired = Self::expired(&mut q);
                if q.ops.is_empty() {
                    q.starting = false;
                    q.flying -= 1;
                    q.flushers -= 1;
                    drop(q);
                    self.answer_late(expired);
                    self.progress.notify_waiters();
                    return;
                }
                let batch = (q.unsent == 0).then(|| {
                    q.starting = false;
                    let max = (MAX_BATCH * self.flight.servers()).clamp(MAX_BATCH, MAX_SPLIT_BATCH);
                    let n = q.ops.len().min(max);
                    q.unsent += 1;
                    q.ops.drain(..n).collect()
                });
                (batch, expired)
            };
            self.answer_late(expired);
            let Some(batch) = batch else {
                progress.await;
                continue;
            };
            let ops: Vec<&F::Op> = batch.iter().map(|p| &p.op).collect();
            let replies = self
                .sent(async {
                    if let [one] = ops.as_slice() {
                        vec![self.flight.one(one).await]
                    } else {
                        self.flight.many(&ops).await
                    }
                })
                .await;
            for (p, r) in batch.into_iter().zip(replies) {
                let _ = p.tx.send(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The batcher's paths with a fake [`Flight`] whose calls wait until the test lets
    //! their operations through: which operations fly alone, which queue.
    use std::collections::HashSet;
    use std::future::Future;
    use std::sync::Arc;
    use std::time::Duration;

    use super::{Batcher, BoxFuture, Flight};
    use crate::error::Result;

    #[derive(Default)]
    struct Gated {
        /// Every call, in the order it was made: its operations.
        calls: parking_lot::Mutex<Vec<Vec<u32>>>,
        open: parking_lot::Mutex<HashSet<u32>>,
        opened: tokio::sync::Notify,
    }

    impl Gated {
        async fn call(&self, ops: Vec<u32>) -> Vec<Result<u32>> {
            self.calls.lock().push(ops.clone());
            loop {
                let opened = self.opened.notified();
                if ops.iter().all(|op| self.open.lock().contains(op)) {
                    return ops.into_iter().map(Ok).collect();
                }
                opened.await;
            }
        }
    }

    impl Flight for Arc<Gated> {
        type Op = u32;
        type Reply = u32;

        fn one<'a>(&'a self, op: &'a u32) -> BoxFuture<'a, Result<u32>> {
            Box::pin(async move { self.call(vec![*op]).await.remove(0) })
        }

        fn many<'a>(&'a self, ops: &'a [&'a u32]) -> BoxFuture<'a, Vec<Result<u32>>> {
            Box::pin(self.call(ops.iter().map(|op| **op).collect()))
        }

        fn addr(&self) -> &str {
            "fake"
        }

        fn timeout(&self) -> Duration {
            Duration::from_secs(30)
        }
    }

    fn batcher() -> (Arc<Batcher<Arc<Gated>>>, Arc<Gated>) {
        let gated = Arc::new(Gated::default());
        (Arc::new(Batcher::new(gated.clone())), gated)
    }

    fn open(gated: &Gated, ops: &[u32]) {
        gated.open.lock().extend(ops);
        gated.opened.notify_waiters();
    }

    /// Polls `fut` once; true if it made a call before returning Pending.
    fn polled_once(fut: impl Future, gated: &Gated) -> bool {
        let before = gated.calls.lock().len();
        let mut fut = std::pin::pin!(fut);
        let waker = std::task::Waker::noop();
        let pending = fut
            .as_mut()
            .poll(&mut std::task::Context::from_waker(waker))
            .is_pending();
        assert!(pending, "the fake's calls wait for the test");
        gated.calls.lock().len() > before
    }

    /// Yields until the fake has seen `n` calls (the runtime has one thread: the
    /// spawned callers and flushers run at these yields); a bounded count.
    async fn calls(gated: &Gated, n: usize) -> Vec<Vec<u32>> {
        for _ in 0..1000 {
            if gated.calls.lock().len() >= n {
                return gated.calls.lock().clone();
            }
            tokio::task::yield_now().await;
        }
        panic!("{n} calls expected, got {:?}", gated.calls.lock());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn lightly_loaded_an_operation_flies_at_once_even_beside_another_direct_call() {
        let (b, gated) = batcher();
        let first = tokio::spawn({
            let b = b.clone();
            async move { b.submit(1).await }
        });
        assert_eq!(calls(&gated, 1).await, [vec![1]]);
        // One direct call in flight (under Redlock, often the slowest master's): the
        // next operation is sent in its caller's first poll, no flusher.
        assert!(polled_once(b.submit(2), &gated));
        open(&gated, &[1]);
        assert_eq!(first.await.unwrap().unwrap(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn while_a_flusher_works_the_queue_operations_join_the_next_batch() {
        let (b, gated) = batcher();
        let spawn = |op: u32| {
            let b = b.clone();
            tokio::spawn(async move { b.submit(op).await })
        };
        // Two direct calls in flight, so the third operation queues and a flusher sends it.
        let (one, two, three) = (spawn(1), spawn(2), spawn(3));
        assert_eq!(calls(&gated, 3).await, [vec![1], vec![2], vec![3]]);
        // The direct calls land: one call is in flight, the flusher's.
        open(&gated, &[1, 2]);
        assert_eq!(
            (one.await.unwrap().unwrap(), two.await.unwrap().unwrap()),
            (1, 2)
        );
        // Fewer than two calls in flight, nothing queued: a direct call would be
        // allowed by the count alone. With the flusher at work, the operation queues
        // (nothing is sent in its first poll), and so do its neighbours: one batch.
        assert!(!polled_once(b.submit(9), &gated));
        let (ten, eleven) = (spawn(10), spawn(11));
        assert_eq!(calls(&gated, 4).await[3], [10, 11]);
        open(&gated, &[3, 10, 11]);
        assert_eq!(three.await.unwrap().unwrap(), 3);
        assert_eq!(
            (ten.await.unwrap().unwrap(), eleven.await.unwrap().unwrap()),
            (10, 11)
        );
        // Idle again (the flushers returned): the next operation flies at once.
        assert!(calls_settle(&b).await);
        assert!(polled_once(b.submit(12), &gated));
    }

    /// Yields until no flusher is left and nothing is in flight; a bounded count.
    async fn calls_settle(b: &Batcher<Arc<Gated>>) -> bool {
        for _ in 0..1000 {
            {
                let q = b.queue.lock();
                if q.flushers == 0 && q.flying == 0 {
                    return true;
                }
            }
            tokio::task::yield_now().await;
        }
        false
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_dropped_caller_leaves_no_flusher_counted() {
        let (b, gated) = batcher();
        let spawn = |op: u32| {
            let b = b.clone();
            tokio::spawn(async move { b.submit(op).await })
        };
        let (one, two, three) = (spawn(1), spawn(2), spawn(3));
        calls(&gated, 3).await;
        three.abort();
        open(&gated, &[1, 2, 3]);
        one.await.unwrap().unwrap();
        two.await.unwrap().unwrap();
        assert!(
            calls_settle(&b).await,
            "a flusher or a flight is still counted"
        );
        assert!(polled_once(b.submit(4), &gated));
    }

    /// How long the fake's operations may wait in the queue: its timeout + 10 ms.
    const QUEUED: Duration = Duration::from_millis(30_010);

    /// Fills every flight slot with a call the test holds: two direct (1, 2), two
    /// flushers' (3, 4); what is submitted next stays queued.
    async fn slots_full(gated: &Gated, spawn: impl Fn(u32)) {
        spawn(1);
        spawn(2);
        spawn(3);
        calls(gated, 3).await;
        spawn(4);
        assert_eq!(calls(gated, 4).await, [vec![1], vec![2], vec![3], vec![4]]);
    }

    /// `op`'s answer and when it came; fails (does not hang) if none comes in time.
    async fn answered(
        op: tokio::task::JoinHandle<Result<u32>>,
        start: tokio::time::Instant,
    ) -> (Result<u32>, Duration) {
        let r = tokio::time::timeout(QUEUED * 3, op).await;
        let r = r.expect("no answer in three queue bounds").unwrap();
        (r, start.elapsed())
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn operations_queued_behind_hung_flights_time_out_at_their_deadline() {
        let (b, gated) = batcher();
        let spawn = |op: u32| {
            let b = b.clone();
            tokio::spawn(async move { b.submit(op).await })
        };
        let start = tokio::time::Instant::now();
        slots_full(&gated, |op| drop(spawn(op))).await;
        let (five, six) = (spawn(5), spawn(6));
        // Queued 10 s later: its own deadline, 10 s after theirs (the watcher sleeps
        // again, for it).
        tokio::time::sleep(Duration::from_secs(10)).await;
        let seven = spawn(7);
        for op in [five, six] {
            let (r, after) = answered(op, start).await;
            assert!(
                matches!(r, Err(crate::Error::Timeout { after, .. }) if after == QUEUED),
                "{r:?}"
            );
            assert!(after >= QUEUED && after <= QUEUED + Duration::from_millis(2));
        }
        let (r, after) = answered(seven, start).await;
        assert!(matches!(r, Err(crate::Error::Timeout { .. })), "{r:?}");
        let late = QUEUED + Duration::from_secs(10);
        assert!(after >= late && after <= late + Duration::from_millis(2));
        // The flights land: the timed-out operations were never sent (invariant 4).
        open(&gated, &[1, 2, 3, 4, 5, 6, 7]);
        assert!(calls_settle(&b).await);
        assert_eq!(gated.calls.lock().len(), 4);
        assert!(b.queue.lock().ops.is_empty());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_flight_landing_after_the_deadline_sends_nothing_expired_and_no_timer_cuts_a_flight()
    {
        let (b, gated) = batcher();
        let spawn = |op: u32| {
            let b = b.clone();
            tokio::spawn(async move { b.submit(op).await })
        };
        let start = tokio::time::Instant::now();
        slots_full(&gated, |op| drop(spawn(op))).await;
        let (five, six) = (spawn(5), spawn(6));
        // Calls 1 to 4 take 40 s, longer than the fake's timeout (30 s): 5 and 6 are
        // answered at their deadline, not when a slot frees.
        let (r, after) = answered(five, start).await;
        assert!(matches!(r, Err(crate::Error::Timeout { .. })), "{r:?}");
        assert!(after >= QUEUED && after <= QUEUED + Duration::from_millis(2));
        assert!(answered(six, start).await.0.is_err());
        tokio::time::sleep_until(start + Duration::from_secs(40)).await;
        // An operation queued now flies when a slot frees; in flight, only its flight
        // bounds it: answered at 40 s + 35 s, past any queue deadline.
        let eight = spawn(8);
        open(&gated, &[1, 2, 3, 4]);
        assert_eq!(calls(&gated, 5).await[4], [8]);
        tokio::time::sleep(Duration::from_secs(35)).await;
        open(&gated, &[8]);
        let (r, after) = answered(eight, start).await;
        assert_eq!(r.unwrap(), 8);
        assert!(after >= Duration::from_secs(75));
        assert!(calls_settle(&b).await);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_drain_past_the_deadline_answers_what_expired_instead_of_sending_it() {
        let (b, gated) = batcher();
        // As if a watcher were running and woke late (a loaded machine): none starts.
        b.queue.lock().watching = true;
        let spawn = |op: u32| {
            let b = b.clone();
            tokio::spawn(async move { b.submit(op).await })
        };
        let start = tokio::time::Instant::now();
        slots_full(&gated, |op| drop(spawn(op))).await;
        let five = spawn(5);
        tokio::time::sleep(QUEUED + Duration::from_secs(1)).await;
        assert!(!five.is_finished());
        // Slots free after the deadline: the drain answers 5, does not send it.
        open(&gated, &[1, 2, 3, 4, 5]);
        let (r, _) = answered(five, start).await;
        assert!(matches!(r, Err(crate::Error::Timeout { .. })), "{r:?}");
        assert!(calls_settle(&b).await);
        assert_eq!(gated.calls.lock().len(), 4);
    }
}
