//! Scripts by SHA: [`Script`] (a Lua source; its SHA1s computed on first use) and
//! [`Invocation`] (one call with its keys and arguments), run with EVALSHA. Nothing is
//! loaded in advance: a server's [`Cached`] says which scripts it is known to hold, and
//! a script's first call on a server goes as one pipeline, `SCRIPT LOAD` and
//! `EVALSHA`, written together, so a fresh or restarted server never answers it
//! NOSCRIPT and no reload is sent after requests written meanwhile (issue 11.7). Only a
//! flush (`SCRIPT FLUSH`, or a promoted replica without the script) between a known
//! script's writing and its running meets NOSCRIPT; NOSCRIPT means the script did not
//! run, so the call is sent again, as EVAL with the source, which runs it whatever the
//! cache holds (or, if the ACL forbids EVAL, after a SCRIPT LOAD, for as long as the
//! server keeps flushing; the transport's timeout bounds that loop), and the server's
//! [`Cached`] forgets everything.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use redis::aio::ConnectionLike;
use redis::{RedisResult, ToRedisArgs, Value};

use super::packed::Packed;

/// How many times one call reloads its script before giving up. Each flush between
/// our SCRIPT LOAD and the EVALSHA that follows costs one reload; a server flushing in
/// a loop is outlasted, since every round trip gives the call another chance.
pub(crate) const MAX_RELOADS: usize = 1000;

/// Which variant of a script a deployment runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Classic pub/sub (`lua/dialect_classic.lua`).
    Classic,
    /// Redis Cluster with sharded pub/sub, Redis >= 7 (`lua/dialect_sharded.lua`), so
    /// messages reach `SSUBSCRIBE`rs (Redisson's subscription mode on such clusters).
    Sharded,
}

/// The prelude of each dialect: it names the pub/sub commands the scripts call.
const CLASSIC: &str = include_str!("../../lua/dialect_classic.lua");
const SHARDED: &str = include_str!("../../lua/dialect_sharded.lua");
/// The flag line of [`Script::cross_slot`] scripts in the sharded dialect.
const CROSS_SLOT_FLAGS: &str = include_str!("../../lua/cross_slot_flags.lua");
/// The flag line of [`Script::cross_slot_writes`] scripts in the sharded dialect.
const CROSS_SLOT_WRITE_FLAGS: &str = include_str!("../../lua/cross_slot_write_flags.lua");

/// A [`Script`] made of files in `lua/`, concatenated in order (a shared part such
/// as `fair_evict.lua` first), in a `LazyLock`: `lua!("acquire.lua")`,
/// `lua!("fair_evict.lua", "fair_acquire.lua")`; `lua!(cross_slot "renew.lua")` for
/// [`Script::cross_slot`], `lua!(cross_slot_writes ...)` for [`Script::cross_slot_writes`].
macro_rules! lua {
    (cross_slot_writes $($file:literal),+) => {
        std::sync::LazyLock::new(|| $crate::transport::Script::cross_slot_writes(concat!(
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),+
        )))
    };
    (cross_slot $($file:literal),+) => {
        std::sync::LazyLock::new(|| $crate::transport::Script::cross_slot(concat!(
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),+
        )))
    };
    ($($file:literal),+) => {
        std::sync::LazyLock::new(|| $crate::transport::Script::new(concat!(
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file))),+
        )))
    };
}
pub(crate) use lua;

/// One text of a script and its SHA1.
struct Text {
    source: String,
    hash: String,
}

impl Text {
    fn new(source: String) -> Self {
        let hash = redis::Script::new(&source).get_hash().to_string();
        Text { source, hash }
    }
}

/// A Lua script and its SHA1, in both [`Dialect`]s: its source after the dialect's
/// prelude. Each text and its SHA1 are made on first use (a process computes the SHA1s
/// of the scripts it calls, not of all of them).
pub(crate) struct Script {
    /// Its number in this process, by which a server's [`Cached`] knows it.
    id: usize,
    source: &'static str,
    /// The sharded dialect's flag line (or nothing).
    flags: &'static str,
    classic: OnceLock<Text>,
    sharded: OnceLock<Text>,
    /// The commands the script names in `redis.call` / `redis.pcall`, lowercase: what
    /// a refusal inside it may be about (an ACL `NOPERM` from a script does not say).
    calls: OnceLock<Vec<String>>,
}

/// The next [`Script::id`].
static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// The commands `source` calls by name (`redis.call('hexists', ...)`), in order, once.
fn calls_in(source: &str) -> Vec<String> {
    let mut calls: Vec<String> = Vec::new();
    for part in source.split("redis.").skip(1) {
        let Some(rest) = part
            .strip_prefix("call(")
            .or_else(|| part.strip_prefix("pcall("))
        else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
            continue;
        };
        if let Some(name) = rest[1..].split(quote).next() {
            let name = name.to_ascii_lowercase();
            if !name.is_empty() && !calls.contains(&name) {
                calls.push(name);
            }
        }
    }
    calls
}

impl Script {
    /// A script from its source (the SHA1s are computed once, here).
    pub(crate) fn new(source: &'static str) -> Self {
        Self::with_flags(source, "")
    }

    /// A script that touches keys of several hash slots it does not declare (a
    /// renewal of every lock one cluster node serves, named in ARGV): in the sharded
    /// dialect it carries `lua/cross_slot_flags.lua` (`allow-cross-slot-keys`, Redis 7,
    /// with `allow-oom` so that, as without flags, it still runs when the node is out of
    /// memory). Cluster routing still requires the *declared* keys to share one slot.
    pub(crate) fn cross_slot(source: &'static str) -> Self {
        Self::with_flags(source, CROSS_SLOT_FLAGS)
    }

    /// A [`cross_slot`](Self::cross_slot) script that creates keys (group commit per
    /// cluster node): without `allow-oom`, so a node out of memory refuses the whole
    /// call before it runs (OOM), where a script without flags would stop at its first
    /// acquisition, half-way; the caller then sends each operation alone.
    pub(crate) fn cross_slot_writes(source: &'static str) -> Self {
        Self::with_flags(source, CROSS_SLOT_WRITE_FLAGS)
    }

    fn with_flags(source: &'static str, flags: &'static str) -> Self {
        Script {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            source,
            flags,
            classic: OnceLock::new(),
            sharded: OnceLock::new(),
            calls: OnceLock::new(),
        }
    }

    fn text(&self, dialect: Dialect) -> &Text {
        match dialect {
            Dialect::Classic => {
                (self.classic).get_or_init(|| Text::new(format!("{CLASSIC}{}", self.source)))
            }
            Dialect::Sharded => (self.sharded)
                .get_or_init(|| Text::new(format!("{}{SHARDED}{}", self.flags, self.source))),
        }
    }

    /// A call of this script; add its keys and arguments with
    /// [`key`](Invocation::key) and [`arg`](Invocation::arg).
    pub(crate) fn call(&'static self) -> Invocation {
        // Room for every call of our scripts without regrowing (W1's hot path).
        Invocation {
            script: self,
            keys: Packed::with_capacity(4, 128),
            args: Packed::with_capacity(6, 128),
        }
    }
}

/// How many scripts a [`Cached`] can know (more are called as if known: EVALSHA, and
/// a reload on NOSCRIPT).
pub(crate) const KNOWN: usize = 4 * 64;

/// The scripts one server is known to hold: those whose `SCRIPT LOAD` it answered
/// since it was last forgotten. A transport forgets when its connections break (the
/// server may have restarted) and on any NOSCRIPT (a flush, a promoted replica):
/// every script's next call loads it again, in the same round trip.
#[derive(Default)]
pub(crate) struct Cached {
    known: [AtomicU64; KNOWN / 64],
    /// Bumped by each [`forget`](Self::forget): a load answered after a forget it was
    /// sent before is not taken as known (the server it reached may be gone).
    epoch: AtomicU64,
    forgetting: parking_lot::Mutex<()>,
}

impl Cached {
    fn has(&self, id: usize) -> bool {
        id >= KNOWN || self.known[id / 64].load(Ordering::Acquire) & (1 << (id % 64)) != 0
    }

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Script `id` was loaded by a request sent in `epoch`.
    fn loaded(&self, id: usize, epoch: u64) {
        let _one = self.forgetting.lock();
        if id < KNOWN && self.epoch() == epoch {
            self.known[id / 64].fetch_or(1 << (id % 64), Ordering::Release);
        }
    }

    /// Forgets every script: the server may no longer hold them.
    pub(crate) fn forget(&self) {
        let _one = self.forgetting.lock();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        for word in &self.known {
            word.store(0, Ordering::Release);
        }
    }
}

/// One call of a [`Script`].
pub(crate) struct Invocation {
    script: &'static Script,
    keys: Packed,
    args: Packed,
}

impl Invocation {
    /// Appends a key (`KEYS[n]`).
    pub(crate) fn key(&mut self, key: impl ToRedisArgs) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Appends an argument (`ARGV[n]`).
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// Room for `keys` more keys and `args` more arguments, each `(count, bytes)`: a
    /// batch of many operations is packed without regrowing its buffers.
    pub(crate) fn reserve(&mut self, keys: (usize, usize), args: (usize, usize)) -> &mut Self {
        self.keys.reserve(keys.0, keys.1);
        self.args.reserve(args.0, args.1);
        self
    }

    /// Appends the key `prefix:{name}` ([`keys::derived`](crate::keys::derived)), built
    /// in place.
    pub(crate) fn key_derived(&mut self, prefix: &str, name: &str) -> &mut Self {
        crate::keys::write_derived(&mut self.keys, prefix, name);
        self
    }

    /// Appends the argument `prefix:{name}`, built in place.
    pub(crate) fn arg_derived(&mut self, prefix: &str, name: &str) -> &mut Self {
        crate::keys::write_derived(&mut self.args, prefix, name);
        self
    }

    /// The commands the script calls by name (see `Script::calls`).
    pub(crate) fn calls(&self) -> &[String] {
        self.script
            .calls
            .get_or_init(|| calls_in(self.script.source))
    }

    /// The first key, by which a clustered transport routes the call.
    pub(crate) fn first_key(&self) -> Option<&[u8]> {
        self.keys.first()
    }

    fn evalsha(&self, dialect: Dialect) -> redis::Cmd {
        self.command("EVALSHA", &self.script.text(dialect).hash)
    }

    /// `EVAL source ...`: runs the script without needing it cached (and caches it).
    pub(crate) fn eval(&self, dialect: Dialect) -> redis::Cmd {
        self.command("EVAL", &self.script.text(dialect).source)
    }

    fn command(&self, name: &str, script: &str) -> redis::Cmd {
        // Sized up front: one allocation for the packed arguments, none regrown.
        let data = name.len() + script.len() + 4 + self.keys.bytes() + self.args.bytes();
        let mut cmd = redis::Cmd::with_capacity(3 + self.keys.len() + self.args.len(), data);
        cmd.arg(name).arg(script).arg(self.keys.len());
        for k in self.keys.iter().chain(self.args.iter()) {
            cmd.arg(k);
        }
        cmd
    }

    /// `SCRIPT LOAD` of the script, for a pipeline that calls it next.
    fn load(&self, dialect: Dialect) -> redis::Cmd {
        let mut load = redis::cmd("SCRIPT");
        load.arg("LOAD").arg(&*self.script.text(dialect).source);
        load
    }

    /// Runs the call on `conn`: EVALSHA, preceded in the same round trip by the
    /// script's `SCRIPT LOAD` unless the server is known to hold it (`cached`). On
    /// NOSCRIPT (the script did not run) `cached` forgets and the call is sent again, as
    /// EVAL with the source, which cannot meet NOSCRIPT however often the server
    /// flushes. A user whose ACL forbids EVAL gets SCRIPT LOAD and EVALSHA again
    /// instead, for as long as the server keeps flushing (at most [`MAX_RELOADS`]
    /// times).
    pub(crate) async fn run<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        dialect: Dialect,
        cached: &Cached,
    ) -> RedisResult<Value> {
        let first = match cached.has(self.script.id) {
            // The hot path: one command, no pipeline.
            true => self.evalsha(dialect).query_async::<Value>(conn).await,
            false => (self.run_with(conn, dialect, cached, None).await)
                .map(|mut replies| replies.swap_remove(0)),
        };
        match first {
            Err(e) if is_noscript(&e) => cached.forget(),
            other => return other,
        }
        match self.eval(dialect).query_async::<Value>(conn).await {
            Err(e) if e.code() == Some("NOPERM") => {}
            other => return other,
        }
        let evalsha = self.evalsha(dialect);
        let mut reloads = 0;
        loop {
            self.load(dialect).query_async::<()>(conn).await?;
            reloads += 1;
            match evalsha.query_async::<Value>(conn).await {
                Err(e) if is_noscript(&e) && reloads < MAX_RELOADS => {}
                other => return other,
            }
        }
    }

    /// The call as EVALSHA (after its `SCRIPT LOAD` unless `cached` knows the script),
    /// then `then`, in one round trip; the replies of the call and of `then`. The
    /// script's refusal (NOSCRIPT included) is the error; `then`'s is its reply, a
    /// [`Value::ServerError`].
    async fn run_with<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        dialect: Dialect,
        cached: &Cached,
        then: Option<&redis::Cmd>,
    ) -> RedisResult<Vec<Value>> {
        let (id, epoch) = (self.script.id, cached.epoch());
        let known = cached.has(id);
        let mut pipe = redis::pipe();
        if !known {
            pipe.add_command(self.load(dialect));
        }
        pipe.add_command(self.evalsha(dialect));
        if let Some(then) = then {
            pipe.add_command(then.clone());
        }
        let mut replies: Vec<Value> = pipe.ignore_errors().query_async(conn).await?;
        if !known {
            if replies.is_empty() {
                return Err(unexpected());
            }
            if !matches!(replies.remove(0), Value::ServerError(_)) {
                cached.loaded(id, epoch);
            }
        }
        match replies.first() {
            None => Err(unexpected()),
            Some(Value::ServerError(e)) => Err(e.clone().into()),
            Some(_) => Ok(replies),
        }
    }
}

/// A pipeline answered with fewer replies than it has commands.
fn unexpected() -> redis::RedisError {
    (
        redis::ErrorKind::UnexpectedReturnType,
        "a pipeline answered fewer replies than it has commands",
    )
        .into()
}

#[cfg(test)]
impl Invocation {
    /// The script, keys and arguments (the engine's fake server reads them).
    pub(crate) fn parts(&self) -> (&'static Script, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let owned = |p: &Packed| p.iter().map(<[u8]>::to_vec).collect();
        (self.script, owned(&self.keys), owned(&self.args))
    }
}

impl Invocation {
    /// Runs the call and then `then` in one round trip (a pipeline), as EVALSHA, or as
    /// EVAL after NOSCRIPT; the replies of both. A refusal of the script itself (OOM,
    /// WRONGTYPE, NOPERM) is returned as the script's own error, with its code, as
    /// [`run`](Self::run) returns it. A refusal of `then` alone is not the script's:
    /// the script's reply is kept (it may have granted a lock the caller must undo) and
    /// `then`'s error comes back as its reply, a [`Value::ServerError`] (a `WAITAOF`
    /// refused because the server's append-only file was switched off since connect).
    pub(crate) async fn run_then<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        dialect: Dialect,
        then: &redis::Cmd,
        cached: &Cached,
    ) -> RedisResult<(Value, Value)> {
        let replies = match self.run_with(conn, dialect, cached, Some(then)).await {
            Err(e) if is_noscript(&e) => {
                cached.forget();
                let mut pipe = redis::pipe();
                pipe.add_command(self.eval(dialect))
                    .add_command(then.clone())
                    .ignore_errors();
                let replies: Vec<Value> = pipe.query_async(conn).await?;
                if let Some(Value::ServerError(e)) = replies.first() {
                    return Err(e.clone().into());
                }
                replies
            }
            other => other?,
        };
        let mut replies = replies.into_iter();
        match (replies.next(), replies.next()) {
            (Some(reply), Some(then)) => Ok((reply, then)),
            _ => Err(unexpected()),
        }
    }
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.code() == Some("NOSCRIPT")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_knows_the_commands_it_calls() {
        let src = "local h = redis.pcall('hexists', KEYS[1], ARGV[1])\n\
                   if redis.call(\"PTTL\", KEYS[1]) < 5 then redis.call('pexpire', KEYS[1], 5) end\n\
                   redis.call('hexists', KEYS[1], 'x') redis.call(cmd, KEYS[1])";
        assert_eq!(calls_in(src), ["hexists", "pttl", "pexpire"]);
        static RENEW: std::sync::LazyLock<Script> =
            std::sync::LazyLock::new(|| Script::new(include_str!("../../lua/renew.lua")));
        let calls = RENEW.call().calls().to_vec();
        assert!(calls.contains(&"hexists".to_string()), "{calls:?}");
    }

    #[test]
    fn evalsha_carries_the_hash_the_key_count_keys_then_args() {
        static S: std::sync::LazyLock<Script> =
            std::sync::LazyLock::new(|| Script::new(include_str!("../../lua/acquire.lua")));
        let mut inv = S.call();
        inv.key("k1").arg(5).key("k2").arg("x");
        let packed = inv.evalsha(Dialect::Classic).get_packed_command();
        let text = String::from_utf8_lossy(&packed);
        let parts: Vec<&str> = text
            .split("\r\n")
            .filter(|p| !p.starts_with(['*', '$']))
            .collect();
        assert_eq!(
            parts[..6],
            [
                "EVALSHA",
                &*S.text(Dialect::Classic).hash,
                "2",
                "k1",
                "k2",
                "5"
            ]
        );
        assert_eq!(parts[6], "x");
        assert_eq!(inv.first_key(), Some(&b"k1"[..]));
    }

    #[test]
    fn each_dialect_puts_its_prelude_and_flags_before_the_source() {
        let source = include_str!("../../lua/renew.lua");
        let plain = Script::new(source);
        assert_eq!(
            plain.text(Dialect::Classic).source,
            format!("{CLASSIC}{source}")
        );
        assert_eq!(
            plain.text(Dialect::Sharded).source,
            format!("{SHARDED}{source}")
        );
        assert_ne!(
            plain.text(Dialect::Classic).hash,
            plain.text(Dialect::Sharded).hash
        );
        let cross = Script::cross_slot(source);
        assert_eq!(
            cross.text(Dialect::Classic).source,
            plain.text(Dialect::Classic).source
        );
        assert!(cross
            .text(Dialect::Sharded)
            .source
            .starts_with(CROSS_SLOT_FLAGS));
        assert!(cross
            .text(Dialect::Sharded)
            .source
            .ends_with(&plain.text(Dialect::Sharded).source));
    }
}
