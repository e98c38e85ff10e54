//! Inspection for operators (`Lock::status`, `redlatch status`): what one master holds
//! under a name. A name may carry any kind's layout (a plain lock's hash, a fair
//! queue, a fencing counter, a read-write lock's mode, a counter, expirable permits),
//! so an inspection reads them all in one pipeline: each kind's file declares its
//! part, a [`Section`] (the reads of its layout and what they say), and
//! [`SECTIONS`](super::SECTIONS) (kinds/mod.rs) lists them.

use std::time::Duration;

use redis::Value;

/// What one master holds under a name, as every kind's layout reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct State {
    /// Redis type of the key (`none` when absent).
    pub(crate) key_type: String,
    /// Holder ids with their hold counts.
    pub(crate) holders: Vec<(String, u64)>,
    /// Time left on the key; `None` when absent or without expiry.
    pub(crate) ttl: Option<Duration>,
    /// Fair-lock waiters in queue order, with their deadline in ms since the epoch.
    pub(crate) queue: Vec<(String, Option<i64>)>,
    /// The fencing counter, if any.
    pub(crate) fencing_counter: Option<u64>,
    /// A read-write lock's mode.
    pub(crate) mode: Option<String>,
    /// The value of a string key (a semaphore's permits, a latch's count).
    pub(crate) counter: Option<i64>,
    /// Expirable permits (id in hex) with their expiry in ms since the epoch.
    pub(crate) permits: Vec<(String, Option<i64>)>,
    /// Waiting writers and when their intent lapses, in ms since the epoch.
    pub(crate) writers_waiting: Vec<(String, Option<i64>)>,
}

/// One kind's part of an inspection, described: its reads of `name`'s layout (added
/// to the pipeline, `replies` of them) and how their replies, in order, fill the state.
pub(crate) struct Section {
    pub(crate) reads: fn(&str, &mut redis::Pipeline),
    pub(crate) replies: usize,
    pub(crate) read: fn(&[Value], &mut State),
}

/// The pipeline that inspects `name`, `sections` in order (a key of another type
/// fails the reads of a type it is not; TYPE still says what it is).
pub(crate) fn pipeline(sections: &[&Section], name: &str) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for section in sections {
        (section.reads)(name, &mut pipe);
    }
    pipe
}

/// The state the replies of `sections`' pipeline say; an error if the reply is not
/// one per read.
pub(crate) fn read(sections: &[&Section], replies: &[Value]) -> Result<State, String> {
    let expected: usize = sections.iter().map(|s| s.replies).sum();
    if replies.len() != expected {
        return Err(format!("unexpected reply of {} items", replies.len()));
    }
    let mut state = State::default();
    let mut at = 0;
    for section in sections {
        (section.read)(&replies[at..at + section.replies], &mut state);
        at += section.replies;
    }
    Ok(state)
}

/// A PTTL as the lease left: `None` for a missing key (-2) or one without expiry (-1).
/// 0 is a lease in its last millisecond (Redis drops a key once its millisecond clock
/// passes the expiry), still held: `Some(ZERO)`.
pub(crate) fn lease_left(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// A ZRANGE ... WITHSCORES of `key` as one read.
pub(crate) fn scores(pipe: &mut redis::Pipeline, key: String) {
    pipe.cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES");
}

/// A ZRANGE WITHSCORES reply as (member, score) pairs, members read by `member`.
pub(crate) fn scored(v: &Value, member: fn(&Value) -> Option<String>) -> Vec<(String, i64)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((member(&p[0])?, int(p.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(k, s)| Some((member(k)?, int(s)?)))
            .collect(),
        _ => vec![],
    }
}

/// A binary member (a permit id) in hex.
pub(crate) fn hex(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
        _ => None,
    }
}

/// A reply as text.
pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

/// A reply as a number (an integer, a double, or their text).
pub(crate) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Double(d) => Some(*d as i64),
        other => text(other)
            .and_then(|s| s.parse::<f64>().ok())
            .map(|f| f as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::kinds::SECTIONS;

    /// The state of a hash whose key reads PTTL `pttl`.
    fn with_pttl(pttl: i64) -> State {
        let replies = SECTIONS.iter().map(|s| s.replies).sum();
        let mut reply = vec![Value::Nil; replies];
        reply[0] = Value::SimpleString("hash".into());
        reply[1] = Value::Int(pttl);
        read(&SECTIONS, &reply).expect("one reply per read")
    }

    /// A PTTL of 0 is a lease in its last millisecond (Redis keeps the key until its
    /// millisecond clock has passed the expiry), not a key without expiry.
    #[test]
    fn a_lease_in_its_last_millisecond_has_a_ttl_of_zero() {
        assert_eq!(with_pttl(1500).ttl, Some(Duration::from_millis(1500)));
        assert_eq!(with_pttl(0).ttl, Some(Duration::ZERO));
        assert_eq!(with_pttl(-1).ttl, None, "no expiry");
        assert_eq!(with_pttl(-2).ttl, None, "no key");
    }

    /// A reply that is not one per read is said so, not read out of place.
    #[test]
    fn a_reply_of_the_wrong_length_is_an_error() {
        assert_eq!(
            read(&SECTIONS, &[const { Value::Nil }; 3]).unwrap_err(),
            "unexpected reply of 3 items"
        );
    }
}
