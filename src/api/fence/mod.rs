//! Fencing at the resource ([`Token`], [`HasToken`]; with the `postgres` feature,
//! [`postgres`]; with the `s3` feature, `s3`, a conditional PUT): the store a lock protects refuses a write that carries an older
//! fencing token than one it has already accepted, which is what a lease alone cannot
//! promise (a holder paused, partitioned or outlived by its master's clock still
//! writes after its lease ended). docs/fencing.md tells the whole story.
//!
//! A [`Token`] is the fencing token of one acquisition with the name of the lock that
//! handed it out: tokens of one lock grow with every acquisition, tokens of two locks
//! cannot be compared, so a resource is fenced by one lock's tokens and refuses
//! another's ([`Error::FenceMismatch`]). Any guard that has a token gives it
//! ([`HasToken`]): a fenced lock's guard, its blocking twin, an election's
//! leadership; a token kept elsewhere (`$REDLATCH_FENCING_TOKEN` of `redlatch run
//! --fenced`) is [`Token::new`].

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
#[cfg(feature = "s3")]
#[cfg_attr(docsrs, doc(cfg(feature = "s3")))]
pub mod s3;

use crate::api::blocking;
use crate::api::election::Leadership;
use crate::api::guard::LockGuard;
use crate::error::{Error, Result};

/// The longest resource name a fence accepts, in bytes (a primary key in an index of
/// the store: PostgreSQL's B-tree takes at most about 2,700 bytes per entry).
pub const MAX_RESOURCE_LEN: usize = 1024;

/// A fencing token: its value, the lock that handed it out and the holder it was
/// handed to (recorded beside the token by the store, for the operator).
///
/// # Examples
/// ```
/// use redlatch::fence::{HasToken, Token};
/// // What a shell job of `redlatch run --fenced` finds in its environment:
/// let token = Token::new("ledger", 42).with_holder("nightly-job");
/// assert_eq!((token.lock(), token.value(), token.holder()), ("ledger", 42, "nightly-job"));
/// assert_eq!(token.token().unwrap(), token); // a token is its own source
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    lock: String,
    value: u64,
    holder: String,
}

impl Token {
    /// The token `value` of the lock `lock` (the name a fenced lock was taken with),
    /// with no holder.
    ///
    /// # Examples
    /// See the example on [`Token`].
    pub fn new(lock: impl Into<String>, value: u64) -> Token {
        Token {
            lock: lock.into(),
            value,
            holder: String::new(),
        }
    }

    /// The same token, recorded as held by `holder`.
    ///
    /// # Examples
    /// See the example on [`Token`].
    pub fn with_holder(mut self, holder: impl Into<String>) -> Token {
        self.holder = holder.into();
        self
    }

    /// The name of the lock that handed the token out.
    ///
    /// # Examples
    /// See the example on [`Token`].
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// The token's value: greater than every token the lock handed out before it.
    ///
    /// # Examples
    /// See the example on [`Token`].
    pub fn value(&self) -> u64 {
        self.value
    }

    /// The holder it was handed to ("" when unknown).
    ///
    /// # Examples
    /// See the example on [`Token`].
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Checks what a fence will send: a resource name of 1 to [`MAX_RESOURCE_LEN`]
    /// bytes, a lock name, and a value a signed 64-bit column holds (1 to
    /// `i64::MAX`: the counters start at 1). Nothing is sent when this fails.
    pub(crate) fn checked(&self, resource: &str) -> Result<i64> {
        if resource.is_empty() || resource.len() > MAX_RESOURCE_LEN {
            return Err(Error::InvalidName(format!(
                "resource name of {} bytes: a fence takes 1 to {MAX_RESOURCE_LEN}",
                resource.len()
            )));
        }
        if self.lock.is_empty() {
            return Err(Error::InvalidName(format!(
                "token {} for resource {resource:?} names no lock",
                self.value
            )));
        }
        match i64::try_from(self.value) {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(Error::InvalidCount(format!(
                "fencing token {} of lock {:?}: tokens run from 1 to {}",
                self.value,
                self.lock,
                i64::MAX
            ))),
        }
    }
}

/// Anything that carries a fencing token: what a fence takes.
///
/// `None` for a guard without one (a plain lock's): the fence refuses it with
/// [`Error::Unsupported`] before anything is sent.
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// use redlatch::fence::HasToken;
/// use redlatch::{Client, Config};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// let guard = client.fenced_lock("ledger").lock().await?;
/// let token = guard.token().expect("a fenced lock's guard has a token");
/// assert_eq!((token.lock(), Some(token.value())), ("ledger", guard.fencing_token()));
/// assert_eq!(token.holder(), guard.holder());
/// let plain = client.lock("other").lock().await?;
/// assert_eq!(plain.token(), None); // a plain lock hands out no token
/// # Ok(()) }) }
/// ```
pub trait HasToken {
    /// The token, if there is one.
    fn token(&self) -> Option<Token>;
}

impl HasToken for Token {
    fn token(&self) -> Option<Token> {
        Some(self.clone())
    }
}

impl HasToken for LockGuard {
    fn token(&self) -> Option<Token> {
        let value = self.fencing_token()?;
        Some(Token::new(self.name(), value).with_holder(self.holder()))
    }
}

impl HasToken for blocking::LockGuard {
    fn token(&self) -> Option<Token> {
        self.as_async().token()
    }
}

impl HasToken for Leadership {
    fn token(&self) -> Option<Token> {
        self.guard().token()
    }
}

impl<T: HasToken + ?Sized> HasToken for &T {
    fn token(&self) -> Option<Token> {
        (**self).token()
    }
}

/// The token of `source`, or [`Error::Unsupported`] naming the resource.
pub(crate) fn token_of(source: &(impl HasToken + ?Sized), resource: &str) -> Result<Token> {
    source.token().ok_or_else(|| Error::Unsupported {
        what: format!("fencing resource {resource:?} with a lock that has no token"),
        reason: "only a fenced lock (fenced_lock, redlatch run --fenced) or an election hands out fencing tokens".into(),
    })
}
