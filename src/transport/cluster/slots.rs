//! Hash slots: which slot a key is in (CRC16 of its hash tag, as Redis Cluster
//! computes it) and which primary serves each slot (the map read from `CLUSTER SLOTS`).

use redis::Value;

/// Slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the bytes between the
/// first `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), bit by bit: slots are
/// computed once per request, on keys of a few dozen bytes.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// No primary serves the slot.
const NONE: u16 = u16::MAX;

/// Which primary serves each slot.
#[derive(Clone)]
pub(crate) struct SlotMap {
    /// Per slot: an index into `primaries`, or [`NONE`].
    owner: Box<[u16]>,
    /// The primaries' `host:port`.
    primaries: Vec<String>,
}

impl SlotMap {
    /// Reads a `CLUSTER SLOTS` reply; a node announcing no host (an empty string, as
    /// a node may for itself) is reached at `asked_host`, the host we asked.
    pub(crate) fn parse(reply: &Value, asked_host: &str) -> Result<SlotMap, String> {
        let Value::Array(ranges) = reply else {
            return Err(format!("CLUSTER SLOTS answered {reply:?}"));
        };
        let mut map = SlotMap {
            owner: vec![NONE; usize::from(SLOTS)].into_boxed_slice(),
            primaries: Vec::new(),
        };
        for range in ranges {
            let bad = || format!("unexpected CLUSTER SLOTS entry {range:?}");
            let Value::Array(parts) = range else {
                return Err(bad());
            };
            let (Some(Value::Int(start)), Some(Value::Int(end)), Some(Value::Array(node))) =
                (parts.first(), parts.get(1), parts.get(2))
            else {
                return Err(bad());
            };
            let host = match node.first() {
                Some(Value::BulkString(h)) if h.is_empty() || h == b"?" => asked_host.to_string(),
                Some(Value::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
                Some(Value::SimpleString(h)) => h.clone(),
                _ => return Err(bad()),
            };
            let Some(Value::Int(port)) = node.get(1) else {
                return Err(bad());
            };
            let (start, end) = (*start, *end);
            if !(0..i64::from(SLOTS)).contains(&start) || !(start..i64::from(SLOTS)).contains(&end)
            {
                return Err(bad());
            }
            let addr = format!("{host}:{port}");
            let idx = map.index_of(&addr);
            for slot in start..=end {
                map.owner[slot as usize] = idx;
            }
        }
        if map.primaries.is_empty() {
            return Err("the cluster serves no slot".into());
        }
        Ok(map)
    }

    fn index_of(&mut self, addr: &str) -> u16 {
        match self.primaries.iter().position(|p| p == addr) {
            Some(i) => i as u16,
            None => {
                self.primaries.push(addr.to_string());
                (self.primaries.len() - 1) as u16
            }
        }
    }

    /// The primary serving `slot`, if any.
    pub(crate) fn owner(&self, slot: u16) -> Option<&str> {
        let idx = *self.owner.get(usize::from(slot))?;
        self.primaries.get(usize::from(idx)).map(String::as_str)
    }

    /// The index of the primary serving `slot` (for grouping requests by node).
    pub(crate) fn owner_index(&self, slot: u16) -> usize {
        usize::from(self.owner[usize::from(slot)])
    }

    /// Records that `addr` serves `slot` now (a MOVED answer), until the next refresh.
    pub(crate) fn moved(&mut self, slot: u16, addr: &str) {
        if slot < SLOTS {
            let idx = self.index_of(addr);
            self.owner[usize::from(slot)] = idx;
        }
    }

    /// The primaries, in the order they were first seen.
    pub(crate) fn primaries(&self) -> &[String] {
        &self.primaries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0 (tests/topologies/cluster.rs checks more
        // against a live cluster).
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}")); // empty tag: whole key
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }

    #[test]
    fn a_slots_reply_maps_every_range_to_its_primary() {
        let node = |host: &str, port| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8000),
                node("10.0.0.1", 7000),
            ]),
            Value::Array(vec![Value::Int(8001), Value::Int(16383), node("", 7001)]),
        ]);
        let mut map = SlotMap::parse(&reply, "127.0.0.1").unwrap();
        assert_eq!(map.owner(0), Some("10.0.0.1:7000"));
        assert_eq!(map.owner(8000), Some("10.0.0.1:7000"));
        assert_eq!(map.owner(8001), Some("127.0.0.1:7001"));
        map.moved(5, "127.0.0.1:7001");
        assert_eq!(map.owner(5), Some("127.0.0.1:7001"));
        assert_eq!(map.primaries().len(), 2);
        assert!(SlotMap::parse(&Value::Array(vec![]), "h").is_err());
        assert!(SlotMap::parse(&Value::Int(1), "h").is_err());
    }

    #[test]
    fn an_unserved_slot_has_no_owner() {
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Int(0),
            Value::Int(10),
            Value::Array(vec![Value::BulkString(b"h".to_vec()), Value::Int(1)]),
        ])]);
        let map = SlotMap::parse(&reply, "h").unwrap();
        assert_eq!(map.owner(10), Some("h:1"));
        assert_eq!(map.owner(11), None);
    }
}
