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
//! ```
//! # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
//! # fn main() { doc_redis::run_blocking(|url| {
//! use redlatch::blocking::Client;
//! use redlatch::Config;
//!
//! let client = Client::connect(Config::single(url))?;
//! let lock = client.lock("billing-run");
//! let guard = lock.lock()?;
//! // ... critical section; the watchdog keeps the lease meanwhile ...
//! drop(guard); // released here, before `drop` returns
//! assert!(!lock.is_locked()?);
//! # Ok(()) }) }
//! ```
//!
//! # Panics
//! Every blocking call panics when made from inside an async runtime (it would block
//! one of the runtime's threads); use the async API there. Dropping a guard inside a
//! runtime does not panic: the release then happens in the background, as with the
//! async [`LockGuard`](crate::LockGuard). The same holds for every guard here
//! ([`MultiGuard`], [`SemaphorePermit`], [`Permit`]).

use std::future::Future;
use std::sync::Arc;

use crate::error::{Error, Result};

mod client;
mod group;
mod latch;
mod lock;
mod multi;
mod permits;
mod rwlock;
mod semaphore;

pub use client::Client;
pub use group::FasterMultiLock;
pub use latch::CountDownLatch;
pub use lock::{Lock, LockGuard};
pub use multi::{MultiGuard, MultiLock};
pub use permits::{Permit, PermitExpirableSemaphore};
pub use rwlock::ReadWriteLock;
pub use semaphore::{Semaphore, SemaphorePermit};

/// The runtime shared by a blocking client, its locks and guards. Shut down in the
/// background when the last of them goes, so that dropping one inside an async
/// context does not panic.
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

    fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.get().block_on(f)
    }

    fn spawn<F: Future<Output = ()> + Send + 'static>(&self, f: F) {
        self.get().spawn(f);
    }
}

/// Runs a guard's release from its `drop`: blocking until it is done, or, inside an
/// async runtime (where blocking would panic), in the background on our own runtime
/// (the caller's may end before the release ran).
fn finish<F: Future<Output = ()> + Send + 'static>(rt: &Runtime, release: F) {
    if tokio::runtime::Handle::try_current().is_ok() {
        rt.spawn(release);
    } else {
        rt.block_on(release);
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
