//! The bookkeeping keys and channels (issue 49 item 5): what redlatch writes about its
//! clients rather than about a lock's state. With the default prefix `redlatch`:
//!
//! * `redlatch_client:{<uuid>}`: the client record (host, pid, app, version, since);
//! * `redlatch_ledger:{<uuid>}`: the ledger (holds and waits, for naming holders and
//!   waiters and for deadlock detection);
//! * `redlatch_revoke:{<name>}`: the release requests of a lock (in the lock's slot);
//! * `redlatch_client__channel:{<uuid>}`: the client's notice channel (force-unlocks,
//!   release requests).
//!
//! `Config::bookkeeping_prefix` replaces `redlatch` (say `orders:rl`, giving
//! `orders:rl_client:{<uuid>}`, within an ACL of `~orders:*` and
//! `&orders:rl_client__channel*`); `Config::bookkeeping(false)` writes none of them.
//!
//! Invariants:
//! 1. The hash tags are those of the default names: a record, ledger and notice channel
//!    hash on the client's uuid, a revoke marker on the lock's tag (keys::derived). A
//!    prefix therefore holds no brace (and no glob character: ledgers are found by
//!    `SCAN MATCH <prefix>_ledger:*`).
//! 2. The lock path never reads or writes any of them: with bookkeeping off, or refused
//!    by the ACL, every lock, job and kind still works.

use std::sync::Arc;

/// The prefix of the bookkeeping keys and channels by default.
pub(crate) const DEFAULT_PREFIX: &str = "redlatch";

/// The longest prefix accepted, in bytes.
pub(crate) const MAX_PREFIX_LEN: usize = 128;

/// The suffix every notice channel's prefix ends with.
const NOTICE: &str = "_client__channel";

/// Where one client's bookkeeping goes: a prefix, or nowhere (off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Books {
    /// `None`: bookkeeping is off.
    prefix: Option<Arc<str>>,
}

impl Default for Books {
    fn default() -> Books {
        Books::under(DEFAULT_PREFIX)
    }
}

impl Books {
    /// Bookkeeping under `prefix` (checked by [`check_prefix`]).
    pub(crate) fn under(prefix: &str) -> Books {
        Books {
            prefix: Some(prefix.into()),
        }
    }

    /// No bookkeeping at all.
    pub(crate) fn off() -> Books {
        Books { prefix: None }
    }

    /// Whether bookkeeping is on.
    pub(crate) fn is_on(&self) -> bool {
        self.prefix.is_some()
    }

    fn p(&self) -> &str {
        self.prefix.as_deref().unwrap_or(DEFAULT_PREFIX)
    }

    /// The client record of `uuid`: `<prefix>_client:{<uuid>}`.
    pub(crate) fn record(&self, uuid: &str) -> String {
        format!("{}_client:{{{uuid}}}", self.p())
    }

    /// The ledger of `uuid`: `<prefix>_ledger:{<uuid>}`.
    pub(crate) fn ledger(&self, uuid: &str) -> String {
        format!("{}_ledger:{{{uuid}}}", self.p())
    }

    /// What every ledger's key starts with.
    pub(crate) fn ledger_start(&self) -> String {
        format!("{}_ledger:", self.p())
    }

    /// The `SCAN MATCH` pattern of every ledger.
    pub(crate) fn ledger_pattern(&self) -> String {
        format!("{}*", self.ledger_start())
    }

    /// The client uuid of a ledger's key.
    pub(crate) fn ledger_owner<'a>(&self, key: &'a str) -> Option<&'a str> {
        key.strip_prefix(self.p())?
            .strip_prefix("_ledger:{")?
            .strip_suffix('}')
    }

    /// The release requests of lock `name`: `<prefix>_revoke:{<name>}` (its slot).
    pub(crate) fn revoke(&self, name: &str) -> String {
        super::derived(&format!("{}_revoke", self.p()), name)
    }

    /// The prefix of every notice channel, as the scripts take it; `None` when off
    /// (then no script tells anyone).
    pub(crate) fn notice_prefix(&self) -> Option<String> {
        self.prefix.as_deref().map(|p| format!("{p}{NOTICE}"))
    }

    /// Client `id`'s notice channel: `<prefix>_client__channel:{<id>}`.
    pub(crate) fn notice_channel(&self, id: &str) -> String {
        format!("{}{NOTICE}:{{{id}}}", self.p())
    }

    /// Whether `key` is a bookkeeping key under this prefix (never a lock to list).
    pub(crate) fn owns(&self, key: &str) -> bool {
        let Some(rest) = key.strip_prefix(self.p()) else {
            return false;
        };
        ["_client:{", "_ledger:{", "_revoke:"]
            .iter()
            .any(|s| rest.starts_with(s))
    }
}

/// Whether `channel` is some client's notice channel, whatever its prefix.
pub(crate) fn is_notice_channel(channel: &str) -> bool {
    let Some((_, id)) = channel.rsplit_once(&format!("{NOTICE}:{{")[..]) else {
        return false;
    };
    id.strip_suffix('}')
        .is_some_and(|id| uuid::Uuid::try_parse(id).is_ok())
}

/// Checks a prefix: 1 to [`MAX_PREFIX_LEN`] bytes, no brace (invariant 1), no glob
/// character, no control character or space.
pub(crate) fn check_prefix(prefix: &str) -> std::result::Result<(), String> {
    if prefix.is_empty() {
        return Err("must not be empty".into());
    }
    if prefix.len() > MAX_PREFIX_LEN {
        return Err(format!(
            "must be at most {MAX_PREFIX_LEN} bytes, got {}",
            prefix.len()
        ));
    }
    let bad = |c: char| "{}*?[]\\".contains(c) || c.is_control() || c.is_whitespace();
    if let Some(c) = prefix.chars().find(|&c| bad(c)) {
        return Err(format!(
            "must not contain {c:?} (no braces: the keys keep their hash tags; no glob \
             characters, spaces or control characters)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_names_are_todays_and_a_prefix_keeps_the_hash_tags() {
        let u = "0b1b7a5e-3a5c-4e4e-9a4b-1c2d3e4f5a6b";
        let d = Books::default();
        assert_eq!(d.record(u), format!("redlatch_client:{{{u}}}"));
        assert_eq!(d.ledger(u), format!("redlatch_ledger:{{{u}}}"));
        assert_eq!(d.revoke("a"), "redlatch_revoke:{a}");
        assert_eq!(d.revoke("{o}:1"), "redlatch_revoke:{o}:1");
        assert_eq!(
            d.notice_channel(u),
            format!("redlatch_client__channel:{{{u}}}")
        );
        assert_eq!(d.notice_prefix().unwrap(), "redlatch_client__channel");
        let p = Books::under("orders:rl");
        assert_eq!(p.record(u), format!("orders:rl_client:{{{u}}}"));
        assert_eq!(p.revoke("x"), "orders:rl_revoke:{x}");
        assert_eq!(p.ledger_owner(&p.ledger(u)), Some(u));
        assert_eq!(d.ledger_owner(&p.ledger(u)), None);
        assert_eq!(p.ledger_pattern(), "orders:rl_ledger:*");
        assert!(p.owns(&p.record(u)) && p.owns(&p.ledger(u)) && p.owns(&p.revoke("x")));
        assert!(!p.owns("orders:42") && !d.owns("redlatch_job:{x}"));
        assert!(is_notice_channel(&p.notice_channel(u)));
        assert!(is_notice_channel(&d.notice_channel(u)));
        assert!(!is_notice_channel("redisson_lock__channel:{a}"));
        assert!(Books::off().notice_prefix().is_none() && !Books::off().is_on());
    }

    #[test]
    fn prefixes_are_checked_with_a_reason() {
        for ok in ["redlatch", "orders:rl", "job-lock:books", "a"] {
            assert!(check_prefix(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("a{b", "braces"),
            ("a}", "braces"),
            ("a*", "glob"),
            ("a b", "spaces"),
            (&*"x".repeat(129), "at most 128"),
        ] {
            assert!(check_prefix(bad).unwrap_err().contains(why), "{bad:?}");
        }
    }
}
