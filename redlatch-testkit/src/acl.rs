//! The minimal ACL of docs/errors.md, shared by tests/standalone/acl.rs (the core scenarios under
//! it) and the CLI's tests (`redlatch run` under it prints nothing).

use super::RedisServer;

/// The minimal ACL's commands, as docs/errors.md lists them (tests/standalone/acl.rs checks the two
/// agree).
pub const MINIMAL: &[&str] = &[
    "+ping",
    "+evalsha",
    "+eval",
    "+script|load",
    "+info",
    "+subscribe",
    "+unsubscribe",
    // Called by the scripts:
    "+hincrby",
    "+hexists",
    "+hget",
    "+exists",
    "+pexpire",
    "+pexpireat",
    "+pttl",
    "+del",
    "+publish",
    "+pubsub|numsub",
    "+get",
    "+set",
    "+incr",
    "+type",
    "+time",
    "+lindex",
    "+lpos",
    "+lrange",
    "+lpop",
    "+lrem",
    "+rpush",
    "+zadd",
    "+zincrby",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zscore",
    // `Lock::status` (operators):
    "+hgetall",
];

/// The minimal ACL's channels: the unlock channels, and the revoke channels a holder
/// listening for release requests subscribes to (`redlatch run` does by default).
pub const CHANNELS: &[&str] = &["&redisson_lock__channel*", "&redlatch_client__channel*"];

/// The password of [`user`].
pub const PASSWORD: &str = "s3cret";

/// Creates user `locker` with the minimal ACL minus `without` (commands or channels), on
/// keys `~*`; returns its URL.
pub fn user(server: &RedisServer, without: &[&str]) -> String {
    let mut args = vec![
        "ACL",
        "SETUSER",
        "locker",
        "reset",
        "on",
        ">s3cret",
        "~*",
        // Redis 6.2's `reset` leaves `allchannels` (its acl-pubsub-default), to which
        // no pattern may be added; Redis 7's already resets them.
        "resetchannels",
    ];
    args.extend(CHANNELS.iter().filter(|c| !without.contains(c)));
    args.push("-@all");
    args.extend(MINIMAL.iter().filter(|c| !without.contains(c)));
    server.cmd::<String>(&args);
    format!("redis://locker:{PASSWORD}@127.0.0.1:{}", server.port())
}

/// A user `locker` with `password` who may run only `PING` (as an operator might start
/// from): refused its first script call. Its URL.
pub fn ping_only(server: &RedisServer, password: &str) -> String {
    server.cmd::<String>(&[
        "ACL",
        "SETUSER",
        "locker",
        "reset",
        "on",
        &format!(">{password}"),
        "~*",
        "resetchannels",
        "&redisson_lock__channel:*",
        "+ping",
    ]);
    format!("redis://locker:{password}@127.0.0.1:{}", server.port())
}
