//! Several locks taken as one (a multi-lock, Redisson `RedissonMultiLock`): the wait
//! that gets all of them or none, without ever waiting for one while holding another.
//! The parts are anything the caller can take and give back (the API's lock guards,
//! each over its own client's masters), so this loop knows neither kinds nor clients.
//!
//! Invariants:
//! 1. All or none: [`all_or_none`] returns every part, or holds none of them when it
//!    returns. A call dropped mid-way leaves its partial holds to their own drops
//!    (the parts release on drop).
//! 2. No deadlock: it never waits for a part while it holds another. It waits for one
//!    part (the one that was busy last, the first at the start), then tries the
//!    others once each (a wait of zero); if one is busy it gives back what it took,
//!    pauses a random moment (two callers on overlapping sets desynchronise) and
//!    waits for that one next.
//! 3. Bounded: with a wait, it returns by the deadline (plus one attempt's bound):
//!    a give-back still unanswered at the deadline finishes in the background, and
//!    the pause is cut at the deadline.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::Result;

/// Takes parts `0..n` together (invariants 1-3). `take(i, wait)` takes part `i`,
/// waiting at most `wait` (`None`: as long as it takes), `Ok(None)` when it stayed
/// busy; `give_back` returns what was taken; `pause` is the random back-off after a
/// busy part. `wait` is the whole call's: `Ok(None)` when it ran out.
pub(crate) async fn all_or_none<T, Take, Taking, GiveBack, Giving>(
    n: usize,
    wait: Option<Duration>,
    take: Take,
    give_back: GiveBack,
    pause: impl Fn() -> Duration,
) -> Result<Option<Vec<T>>>
where
    Take: Fn(usize, Option<Duration>) -> Taking,
    Taking: Future<Output = Result<Option<T>>>,
    GiveBack: Fn(Vec<T>) -> Giving,
    Giving: Future + Send + 'static,
    Giving::Output: Send,
{
    let deadline = wait.and_then(|w| Instant::now().checked_add(w));
    let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    // No deadline although a wait was given: it is beyond what an Instant holds.
    let left = || left().or(wait);
    let mut next = 0;
    loop {
        let Some(first) = take(next, left()).await? else {
            return Ok(None);
        };
        let mut taken = vec![first];
        let mut busy = None;
        for i in (0..n).filter(|i| *i != next) {
            match take(i, Some(Duration::ZERO)).await? {
                Some(part) => taken.push(part),
                None => {
                    busy = Some(i);
                    break;
                }
            }
        }
        let Some(busy) = busy else {
            return Ok(Some(taken));
        };
        // Invariant 2, bounded by invariant 3.
        let back = tokio::spawn(give_back(taken));
        match deadline {
            Some(d) => drop(tokio::time::timeout_at(d, back).await),
            None => drop(back.await),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
        let until = Instant::now() + pause();
        tokio::time::sleep_until(deadline.map_or(until, |d| d.min(until))).await;
        next = busy;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;

    /// Parts as booleans: taken (true) or free; `busy[i]` stays busy for `turns[i]`
    /// more tries. Records each try as (part, waited).
    #[derive(Default)]
    struct Parts {
        taken: Vec<bool>,
        busy_tries: Vec<usize>,
        tries: Vec<(usize, bool)>,
    }

    fn parts(n: usize, busy_tries: &[usize]) -> Arc<Mutex<Parts>> {
        Arc::new(Mutex::new(Parts {
            taken: vec![false; n],
            busy_tries: busy_tries.to_vec(),
            tries: Vec::new(),
        }))
    }

    async fn run(p: &Arc<Mutex<Parts>>, n: usize, wait: Option<Duration>) -> Option<Vec<usize>> {
        let take = |i: usize, w: Option<Duration>| {
            let p = p.clone();
            async move {
                let mut p = p.lock();
                p.tries.push((i, w != Some(Duration::ZERO)));
                assert!(!p.taken[i], "part {i} taken twice");
                if p.busy_tries[i] > 0 {
                    p.busy_tries[i] -= 1;
                    return Ok(None);
                }
                // Invariant 2: a waiting take never happens while a part is held.
                if w != Some(Duration::ZERO) {
                    assert!(p.taken.iter().all(|t| !t), "waited while holding");
                }
                p.taken[i] = true;
                Ok(Some(i))
            }
        };
        let give_back = |held: Vec<usize>| {
            let p = p.clone();
            async move {
                for i in held {
                    p.lock().taken[i] = false;
                }
            }
        };
        all_or_none(n, wait, take, give_back, || Duration::from_millis(1))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn all_free_takes_all_with_one_wait_and_tries_for_the_rest() {
        let p = parts(3, &[0, 0, 0]);
        assert_eq!(run(&p, 3, None).await, Some(vec![0, 1, 2]));
        assert_eq!(p.lock().tries, [(0, true), (1, false), (2, false)]);
    }

    #[tokio::test]
    async fn a_busy_part_is_given_back_around_and_waited_for_next() {
        let p = parts(3, &[0, 0, 1]);
        let got = run(&p, 3, None).await.expect("all taken");
        assert_eq!(got, [2, 0, 1]);
        let p = p.lock();
        assert_eq!(p.tries[..3], [(0, true), (1, false), (2, false)]);
        assert_eq!(p.tries[3], (2, true), "the busy one is waited for next");
        assert!(p.taken.iter().all(|t| *t));
    }

    #[tokio::test]
    async fn a_part_that_stays_busy_past_the_wait_leaves_nothing_taken() {
        let p = parts(2, &[0, usize::MAX]);
        assert_eq!(run(&p, 2, Some(Duration::from_millis(20))).await, None);
        // The give-back was spawned: let it finish, then nothing is held.
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(p.lock().taken.iter().all(|t| !t));
    }
}
