//! Holder identity: `"{client_uuid}:{n}"` as in Redisson (`uuid:threadId`).
//!
//! `n` is the tokio task id of the calling task, so nested `lock()` calls in one task
//! re-enter and another task waits. Outside any task (for example in `block_on`) `n`
//! is a per-thread number from a range task ids never reach (2^48 and up).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use uuid::Uuid;

static NEXT_THREAD_NO: AtomicU64 = AtomicU64::new(1 << 48);

thread_local! {
    static THREAD_NO: u64 = NEXT_THREAD_NO.fetch_add(1, Ordering::Relaxed);
}

/// `"{id}:"`, the part of every holder id that is fixed per client.
pub(crate) fn prefix(id: &Uuid) -> String {
    format!("{id}:")
}

/// The holder id of the calling task (or thread), given the client's [`prefix`].
pub(crate) fn current(prefix: &str) -> Arc<str> {
    use std::fmt::Write;
    let mut s = String::with_capacity(prefix.len() + 20);
    s.push_str(prefix);
    let _ = match tokio::task::try_id() {
        Some(task) => write!(s, "{task}"),
        None => THREAD_NO.with(|n| write!(s, "{n}")),
    };
    s.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tasks_get_distinct_ids_and_one_task_keeps_its_id() {
        let id = Uuid::new_v4();
        let p = prefix(&id);
        let p2 = p.clone();
        let here = tokio::spawn(async move { (current(&p2), current(&p2)) })
            .await
            .unwrap();
        assert_eq!(here.0, here.1);
        let p3 = p.clone();
        let other = tokio::spawn(async move { current(&p3) }).await.unwrap();
        assert_ne!(here.0, other);
        assert!(here.0.starts_with(&format!("{id}:")));
    }

    #[test]
    fn outside_a_task_the_thread_number_is_used() {
        let p = prefix(&Uuid::new_v4());
        let a = current(&p);
        assert_eq!(a, current(&p));
        let p2 = p.clone();
        let b = std::thread::spawn(move || current(&p2)).join().unwrap();
        assert_ne!(a, b);
        let n: u64 = a.rsplit(':').next().unwrap().parse().unwrap();
        assert!(n >= 1 << 48);
    }
}
