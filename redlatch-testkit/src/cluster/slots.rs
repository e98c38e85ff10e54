//! Hash slots as Redis Cluster computes them.

use super::SLOTS;

/// The hash slot of `key` as Redis computes it: CRC16 (XMODEM) mod 16384 of the key, or of
/// the part between the first `{` and the next `}` if that part is not empty.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// A key `prefix0`, `prefix1`, ... in `slot`.
pub fn key_in_slot(slot: u16, prefix: &str) -> String {
    assert!(slot < SLOTS, "slot {slot} out of range");
    (0u64..)
        .map(|n| format!("{prefix}{n}"))
        .find(|k| key_slot(k.as_bytes()) == slot)
        .expect("every slot has keys")
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the one Redis Cluster uses.
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
