//! A call that may be waiting for its own task's hold: `let g = lock.lock().await?;
//! helper().await` where `helper` calls `lock.lock()` again outside `g.scope(...)` is
//! another holder (holding/holder_id.rs invariant 1) and waits for `g`, which its own task would
//! release only after `helper` returns: it waits forever. The engine cannot see that the
//! call is nested in the code that holds the guard, so it tells the caller, once, when
//! the wait looks like that.
//!
//! The rule (docs/errors.md, "A task waiting on its own hold"):
//! 1. Armed only for a call of its own (no `Owner`, no blocking-API thread: those
//!    re-enter) that starts while its task (or, outside any task, its thread) holds the
//!    lock, or the other side of a read-write lock, under another holder id (holding/table.rs
//!    `taken_in`). Any other call runs unwrapped: nothing on the hot path.
//! 2. "Nothing else of the task runs": every poll of the call since the window began
//!    came from the call's own wake-ups (the waker it hands down is wrapped to mark
//!    them). A poll that came from elsewhere restarts the window: the task is running
//!    other code, which may be the code holding the lock. `join!` and `select!` poll
//!    every branch whenever one is woken, so a sibling that holds the lock and does
//!    anything restarts it.
//! 3. When a window of [`AFTER`] ends and the task still holds the lock, one WARN names
//!    the lock and the way out (`guard.scope`); at most one per call. The call goes on
//!    waiting: its semantics do not change (futures of one task still exclude each
//!    other).
//!
//! What it cannot tell apart: a sibling future (`join!`, `for_each_concurrent`, whose
//! `FuturesUnordered` polls only the woken future) that holds the lock and stays idle
//! for longer than [`AFTER`] looks like a self-wait and gets the WARN, which says so.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::engine::holding::holder_id::{self, Context as Caller};
use crate::engine::holding::table::HoldTable;
use crate::engine::kinds::kind::Kind;

/// How long a call waits, with nothing else of its task running, before the WARN.
pub(crate) const AFTER: Duration = Duration::from_secs(5);

/// The call's own waker: marks its wake-ups, then wakes the task (rule 2).
struct Marker {
    woken: AtomicBool,
    task: parking_lot::Mutex<Option<Waker>>,
}

impl Wake for Marker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        if let Some(task) = self.task.lock().as_ref() {
            task.wake_by_ref();
        }
    }
}

/// What a watched call is: its lock, its holder and its caller.
pub(in crate::engine) struct Watched<'a> {
    pub(in crate::engine) holds: &'a HoldTable,
    pub(in crate::engine) name: &'a str,
    pub(in crate::engine) kind: Kind,
    pub(in crate::engine) holder: &'a str,
    caller: Caller,
}

impl<'a> Watched<'a> {
    /// The watch of a call by `holder` of `kind` on `name`, if rule 1 arms one.
    pub(in crate::engine) fn arm(
        holds: &'a HoldTable,
        name: &'a str,
        kind: Kind,
        holder: &'a str,
    ) -> Option<Self> {
        let watched = Watched {
            holds,
            name,
            kind,
            holder,
            caller: holder_id::context(),
        };
        watched.held_by_caller().then_some(watched)
    }

    /// Whether the caller's task holds the lock under another holder id (rule 1).
    fn held_by_caller(&self) -> bool {
        let siblings = self.kind.protocol().siblings().iter().copied();
        std::iter::once(self.kind).chain(siblings).any(|kind| {
            (self.holds.taken_in(self.name, kind, self.caller))
                .is_some_and(|h| holder_id::base(&h.holder) != holder_id::base(self.holder))
        })
    }

    /// Runs `call`, warning once if it looks like a self-wait (rules 2, 3).
    pub(in crate::engine) fn watch<F: Future + 'a>(
        self,
        call: F,
    ) -> impl Future<Output = F::Output> + 'a {
        let marker = Arc::new(Marker {
            woken: AtomicBool::new(false),
            task: parking_lot::Mutex::new(None),
        });
        SelfWait {
            call: Box::pin(call),
            waker: Waker::from(marker.clone()),
            marker,
            window: Box::pin(tokio::time::sleep(AFTER)),
            watched: self,
            polled: false,
            warned: false,
        }
    }
}

struct SelfWait<'a, F> {
    call: Pin<Box<F>>,
    marker: Arc<Marker>,
    waker: Waker,
    window: Pin<Box<tokio::time::Sleep>>,
    watched: Watched<'a>,
    polled: bool,
    warned: bool,
}

impl<F: Future> Future for SelfWait<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        {
            let mut task = this.marker.task.lock();
            if !task.as_ref().is_some_and(|t| t.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let own = this.marker.woken.swap(false, Ordering::AcqRel);
        if this.polled && !own {
            // Rule 2: the task runs other code.
            (this.window.as_mut()).reset(tokio::time::Instant::now() + AFTER);
        }
        this.polled = true;
        let mut own_cx = Context::from_waker(&this.waker);
        if let Poll::Ready(out) = this.call.as_mut().poll(&mut own_cx) {
            return Poll::Ready(out);
        }
        while !this.warned && this.window.as_mut().poll(&mut own_cx).is_ready() {
            if this.watched.held_by_caller() {
                this.warned = true;
                tracing::warn!(target: "redlatch", lock = %this.watched.name, waited = ?AFTER,
                    "waiting for a hold this task took outside the guard's scope, with \
                     nothing else of the task running: a call nested in the code holding the \
                     guard waits for itself forever; run it in guard.scope(...) to re-enter \
                     (a join!/select! sibling holding the lock on purpose: ignore this)");
            } else {
                (this.window.as_mut()).reset(tokio::time::Instant::now() + AFTER);
            }
        }
        Poll::Pending
    }
}
