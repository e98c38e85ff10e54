//! Fan-out to N masters and the majority rules, in one place (redsync's
//! `actOnPoolsAsync`): every operation sends the same request to all masters in
//! parallel and judges the answers here.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_util::task::TaskTracker;

use crate::engine::masters::master::Master;
use crate::error::{Error, MasterError, Result};

/// Runs `f` on every master at once; one result per master, in master order.
/// Each call is bounded by the master's own timeout, so the whole fan-out takes as
/// long as the slowest answer, never the sum (see [`fan_out_until`] for not waiting
/// for the slowest at all).
pub(crate) async fn fan_out<'a, M, T, F, Fut>(masters: &'a [M], f: F) -> Vec<Result<T>>
where
    F: Fn(&'a M) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    if let [only] = masters {
        return vec![f(only).await];
    }
    join_all(masters.iter().map(f)).await
}

/// Runs `f` on every master at once and returns as soon as `decided` says the answers
/// so far settle the outcome; one entry per master, in master order, `None` for a call
/// still running. Those calls are not dropped (a dropped call might never have been
/// sent): they finish in the background on `tracker`, so every master still gets the
/// request, in order with later requests on the same connection.
pub(crate) async fn fan_out_until<T, F, Fut>(
    masters: &[Arc<Master>],
    tracker: &TaskTracker,
    f: F,
    decided: impl Fn(&[Option<Result<T>>]) -> bool,
) -> Vec<Option<Result<T>>>
where
    F: Fn(Arc<Master>) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    if let [only] = masters {
        return vec![Some(f(only.clone()).await)];
    }
    let mut results: Vec<Option<Result<T>>> = masters.iter().map(|_| None).collect();
    let mut calls: FuturesUnordered<_> = (masters.iter().enumerate())
        .map(|(i, m)| {
            let call = f(m.clone());
            async move { (i, call.await) }
        })
        .collect();
    while let Some((i, r)) = calls.next().await {
        results[i] = Some(r);
        if decided(&results) {
            break;
        }
    }
    if !calls.is_empty() {
        tracker.spawn(async move { while calls.next().await.is_some() {} });
    }
    results
}

/// How many answers so far match `want`.
pub(crate) fn count<T>(results: &[Option<Result<T>>], want: impl Fn(&T) -> bool) -> usize {
    results
        .iter()
        .filter(|r| matches!(r, Some(Ok(x)) if want(x)))
        .count()
}

/// The error for an operation that reached `acquired` of `needed` masters: every
/// master's error, with its address (`addrs[i]` for `results[i]`; `None`, a call still
/// running, and `Ok` are left out). With a single master its own error is returned as
/// is, so single mode reads naturally.
pub(crate) fn no_quorum<T>(
    acquired: usize,
    needed: usize,
    addrs: &[&str],
    results: impl IntoIterator<Item = Option<Result<T>>>,
) -> Error {
    let mut errors: Vec<MasterError> = (addrs.iter().zip(results))
        .filter_map(|(addr, r)| match r {
            Some(Err(e)) => Some(MasterError::new(*addr, e)),
            _ => None,
        })
        .collect();
    if addrs.len() == 1 && errors.len() == 1 {
        return errors.remove(0).error;
    }
    Error::NoQuorum {
        acquired,
        needed,
        errors: errors.into(),
    }
}

/// The masters' addresses, in their order (for [`no_quorum`]).
pub(crate) fn addrs(masters: &[Arc<Master>]) -> Vec<&str> {
    masters.iter().map(|m| m.addr()).collect()
}

/// Judges a read: Ok(answers) when at least `quorum` of `masters` answered.
pub(crate) fn answers<T>(
    masters: &[Arc<Master>],
    results: Vec<Result<T>>,
    quorum: usize,
) -> Result<Vec<T>> {
    let ok = results.iter().filter(|r| r.is_ok()).count();
    if ok < quorum {
        let results = results.into_iter().map(Some);
        return Err(no_quorum(ok, quorum, &addrs(masters), results));
    }
    Ok(results.into_iter().filter_map(Result::ok).collect())
}

/// The largest value that at least `quorum` of `values` reach: what a majority agrees
/// on at least. `values` must hold at least `quorum` entries.
pub(crate) fn majority_floor<T: Ord + Copy>(mut values: Vec<T>, quorum: usize) -> T {
    values.sort_unstable_by(|a, b| b.cmp(a));
    values[quorum - 1]
}

/// True when at least `quorum` of the answers are true.
pub(crate) fn majority_true(values: &[bool], quorum: usize) -> bool {
    values.iter().filter(|b| **b).count() >= quorum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_floor_is_what_a_majority_reaches() {
        assert_eq!(majority_floor(vec![5, 1, 3], 2), 3);
        assert_eq!(majority_floor(vec![0, 0, 9, 9, 1], 3), 1);
        assert_eq!(majority_floor(vec![7], 1), 7);
    }

    #[test]
    fn majority_true_counts() {
        assert!(majority_true(&[true, false, true], 2));
        assert!(!majority_true(&[true, false, false], 2));
    }

    #[test]
    fn a_lone_master_reports_its_own_error() {
        let bad = || Some(Err::<(), _>(Error::config("x")));
        let e = no_quorum(0, 1, &["a:1"], [bad()]);
        assert!(matches!(e, Error::Config { .. }));
    }

    #[test]
    fn a_quorum_failure_keeps_every_masters_error() {
        let down = |addr: &str| Error::Timeout {
            addr: addr.into(),
            after: std::time::Duration::from_secs(1),
        };
        let results = [
            Some(Ok(())),
            Some(Err(down("a:2"))),
            None,
            Some(Err(Error::config("x"))),
        ];
        let e = no_quorum(1, 3, &["a:1", "a:2", "a:3", "a:4"], results);
        let Error::NoQuorum {
            acquired: 1,
            needed: 3,
            errors,
        } = &e
        else {
            panic!("{e:?}");
        };
        let at: Vec<&str> = errors.iter().map(|m| m.addr.as_str()).collect();
        assert_eq!(at, ["a:2", "a:4"]);
        assert!(matches!(errors[1].error, Error::Config { .. }));
    }
}
