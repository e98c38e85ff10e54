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
    // The client record and ledger (bookkeeping: docs/errors.md, "Minimal ACL per
    // feature"):
    "+hset",
    "+hdel",
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

/// docs/errors.md, "Minimal ACL per feature": the keys, channels and commands beyond
/// [`MINIMAL`] each feature needs for lock names under `orders:` (a job's key under
/// `job-lock:`), with bookkeeping off. The plain, fair and fenced locks share their
/// clean-up of a lost hold (lua/drop.lua), which reads a fair lock's queue: all three
/// need its keys. tests/standalone/acl_books.rs runs each under exactly this.
pub const FEATURES: &[(&str, &[&str])] = &[
    (
        "plain lock",
        &[
            "~orders:*",
            "~redlatch_lock_waiters:{orders:*",
            "~redisson_lock_queue:{orders:*",
            "~redisson_lock_timeout:{orders:*",
            "~redlatch_fair_alive:{orders:*",
            "~redisson_lock__channel:{orders:*",
            "&redisson_lock__channel:{orders:*",
        ],
    ),
    (
        "fair lock",
        &[
            "~orders:*",
            "~redlatch_lock_waiters:{orders:*",
            "~redisson_lock_queue:{orders:*",
            "~redisson_lock_timeout:{orders:*",
            "~redlatch_fair_alive:{orders:*",
            "~redisson_lock__channel:{orders:*",
            "&redisson_lock__channel:{orders:*",
        ],
    ),
    (
        "fenced lock",
        &[
            "~orders:*",
            "~redlatch_lock_waiters:{orders:*",
            "~redisson_lock_queue:{orders:*",
            "~redisson_lock_timeout:{orders:*",
            "~redlatch_fair_alive:{orders:*",
            "~redisson_lock__channel:{orders:*",
            "&redisson_lock__channel:{orders:*",
            "~redisson_lock_token:{orders:*",
            "~redlatch_token_epoch:{orders:*",
        ],
    ),
    (
        "read-write lock",
        &[
            "~orders:*",
            "~{orders:*",
            "~redlatch_rwlock_writers:{orders:*",
            "~redisson_rwlock:{orders:*",
            "&redisson_rwlock:{orders:*",
            "+hlen",
            "+zremrangebyscore",
        ],
    ),
    (
        "semaphore",
        &[
            "~orders:*",
            "~redisson_sc:{orders:*",
            "&redisson_sc:{orders:*",
            "+decrby",
            "+incrby",
        ],
    ),
    (
        "count-down latch",
        &[
            "~orders:*",
            "~redisson_countdownlatch__channel__{orders:*",
            "&redisson_countdownlatch__channel__{orders:*",
            "+decr",
        ],
    ),
    (
        "job",
        &[
            "~job-lock:*",
            "~redlatch_job:{job-lock:*",
            "~redisson_lock__channel:{job-lock:*",
            "&redisson_lock__channel:{job-lock:*",
        ],
    ),
];

/// What bookkeeping under the prefix `orders:rl` adds to a feature's rules: its keys
/// (`orders:rl_client:{id}`, `..._ledger:{id}`, `..._revoke:{name}`) and each
/// client's notice channel.
pub const BOOKKEEPING: &[&str] = &["~orders:rl_*", "&orders:rl_client__channel*"];

/// Creates user `svc` (password [`PASSWORD`]) with exactly `rules` (keys, channels and
/// commands) and the commands of [`MINIMAL`] plus `extra`; returns its URL.
pub fn confined(server: &RedisServer, rules: &[&str], extra: &[&str]) -> String {
    let mut args = vec![
        "ACL",
        "SETUSER",
        "svc",
        "reset",
        "on",
        ">s3cret",
        "resetchannels",
    ];
    let (commands, keys): (Vec<&str>, Vec<&str>) = rules.iter().partition(|r| r.starts_with('+'));
    args.extend(keys);
    args.push("-@all");
    args.extend(MINIMAL);
    args.extend(commands);
    args.extend(extra);
    server.cmd::<String>(&args);
    format!("redis://svc:{PASSWORD}@127.0.0.1:{}", server.port())
}

/// docs/errors.md, "Minimal ACL per feature", continued: the other kinds, as
/// [`FEATURES`] (names under `orders:`, bookkeeping off). Every kind with the plain
/// lock's layout (non-reentrant, spin, multi, fenced under an election or guarded
/// writes) drops a lost hold with lua/drop.lua, hence the fair queue's keys; the spin
/// lock subscribes to nothing but publishes on the channel when forced or dropped; an
/// election's lock is named `redlatch_election:{name}`, so its derived keys carry
/// that prefix inside theirs. tests/standalone/acl_kinds.rs runs each under exactly
/// this.
pub const MORE_FEATURES: &[(&str, &[&str])] = &[
    ("non-reentrant lock", PLAIN),
    (
        "non-reentrant fair lock",
        &[
            "~orders:*",
            "~redisson_lock_queue:{orders:*",
            "~redisson_lock_timeout:{orders:*",
            "~redlatch_fair_alive:{orders:*",
            "~redisson_lock__channel:{orders:*",
            "&redisson_lock__channel:{orders:*",
        ],
    ),
    ("spin lock", PLAIN),
    (
        "simple lock",
        &["~orders:*", "&redisson_lock__channel:{orders:*", "+strlen"],
    ),
    ("multi-lock", PLAIN),
    (
        "faster multi-lock",
        &[
            "~orders:*",
            "~redisson_lock__channel:{orders:*",
            "&redisson_lock__channel:{orders:*",
        ],
    ),
    (
        "permit-expirable semaphore",
        &[
            "~orders:*",
            "~{orders:*",
            "~redisson_sc:{orders:*",
            "&redisson_sc:{orders:*",
            "+decrby",
            "+incrby",
            "+zcard",
        ],
    ),
    (
        "leader election",
        &[
            "~redlatch_election:{orders:*",
            "~redlatch_election_leader:{orders:*",
            "~redlatch_election_log:{orders:*",
            "~redlatch_lock_waiters:redlatch_election:{orders:*",
            "~redisson_lock_token:redlatch_election:{orders:*",
            "~redisson_lock_queue:redlatch_election:{orders:*",
            "~redisson_lock_timeout:redlatch_election:{orders:*",
            "~redlatch_fair_alive:redlatch_election:{orders:*",
            "~redisson_lock__channel:redlatch_election:{orders:*",
            "&redisson_lock__channel:redlatch_election:{orders:*",
            "&redlatch_election__channel:{orders:*",
            "+hmget",
            "+xadd",
            "+xrange",
            "+xrevrange",
        ],
    ),
    (
        "guarded writes on a fenced lock",
        &[
            "~orders:*",
            "~redlatch_lock_waiters:{orders:*",
            "~redisson_lock_queue:{orders:*",
            "~redisson_lock_timeout:{orders:*",
            "~redlatch_fair_alive:{orders:*",
            "~redisson_lock__channel:{orders:*",
            "&redisson_lock__channel:{orders:*",
            "~redisson_lock_token:{orders:*",
            "~redlatch_fence:{orders:*",
            "~{orders:*",
            "+hmget",
            "+incrby",
            "+xadd",
        ],
    ),
];

/// The plain lock's line of [`FEATURES`].
const PLAIN: &[&str] = FEATURES[0].1;
