//! Synchronous locks for code that does not run on an async runtime, as
//! `reqwest::blocking` is for HTTP: the same locks, on the same wire, with guards that
//! release when dropped. The whole family is here: [`Lock`] (plain, fair, fenced),
//! [`ReadWriteLock`], [`MultiLock`], [`FasterMultiLock`], [`Semaphore`], [`PermitExpirableSemaphore`] and
//! [`CountDownLatch`], each a thin shell over its async counterpart.
//!
//! A [`Client`] owns a small tokio runtime (one worker thread, named
//! `redlatch-blocking`) that runs the watchdog and the pub/sub connection in the
//! background; each call blocks the calling thread until it is done. The holder is the
//! calling **thread**, as in Redisson's `RLock`: nested `lock()` calls on one thread
//! re-enter, other threads wait.
//!
//! The [`Client`] example shows the shape of it; the blocking methods link to their
//! async namesakes' examples.
//!
//! # Inside an async runtime
//! A blocking call made on a thread that drives a tokio runtime's tasks would block one
//! of the runtime's threads (and tokio would panic with a message naming neither
//! redlatch nor the fix), so it fails at once with [`Error::Runtime`],
//! whose message names the remedy: use the async API there, or move the blocking code
//! into `tokio::task::spawn_blocking` (where, as in `block_in_place`, blocking calls
//! work). [`Client::close`] there closes in the background.
//! Dropping a guard inside a runtime does not fail either: the release then happens in
//! the background, as with the async [`LockGuard`](crate::LockGuard). The same holds
//! for every guard here ([`MultiGuard`], [`SemaphorePermit`], [`Permit`]).
//!
//! ```
//! # fn main() {
//! let rt = tokio::runtime::Runtime::new().unwrap();
//! let err = rt
//!     .block_on(async {
//!         redlatch::blocking::Client::connect(redlatch::Config::single("redis://127.0.0.1:1"))
//!     })
//!     .unwrap_err();
//! assert!(err.to_string().contains("spawn_blocking"), "{err}");
//! # }
//! ```

use std::future::Future;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::Hold;

mod client;
mod context;
mod expirable_semaphore;
mod group;
mod guard;
mod job;
mod latch;
mod lock;
mod multi;
mod rwlock;
mod semaphore;

pub use client::Client;
pub use expirable_semaphore::PermitExpirableSemaphore;
pub use group::FasterMultiLock;
pub use guard::{Guard, LockGuard, MultiGuard, Permit, SemaphorePermit};
pub use job::Job;
pub use latch::CountDownLatch;
pub use lock::Lock;
pub use multi::MultiLock;
pub use rwlock::ReadWriteLock;
pub use semaphore::Semaphore;

/// The runtime shared by a blocking client, its locks and guards: the one funnel
/// every blocking call goes through ([`call`](Runtime::call), as tokio's
/// `Mutex::blocking_lock` runs its async path). Shut down in the background when the
/// last of them goes, so that dropping one inside an async context does not panic.
#[derive(Debug)]
pub(crate) struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn start() -> Result<Arc<Runtime>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redlatch-blocking")
            .enable_all()
            .build()
            .map_err(|e| Error::Runtime {
                reason: format!("cannot start the blocking client's runtime: {e}"),
                source: Some(crate::error::Cause::new(e)),
            })?;
        Ok(Arc::new(Runtime(Some(rt))))
    }

    fn get(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("runtime lives until dropped")
    }

    /// Runs an async call on this thread (a per-thread lock's holder) to its end; an
    /// [`inside_runtime`] error inside an async runtime, where blocking would panic.
    fn call<T>(&self, f: impl Future<Output = Result<T>>) -> Result<T> {
        self.may_block()?;
        self.get().block_on(f)
    }

    /// Ok where this thread may block on the runtime (outside any runtime, on a
    /// `spawn_blocking` thread, in `block_in_place`); else the [`inside_runtime`] error.
    fn may_block(&self) -> Result<()> {
        if context::may_block(self.get()) {
            Ok(())
        } else {
            Err(inside_runtime())
        }
    }

    /// [`call`](Self::call) for a call that returns a hold, in a blocking [`Guard`].
    fn hold<G: Hold>(self: &Arc<Self>, f: impl Future<Output = Result<G>>) -> Result<Guard<G>> {
        Ok(Guard::new(self.call(f)?, self))
    }

    /// [`hold`](Self::hold) for a call with a bounded wait (`None`: still busy).
    fn try_hold<G: Hold>(
        self: &Arc<Self>,
        f: impl Future<Output = Result<Option<G>>>,
    ) -> Result<Option<Guard<G>>> {
        Ok(self.call(f)?.map(|g| Guard::new(g, self)))
    }

    /// Runs a guard's release from its `drop`: to its end, or in the background on our
    /// runtime when inside another (where blocking would panic).
    fn finish<F: Future<Output = ()> + Send + 'static>(&self, release: F) {
        if context::may_block(self.get()) {
            self.get().block_on(release);
        } else {
            self.get().spawn(release);
        }
    }
}

/// The error of a blocking call made inside an async runtime: it names redlatch and
/// the two ways out.
fn inside_runtime() -> Error {
    Error::Runtime {
        reason: "redlatch::blocking called inside a tokio runtime, where it would block \
                 one of the runtime's threads: use the async API (redlatch::Client) there, \
                 or run the blocking code in tokio::task::spawn_blocking"
            .into(),
        source: None,
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
