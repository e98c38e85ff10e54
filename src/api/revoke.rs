//! Cooperative revocation (Curator's `makeRevocable`): [`Lock::request_release`] asks
//! the holders of a lock to let it go; a holder learns it from
//! [`LockGuard::revoke_requested`] and can finish and release. Nothing is forced: a
//! holder that does not listen (a Redisson client, or a guard that never asked) keeps
//! the lock. Its own `impl` blocks, beside `lock.rs` and `guard.rs`.

use tokio_util::sync::CancellationToken;

use crate::api::guard::LockGuard;
use crate::api::lock::Lock;
use crate::error::Result;

/// What [`Lock::request_release`] reached.
///
/// # Examples
/// See the example on [`Lock::request_release`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReleaseRequested {
    /// The holders asked (holder ids, `"{client_uuid}:{n}"`); empty when the lock was
    /// free.
    pub holders: Vec<String>,
    /// How many listening redlatch clients the request woke (summed over the masters);
    /// 0 when no holder listens: Redisson holders, and redlatch guards that never called
    /// [`LockGuard::revoke_requested`], do not receive requests.
    pub listeners: u64,
}

impl Lock {
    /// Asks the lock's current holders to release it (cooperative revocation): each
    /// holder's client is told on its own channel, and the holder's
    /// [`revoke_requested`](LockGuard::revoke_requested) token fires. The request stays
    /// in Redis while the lock's lease runs, so a holder that starts listening later
    /// still sees it. Nothing is released by this call.
    ///
    /// # Errors
    /// [`Error::WrongType`](crate::Error::WrongType) if the key is not a lock; a
    /// master's error or [`Error::NoQuorum`](crate::Error::NoQuorum).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.lock("reports:nightly");
    /// let guard = lock.lock().await?;
    /// let revoke = guard.revoke_requested(); // listen for requests
    ///
    /// let other = Client::connect(Config::from_env()?).await?; // another process
    /// let asked = other.lock("reports:nightly").request_release().await?;
    /// assert_eq!(asked.holders, [guard.holder()]);
    ///
    /// revoke.cancelled().await; // the holder hears it, finishes and releases
    /// guard.unlock().await?;
    /// # Ok(()) }) }
    /// ```
    pub async fn request_release(&self) -> Result<ReleaseRequested> {
        self.check_name()?;
        let engine = &self.client().engine;
        let (listeners, holders) = engine.request_release(self.name()).await?;
        Ok(ReleaseRequested { holders, listeners })
    }
}

impl LockGuard {
    /// A token cancelled when someone asks this holder to release the lock
    /// ([`Lock::request_release`], `redlatch unlock --ask`): finish what you are doing
    /// and release. Calling it starts listening (one subscription per client and lock,
    /// shared); listening ends when the hold is released or lost. A request made before
    /// the call, while this hold was held, is seen too.
    ///
    /// Outside a tokio runtime the token never fires, nor with the client's bookkeeping
    /// off ([`Config::bookkeeping`](crate::Config::bookkeeping)): no request reaches it.
    ///
    /// # Examples
    /// See the example on [`Lock::request_release`](crate::Lock::request_release).
    pub fn revoke_requested(&self) -> CancellationToken {
        self.held().watch_revocation()
    }
}
