//! The fake server's model of the plain lock's scripts, one function per script,
//! following each script's header in `lua/` (KEYS, ARGV, replies); the semaphore's
//! are in counters.rs.

use redis::Value;

use crate::engine::fake::{counters, State};
use crate::engine::kinds::plain as scripts;
use crate::engine::kinds::renew;
use crate::error::Result;
use crate::transport::Invocation;

/// Runs `inv` against `s` (atomically: the caller holds the state's lock).
pub(super) fn run(s: &mut State, inv: &Invocation, now_ms: u64) -> Result<Value> {
    let (script, keys, args) = inv.parts();
    let text = |v: &Vec<u8>| String::from_utf8_lossy(v).into_owned();
    let keys: Vec<String> = keys.iter().map(text).collect();
    let args: Vec<String> = args.iter().map(text).collect();
    let is = |other: &'static std::sync::LazyLock<crate::transport::Script>| {
        std::ptr::eq(script, &**other)
    };
    if let Some(reply) = counters::run(s, script, &keys, &args) {
        return reply;
    }
    let int = |i: usize| args[i].parse::<u64>().expect("a number");
    if is(&scripts::ACQUIRE) {
        s.log("acquire.lua");
        let waiting = keys.get(1).zip(args.get(2));
        let (status, value) = acquire(s, &keys[0], int(0), &args[1], waiting, now_ms);
        return Ok(Value::BulkString(format!("{status} {value}").into_bytes()));
    }
    if is(&scripts::RELEASE) {
        s.log("release.lua");
        let to = args.get(4).map(|to| (to.as_str(), int(5), args.get(6)));
        let reply = release(s, (&keys[0], &keys[1], &args[0]), int(2), &args[3], to);
        return Ok(reply.map_or(Value::Nil, Value::Int));
    }
    if is(&scripts::BATCH) {
        s.log("batch.lua");
        return Ok(batch(s, &keys, &args, now_ms));
    }
    if is(&scripts::UNWAIT) {
        s.log("unwait.lua");
        return Ok(Value::Int(unwait(
            s, &keys[0], &keys[1], &args[0], &args[1],
        )));
    }
    if is(&scripts::FORCE) {
        s.log("force_release.lua");
        let deleted = s.exists(&keys[0]);
        if deleted {
            s.del(&keys[0]);
            s.pass_on(&keys[0], &keys[1], &args[0]);
        }
        return Ok(Value::Int(deleted.into()));
    }
    if is(&renew::RENEW) {
        s.log("renew.lua");
        let lease = int(0);
        let held = (args[1..].chunks(2))
            .map(|p| {
                let held = s.hget(&p[0], &p[1]).is_some();
                if held {
                    s.pexpire(&p[0], lease);
                }
                Value::Int(held.into())
            })
            .collect();
        return Ok(Value::Array(held));
    }
    panic!(
        "the fake server does not model this script ({:?})",
        inv.calls()
    );
}

/// batch.lua: each operation as acquire.lua or release.lua alone, in order.
fn batch(s: &mut State, keys: &[String], args: &[String], now_ms: u64) -> Value {
    // ARGV: the codes, the common lease or "", then per operation [lease,] holder,
    // channel or ticket.
    let (codes, common) = (args[0].as_bytes(), &args[1]);
    let stride = if common.is_empty() { 3 } else { 2 };
    let mut out = Vec::new();
    for (i, op) in args[2..].chunks(stride).enumerate() {
        let (name, waiters) = (&keys[2 * i], &keys[2 * i + 1]);
        let lease = (if stride == 3 { &op[0] } else { common })
            .parse::<u64>()
            .expect("a lease");
        let (holder, extra) = (&op[stride - 2], &op[stride - 1]);
        let (status, value) = if codes[i] != b'r' {
            // "A" (a ticket no attempt carried before) is modelled as "a": the
            // fake's acquire removes a ticket only if it is there.
            let waiting = (!extra.is_empty()).then_some((waiters, extra));
            acquire(s, name, lease, holder, waiting, now_ms)
        } else {
            match release(s, (name, waiters, extra), lease, holder, None) {
                None => (-1, 0),
                Some(r) => (r, 0),
            }
        };
        out.push(format!("{status} {value}"));
    }
    Value::BulkString(out.join(" ").into_bytes())
}

/// acquire.lua (and batch.lua's "a"): (status, value).
fn acquire(
    s: &mut State,
    name: &str,
    lease: u64,
    holder: &str,
    waiting: Option<(&String, &String)>,
    now_ms: u64,
) -> (i64, i64) {
    if !s.exists(name) {
        s.hincrby(name, holder, 1);
        s.pexpire(name, lease);
        if let Some((waiters, ticket)) = waiting {
            s.zrem(waiters, ticket);
        }
        return (1, 1);
    }
    if s.hget(name, holder).is_some() {
        if let Some((waiters, _)) = waiting.filter(|(w, t)| s.handed_is(w, t)) {
            s.del_handed(waiters);
            s.pexpire(name, lease);
            return (1, 1);
        }
        let count = s.hincrby(name, holder, 1);
        if s.pttl(name) < lease as i64 {
            s.pexpire(name, lease);
        }
        if let Some((waiters, ticket)) = waiting {
            s.zrem(waiters, ticket);
        }
        return (2, count);
    }
    let pttl = s.pttl(name);
    if let Some((waiters, ticket)) = waiting {
        s.zadd_nx(waiters, now_ms, ticket);
    }
    (0, pttl)
}

/// release.lua (and batch.lua's "r"): `None` not held, 0 still held, 1 released and
/// passed on, 2 handed to `to` (holder, lease, ticket).
fn release(
    s: &mut State,
    (name, waiters, channel): (&str, &str, &str),
    lease: u64,
    holder: &str,
    to: Option<(&str, u64, Option<&String>)>,
) -> Option<i64> {
    let held = s.hget(name, holder)?;
    if held > 1 {
        s.hincrby(name, holder, -1);
        if s.pttl(name) < lease as i64 {
            s.pexpire(name, lease);
        }
        return Some(0);
    }
    s.del(name);
    if let Some((to, to_lease, ticket)) = to.filter(|_| s.numsub(channel) <= 1) {
        s.hincrby(name, to, 1);
        s.pexpire(name, to_lease);
        if let Some(ticket) = ticket {
            s.zrem(waiters, ticket);
        }
        return Some(2);
    }
    s.pass_on(name, waiters, channel);
    Some(1)
}

/// unwait.lua: 1 if the lock is free now (and was passed on).
fn unwait(s: &mut State, name: &str, waiters: &str, channel: &str, ticket: &str) -> i64 {
    s.zrem(waiters, ticket);
    if s.handed_is(waiters, ticket) {
        s.del_handed(waiters);
        let holder = ticket.splitn(3, ':').take(2).collect::<Vec<_>>().join(":");
        match s.hget(name, &holder) {
            Some(n) if n > 1 => {
                s.hincrby(name, &holder, -1);
            }
            Some(_) => s.del(name),
            None => {}
        }
    }
    if !s.exists(name) {
        s.pass_on(name, waiters, channel);
        return 1;
    }
    0
}
