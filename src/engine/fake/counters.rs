//! The fake server's model of the counters' scripts (the semaphore's lua/sem_*.lua,
//! the latch's lua/latch_*.lua), following each script's header (KEYS, ARGV,
//! replies): a counter is a number at its name, with an optional time to live.

use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use crate::engine::fake::State;
use crate::engine::kinds::latch::{LATCH_COUNT_DOWN, LATCH_SET};
use crate::engine::kinds::semaphore::{SEM_ACQUIRE, SEM_DRAIN, SEM_RELEASE, SEM_SET};
use crate::error::Result;
use crate::transport::Script;

/// Runs `script` if it is one of the counters'; `None` otherwise.
pub(super) fn run(
    s: &mut State,
    script: &'static Script,
    keys: &[String],
    args: &[String],
) -> Option<Result<Value>> {
    let is = |other: &'static std::sync::LazyLock<Script>| std::ptr::eq(script, &**other);
    let int = |i: usize| args[i].parse::<i64>().expect("a number");
    let name = keys.first()?.as_str();
    let reply = if is(&SEM_ACQUIRE) {
        s.log("sem_acquire.lua");
        match s.counter(name) {
            Some(n) if n >= int(0) => {
                s.incr_counter(name, -int(0));
                Value::Int(1)
            }
            _ => Value::Int(0),
        }
    } else if is(&SEM_RELEASE) {
        s.log("sem_release.lua");
        if args[1] == "exists" && s.counter(name).is_none() {
            return Some(Ok(Value::Nil));
        }
        let value = s.counter(name).unwrap_or(0) + int(0);
        s.incr_counter(name, int(0));
        s.publish(&keys[1], &value.to_string());
        Value::Int(value)
    } else if is(&SEM_SET) {
        s.log("sem_set.lua");
        let value = s.counter(name);
        if args[0] == "try" && value.is_some() {
            return Some(Ok(Value::Int(0)));
        }
        let new = match args[0].as_str() {
            "add" => value.unwrap_or(0) + int(1),
            _ => int(1),
        };
        let ttl = (args[0] == "try" && args.len() > 2).then(|| int(2) as u64);
        s.set_counter(name, new, ttl);
        s.publish(&keys[1], &new.to_string());
        Value::Int(1)
    } else if is(&SEM_DRAIN) {
        s.log("sem_drain.lua");
        match s.counter(name) {
            None => Value::Int(0),
            Some(n) => {
                s.set_counter(name, 0, None);
                Value::Int(n)
            }
        }
    } else if is(&LATCH_SET) {
        s.log("latch_set.lua");
        if s.counter(name).is_some() {
            return Some(Ok(Value::Int(0)));
        }
        s.set_counter(name, int(1), None);
        s.publish(&keys[1], &args[0]);
        Value::Int(1)
    } else if is(&LATCH_COUNT_DOWN) {
        s.log("latch_count_down.lua");
        let left = s.counter(name).unwrap_or(0) - 1;
        if left <= 0 {
            s.counters.remove(name);
        } else {
            s.incr_counter(name, -1);
        }
        if left == 0 {
            s.publish(&keys[1], &args[0]);
        }
        Value::Int(left.max(0))
    } else {
        return None;
    };
    Some(Ok(reply))
}

impl State {
    /// GET of a counter.
    pub(super) fn counter(&self, name: &str) -> Option<i64> {
        self.counters.get(name).map(|c| c.0)
    }

    /// SET (with PX `ttl_ms`, else without expiry).
    fn set_counter(&mut self, name: &str, n: i64, ttl_ms: Option<u64>) {
        let expires = ttl_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        self.counters.insert(name.to_string(), (n, expires));
    }

    /// INCRBY: keeps a time to live, creates a missing counter at 0 first.
    fn incr_counter(&mut self, name: &str, by: i64) {
        self.counters.entry(name.to_string()).or_insert((0, None)).0 += by;
    }
}
