//! Where a client keeps its bookkeeping (issue 49 item 5): the client record, the
//! ledger, release requests and the notice channel, under a prefix an ACL can allow,
//! or nowhere (keys/books.rs names them; docs/errors.md gives the ACL).

use crate::api::config::Config;
use crate::error::{Error, Result};
use crate::keys::books::{check_prefix, Books, DEFAULT_PREFIX};

/// Environment variable read when neither [`Config::bookkeeping_prefix`] nor
/// [`Config::bookkeeping`] was called: a prefix, or `off`.
pub const ENV_BOOKKEEPING: &str = "REDLATCH_BOOKKEEPING";

impl Config {
    /// The prefix of the keys and the channel redlatch keeps about this client, in
    /// place of `redlatch`: the client record `<prefix>_client:{<client id>}`, the
    /// ledger `<prefix>_ledger:{<client id>}`, release requests
    /// `<prefix>_revoke:{<lock name>}` and the notice channel
    /// `<prefix>_client__channel:{<client id>}`. A service whose ACL allows only its own
    /// keys (`~orders:*`) sets `orders:rl` and adds the channel
    /// `&orders:rl_client__channel*` (docs/errors.md, "Minimal ACL per feature").
    /// Operators then give the CLI the same prefix (`redlatch --bookkeeping orders:rl
    /// status ...`): each tool sees only the clients that share its prefix.
    ///
    /// Default: `$REDLATCH_BOOKKEEPING`, else `redlatch` (today's names, which Redisson
    /// never reads). Checked by [`Client::connect`](crate::Client::connect): 1 to 128
    /// bytes, no braces (the keys keep their hash tags), glob characters, spaces or
    /// control characters.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let config = Config::single("redis://127.0.0.1:7000").bookkeeping_prefix("orders:rl");
    /// assert_eq!(config.bookkeeping_keys_prefix().as_deref(), Some("orders:rl"));
    /// let off = Config::single("redis://127.0.0.1:7000").bookkeeping(false);
    /// assert_eq!(off.bookkeeping_keys_prefix(), None);
    /// ```
    pub fn bookkeeping_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.bookkeeping.0 = Some(prefix.into());
        self
    }

    /// Bookkeeping on (under [`bookkeeping_prefix`](Self::bookkeeping_prefix), default
    /// `redlatch`) or off. Off, this client writes no record, ledger or release request
    /// and listens on no notice channel, so it needs no key or channel beyond its
    /// locks'; every lock, job and kind works the same. What is lost:
    ///
    /// * its holders and waiters show in `status`, `list` and `top` (and
    ///   [`Lock::status`](crate::Lock::status)) by bare id, with no host, pid, app or
    ///   hold time, and its waiters are counted, not named;
    /// * [`deadlock_detection`](Self::deadlock_detection) (refused at connect with
    ///   both) and `redlatch deadlocks` do not see its tasks;
    /// * a force-unlock reaches its guards at their next renewal (a third of the
    ///   watchdog timeout), not at once;
    /// * a release request (`redlatch unlock --ask`,
    ///   [`Lock::request_release`](crate::Lock::request_release)) does not reach it,
    ///   and it cannot send one.
    ///
    /// # Examples
    /// See the example on [`bookkeeping_prefix`](Self::bookkeeping_prefix).
    pub fn bookkeeping(mut self, on: bool) -> Self {
        self.bookkeeping.1 = Some(on);
        self
    }

    /// The bookkeeping prefix in use, `None` when bookkeeping is off.
    ///
    /// # Examples
    /// See the example on [`bookkeeping_prefix`](Self::bookkeeping_prefix).
    pub fn bookkeeping_keys_prefix(&self) -> Option<String> {
        let env = std::env::var(ENV_BOOKKEEPING).ok();
        let on = (self.bookkeeping.1).unwrap_or(env.as_deref() != Some("off"));
        let from_env = env.filter(|v| v != "off" && check_prefix(v).is_ok());
        let prefix = (self.bookkeeping.0.clone())
            .or(from_env)
            .unwrap_or_else(|| DEFAULT_PREFIX.into());
        on.then_some(prefix)
    }

    /// The engine's view.
    pub(crate) fn books(&self) -> Books {
        match self.bookkeeping_keys_prefix() {
            Some(p) => Books::under(&p),
            None => Books::off(),
        }
    }

    /// Checks the prefix given or in `$REDLATCH_BOOKKEEPING`, and that deadlock
    /// detection has the ledgers it reads.
    pub(crate) fn check_bookkeeping(&self) -> Result<()> {
        if let Some(p) = &self.bookkeeping.0 {
            check_prefix(p)
                .map_err(|why| Error::config(format!("bookkeeping prefix {p:?} {why}")))?;
        } else if let Ok(v) = std::env::var(ENV_BOOKKEEPING)
            && v != "off"
        {
            check_prefix(&v).map_err(|why| {
                Error::config(format!(
                    "{ENV_BOOKKEEPING}={v:?}: a prefix or off; it {why}"
                ))
            })?;
        }
        if self.deadlock_detection && self.bookkeeping_keys_prefix().is_none() {
            return Err(Error::config(
                "deadlock_detection reads the clients' ledgers, which bookkeeping(false) \
                 turns off: turn one of them off, or give the ledgers a prefix your ACL \
                 allows (bookkeeping_prefix)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_off_are_checked_with_a_reason() {
        let c = || Config::single("redis://127.0.0.1:7000");
        assert_eq!(c().bookkeeping_prefix("a:b").books(), Books::under("a:b"));
        assert_eq!(c().bookkeeping(false).books(), Books::off());
        let back_on = c()
            .bookkeeping_prefix("a:b")
            .bookkeeping(false)
            .bookkeeping(true);
        assert_eq!(back_on.books(), Books::under("a:b"));
        let err = c().bookkeeping_prefix("{x}").validate().unwrap_err();
        assert!(matches!(err, Error::Config { .. }), "{err:?}");
        assert!(err.to_string().contains("braces"), "{err}");
        let both = c().bookkeeping(false).deadlock_detection(true);
        let err = both.validate().unwrap_err();
        assert!(err.to_string().contains("deadlock_detection"), "{err}");
        assert!(c().bookkeeping(false).validate().is_ok());
    }
}
