//! Writes guarded by a lock (docs/election.md, "Writes guarded by the lock"): a write
//! that Redis applies only while the guard's holder holds the lock, and (with a fencing
//! token) no later token has written (lua/guarded_check.lua), in one script in the
//! lock's hash slot.
//!
//! Invariants:
//! 1. Every key is in the lock's hash slot (same hash tag, or the lock's own name as
//!    the tag), checked before anything is sent: on a cluster the script could not run
//!    elsewhere, and everywhere else the write stays movable with the lock.
//! 2. The check and the write are one script: nothing can take the lock between them.
//! 3. A user's script is wrapped once per distinct source and kept for the process's
//!    life (the transport runs scripts by SHA from a `&'static` source): make a
//!    [`GuardedScript`](crate::GuardedScript) once and reuse it.
//! 4. One master only: under Redlock the data would be written on one master while
//!    the lock is held on a majority, and no one master can check it for the others.
//!
//! The API calls these through the guard's [`Held`]: [`Held::guarded_write`],
//! [`Held::guarded_script`].

use std::collections::HashMap;
use std::sync::LazyLock;

use redis::{FromRedisValue, Value};

use crate::engine::holding::held::Held;
use crate::engine::masters::master::Master;
use crate::engine::masters::replies::typed;
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Lane, Script};

static WRITE: LazyLock<Script> = lua!("guarded_check.lua", "guarded_write.lua");

/// This file's fixed script, for the catalogue (facade/catalogue.rs); a user's guarded script
/// is loaded on its first call.
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 1] {
    [&WRITE]
}

const CHECK: &str = include_str!("../../../lua/guarded_check.lua");
const HEAD: &str = include_str!("../../../lua/guarded_script_head.lua");
const TAIL: &str = include_str!("../../../lua/guarded_script_tail.lua");

/// The error code guarded_check.lua refuses with.
const NOT_HELD: &str = "REDLATCH_NOT_HELD";

/// The fence of lock `name`: the greatest token a guarded write was applied with.
pub(crate) fn fence_key(name: &str) -> String {
    keys::derived("redlatch_fence", name)
}

/// The part of a key Redis Cluster hashes: the first non-empty `{tag}`, else the key.
pub(crate) fn hash_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// Invariant 1: every key hashes like the lock `name`.
pub(crate) fn check_keys<'a>(name: &str, keys: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let tag = hash_part(name.as_bytes());
    for key in keys {
        if hash_part(key.as_bytes()) != tag {
            let tag = String::from_utf8_lossy(tag);
            return Err(Error::Unsupported {
                what: format!("a write to key {key:?} guarded by lock {name:?}"),
                reason: format!(
                    "the key is not in the lock's hash slot; give it the lock's hash tag \
                     (\"{{{tag}}}:...\"), and the lock one too if it has none"
                ),
            });
        }
    }
    Ok(())
}

/// One guarded write: `op` and its `args` on `keys` (lua/guarded_write.lua).
struct Write<'a> {
    op: &'static str,
    keys: Vec<String>,
    args: &'a [Vec<u8>],
}

/// A user's Lua script wrapped to run guarded (invariant 3), as the API keeps it.
#[derive(Clone, Copy)]
pub(crate) struct Wrapped(&'static Script);

impl Held {
    /// Runs `op` with `args` on `keys` if this guard still holds its lock (and, with a
    /// fencing token, no later token has written): invariants 1, 2 and 4.
    pub(crate) async fn guarded_write(
        &self,
        op: &'static str,
        keys: Vec<String>,
        args: &[Vec<u8>],
    ) -> Result<Value> {
        let m = only_master(self)?;
        let write = Write { op, keys, args };
        (self::write(m, self.name(), self.holder(), self.token(), write)).await
    }

    /// Runs the user's wrapped `script` with `keys` and `args` if this guard still
    /// holds its lock, as [`guarded_write`](Self::guarded_write).
    pub(crate) async fn guarded_script(
        &self,
        script: Wrapped,
        keys: &[String],
        args: &[Vec<u8>],
    ) -> Result<Value> {
        let m = only_master(self)?;
        let (name, holder, token) = (self.name(), self.holder(), self.token());
        self::script(m, name, holder, token, script.0, keys, args).await
    }

    /// Decodes the reply of a guarded write; a mismatch is a protocol error naming
    /// the master.
    pub(crate) fn decode<T: FromRedisValue>(&self, v: Value) -> Result<T> {
        self.engine().masters[0].decode(v)
    }
}

/// The only master, where `held`'s guarded writes go (invariant 4).
fn only_master(held: &Held) -> Result<&Master> {
    match held.engine().masters.as_slice() {
        [only] => Ok(only),
        masters => Err(Error::Unsupported {
            what: format!(
                "a write guarded by lock {:?} over {} Redlock masters",
                held.name(),
                masters.len()
            ),
            reason: "the data would be written on one master while the lock is held on a \
                     majority; no one master can check the lock for the others"
                .into(),
        }),
    }
}

/// Runs `write` if `holder` (with `token`) still holds lock `name` on `m`.
async fn write(
    m: &Master,
    name: &str,
    holder: &str,
    token: Option<u64>,
    write: Write<'_>,
) -> Result<Value> {
    check_keys(name, write.keys.iter().map(String::as_str))?;
    let mut inv = WRITE.call();
    inv.key(name).key(fence_key(name));
    for k in &write.keys {
        inv.key(k);
    }
    inv.arg(holder)
        .arg(token.map(|t| t.to_string()).unwrap_or_default())
        .arg(write.op);
    for a in write.args {
        inv.arg(a.as_slice());
    }
    let v = m.eval(Lane::Lock, &inv).await;
    refused(name, holder, v)
}

/// The wrapped script for a user's `body`, made once per distinct source (invariant 3).
pub(crate) fn wrapped(body: &str) -> Wrapped {
    static CACHE: LazyLock<parking_lot::Mutex<HashMap<String, &'static Script>>> =
        LazyLock::new(Default::default);
    let mut cache = CACHE.lock();
    if let Some(s) = cache.get(body) {
        return Wrapped(s);
    }
    let source: &'static str = Box::leak(format!("{CHECK}{HEAD}{body}{TAIL}").into_boxed_str());
    let script: &'static Script = Box::leak(Box::new(Script::new(source)));
    cache.insert(body.to_string(), script);
    Wrapped(script)
}

/// Runs a user's wrapped `script` with `keys` and `args` if `holder` still holds `name`.
async fn script(
    m: &Master,
    name: &str,
    holder: &str,
    token: Option<u64>,
    script: &'static Script,
    keys: &[String],
    args: &[Vec<u8>],
) -> Result<Value> {
    check_keys(name, keys.iter().map(String::as_str))?;
    let mut inv = script.call();
    inv.key(name).key(fence_key(name));
    for k in keys {
        inv.key(k);
    }
    inv.arg(holder)
        .arg(token.map(|t| t.to_string()).unwrap_or_default());
    for a in args {
        inv.arg(a.as_slice());
    }
    let v = m.eval(Lane::Lock, &inv).await;
    refused(name, holder, v)
}

/// The refusal of guarded_check.lua as [`Error::NotHeld`]; other errors typed.
fn refused(name: &str, holder: &str, v: Result<Value>) -> Result<Value> {
    match v {
        Err(Error::Redis { source, .. }) if source.code() == Some(NOT_HELD) => {
            tracing::debug!(
                lock = name,
                holder,
                detail = source.detail().unwrap_or_default(),
                "guarded write refused"
            );
            Err(Error::NotHeld {
                name: name.to_string(),
                holder: holder.to_string(),
            })
        }
        Err(e) => Err(typed(name, e)),
        Ok(v) => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_hash_like_the_lock() {
        assert_eq!(hash_part(b"{orders}:42"), b"orders");
        assert_eq!(hash_part(b"orders:42"), b"orders:42");
        assert_eq!(hash_part(b"a{}b{c}"), b"a{}b{c}");
        assert!(check_keys("orders:42", ["{orders:42}:state", "x{orders:42}"]).is_ok());
        assert!(check_keys("{orders}:42", ["{orders}:total"]).is_ok());
        let err = check_keys("{orders}:42", ["{orders}:ok", "other"]).unwrap_err();
        assert!(
            matches!(&err, Error::Unsupported { what, reason }
                if what.contains("\"other\"") && reason.contains("{orders}")),
            "{err:?}"
        );
        assert!(err.is_permanent());
    }
}
