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
    /// assert_eq!(w.incr_by("{orders}:total", 5).await?, 5);
    /// w.hset("{orders}:42:meta", &[("by", "worker-1")]).await?;
    /// w.rpush("{orders}:log", &["paid"]).await?;
    /// let id = w.xadd("{orders}:events", &[("event", "paid")]).await?;
    /// assert!(id.contains('-'));
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.fenced_lock("{cart}:1").lock().await?;
    /// let w = guard.guarded();
    /// w.set("{cart}:1:items", 40).await?;
    /// assert_eq!(w.incr_by("{cart}:1:items", 2).await?, 42); // the value was stored
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.fenced_lock("{user}:7").lock().await?;
    /// let w = guard.guarded();
    /// assert_eq!(w.hset("{user}:7:profile", &[("name", "ada"), ("lang", "en")]).await?, 2);
    /// // "lang" is updated, "tz" added: one new field.
    /// assert_eq!(w.hset("{user}:7:profile", &[("lang", "fr"), ("tz", "UTC")]).await?, 1);
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.fenced_lock("{tmp}:3").lock().await?;
    /// let w = guard.guarded();
    /// w.set("{tmp}:3:a", 1).await?;
    /// w.set("{tmp}:3:b", 2).await?;
    /// assert_eq!(w.del(["{tmp}:3:a", "{tmp}:3:b", "{tmp}:3:none"]).await?, 2);
    /// assert_eq!(w.del(["{tmp}:3:a"]).await?, 0); // already gone
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.fenced_lock("{stock}:5").lock().await?;
    /// let w = guard.guarded();
    /// assert_eq!(w.incr_by("{stock}:5:count", 10).await?, 10); // a missing key counts from 0
    /// assert_eq!(w.incr_by("{stock}:5:count", -3).await?, 7);
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.fenced_lock("{queue}:2").lock().await?;
    /// let w = guard.guarded();
    /// assert_eq!(w.rpush("{queue}:2:jobs", &["a", "b"]).await?, 2);
    /// assert_eq!(w.rpush("{queue}:2:jobs", &["c"]).await?, 3);
    /// # Ok(()) }) }
    /// ```
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
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use redlatch::{Client, Config};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// let guard = client.fenced_lock("{audit}:4").lock().await?;
    /// let w = guard.guarded();
    /// let first = w.xadd("{audit}:4:events", &[("event", "opened")]).await?;
    /// let second = w.xadd("{audit}:4:events", &[("event", "closed")]).await?;
    /// let id = |s: &str| -> (u64, u64) {
    ///     let (ms, seq) = s.split_once('-').expect("an id is ms-seq");
    ///     (ms.parse().unwrap(), seq.parse().unwrap())
    /// };
    /// assert!(id(&second) > id(&first)); // ids grow
    /// # Ok(()) }) }
    /// ```
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
    /// let guard = client.fenced_lock("{acct}:7").lock().await?;
    /// let w = guard.guarded();
    /// w.set("{acct}:7:balance", 10).await?;
    /// let swapped: bool = w.script(&CAS, &["{acct}:7:balance"], &["10", "25"]).await?;
    /// assert!(swapped);
    /// let swapped: bool = w.script(&CAS, &["{acct}:7:balance"], &["10", "99"]).await?;
    /// assert!(!swapped);
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
#[derive(Clone, Copy)]
pub struct GuardedScript {
    script: Wrapped,
}

impl GuardedScript {
    /// Wraps the Lua `body` (a script's text, e.g. `include_str!` of a file).
    ///
    /// # Examples
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
    /// # fn main() { doc_redis::run(|url| async move {
    /// use std::sync::LazyLock;
    /// use redlatch::{Client, Config, GuardedScript};
    /// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
    /// static CAS: LazyLock<GuardedScript> = LazyLock::new(|| {
    ///     GuardedScript::new(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/examples/cas.lua")))
    /// });
    /// let lock = client.fenced_lock("{flags}:6");
    /// let guard = lock.lock().await?;
    /// let w = guard.guarded();
    /// w.set("{flags}:6:mode", "off").await?;
    /// assert!(w.script::<bool, _>(&CAS, &["{flags}:6:mode"], &["off", "on"]).await?);
    /// lock.force_unlock().await?; // the lock is gone: the script does not run
    /// let refused = w.script::<bool, _>(&CAS, &["{flags}:6:mode"], &["on", "x"]).await;
    /// assert!(refused.unwrap_err().is_not_held());
    /// # Ok(()) }) }
    /// ```
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
