//! Writes guarded by a lock ([`Guarded`], [`GuardedScript`]): Redis applies them only
//! while the guard still holds the lock and no later fencing token has written
//! (etcd's `IsOwner()` compare inside a transaction). Lives beside `guard.rs` as its
//! own `impl LockGuard` block.

use redis::{FromRedisValue, ToRedisArgs, Value};

use crate::api::guard::LockGuard;
use crate::engine::facade::{wrapped, Wrapped};
#[cfg(doc)]
use crate::error::Error;
use crate::error::Result;

impl LockGuard {
    /// Writes that Redis applies only while this guard still holds the lock (and, for a
    /// fenced lock, no write with a later token was applied): the check and the write
    /// are one script, so a holder paused past its lease, whose lock someone else took
    /// meanwhile, has its write refused with [`Error::NotHeld`] instead of overwriting
    /// the new holder's data. No token-checking store is needed for data in Redis.
    ///
    /// Every key must be in the lock's hash slot: it carries the lock's hash tag
    /// (`{orders}:42:state` for the lock `{orders}:42`; for a lock named without braces,
    /// `orders:42`, the tag is the whole name: `{orders:42}:state`). Other keys are
    /// refused with [`Error::Unsupported`] before anything is sent. Under Redlock
    /// (several masters) guarded writes are refused too: the data would live on one
    /// master while the lock lives on a majority.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.fenced_lock("{orders}:42");
    /// let guard = lock.lock().await?;
    /// let w = guard.guarded();
    /// w.set("{orders}:42:state", "paid").await?;
    /// assert_eq!(w.incr_by("{orders}:total", 5).await?, 5); // a missing key counts from 0
    /// assert_eq!(w.hset("{orders}:42:meta", &[("by", "worker-1"), ("at", "noon")]).await?, 2); // new fields
    /// assert_eq!(w.rpush("{orders}:log", &["paid"]).await?, 1); // the list's length
    /// let id = w.xadd("{orders}:events", &[("event", "paid")]).await?;
    /// assert!(id.contains('-')); // the entry's id, "ms-seq"
    /// assert_eq!(w.del(["{orders}:42:meta", "{orders}:none"]).await?, 1); // keys deleted
    /// assert!(w.set("elsewhere", "x").await.unwrap_err().is_permanent()); // not in the slot
    /// lock.force_unlock().await?; // the lock is gone: writes are refused
    /// assert!(w.set("{orders}:42:state", "late").await.unwrap_err().is_not_held());
    /// # Ok(()) }) }
    /// ```
    pub fn guarded(&self) -> Guarded<'_> {
        Guarded { guard: self }
    }
}

/// Writes guarded by a [`LockGuard`]: see [`LockGuard::guarded`].
///
/// # Examples
/// See the example on [`LockGuard::guarded`].
#[derive(Clone, Copy, Debug)]
pub struct Guarded<'a> {
    guard: &'a LockGuard,
}

fn packed<T: ToRedisArgs>(items: &mut Vec<Vec<u8>>, v: &T) {
    v.write_redis_args(items);
}

impl Guarded<'_> {
    /// Decodes a reply; a mismatch names the master.
    fn decode<T: FromRedisValue>(&self, v: Value) -> Result<T> {
        self.guard.held().decode(v)
    }

    async fn run(&self, op: &'static str, keys: Vec<String>, args: &[Vec<u8>]) -> Result<Value> {
        self.guard.held().guarded_write(op, keys, args).await
    }

    /// `SET key value`, if the lock is still held.
    ///
    /// # Errors
    /// [`Error::NotHeld`] when the guard no longer holds the lock (nothing written);
    /// [`Error::Unsupported`] for a key outside the lock's hash slot, or under Redlock;
    /// a master's error.
    ///
    /// # Examples
    /// See the example on [`LockGuard::guarded`].
    pub async fn set(&self, key: impl Into<String>, value: impl ToRedisArgs) -> Result<()> {
        let mut args = Vec::new();
        packed(&mut args, &value);
        self.run("set", vec![key.into()], &args).await.map(|_| ())
    }

    /// `HSET key field value [field value ...]`; returns the number of fields added.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Examples
    /// See the example on [`LockGuard::guarded`].
    pub async fn hset<F: ToRedisArgs, V: ToRedisArgs>(
        &self,
        key: impl Into<String>,
        fields: &[(F, V)],
    ) -> Result<u64> {
        let mut args = Vec::new();
        for (f, v) in fields {
            packed(&mut args, f);
            packed(&mut args, v);
        }
        let v = self.run("hset", vec![key.into()], &args).await?;
        self.decode(v)
    }

    /// `DEL key [key ...]`; returns the number of keys removed.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Examples
    /// See the example on [`LockGuard::guarded`].
    pub async fn del<K: Into<String>>(&self, keys: impl IntoIterator<Item = K>) -> Result<u64> {
        let keys: Vec<String> = keys.into_iter().map(Into::into).collect();
        if keys.is_empty() {
            return Ok(0);
        }
        self.decode(self.run("del", keys, &[]).await?)
    }

    /// `INCRBY key by`; returns the new value.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Examples
    /// See the example on [`LockGuard::guarded`].
    pub async fn incr_by(&self, key: impl Into<String>, by: i64) -> Result<i64> {
        let mut args = Vec::new();
        packed(&mut args, &by);
        self.decode(self.run("incrby", vec![key.into()], &args).await?)
    }

    /// `RPUSH key value [value ...]` (append to a list); returns the list's length.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Examples
    /// See the example on [`LockGuard::guarded`].
    pub async fn rpush<V: ToRedisArgs>(&self, key: impl Into<String>, values: &[V]) -> Result<u64> {
        let mut args = Vec::new();
        for v in values {
            packed(&mut args, v);
        }
        self.decode(self.run("rpush", vec![key.into()], &args).await?)
    }

    /// `XADD key * field value [field value ...]` (append to a stream); returns the
    /// entry's id.
    ///
    /// # Errors
    /// As [`set`](Self::set).
    ///
    /// # Examples
    /// See the example on [`LockGuard::guarded`].
    pub async fn xadd<F: ToRedisArgs, V: ToRedisArgs>(
        &self,
        key: impl Into<String>,
        fields: &[(F, V)],
    ) -> Result<String> {
        let mut args = Vec::new();
        for (f, v) in fields {
            packed(&mut args, f);
            packed(&mut args, v);
        }
        self.decode(self.run("xadd", vec![key.into()], &args).await?)
    }

    /// Runs `script` with `keys` and `args` if the lock is still held (checked in the
    /// same script, before the user's code runs); returns the script's reply.
    ///
    /// # Errors
    /// As [`set`](Self::set), and the script's own errors.
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::sync::LazyLock;
    /// use redlatch::{Client, Config, GuardedScript};
    /// // Keep the user's Lua in a file of its own; here, a compare-and-set.
    /// static CAS: LazyLock<GuardedScript> = LazyLock::new(|| {
    ///     GuardedScript::new(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/examples/cas.lua")))
    /// });
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let lock = client.fenced_lock("{acct}:7");
    /// let guard = lock.lock().await?;
    /// let w = guard.guarded();
    /// w.set("{acct}:7:balance", 10).await?;
    /// let swapped: bool = w.script(&CAS, &["{acct}:7:balance"], &["10", "25"]).await?;
    /// assert!(swapped);
    /// let swapped: bool = w.script(&CAS, &["{acct}:7:balance"], &["10", "99"]).await?;
    /// assert!(!swapped);
    /// lock.force_unlock().await?; // the lock is gone: the script does not run
    /// let refused = w.script::<bool, _>(&CAS, &["{acct}:7:balance"], &["25", "0"]).await;
    /// assert!(refused.unwrap_err().is_not_held());
    /// # Ok(()) }) }
    /// ```
    pub async fn script<T: FromRedisValue, A: ToRedisArgs>(
        &self,
        script: &GuardedScript,
        keys: &[&str],
        args: &[A],
    ) -> Result<T> {
        let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let mut packed_args = Vec::new();
        for a in args {
            packed(&mut packed_args, a);
        }
        let held = self.guard.held();
        let v = held
            .guarded_script(script.script, &keys, &packed_args)
            .await?;
        self.decode(v)
    }
}

/// A user's Lua script run guarded by a lock ([`Guarded::script`]): it sees its own
/// `KEYS` and `ARGV` from 1, as if run alone, and runs only while the lock is held.
/// Make it once (a `static` `LazyLock`) and reuse it: each distinct source is kept for
/// the process's life. The body must not start with a `#!lua` flags line.
///
/// # Examples
/// See the example on [`Guarded::script`].
#[derive(Clone, Copy)]
pub struct GuardedScript {
    script: Wrapped,
}

impl GuardedScript {
    /// Wraps the Lua `body` (a script's text, e.g. `include_str!` of a file).
    ///
    /// # Examples
    /// See the example on [`Guarded::script`].
    pub fn new(body: &str) -> Self {
        GuardedScript {
            script: wrapped(body),
        }
    }
}

impl std::fmt::Debug for GuardedScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedScript").finish_non_exhaustive()
    }
}
