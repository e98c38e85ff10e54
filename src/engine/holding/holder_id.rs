//! Holder identity: `"{client_uuid}:{n}"` as in Redisson (`uuid:threadId`).
//!
//! Which `n` an acquisition uses decides who re-enters whom, so it decides exclusion:
//!
//! Invariants:
//! 1. An async acquisition outside any [`Scope`] of its lock takes a fresh `n` (a
//!    process-wide counter, below 2^48): two acquisitions never share a holder id, so
//!    futures polled by one task (`join!`, `select!`, `for_each_concurrent`) exclude
//!    each other exactly as two tasks do. A tokio task is not a thread: it interleaves
//!    its futures, so its id cannot stand for "one sequential holder".
//! 2. Inside a guard's scope ([`Scope::enter`], the API's `LockGuard::scope`), an
//!    acquisition of the same client and name re-enters that guard's holder id: the
//!    scope is what a nested call runs in, and nothing outside it (a sibling future, a
//!    spawned task: task-locals are not inherited) can see it.
//! 3. An explicit owner (the API's `Owner`, a [`fresh_number`]) is one holder for
//!    every call made with it, as a Redisson `threadId` argument is.
//! 4. The blocking API passes [`thread`] ids (2^48 and up, one per OS thread): a thread
//!    runs one call at a time, so nested calls on one thread re-enter, as in Redisson.
//! 5. A hold remembers the [`Context`] (task, or thread outside any task) that took it,
//!    for "is it held by the caller" questions; a holder id never depends on it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use uuid::Uuid;

/// Per-acquisition numbers (invariant 1); never reach the thread numbers.
static NEXT_CALL_NO: AtomicU64 = AtomicU64::new(1);
static NEXT_THREAD_NO: AtomicU64 = AtomicU64::new(1 << 48);

thread_local! {
    static THREAD_NO: u64 = NEXT_THREAD_NO.fetch_add(1, Ordering::Relaxed);
}

tokio::task_local! {
    /// The guard scopes the current future runs in, innermost first.
    static SCOPE: Scope;
}

/// `"{id}:"`, the part of every holder id that is fixed per client.
pub(crate) fn prefix(id: &Uuid) -> String {
    format!("{id}:")
}

fn with_number(prefix: &str, n: u64) -> Arc<str> {
    use std::fmt::Write;
    let mut s = String::with_capacity(prefix.len() + 20);
    s.push_str(prefix);
    let _ = write!(s, "{n}");
    s.into()
}

/// A number no other holder of this process has (per call, or an explicit owner).
pub(crate) fn fresh_number() -> u64 {
    NEXT_CALL_NO.fetch_add(1, Ordering::Relaxed)
}

/// The holder id of an explicit owner `n` (from [`fresh_number`]).
pub(crate) fn owner(prefix: &str, n: u64) -> Arc<str> {
    with_number(prefix, n)
}

/// A holder id for one async acquisition of `name`: the enclosing scope's holder of
/// that name if there is one (invariant 2), else a fresh one (invariant 1).
pub(crate) fn for_call(prefix: &str, name: &str) -> Arc<str> {
    scoped(prefix, name).unwrap_or_else(|| with_number(prefix, fresh_number()))
}

/// The calling thread's holder id (the blocking API, invariant 4).
pub(crate) fn thread(prefix: &str) -> Arc<str> {
    THREAD_NO.with(|n| with_number(prefix, *n))
}

/// The holder the enclosing scopes give `name`, if any (invariant 2).
pub(crate) fn scoped(prefix: &str, name: &str) -> Option<Arc<str>> {
    SCOPE
        .try_with(|scope| scope.find(prefix, name))
        .ok()
        .flatten()
}

/// Who is asking: the tokio task, or the thread when no task runs (`block_on`, the
/// body of `#[tokio::main]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Context {
    Task(tokio::task::Id),
    Thread(u64),
}

/// The caller's [`Context`] (invariant 5).
pub(crate) fn context() -> Context {
    match tokio::task::try_id() {
        Some(task) => Context::Task(task),
        None => Context::Thread(THREAD_NO.with(|n| *n)),
    }
}

/// What a scope re-enters: (client prefix, lock name, holder id).
pub(crate) type ScopeEntry = (Arc<str>, Arc<str>, Arc<str>);

/// The chain of [`ScopeEntry`]s the current future re-enters.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    entries: Arc<Vec<ScopeEntry>>,
}

impl Scope {
    fn find(&self, prefix: &str, name: &str) -> Option<Arc<str>> {
        (self.entries.iter().rev())
            .find(|(p, n, _)| &**p == prefix && &**n == name)
            .map(|(_, _, h)| h.clone())
    }

    /// Runs `fut` with `(prefix, name, holder)` pairs added to the enclosing scope,
    /// so acquisitions of those names inside it re-enter those holders.
    pub(crate) async fn enter<F: std::future::Future>(
        holds: impl IntoIterator<Item = ScopeEntry>,
        fut: F,
    ) -> F::Output {
        let mut entries = SCOPE
            .try_with(|s| s.entries.as_ref().clone())
            .unwrap_or_default();
        entries.extend(holds);
        let scope = Scope {
            entries: Arc::new(entries),
        };
        SCOPE.scope(scope, fut).await
    }
}

/// `holder` without a writer's `:write` suffix: the id a scope re-enters with (a
/// writer's read acquisitions in its scope are the downgrade).
pub(crate) fn base(holder: &str) -> &str {
    holder.strip_suffix(":write").unwrap_or(holder)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(p: &str, n: &str, h: &str) -> ScopeEntry {
        (p.into(), n.into(), h.into())
    }

    #[tokio::test]
    async fn every_call_outside_a_scope_gets_a_fresh_id() {
        let p = prefix(&Uuid::new_v4());
        let (a, b) = tokio::join!(async { for_call(&p, "x") }, async { for_call(&p, "x") });
        assert_ne!(a, b);
        assert!(a.starts_with(&p));
        let n: u64 = a.rsplit(':').next().unwrap().parse().unwrap();
        assert!(n < 1 << 48);
    }

    #[tokio::test]
    async fn a_scope_reenters_its_name_only_and_nests() {
        let p = prefix(&Uuid::new_v4());
        let other = prefix(&Uuid::new_v4());
        let held = Scope::enter([entry(&p, "a", "h-a")], async {
            let inner = Scope::enter([entry(&p, "b", "h-b")], async {
                (for_call(&p, "a"), for_call(&p, "b"), for_call(&other, "a"))
            })
            .await;
            (inner, for_call(&p, "b"), for_call(&p, "c"))
        })
        .await;
        let ((a, b, foreign), b_outside, c) = held;
        assert_eq!((&*a, &*b), ("h-a", "h-b"));
        assert_ne!(&*foreign, "h-a", "another client's lock of the same name");
        assert_ne!(&*b_outside, "h-b", "b's scope ended");
        assert_ne!(&*c, "h-a");
    }

    #[tokio::test]
    async fn a_spawned_task_does_not_inherit_the_scope() {
        let p = prefix(&Uuid::new_v4());
        let p2 = p.clone();
        let there = Scope::enter([entry(&p, "a", "h-a")], async move {
            tokio::spawn(async move { for_call(&p2, "a") })
                .await
                .unwrap()
        })
        .await;
        assert_ne!(&*there, "h-a");
    }

    #[test]
    fn threads_get_distinct_stable_ids() {
        let p = prefix(&Uuid::new_v4());
        let a = thread(&p);
        assert_eq!(a, thread(&p));
        let p2 = p.clone();
        let b = std::thread::spawn(move || thread(&p2)).join().unwrap();
        assert_ne!(a, b);
        let n: u64 = a.rsplit(':').next().unwrap().parse().unwrap();
        assert!(n >= 1 << 48);
    }

    #[tokio::test]
    async fn context_tells_tasks_apart() {
        let here = context();
        let there = tokio::spawn(async { context() }).await.unwrap();
        assert_ne!(here, there);
        assert!(matches!(there, Context::Task(_)));
        assert_eq!(base("u:1:write"), "u:1");
        assert_eq!(base("u:1"), "u:1");
    }
}
