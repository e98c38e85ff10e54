//! The calls of a row of the bounds matrix, each timed and judged into a [`Cell`]:
//! every kind's bounded acquisition, `lock()`, `unlock()`, `status`, `close(t)` and the
//! blocking API's `try_lock`, with the bound the module docs of `bounds` give each
//! (part of `bounds`).

use std::future::Future;
use std::pin::Pin;
use std::thread;
use std::time::{Duration, Instant};

use redlatch::Client;

use super::{Before, Cell, Outcome, SLACK};

type Call = Pin<Box<dyn Future<Output = Cell> + Send>>;

/// Times `f`, an acquisition-like call whose result is judged by `judge`.
fn timed<F, T>(
    call: &'static str,
    bound: Duration,
    must_fail: bool,
    f: F,
    judge: fn(T) -> Outcome,
) -> Call
where
    F: Future<Output = T> + Send + 'static,
    T: 'static,
{
    Box::pin(async move {
        let started = Instant::now();
        let result = f.await;
        let elapsed = started.elapsed();
        Cell {
            call,
            bound,
            elapsed,
            outcome: judge(result),
            must_fail,
        }
    })
}

fn held<G>(r: redlatch::Result<Option<G>>) -> Outcome {
    match r {
        Ok(Some(_)) => Outcome::Acquired,
        Ok(None) => Outcome::NotAcquired,
        Err(e) => failed(e),
    }
}

fn got<G>(r: redlatch::Result<G>) -> Outcome {
    match r {
        Ok(_) => Outcome::Acquired,
        Err(e) => failed(e),
    }
}

fn reached(r: redlatch::Result<bool>) -> Outcome {
    match r {
        Ok(true) => Outcome::Acquired,
        Ok(false) => Outcome::NotAcquired,
        Err(e) => failed(e),
    }
}

/// An error, its message cut short for the report (a pipeline's may repeat one
/// refusal per command).
fn failed(e: redlatch::Error) -> Outcome {
    Outcome::Failed(e.to_string().chars().take(120).collect())
}

fn done<T>(_: T) -> Outcome {
    Outcome::Done
}

/// The bounds of a row's calls: a lock's bounded wait (`locking`, which abandons a
/// request at the deadline and the wait slack), the other bounded calls (`bounded`).
#[derive(Clone, Copy)]
struct Bounds {
    wait: Duration,
    locking: Duration,
    bounded: Duration,
}

/// The single locks' bounded calls on `client`: `try_lock` of the plain, fair and
/// read-write lock, and `lock()` (its `unavailable_timeout` is `wait`).
fn lock_calls(client: &Client, b: Bounds) -> Vec<Call> {
    let Bounds {
        wait,
        locking,
        bounded,
    } = b;
    let c = client.clone();
    vec![
        timed(
            "try_lock",
            locking,
            true,
            async move { c.lock("bounds:plain").try_lock(wait).await },
            held,
        ),
        {
            let c = client.clone();
            // unavailable_timeout is `wait`.
            timed(
                "lock()",
                bounded,
                true,
                async move { c.lock("bounds:lock").lock().await },
                got,
            )
        },
        {
            let c = client.clone();
            timed(
                "fair try_lock",
                locking,
                true,
                async move { c.fair_lock("bounds:fair").try_lock(wait).await },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "read try_lock",
                locking,
                true,
                async move { c.read_write_lock("bounds:rw").read().try_lock(wait).await },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "write try_lock",
                locking,
                true,
                async move { c.read_write_lock("bounds:rw2").write().try_lock(wait).await },
                held,
            )
        },
    ]
}

/// The multi-locks' and the spin lock's `try_lock` on `client`.
fn multi_and_spin_calls(client: &Client, b: Bounds) -> Vec<Call> {
    let Bounds {
        wait,
        locking,
        bounded,
    } = b;
    vec![
        {
            let c = client.clone();
            timed(
                "multi try_lock",
                bounded,
                true,
                async move {
                    c.multi_lock(["bounds:m1", "bounds:m2"])
                        .try_lock(wait)
                        .await
                },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "faster multi try_lock",
                locking,
                true,
                async move {
                    c.faster_multi_lock("bounds:group", ["a", "b"])
                        .unwrap()
                        .try_lock(wait)
                        .await
                },
                held,
            )
        },
        {
            let c = client.clone();
            let spin = async move { c.spin_lock("bounds:spin").try_lock(wait).await };
            timed("spin try_lock", locking, true, spin, held)
        },
    ]
}

/// The counters' and the election's bounded waits on `client` (each within `locking`):
/// the semaphores' `try_acquire`, the latch's `wait_timeout` and `try_campaign`.
fn counter_and_election_calls(client: &Client, b: Bounds) -> Vec<Call> {
    let Bounds { wait, locking, .. } = b;
    let c = client.clone();
    vec![
        timed(
            "semaphore try_acquire",
            locking,
            true,
            async move { c.semaphore("bounds:sem").try_acquire(wait).await },
            held,
        ),
        {
            let c = client.clone();
            timed(
                "expirable semaphore try_acquire",
                locking,
                true,
                async move {
                    c.permit_expirable_semaphore("bounds:permits")
                        .try_acquire(wait)
                        .await
                },
                held,
            )
        },
        {
            let c = client.clone();
            timed(
                "latch wait_timeout",
                locking,
                true,
                async move { c.count_down_latch("bounds:latch").wait_timeout(wait).await },
                reached,
            )
        },
        {
            let c = client.clone();
            timed(
                "try_campaign",
                locking,
                true,
                async move { c.election("bounds:election").try_campaign("me", wait).await },
                held,
            )
        },
    ]
}

/// Every call of the matrix on `before`'s clients, with bounds for `wait` and one
/// request's bound `per_request` (the master timeout, plus the replicas' wait where
/// acquisitions wait for replicas).
pub(super) fn calls(
    before: Before,
    wait: Duration,
    per_request: Duration,
) -> (Vec<Call>, thread::JoinHandle<Cell>) {
    let Before {
        client,
        closing,
        guard,
        blocking,
    } = before;
    let bounded = wait + per_request + SLACK;
    // A lock's bounded wait abandons a request at the deadline and the wait slack.
    let locking = wait + per_request.min(redlatch::WAIT_SLACK) + SLACK;
    let b = Bounds {
        wait,
        locking,
        bounded,
    };
    let mut calls = lock_calls(&client, b);
    calls.extend(multi_and_spin_calls(&client, b));
    calls.extend(counter_and_election_calls(&client, b));
    calls.push(timed("unlock", bounded, true, guard.unlock(), got));
    let c = client.clone();
    calls.push(timed(
        "status",
        per_request + SLACK,
        false,
        async move { c.lock("bounds:plain").status().await },
        done,
    ));
    calls.push(timed(
        "close(t)",
        wait + SLACK,
        false,
        closing.close(wait),
        done,
    ));
    let blocking = thread::spawn(move || {
        let started = Instant::now();
        let r = blocking.lock("bounds:blocking").try_lock(wait);
        let elapsed = started.elapsed();
        Cell {
            call: "blocking try_lock",
            bound: locking,
            elapsed,
            outcome: held(r),
            must_fail: true,
        }
    });
    (calls, blocking)
}
