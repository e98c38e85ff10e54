//! Naming a holder that is not redlatch's by the value it wrote: the token formats of
//! the clients that take the simple lock's `SET NX PX` key (and of ShedLock, whose job
//! lock is the same kind of key), for `status` when a holder has no client record.
//!
//! | client | its value |
//! |---|---|
//! | ShedLock (`RedisLockProvider`) | `ADDED:<ISO-8601 instant>@<hostname>`, and `:<UUID>` after it in its safe-update mode |
//! | go-redsync v4 | 16 random bytes, base64 (standard alphabet, padded): 24 characters ending in `==` |
//! | redis-py `Lock` | `uuid.uuid1().hex`: 32 lowercase hex digits, version digit `1` at 13, variant `8`-`b` at 17 |
//! | node-redlock | 16 random bytes, hex: 32 lowercase hex digits |
//!
//! A node-redlock token looks like a redis-py one by chance once in 64 (the two fixed
//! digits of a UUID v1); both are named then. A ShedLock value the library reads (its
//! host and start, kinds/shedlock.rs) is named by `status` from those; this
//! names the others.

/// What `token` says about its holder, when it is one of the formats above.
pub fn describe(token: &str) -> Option<String> {
    if let Some(rest) = token.strip_prefix("ADDED:") {
        let (at, host) = rest.split_once('@')?;
        let host = match host.rsplit_once(':') {
            Some((h, id)) if is_uuid(id) => h,
            _ => host,
        };
        return Some(format!(
            "a ShedLock holder on host {host}, locked at {at} (value {token})"
        ));
    }
    if is_redsync(token) {
        return Some(format!(
            "a go-redsync holder (token {token}: 16 random bytes, base64)"
        ));
    }
    let hex = token.len() == 32
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex {
        return None;
    }
    let b = token.as_bytes();
    Some(
        match b[12] == b'1' && matches!(b[16], b'8' | b'9' | b'a' | b'b') {
            true => format!(
                "a redis-py Lock holder (token {token}: a UUID v1 in hex; a node-redlock token \
             matches too, once in 64)"
            ),
            false => format!("a node-redlock holder (token {token}: 16 random bytes, hex)"),
        },
    )
}

/// A UUID as Java prints it: 36 characters, hex digits and dashes at 8, 13, 18, 23.
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// redsync's `genValue`: 16 bytes in padded standard base64.
fn is_redsync(token: &str) -> bool {
    let Some(body) = token.strip_suffix("==") else {
        return false;
    };
    body.len() == 22
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        // The last digit of 16 bytes carries 2 bits: its low 4 bits are zero.
        && b"AQgw".contains(&body.as_bytes()[21])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shedlock_value_names_its_host_and_time_in_both_modes() {
        let plain = describe("ADDED:2026-12-02T01:22:33.456Z@build-7").unwrap();
        assert!(
            plain.starts_with(
                "a ShedLock holder on host build-7, locked at 2026-12-02T01:22:33.456Z"
            ),
            "{plain}"
        );
        let safe = "ADDED:2026-12-02T01:22:33.456Z@build-7:5b3f1c2e-8a1d-4a6e-9f0b-2c4d6e8f0a1b";
        let safe = describe(safe).unwrap();
        assert!(
            safe.starts_with("a ShedLock holder on host build-7, locked at"),
            "{safe}"
        );
        assert_eq!(describe("ADDED:no-at-sign"), None);
    }

    #[test]
    fn a_redsync_token_is_16_bytes_of_padded_base64() {
        let d = describe("q7Jd0v3FkQ9m1nT2rX8yLg==").unwrap();
        assert!(d.starts_with("a go-redsync holder"), "{d}");
        // Not 16 bytes: 15 (one = of padding), 17, or stray bits in the last digit.
        assert_eq!(describe("q7Jd0v3FkQ9m1nT2rX8yLgA="), None);
        assert_eq!(describe("q7Jd0v3FkQ9m1nT2rX8yLh=="), None);
        assert_eq!(describe("q7Jd0v3FkQ9m1nT2rX8y=="), None);
    }

    #[test]
    fn a_uuid1_in_hex_is_redis_py_and_other_hex_node_redlock() {
        // uuid.uuid1().hex: version 1 at index 12, variant 10xx at index 16.
        let py = describe("6e9a3a5ab05f11efb8a10242ac120002").unwrap();
        assert!(py.starts_with("a redis-py Lock holder"), "{py}");
        let node = describe("3f2a9c71d04e8b5f6a1c2e3d4b5a6978").unwrap();
        assert!(node.starts_with("a node-redlock holder"), "{node}");
        // Not these formats: a redlatch or Redisson holder id, upper-case hex, too short.
        for other in [
            "5b3f1c2e-8a1d-4a6e-9f0b-2c4d6e8f0a1b:1",
            "6E9A3A5AB05F11EFB8A10242AC120002",
            "6e9a3a5ab05f11ef",
        ] {
            assert_eq!(describe(other), None, "{other}");
        }
    }
}
