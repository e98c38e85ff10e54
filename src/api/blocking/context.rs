//! Whether this thread may block on the blocking client's runtime.
//!
//! Outside any tokio runtime it may. Inside a runtime's context it may on a
//! `spawn_blocking` thread or within `block_in_place`, and may not on a thread that
//! drives async tasks, where tokio's `block_on` panics ("Cannot start a runtime from
//! within a runtime") before it polls anything. tokio has no public question for the
//! difference, so [`may_block`] asks it: it blocks on a future that is ready at once,
//! catching tokio's refusal, with this thread's panic message held back (a process-wide
//! hook installed once, that passes every other panic to the hook it replaced).

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Set while [`may_block`] asks tokio: this thread's panic message is not printed.
    static ASKING: Cell<bool> = const { Cell::new(false) };
}

/// Whether `rt.block_on` may be called on this thread.
pub(super) fn may_block(rt: &tokio::runtime::Runtime) -> bool {
    if tokio::runtime::Handle::try_current().is_err() {
        return true;
    }
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !ASKING.with(Cell::get) {
                previous(info);
            }
        }));
    });
    ASKING.with(|a| a.set(true));
    let asked = panic::catch_unwind(AssertUnwindSafe(|| rt.block_on(async {})));
    ASKING.with(|a| a.set(false));
    asked.is_ok()
}
