//! The transport layer: how a request reaches one Redis deployment and how its answer
//! comes back. The engine calls [`Transport`] and knows nothing of connections.
//!
//! * [`connect`]: connection set-up and topology discovery, from plain settings.
//! * [`standalone`]: one server (a standalone master): connection lanes, timeouts.
//! * [`script`]: EVALSHA with a reload on NOSCRIPT.
//! * [`batch`]: group commit, generic over how a batch is sent.
//! * [`pubsub`]: the pub/sub hub, one [`Subscriber`] per deployment.
//! * [`subscriber`]: a deployment's subscriber: one classic pub/sub connection, or
//!   (cluster) sharded subscriptions spread over the primaries.
//! * [`sentinel`]: a Sentinel-managed primary, followed across switches.
//! * [`replicas`]: replica-synced acquisitions and renewals (`WAIT`), and which
//!   replicas are waited for.
//! * [`cluster`]: Redis Cluster: requests routed by their first key's hash slot,
//!   MOVED/ASK followed, sharded pub/sub.
//! * `tls` (cargo feature `tls`): the rustls crypto provider and the certificates of
//!   `rediss://` connections.
//!
//! A Cluster or Sentinel transport is another implementation of [`Transport`]: it
//! routes each request by its first key, which is why every request carries its keys.

pub(crate) mod batch;
pub(crate) mod cluster;
pub(crate) mod coalesce;
pub(crate) mod connect;
pub(crate) mod flow;
pub(crate) mod notices;
pub(crate) mod packed;
pub(crate) mod pubsub;
pub(crate) mod replicas;
pub(crate) mod script;
pub(crate) mod sentinel;
pub(crate) mod server_errors;
pub(crate) mod standalone;
pub(crate) mod subscriber;
#[cfg(feature = "tls")]
pub(crate) mod tls;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use redis::Value;

use crate::error::Result;

pub(crate) use script::{Dialect, Invocation, Script};
pub(crate) use subscriber::Subscriber;

/// A boxed, sendable future: what [`Transport`] methods return (the trait is used as
/// `dyn Transport`).
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Which connection of a deployment a request travels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    /// The one ordered connection every lock script uses: a release that timed out on
    /// our side but was written is executed before any later acquire of the same
    /// holder, so it can never delete a newer grant.
    Lock,
    /// Renewals and reads, spread over the other connections, so a flood of lock
    /// traffic cannot hold up the watchdog.
    Side,
}

/// One request: a script, a command or a pipeline. A clustered transport routes it by
/// its first key: a script's first KEYS entry, a command's first argument (every
/// keyed command we send has its key there; `PING` and `INFO` have none and may go to
/// any node), a pipeline's first command's.
#[derive(Clone, Copy)]
pub(crate) enum Request<'a> {
    /// A script run with EVALSHA (reloaded on NOSCRIPT).
    Eval(&'a Invocation),
    /// A lock acquisition that replicas must acknowledge: the script, then (in the
    /// same round trip) `WAIT` per the deployment's [`replicas`] policy; answered
    /// `[reply, acked, wanted, node]` (replicas.rs invariant 2). The timeout given is
    /// extended by the policy's wait.
    Synced(&'a Invocation),
    /// One command.
    Cmd(&'a redis::Cmd),
    /// Several commands in one round trip; the reply is an array.
    Pipe(&'a redis::Pipeline),
}

/// One Redis deployment as the engine sees it: a place to send requests to and to
/// open pub/sub connections on. Every call is bounded by `timeout` (connecting
/// included) and its error names the deployment's address.
pub(crate) trait Transport: Send + Sync + 'static {
    /// `host:port` (passwords never appear here), as shown in errors.
    fn addr(&self) -> &str;

    /// The per-command timeout.
    fn timeout(&self) -> Duration;

    /// The time allowed to open a connection.
    fn connect_timeout(&self) -> Duration;

    /// Sends `request` on `lane`, bounded by `timeout`.
    fn send<'a>(
        &'a self,
        lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>>;

    /// The addresses of the primaries that serve the deployment's keys now, for keyless
    /// commands each node answers for its own keys (`SCAN`): the cluster's primaries;
    /// one entry, the deployment's address, otherwise.
    fn primary_addrs(&self) -> Vec<String> {
        vec![self.addr().to_string()]
    }

    /// Sends `request` to the primary at `addr` (one of
    /// [`primary_addrs`](Self::primary_addrs)), bounded by `timeout`.
    fn send_to<'a>(
        &'a self,
        _addr: &'a str,
        lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>> {
        self.send(lane, timeout, request)
    }

    /// Opens a new subscriber (see [`Subscriber`]).
    fn subscriber(&self) -> BoxFuture<'_, redis::RedisResult<Box<dyn Subscriber>>>;

    /// Which script calls `key` may share (group commit without
    /// [`node_batches`](Self::node_batches), per-pair renewals): keys with the same
    /// number may be declared in one call. Always 0 for a single server; the hash slot
    /// on a cluster, whose routing refuses a call declaring keys of several slots
    /// (CROSSSLOT) even with the `allow-cross-slot-keys` script flag, which only
    /// relaxes the keys a script touches without declaring them.
    fn shard(&self, _key: &[u8]) -> usize {
        0
    }

    /// The address of the server that serves `key` now, as shown by `status`: the
    /// deployment's own address unless it spreads keys over nodes or follows a
    /// primary.
    fn serving(&self, _key: &[u8]) -> String {
        self.addr().to_string()
    }

    /// Which node serves `key` now, as a small number (0 for a single server): calls
    /// that may touch undeclared keys of several slots (renewals) are grouped by it.
    fn node(&self, _key: &[u8]) -> usize {
        0
    }

    /// Whether plain lock operations of several hash slots served by one node may share
    /// one call (`lua/batch_node.lua`, which names its locks in ARGV and carries the
    /// `allow-cross-slot-keys` flag of Redis >= 7): a cluster in the sharded dialect.
    /// Group commit then batches per [`node`](Self::node), not per
    /// [`shard`](Self::shard).
    fn node_batches(&self) -> bool {
        false
    }

    /// How many primaries serve the deployment's slots now (1 but for a cluster).
    fn primaries(&self) -> usize {
        1
    }

    /// Whether acquisitions should be sent as [`Request::Synced`].
    fn syncs(&self) -> bool {
        false
    }

    /// Whether a grant written without a synced call (a hand-over in a release script)
    /// must be claimed again to reach the replicas: [`syncs`](Self::syncs) unless the
    /// transport knows no replica is waited for.
    fn grants_need_replicas(&self) -> bool {
        self.syncs()
    }

    /// Whether renewals should be sent as [`Request::Synced`]: some replica to wait
    /// for per the last count (a renewal never recounts before it is sent: it stays
    /// cheap, and a short `WAIT` recounts after it).
    fn syncs_renewals(&self) -> bool {
        self.syncs()
    }

    /// The longest a synced acquisition waits for replicas.
    fn sync_timeout(&self) -> Duration {
        Duration::ZERO
    }

    /// When the server serving `key` last changed under us: another primary (a
    /// failover, a slot moved) or, for one server, its connections broken (a restart,
    /// which loses its data without persistence). `None`: never since connecting. A
    /// lock found gone after that instant may have been lost with the old server's
    /// data ([`LostReason::MasterDataLost`](crate::LostReason::MasterDataLost)).
    fn changed_at(&self, _key: &[u8]) -> Option<std::time::Instant> {
        None
    }

    /// What replica sync sees of the replicas of the primary serving `key` (`None`
    /// with sync off).
    fn replica_sync(&self, _key: &[u8]) -> Option<replicas::ReplicaSync> {
        None
    }
}

/// A [`Request::Synced`] answer, taken apart: the script's reply, then the
/// acknowledgements received and wanted, and the node that answered.
pub(crate) fn synced_parts(v: Value) -> Option<(Value, usize, usize, String)> {
    let Value::Array(mut items) = v else {
        return None;
    };
    if items.len() != 4 {
        return None;
    }
    let node = match items.pop()? {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => return None,
    };
    let (Value::Int(wanted), Value::Int(acked)) = (items.pop()?, items.pop()?) else {
        return None;
    };
    Some((items.pop()?, acked as usize, wanted as usize, node))
}

impl Request<'_> {
    /// What this request runs, as a refusal names it: for a script, the commands it
    /// calls and `evalsha`; otherwise the command's name.
    pub(crate) fn describe(&self) -> String {
        fn name(cmd: &redis::Cmd) -> String {
            match cmd.args_iter().next() {
                Some(redis::Arg::Simple(n)) => {
                    format!("'{}'", String::from_utf8_lossy(n).to_lowercase())
                }
                _ => "a command".into(),
            }
        }
        match self {
            Request::Eval(inv) | Request::Synced(inv) => {
                let calls: Vec<String> = inv.calls().iter().map(|c| format!("'{c}'")).collect();
                format!(
                    "'evalsha' or a command its script calls ({})",
                    calls.join(", ")
                )
            }
            Request::Cmd(cmd) => name(cmd),
            Request::Pipe(pipe) => {
                let names: Vec<String> = pipe.cmd_iter().map(name).collect();
                names.join(", ")
            }
        }
    }

    /// The key a clustered transport routes by; `None` for a keyless command.
    pub(crate) fn key(&self) -> Option<&[u8]> {
        fn cmd_key(cmd: &redis::Cmd) -> Option<&[u8]> {
            let mut args = cmd.args_iter();
            let redis::Arg::Simple(name) = args.next()? else {
                return None;
            };
            if name.eq_ignore_ascii_case(b"PING") || name.eq_ignore_ascii_case(b"INFO") {
                return None;
            }
            match args.next()? {
                redis::Arg::Simple(key) => Some(key),
                _ => None,
            }
        }
        match self {
            Request::Eval(inv) | Request::Synced(inv) => inv.first_key(),
            Request::Cmd(cmd) => cmd_key(cmd),
            Request::Pipe(pipe) => pipe.cmd_iter().next().and_then(cmd_key),
        }
    }
}
