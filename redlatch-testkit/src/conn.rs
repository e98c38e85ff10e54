//! The tests' own Redis connections (not the library's): every one waits for a reply, and
//! to connect, as long as [`IO_TIMEOUT`], never a client library's default.
//!
//! redis-rs's async connections give up on a reply after 500 ms and on connecting after
//! 1 s by default; on a busy CI machine a test's own `INCR` took longer than that and
//! failed the test though redlatch had done nothing wrong
//! (`non_reentrant::several_clients_and_processes_never_overlap`). Its blocking
//! connections wait forever instead, so a stopped server hangs a test rather than failing
//! it. Tests therefore take their connections from here (or from
//! [`RedisServer::conn`](crate::RedisServer::conn) / [`RedisServer::async_conn`](crate::RedisServer::async_conn));
//! `scripts/check-test-conns.py` (run by `.ci/run`) fails on a test that opens one with
//! redis-rs's defaults. A test that polls a server it expects to be down or paused uses
//! [`RedisServer::try_cmd`](crate::RedisServer::try_cmd) with its own short timeout.

use std::time::Duration;

/// How long a test-side connection waits to connect and for each reply: longer than any
/// test's own bound on one step (a slow step fails on the test's bound, which names it),
/// short enough that a server that never answers fails the test instead of hanging it.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A blocking connection to `info` (a URL or a `redis::ConnectionInfo`) with
/// [`IO_TIMEOUT`] to connect, read and write.
pub fn sync_conn(info: impl redis::IntoConnectionInfo) -> redis::Connection {
    let (client, addr) = client(info);
    let conn = client
        .get_connection_with_timeout(IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("cannot connect to test redis at {addr}: {e}"));
    conn.set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| conn.set_write_timeout(Some(IO_TIMEOUT)))
        .unwrap_or_else(|e| panic!("cannot set the timeouts of a connection to {addr}: {e}"));
    conn
}

/// redis-rs's async connection settings with [`IO_TIMEOUT`] to connect and per reply:
/// for a test that needs more of the config (a push sender, RESP3).
pub fn async_config() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(IO_TIMEOUT))
        .set_response_timeout(Some(IO_TIMEOUT))
}

/// A multiplexed async connection to `info` with [`async_config`]'s timeouts.
pub async fn async_conn(info: impl redis::IntoConnectionInfo) -> redis::aio::MultiplexedConnection {
    let (client, addr) = client(info);
    client
        .get_multiplexed_async_connection_with_config(&async_config())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to test redis at {addr}: {e}"))
}

/// The client and its address for messages (never the URL: it may hold a password).
fn client(info: impl redis::IntoConnectionInfo) -> (redis::Client, String) {
    let info = info
        .into_connection_info()
        .unwrap_or_else(|e| panic!("bad test redis address: {e}"));
    let addr = info.addr().to_string();
    let client = redis::Client::open(info)
        .unwrap_or_else(|e| panic!("cannot make a client for test redis at {addr}: {e}"));
    (client, addr)
}
