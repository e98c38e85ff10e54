//! Redisson's key and channel names, and lock-name validation.
//!
//! Derived names are `prefix:{name}`; when `name` already contains `{`, no braces are
//! added (`prefix:name`), exactly as Redisson's `RedissonObject.suffixName`/`prefixName`.

use crate::error::{Error, Result};

pub(crate) mod books;

/// The longest lock name accepted, in bytes (64 KiB).
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// Checks a lock name: not empty, at most [`MAX_NAME_LEN`] bytes.
pub(crate) fn validate(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidName("the name is empty".into()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::InvalidName(format!(
            "the name is {} bytes long, the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// Checks a fair lock's name: besides [`validate`], it must not be exactly a hash tag
/// (`{x}` with no other brace), whose queue and timeout keys are those of the lock `x`
/// (Redisson derives the same keys for both). Two fair locks sharing one queue can
/// deadlock: the holder of one is queued behind a waiter of the other.
pub(crate) fn validate_fair(name: &str) -> Result<()> {
    validate(name)?;
    let inner = name.strip_prefix('{').and_then(|n| n.strip_suffix('}'));
    if let Some(bare) = inner.filter(|n| !n.is_empty() && !n.contains('{')) {
        return Err(Error::InvalidName(format!(
            "fair lock {name:?} would share its queue with the fair lock {bare:?} \
             (both derive {:?}); add a suffix outside the braces, e.g. \"{name}:lock\"",
            queue(bare)
        )));
    }
    Ok(())
}

/// Checks a name for Redis Cluster: all of a lock's keys must share one hash slot. A
/// name with a `{` but no non-empty `{tag}` (`a{b`, `a{}b`) hashes as a whole, while
/// its derived keys (`prefix:a{}b`) hash differently: a script over them fails with
/// CROSSSLOT. Redisson derives the same keys and fails the same way on the cluster.
pub(crate) fn validate_cluster(name: &str) -> Result<()> {
    let Some(open) = name.find('{') else {
        return Ok(());
    };
    let tagged = name[open + 1..].find('}').is_some_and(|close| close > 0);
    if tagged {
        return Ok(());
    }
    Err(Error::InvalidName(format!(
        "on Redis Cluster the name {name:?} would put the lock and its channel in \
         different hash slots: a name with '{{' needs a non-empty {{tag}} (\"{{orders}}:42\") \
         or no braces"
    )))
}

/// `prefix:{name}`, or `prefix:name` when `name` already has a hash tag. (Built by
/// hand: this runs for every release, and `format!` costs several times more.)
pub(crate) fn derived(prefix: &str, name: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + name.len() + 3);
    for part in derived_parts(prefix, name) {
        s.push_str(part);
    }
    s
}

/// [`derived`] written as the next argument of `out` (a script call's keys or
/// arguments), with no string of its own.
pub(crate) fn write_derived(out: &mut impl redis::RedisWrite, prefix: &str, name: &str) {
    use std::io::Write;
    let mut w = out.writer_for_next_arg();
    for part in derived_parts(prefix, name) {
        w.write_all(part.as_bytes())
            .expect("writing a script's argument cannot fail");
    }
}

/// The pieces of [`derived`], in order.
fn derived_parts<'a>(prefix: &'a str, name: &'a str) -> [&'a str; 5] {
    match name.as_bytes().contains(&b'{') {
        true => [prefix, ":", name, "", ""],
        false => [prefix, ":", "{", name, "}"],
    }
}

/// The channel a full release publishes `"0"` on.
pub(crate) fn channel(name: &str) -> String {
    derived(CHANNEL, name)
}

/// The prefix of [`channel`].
pub(crate) const CHANNEL: &str = "redisson_lock__channel";

/// The fair lock's waiter queue (LIST).
pub(crate) fn queue(name: &str) -> String {
    derived("redisson_lock_queue", name)
}

/// The fair lock's waiter deadlines (ZSET).
pub(crate) fn timeouts(name: &str) -> String {
    derived("redisson_lock_timeout", name)
}

/// The fair lock's liveness set (ZSET redlatch waiter -> ms until which it is known
/// alive; not a Redisson key, see `lua/fair_evict.lua`).
pub(crate) fn fair_alive(name: &str) -> String {
    derived("redlatch_fair_alive", name)
}

/// The fenced lock's token counter.
pub(crate) fn token(name: &str) -> String {
    derived("redisson_lock_token", name)
}

/// The fencing counter's epoch under Redlock (not a Redisson key): the master's `run_id`
/// when the counter was last written back there. Same hash tag as the lock and its
/// counter, so all three stay in one Cluster slot.
pub(crate) fn token_epoch(name: &str) -> String {
    derived("redlatch_token_epoch", name)
}

/// The read-write lock's channel (Redisson's `redisson_rwlock:{name}`): `"0"` when the
/// last reader leaves, `"1"` when a writer leaves.
pub(crate) fn rw_channel(name: &str) -> String {
    derived("redisson_rwlock", name)
}

/// `{name}`, or `name` when it already has a hash tag: the start of every read hold's
/// timeout key (Redisson's `suffixName` without the suffix).
pub(crate) fn rw_tag(name: &str) -> String {
    if name.as_bytes().contains(&b'{') {
        name.to_string()
    } else {
        format!("{{{name}}}")
    }
}

/// A reader's timeout prefix: `<tag>:<holder>:rwlock_timeout`; its hold number i has the
/// key `<prefix>:i`.
pub(crate) fn rw_timeout_prefix(name: &str, holder: &str) -> String {
    format!("{}:{holder}:rwlock_timeout", rw_tag(name))
}

/// The writers waiting on a read-write lock (not a Redisson key; writer preference).
pub(crate) fn rw_writers(name: &str) -> String {
    derived("redlatch_rwlock_writers", name)
}

/// A semaphore's channel (Redisson's `redisson_sc:{name}`): the available permits are
/// published on it when they grow.
pub(crate) fn sem_channel(name: &str) -> String {
    derived("redisson_sc", name)
}

/// An expirable semaphore's acquired permits: `<tag>:timeout` (Redisson's
/// `suffixName(name, "timeout")`).
pub(crate) fn permit_timeouts(name: &str) -> String {
    format!("{}:timeout", rw_tag(name))
}

/// A count-down latch's channel: Redisson always wraps the name in braces here.
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A plain lock's waiter registry (ZSET ticket -> when it began waiting; not a
/// Redisson key, see lua/pass_on.lua). Same hash tag as the lock; the scripts also use
/// `<registry>:handed` (the ticket last handed the lock), which keeps it.
pub(crate) fn waiters(name: &str) -> String {
    derived(WAITERS, name)
}

/// The prefix of [`waiters`].
pub(crate) const WAITERS: &str = "redlatch_lock_waiters";

/// The channel that only says "a redlatch waiter listens on this lock's channels"
/// (never carries a message; lua/pass_on.lua counts its subscribers).
pub(crate) fn marker(name: &str) -> String {
    format!("{}{MARKER}", channel(name))
}

/// A fair waiter's own wake-up channel; with a client id in place of the holder, a
/// plain lock's per-client channel for hand-overs (lua/pass_on.lua).
pub(crate) fn waiter_channel(name: &str, holder: &str) -> String {
    format!("{}:{holder}", channel(name))
}

/// The channel a simple lock's redlatch release publishes `"0"` on when a redlatch
/// waiter listens (`lua/simple_release.lua`): the lock's channel with [`SIMPLE_WAKE`]
/// after it. The Redlock reference clients (redsync, node-redlock, redis-py) and
/// Redisson listen on no such channel, so they never hear it.
pub(crate) fn simple_channel(name: &str) -> String {
    format!("{}{SIMPLE_WAKE}", channel(name))
}

/// The suffix of [`simple_channel`].
pub(crate) const SIMPLE_WAKE: &str = ":redlatch-simple";

/// The suffix of [`marker`]; on a Redis 7 cluster also of each channel's classic
/// marker (lua/dialect_sharded.lua).
pub(crate) const MARKER: &str = ":redlatch-waiters";

/// Whether only redlatch publishes on `channel`: a marker, a simple lock's wake
/// channel, or a channel that ends in a client id (a plain lock's hand-over channel, a
/// revocation's). Redisson's releases may publish on every other channel a waiter
/// listens on (lock, read-write, fair waiter, semaphore and latch channels).
pub(crate) fn redlatch_only(channel: &str) -> bool {
    if channel.ends_with(MARKER) || channel.ends_with(SIMPLE_WAKE) {
        return true;
    }
    let last = channel.rsplit(':').next().unwrap_or_default();
    uuid::Uuid::try_parse(last).is_ok_and(|_| last.len() == 36)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_only_redlatch_publishes_on_are_told_apart() {
        let id = uuid::Uuid::new_v4().to_string();
        assert!(redlatch_only(&marker("a")));
        assert!(redlatch_only(&simple_channel("a")));
        assert_eq!(
            simple_channel("a"),
            "redisson_lock__channel:{a}:redlatch-simple"
        );
        assert!(redlatch_only(&waiter_channel("a", &id)));
        assert!(!redlatch_only(&channel("a")));
        assert!(!redlatch_only(&waiter_channel("a", &format!("{id}:7"))));
        assert!(!redlatch_only(&sem_channel("a")));
        assert!(!redlatch_only(&latch_channel("a")));
        assert!(!redlatch_only(&rw_channel("a")));
    }

    #[test]
    fn braces_are_added_unless_the_name_has_a_hash_tag() {
        assert_eq!(channel("orders:42"), "redisson_lock__channel:{orders:42}");
        assert_eq!(channel("{orders}:42"), "redisson_lock__channel:{orders}:42");
        assert_eq!(queue("a"), "redisson_lock_queue:{a}");
        assert_eq!(timeouts("a"), "redisson_lock_timeout:{a}");
        assert_eq!(token("a"), "redisson_lock_token:{a}");
        assert_eq!(token_epoch("a"), "redlatch_token_epoch:{a}");
        assert_eq!(token_epoch("{o}:1"), "redlatch_token_epoch:{o}:1");
        assert_eq!(waiter_channel("a", "u:1"), "redisson_lock__channel:{a}:u:1");
        assert_eq!(rw_channel("a"), "redisson_rwlock:{a}");
        assert_eq!(rw_timeout_prefix("a", "u:1"), "{a}:u:1:rwlock_timeout");
        assert_eq!(
            rw_timeout_prefix("{o}:1", "u:1"),
            "{o}:1:u:1:rwlock_timeout"
        );
        assert_eq!(rw_writers("a"), "redlatch_rwlock_writers:{a}");
        assert_eq!(sem_channel("s"), "redisson_sc:{s}");
        assert_eq!(permit_timeouts("s"), "{s}:timeout");
        assert_eq!(permit_timeouts("{s}:x"), "{s}:x:timeout");
        assert_eq!(latch_channel("l"), "redisson_countdownlatch__channel__{l}");
    }

    #[test]
    fn a_fair_name_that_is_only_a_hash_tag_is_refused() {
        // The collision itself: two names, one queue.
        assert_eq!(queue("dl"), queue("{dl}"));
        assert!(matches!(validate_fair("{dl}"), Err(Error::InvalidName(_))));
        for ok in ["dl", "{dl}:lock", "a{dl}", "{a}{b}", "{", "}", "{}", "{}x"] {
            assert!(validate_fair(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn on_a_cluster_a_brace_needs_a_tag() {
        for ok in ["orders:42", "{orders}:42", "a{b}c{", "{x}"] {
            assert!(validate_cluster(ok).is_ok(), "{ok}");
        }
        for bad in ["a{b", "a{}b", "{", "}{", "x{}"] {
            assert!(
                matches!(validate_cluster(bad), Err(Error::InvalidName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn empty_and_oversized_names_are_rejected() {
        assert!(validate("").is_err());
        assert!(validate(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate(&"x".repeat(MAX_NAME_LEN)).is_ok());
    }
}
