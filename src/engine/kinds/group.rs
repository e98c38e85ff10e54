//! The faster multi-lock (Redisson `RedissonFasterMultiLock`, `getMultiLock(group,
//! values)`, `lua/group_*.lua`): many values locked under one hash, the group, in one
//! script, all or none. Each value is a field named by its digest ([`field`]); the
//! field holds the holder id, and two sub-fields per holder hold the hold's expiry (an
//! epoch time in ms: our scripts read the server's clock, Redisson's client passes its
//! own) and its reentrant count. A release that frees a value publishes `"0"` on the
//! group's lock channel (`keys::channel(group)`), where Redisson's waiters and ours
//! listen.
//!
//! The engine knows a hold of this kind by a composite name, [`composite`]: the group,
//! `#`, the sorted digests joined by `,`. It is never a Redis key: every call here
//! parses it back ([`parts`]) and sends the group as the key and the digests as
//! arguments, so the generic waiter, the hold table, the Redlock fan-out and lost holds
//! work unchanged, and two value sets of one group are two holds.

use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use futures_util::future::join_all;
use highway::{HighwayHash, HighwayHasher, Key};

use crate::engine::kinds::inspect::State;
use crate::engine::kinds::listed::{self, Holder, Listed, ListedKind};
use crate::engine::kinds::{read_release, AcquireParams, Protocol, Renewal, ScriptOrBatch};
use crate::engine::masters::master::Master;
use crate::engine::masters::plain_ops::Waiting;
use crate::engine::masters::replies::{read_acquire, typed, unreplicated, Acquire, Release};
use crate::error::Result;
use crate::keys;
use crate::transport::script::lua;
use crate::transport::{Invocation, Lane, Script};

static ACQUIRE: LazyLock<Script> = lua!("group_common.lua", "group_acquire.lua");
static RELEASE: LazyLock<Script> = lua!("group_common.lua", "group_release.lua");
static RENEW: LazyLock<Script> = lua!("group_common.lua", "group_renew.lua");
static DROP: LazyLock<Script> = lua!("group_common.lua", "group_drop.lua");
static FORCE: LazyLock<Script> = lua!("group_common.lua", "group_force.lua");
static STATUS: LazyLock<Script> = lua!("group_common.lua", "group_status.lua");

/// These scripts, for the catalogue (facade/catalogue.rs).
#[cfg(test)]
pub(crate) fn scripts() -> [&'static LazyLock<Script>; 6] {
    [&ACQUIRE, &RELEASE, &RENEW, &DROP, &FORCE, &STATUS]
}

/// Redisson's hash key (`org.redisson.misc.Hash`): HighwayHash with these four words.
const HASH_KEY: [u64; 4] = [
    0x9e37_79b9_7f4a_7c15,
    0xf39c_c060_5ced_c834,
    0x1082_276b_f3a2_7251,
    0xf86c_6a11_d0c1_8e95,
];

/// The field of a value in the group hash, as Redisson names it: the 128-bit
/// HighwayHash of the value's encoded bytes (its two 64-bit halves big-endian), in
/// standard base64 without the trailing `==` (22 characters). Redisson encodes a value
/// with the client's codec first: a Java client whose codec is `StringCodec` sends a
/// string's UTF-8 bytes, which is what a `&str` value is here.
pub(crate) fn field(value: &[u8]) -> String {
    let [a, b] = HighwayHasher::new(Key(HASH_KEY)).hash128(value);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_be_bytes());
    bytes[8..].copy_from_slice(&b.to_be_bytes());
    base64_unpadded(&bytes)
}

/// Standard base64 (`A–Z a–z 0–9 + /`) of 16 bytes, without the `==` padding.
fn base64_unpadded(bytes: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - chunk.len()));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The engine's name of a hold on `fields` (distinct) of `group`: `group#f1,f2,…`, the
/// fields sorted. Digests never contain `#`, so [`parts`] splits at the last one.
pub(crate) fn composite(group: &str, fields: &[String]) -> String {
    let mut sorted: Vec<&str> = fields.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    format!("{group}#{}", sorted.join(","))
}

/// The group and the fields of a [`composite`] name.
pub(crate) fn parts(name: &str) -> (&str, impl Iterator<Item = &str> + '_) {
    let (group, fields) = name.rsplit_once('#').unwrap_or((name, ""));
    (group, fields.split(',').filter(|f| !f.is_empty()))
}

/// A call of `script` on the group of `name`: `KEYS[1]` the group (and `KEYS[2]` its
/// channel when `channel`).
fn call<'a>(script: &'static Script, name: &'a str, channel: bool) -> (Invocation, &'a str) {
    let (group, _) = parts(name);
    let mut inv = script.call();
    inv.key(group);
    if channel {
        inv.key(keys::channel(group));
    }
    (inv, group)
}

fn add_fields(inv: &mut Invocation, name: &str) {
    for f in parts(name).1 {
        inv.arg(f);
    }
}

/// Redisson `RedissonFasterMultiLock`.
pub(crate) struct Group;

/// The suffix of a group's expiry fields (`<value>:<holder>:expire_time`,
/// lua/group_common.lua).
pub(crate) const EXPIRY: &str = ":expire_time";

/// A faster multi-lock's listing: one hash of many values, with expiry fields.
pub(crate) static LISTED: Listed = Listed {
    kind: ListedKind::FasterMulti,
    name: "faster_multi",
    is: |st, _| st.key_type == "hash" && st.holders.iter().any(|(f, _)| f.ends_with(EXPIRY)),
    part: listed::no_part,
    channels: listed::key_channel,
    holders: group_holders,
    queued: false,
};

/// A faster multi-lock's holders: `<value>:<holder>:expire_time` fields whose time has
/// not passed (by this machine's clock), counted per holder, with their latest expiry.
fn group_holders(st: &State) -> Vec<Holder<'_>> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    let now = now.map_or(0, |d: Duration| d.as_millis() as i64);
    let mut out: Vec<Holder<'_>> = Vec::new();
    for (field, until) in &st.holders {
        let Some(entry) = field.strip_suffix(EXPIRY) else {
            continue;
        };
        // A value's field is a 22-character digest, with no ':'.
        let Some((_, holder)) = entry.split_once(':') else {
            continue;
        };
        if (*until as i64) < now {
            continue;
        }
        match out.iter_mut().find(|(h, _, _)| *h == holder) {
            Some((_, n, at)) => {
                *n += 1;
                *at = (*at).max(Some(*until as i64));
            }
            None => out.push((holder, 1, Some(*until as i64))),
        }
    }
    out
}

impl Protocol for Group {
    fn label(&self) -> &'static str {
        "group"
    }

    fn listed(&self) -> &'static Listed {
        &LISTED
    }

    /// The group's lock channel (Redisson's `redisson_lock__channel:{group}`).
    fn channel(&self, name: &str) -> String {
        keys::channel(parts(name).0)
    }

    fn acquire(
        &self,
        name: &Arc<str>,
        lease_ms: u64,
        holder: &Arc<str>,
        _ask: &AcquireParams,
        _waiting: Option<Waiting>,
    ) -> ScriptOrBatch<Acquire> {
        let (mut inv, _) = call(&ACQUIRE, name, false);
        inv.arg(lease_ms).arg(&**holder);
        add_fields(&mut inv, name);
        ScriptOrBatch::Script(inv, |addr, name, v| read_acquire(addr, parts(name).0, v))
    }

    fn release(&self, name: &Arc<str>, lease_ms: u64, holder: &Arc<str>) -> ScriptOrBatch<Release> {
        let (mut inv, _) = call(&RELEASE, name, true);
        inv.arg(lease_ms).arg(&**holder);
        add_fields(&mut inv, name);
        ScriptOrBatch::Script(inv, read_release)
    }

    fn drop_lost(&self, name: &str, holder: &str) -> Invocation {
        let (mut inv, _) = call(&DROP, name, true);
        inv.arg(holder);
        add_fields(&mut inv, name);
        inv
    }

    /// The group.
    fn key<'a>(&self, name: &'a str) -> &'a str {
        parts(name).0
    }

    /// One call per hold (its values travel as arguments).
    fn renewal(&self) -> Renewal {
        Renewal::Group
    }

    /// Force-unlocks the values whoever holds them: answers how many had a holder.
    /// Holds of other value sets that shared a value are found lost by their next
    /// renewal (group_renew.lua answers 0).
    fn force_release(&self, name: &str, _notice: Option<&str>) -> Invocation {
        let (mut inv, _) = call(&FORCE, name, true);
        add_fields(&mut inv, name);
        inv
    }
}

/// Renews `(composite name, holder)` holds to `lease_ms`: one call each (a group's
/// values travel as arguments); true = still held and renewed.
pub(crate) async fn renew(
    m: &Master,
    holds: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Vec<Result<bool>> {
    join_all(holds.iter().map(|&(name, holder)| async move {
        let (mut inv, group) = call(&RENEW, name, false);
        inv.arg(lease_ms).arg(holder);
        add_fields(&mut inv, name);
        let (v, short) = m
            .eval_renewal(timeout, &inv)
            .await
            .map_err(|e| typed(group, e))?;
        unreplicated(m.decode::<i64>(v)? == 1, &short)
    }))
    .await
}

/// What [`status`] reads of a group's values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// Some value has a live holder.
    pub(crate) locked: bool,
    /// The holder asked about holds every value.
    pub(crate) held: bool,
    /// Its smallest reentrant count over the values (0 unless held).
    pub(crate) count: u32,
    /// The least time left of its entries (unless held: `None`).
    pub(crate) left: Option<Duration>,
}

/// Reads the values of `name` as `holder` (`""`: nobody) sees them.
pub(crate) async fn status(m: &Master, name: &str, holder: &str) -> Result<Status> {
    let (mut inv, group) = call(&STATUS, name, false);
    inv.arg(holder);
    add_fields(&mut inv, name);
    let v = m
        .eval(Lane::Lock, &inv)
        .await
        .map_err(|e| typed(group, e))?;
    let (locked, held, count, ms): (i64, i64, i64, i64) = m.decode(v)?;
    if locked == crate::engine::masters::replies::WRONG_TYPE {
        return Err(crate::engine::masters::replies::wrong_type(m.addr(), group));
    }
    Ok(Status {
        locked: locked == 1,
        held: held == 1,
        count: count.clamp(0, i64::from(u32::MAX)) as u32,
        left: (ms >= 0).then(|| Duration::from_millis(ms as u64)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet_without_padding() {
        // 16 bytes: 0x00..0x0f; standard base64 "AAECAwQFBgcICQoLDA0ODw==".
        let bytes: [u8; 16] = std::array::from_fn(|i| i as u8);
        assert_eq!(base64_unpadded(&bytes), "AAECAwQFBgcICQoLDA0ODw");
        assert_eq!(base64_unpadded(&[0xff; 16]), "/////////////////////w");
    }

    #[test]
    fn composite_names_part_back_whatever_the_group() {
        let fields = vec!["b1".to_string(), "a2".to_string()];
        let name = composite("g#x{t}", &fields);
        assert_eq!(name, "g#x{t}#a2,b1");
        let (group, f) = parts(&name);
        assert_eq!(group, "g#x{t}");
        assert_eq!(f.collect::<Vec<_>>(), ["a2", "b1"]);
    }

    /// The fields Redisson 4.7.0 (StringCodec) wrote for `getMultiLock("class_100",
    /// ["Jack_001", "Mary_002", "", "ü"])`, read back with HGETALL: a fixture for
    /// machines without a JVM (tests/redisson/redisson_jvm_group.rs checks it live).
    #[test]
    fn fields_are_redissons_digests() {
        assert_eq!(field(b"Jack_001"), "7pNoDdizVy2xY792MaFv+w");
        let mut ours: Vec<String> = [&b"Jack_001"[..], b"Mary_002", b"", "ü".as_bytes()]
            .iter()
            .map(|v| field(v))
            .collect();
        ours.sort();
        let mut redisson = [
            "P7PdxrBodUMmW7+paeu1Ew",
            "kIX2DFOX4IWct7G7K6tV9A",
            "7pNoDdizVy2xY792MaFv+w",
            "t6rZwibGo2uy1OSmNVe8pg",
        ];
        redisson.sort();
        assert_eq!(ours, redisson);
    }

    #[test]
    fn fields_are_22_characters_and_differ_per_value() {
        let (a, b) = (field(b"a"), field(b"b"));
        assert_eq!(a.len(), 22);
        assert_ne!(a, b);
        assert_eq!(a, field(b"a"));
        assert!(!a.contains('#') && !a.contains(','));
    }
}
