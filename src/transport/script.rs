//! Scripts by SHA: [`Script`] (a Lua source and its SHA1) and [`Invocation`] (one call
//! with its keys and arguments), run with EVALSHA. A server that does not know the
//! script (`SCRIPT FLUSH`) answers NOSCRIPT; NOSCRIPT means the script did not run, so
//! the call is sent again, as EVAL with the source, which runs it whatever the cache
//! holds (or, if the ACL forbids EVAL, after a SCRIPT LOAD, for as long as the server
//! keeps flushing; the transport's timeout bounds that loop). Transports load every script on a new
//! connection before using it ([`load_all`]), so NOSCRIPT only follows a SCRIPT FLUSH.

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
/// prelude.
pub(crate) struct Script {
    classic: Text,
    sharded: Text,
    /// The commands the script names in `redis.call` / `redis.pcall`, lowercase: what
    /// a refusal inside it may be about (an ACL `NOPERM` from a script does not say).
    calls: Vec<String>,
}

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

    fn with_flags(source: &'static str, flags: &str) -> Self {
        Script {
            classic: Text::new(format!("{CLASSIC}{source}")),
            sharded: Text::new(format!("{flags}{SHARDED}{source}")),
            calls: calls_in(source),
        }
    }

    fn text(&self, dialect: Dialect) -> &Text {
        match dialect {
            Dialect::Classic => &self.classic,
            Dialect::Sharded => &self.sharded,
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

/// Loads `scripts` (their `dialect` text) on `conn`, after a PING, in one round trip (a
/// pipeline of SCRIPT LOAD). A refusal is the first script's error, with its code and message
/// (`NOAUTH`, `NOPERM ... 'script|load'`), not one line per script.
pub(crate) async fn load_all<C: ConnectionLike + Send>(
    conn: &mut C,
    scripts: &[&'static Script],
    dialect: Dialect,
) -> RedisResult<()> {
    if scripts.is_empty() {
        return Ok(());
    }
    // A connection that has not authenticated is refused before the scripts are sent:
    // Redis closes such a connection on a request argument over 16 KiB (batch.lua with
    // what is prepended to it is one), and its caller would see a broken pipe instead
    // of NOAUTH. Any other refusal of the PING (an ACL without it, a server that renamed
    // it) leaves the answer to the scripts' own replies, as before it was sent.
    if let Err(e) = redis::cmd("PING").query_async::<()>(conn).await {
        if e.code() == Some("NOAUTH") || e.is_io_error() {
            return Err(e);
        }
    }
    let mut pipe = redis::pipe();
    for s in scripts {
        pipe.cmd("SCRIPT").arg("LOAD").arg(&*s.text(dialect).source);
    }
    let replies: Vec<Value> = pipe.ignore_errors().query_async(conn).await?;
    match replies.into_iter().find_map(|r| match r {
        Value::ServerError(e) => Some(e),
        _ => None,
    }) {
        Some(e) => Err(e.into()),
        None => Ok(()),
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
        &self.script.calls
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

    /// Runs the call on `conn`: EVALSHA; on NOSCRIPT (the script did not run), EVAL
    /// with the source, which cannot meet NOSCRIPT however often the server flushes.
    /// A user whose ACL forbids EVAL gets SCRIPT LOAD and EVALSHA again instead, for as
    /// long as the server keeps flushing (at most [`MAX_RELOADS`] times).
    pub(crate) async fn run<C: ConnectionLike + Send>(
        &self,
        conn: &mut C,
        dialect: Dialect,
    ) -> RedisResult<Value> {
        let evalsha = self.evalsha(dialect);
        let first = evalsha.query_async::<Value>(conn).await;
        match first {
            Err(e) if is_noscript(&e) => {}
            other => return other,
        }
        match self.eval(dialect).query_async::<Value>(conn).await {
            Err(e) if e.code() == Some("NOPERM") => {}
            other => return other,
        }
        let mut reloads = 0;
        loop {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(&*self.script.text(dialect).source)
                .query_async::<()>(conn)
                .await?;
            reloads += 1;
            match evalsha.query_async::<Value>(conn).await {
                Err(e) if is_noscript(&e) && reloads < MAX_RELOADS => {}
                other => return other,
            }
        }
    }
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
    ) -> RedisResult<(Value, Value)> {
        let both = |first: redis::Cmd| {
            let mut pipe = redis::pipe();
            pipe.add_command(first)
                .add_command(then.clone())
                .ignore_errors();
            pipe
        };
        let mut replies: Vec<Value> = both(self.evalsha(dialect)).query_async(conn).await?;
        if replies
            .first()
            .is_some_and(|r| matches!(r, Value::ServerError(e) if e.code() == "NOSCRIPT"))
        {
            replies = both(self.eval(dialect)).query_async(conn).await?;
        }
        let mut replies = replies.into_iter();
        match (replies.next(), replies.next()) {
            (Some(Value::ServerError(e)), Some(_)) => Err(e.into()),
            (Some(reply), Some(then)) => Ok((reply, then)),
            _ => Err((
                redis::ErrorKind::UnexpectedReturnType,
                "a pipeline of two commands answered otherwise",
            )
                .into()),
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
            ["EVALSHA", &*S.classic.hash, "2", "k1", "k2", "5"]
        );
        assert_eq!(parts[6], "x");
        assert_eq!(inv.first_key(), Some(&b"k1"[..]));
    }

    #[test]
    fn each_dialect_puts_its_prelude_and_flags_before_the_source() {
        let source = include_str!("../../lua/renew.lua");
        let plain = Script::new(source);
        assert_eq!(plain.classic.source, format!("{CLASSIC}{source}"));
        assert_eq!(plain.sharded.source, format!("{SHARDED}{source}"));
        assert_ne!(plain.classic.hash, plain.sharded.hash);
        let cross = Script::cross_slot(source);
        assert_eq!(cross.classic.source, plain.classic.source);
        assert!(cross.sharded.source.starts_with(CROSS_SLOT_FLAGS));
        assert!(cross.sharded.source.ends_with(&plain.sharded.source));
    }
}
