//! The wire path of plain lock operations: how the master's group commit
//! (transport/batch.rs) sends the acquires and releases queued on it, alone with
//! `acquire.lua` / `release.lua`, several with `batch.lua`, grouped by hash slot, or on
//! a Redis >= 7 cluster with `batch_node.lua`, grouped by node.
//!
//! Invariants of the per-node path ([`Transport::node_batches`]):
//! 1. A node's operations go as one `batch_node.lua` call routed by the first
//!    operation's name, every name in ARGV, whatever their slots (one alone with its own
//!    script). Not `batch.lua`, even for one slot: its operations are only checked
//!    against a slot being migrated by the server's routing of the declared keys, and
//!    its shared DEL of `:handed` keys, undeclared, would fail half-way on such a slot.
//! 2. An operation the node does not serve now, or whose slot is being migrated, is
//!    answered "not here" by the script without any write (batch_node.lua's invariant)
//!    and then sent alone, routed by its own keys (MOVED / ASK / TRYAGAIN followed
//!    there, as for any call): it costs that operation one more round trip, as a
//!    redirect does, and never fails its neighbours. The operations sent alone are all
//!    written in the poll that reads the batch's answer, in the batch's order (two of
//!    one lock reach one node on one ordered connection). That is the ordering of a
//!    redirect the transport follows: a later operation of the same lock in a batch
//!    sent meanwhile (an undoing release of a cancelled acquire) is answered "not here"
//!    after this batch's answer and re-sent by its own flusher after that. Unlike
//!    re-sending a failed batch lock by lock at some later time (docs/deployments.md),
//!    the window is only the two flushers' wake-ups on a multi-threaded runtime, the
//!    same as two redirected calls have.
//! 3. A redirect of the whole call (its routing key's slot moved) is followed by the
//!    transport; the node reached answers "not here" for what it does not serve, so
//!    every operation still runs once, where its slot is served.
//! 4. A node out of memory refuses a `batch_node.lua` call before it runs (the script
//!    may write and lacks `allow-oom`); its operations are then sent alone, so a
//!    release still frees its lock and each acquisition reports the node's OOM, as
//!    with the single scripts.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::join_all;

use crate::engine::masters::replies::{batch_answers, send_acquire, typed, WRONG_TYPE};
use crate::engine::masters::shards::{by_shard, grouped};
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::batch::Flight;
use crate::transport::{BoxFuture, Lane, Request, Script, Transport};

/// The plain lock's scripts this path sends: they are the kind's, kept beside it
/// (kinds/plain.rs, `SCRIPTS`), and handed to each master's group commit.
pub(crate) struct PlainScripts {
    /// One acquisition alone (`acquire.lua`).
    pub(crate) acquire: &'static LazyLock<Script>,
    /// One release alone (`release.lua`).
    pub(crate) release: &'static LazyLock<Script>,
    /// Several operations of one slot (`batch.lua`).
    pub(crate) batch: &'static LazyLock<Script>,
    /// Several operations of one node's slots (`batch_node.lua`, invariant 1).
    pub(crate) batch_node: &'static LazyLock<Script>,
}

/// `batch_node.lua`'s status for an operation the node does not serve now (invariant 2).
const NOT_HERE: i64 = 4;

/// One plain acquire or release, as group commit queues it.
pub(crate) struct PlainOp {
    pub(crate) release: bool,
    pub(crate) name: Arc<str>,
    pub(crate) holder: Arc<str>,
    pub(crate) lease_ms: u64,
    /// An acquire of a registering waiter: its ticket (tickets.rs), registered in the
    /// waiter registry when refused, removed when granted, a hand-over to it claimed
    /// (lua/acquire.lua).
    pub(crate) waiting: Option<Waiting>,
}

/// A registering waiter's ticket, as its acquire carries it.
#[derive(Clone)]
pub(crate) struct Waiting {
    pub(crate) ticket: Arc<str>,
    /// No attempt carried the ticket before: it cannot be registered, nor handed the
    /// lock, yet, so a grant skips the registry (no `ZREM`, no claim check).
    pub(crate) first: bool,
}

impl PlainOp {
    /// The op code of batch.lua / batch_node.lua: `r` a release, `a` an acquire, `A`
    /// an acquire whose ticket is new ([`Waiting::first`]).
    fn code(&self) -> char {
        match (self.release, &self.waiting) {
            (true, _) => 'r',
            (false, Some(Waiting { first: true, .. })) => 'A',
            (false, _) => 'a',
        }
    }

    fn ticket(&self) -> &str {
        self.waiting.as_ref().map_or("", |w| &*w.ticket)
    }
}

/// A plain operation's answer, as `batch.lua` gives it: (status, value).
pub(crate) type PlainReply = (i64, i64);

/// How group commit sends plain operations: alone with `acquire.lua` / `release.lua`,
/// several with `batch.lua`, on the lock lane.
pub(crate) struct PlainFlight(
    pub(crate) Arc<dyn Transport>,
    pub(crate) &'static PlainScripts,
);

impl Flight for PlainFlight {
    type Op = PlainOp;
    type Reply = PlainReply;

    fn one<'a>(&'a self, op: &'a PlainOp) -> BoxFuture<'a, Result<PlainReply>> {
        Box::pin(single(&*self.0, op, self.1))
    }

    fn many<'a>(&'a self, ops: &'a [&'a PlainOp]) -> BoxFuture<'a, Vec<Result<PlainReply>>> {
        let (link, scripts) = (&*self.0, self.1);
        if link.node_batches() {
            return Box::pin(grouped(
                link,
                ops,
                |op| link.node(op.name.as_bytes()),
                |link, ops| Box::pin(node_group(link, ops, scripts)),
            ));
        }
        Box::pin(by_shard(
            &*self.0,
            ops,
            |op| &op.name,
            move |link, ops| {
                Box::pin(async move {
                    // A failed group fails its operations: re-sending them one by one
                    // later could put them behind requests sent meanwhile (an undoing
                    // release would then run before the acquire it undoes).
                    match batch(link, &ops, scripts).await {
                        Err(e) => ops.iter().map(|_| Err(e.clone())).collect(),
                        Ok(replies) => replies,
                    }
                })
            },
        ))
    }

    fn addr(&self) -> &str {
        self.0.addr()
    }

    /// A call's bound: the command timeout, plus the replicas' while acquisitions are
    /// synced (a synced call's extra time, `Request::Synced`), so that what queues
    /// behind a synced batch is not timed out while that batch may still answer.
    fn timeout(&self) -> Duration {
        match self.0.syncs() {
            true => self.0.timeout() + self.0.sync_timeout(),
            false => self.0.timeout(),
        }
    }

    /// Per node, a batch goes as one call per primary (invariant 1): a batch may hold a
    /// full call's worth for each. (Per slot, names spread over all slots go one call
    /// each whatever the batch's size.)
    fn servers(&self) -> usize {
        match self.0.node_batches() {
            true => self.0.primaries(),
            false => 1,
        }
    }
}

/// One plain operation with its own script (acquire.lua / release.lua), answered in
/// `batch.lua`'s terms.
async fn single(link: &dyn Transport, op: &PlainOp, scripts: &PlainScripts) -> Result<PlainReply> {
    let name = &*op.name;
    let inv = if op.release {
        let mut inv = scripts.release.call();
        inv.key(name)
            .key_derived(keys::WAITERS, name)
            .arg_derived(keys::CHANNEL, name)
            .arg("0")
            .arg(op.lease_ms)
            .arg(&*op.holder);
        inv
    } else {
        let mut inv = scripts.acquire.call();
        inv.key(name).arg(op.lease_ms).arg(&*op.holder);
        if let Some(w) = &op.waiting {
            inv.key_derived(keys::WAITERS, name).arg(&*w.ticket);
            if w.first {
                inv.arg("1");
            }
        }
        inv
    };
    let mut short = None;
    let reply = if op.release {
        link.send(Lane::Lock, link.timeout(), Request::Eval(&inv))
            .await
    } else {
        send_acquire(link, link.timeout(), &inv)
            .await
            .map(|(v, s)| {
                short = s;
                v
            })
    };
    let reply = reply.and_then(|v| {
        let decoded = if op.release {
            redis::from_redis_value::<Option<i64>>(v).map(|v| (v.map_or(-1, |x| x.min(1)), 0))
        } else {
            batch_answers(&v, 1)
                .map(|a| a[0])
                .ok_or_else(|| format!("unexpected acquire reply {v:?}").into())
        };
        decoded.map_err(|e| Error::Redis {
            addr: link.addr().to_string(),
            source: e.into(),
        })
    });
    match reply.map_err(|e| typed(name, e)) {
        Err(Error::WrongType { .. }) => Ok((WRONG_TYPE, 0)),
        Ok((1 | 2, _)) if short.is_some() => Err(short.expect("checked")),
        other => other,
    }
}

/// Many plain operations in one `batch.lua` call. A grant the replicas did not
/// acknowledge in time is that operation's [`Error::NotReplicated`].
async fn batch(
    link: &dyn Transport,
    ops: &[&PlainOp],
    scripts: &PlainScripts,
) -> Result<Vec<Result<PlainReply>>> {
    let mut inv = scripts.batch.call();
    let lease = common_lease(ops);
    inv.reserve(key_room(ops, 2), arg_room(ops, 3));
    inv.arg(codes(ops))
        .arg(lease.map_or(String::new(), |ms| ms.to_string()));
    for op in ops {
        inv.key(&*op.name).key_derived(keys::WAITERS, &op.name);
        if lease.is_none() {
            inv.arg(op.lease_ms);
        }
        inv.arg(&*op.holder);
        match op.release {
            true => inv.arg_derived(keys::CHANNEL, &op.name),
            false => inv.arg(op.ticket()),
        };
    }
    send_batch(link, ops, &inv).await
}

/// The batch scripts' `ARGV[1]`: each operation's code, in order.
fn codes(ops: &[&PlainOp]) -> String {
    ops.iter().map(|op| op.code()).collect()
}

/// The batch scripts' `ARGV[2]`: the lease every operation asks for, when they all ask
/// for one (then no operation carries its own: each argument costs the server its
/// parsing and a Lua string; see batch.lua).
fn common_lease(ops: &[&PlainOp]) -> Option<u64> {
    let first = ops.first()?.lease_ms;
    ops.iter().all(|op| op.lease_ms == first).then_some(first)
}

/// Room for a batch call's keys, `per_op` per operation (each its name and its waiter
/// registry's key), and `(count, bytes)`: the call is then packed without regrowing
/// its buffers (that regrowth was ~0.7k instructions of a W2 pair).
fn key_room(ops: &[&PlainOp], per_op: usize) -> (usize, usize) {
    let bytes = ops
        .iter()
        .map(|op| 2 * op.name.len() + keys::WAITERS.len() + 3);
    (per_op * ops.len(), bytes.sum())
}

/// The same for its arguments, `per_op` per operation, after the codes and the common
/// lease: at most its lease, holder, name, registry key and ticket or channel
/// (batch_node.lua's, the most).
fn arg_room(ops: &[&PlainOp], per_op: usize) -> (usize, usize) {
    const FIXED: usize = 1 + 20 + keys::WAITERS.len() + 3 + keys::CHANNEL.len() + 3;
    let bytes = (ops.iter()).map(|op| 3 * op.name.len() + op.holder.len() + op.ticket().len());
    (
        2 + per_op * ops.len(),
        20 + bytes.sum::<usize>() + FIXED * ops.len(),
    )
}

/// Sends a batch script call for `ops` (synced when it acquires) and reads its two
/// integers per operation.
async fn send_batch(
    link: &dyn Transport,
    ops: &[&PlainOp],
    inv: &crate::transport::Invocation,
) -> Result<Vec<Result<PlainReply>>> {
    let (v, short) = match ops.iter().any(|op| !op.release) {
        true => send_acquire(link, link.timeout(), inv).await?,
        false => (
            link.send(Lane::Lock, link.timeout(), Request::Eval(inv))
                .await?,
            None,
        ),
    };
    match batch_answers(&v, ops.len()) {
        Some(answers) => Ok(answers
            .into_iter()
            .zip(ops)
            .map(|(answer, op)| match (&short, op.release, answer.0) {
                (Some(e), false, 1 | 2) => Err(e.clone()),
                _ => Ok(answer),
            })
            .collect()),
        None => Err(Error::Redis {
            addr: link.addr().to_string(),
            source: redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected batch reply",
                format!("{v:?}"),
            )),
        }),
    }
}

/// One node's operations (invariant 1): one alone, several as `batch_node.lua`, then
/// what the node did not serve alone (invariant 2).
async fn node_group(
    link: &dyn Transport,
    ops: Vec<&PlainOp>,
    scripts: &PlainScripts,
) -> Vec<Result<PlainReply>> {
    if let [op] = ops.as_slice() {
        return vec![single(link, op, scripts).await];
    }
    // A failed call fails its operations (see `PlainFlight::many`), except a node out of
    // memory, which refused it before it ran (invariant 4).
    let mut replies = match node_batch(link, &ops, scripts).await {
        Err(Error::OutOfMemory { .. }) => vec![Ok((NOT_HERE, 0)); ops.len()],
        Err(e) => return ops.iter().map(|_| Err(e.clone())).collect(),
        Ok(replies) => replies,
    };
    let away: Vec<usize> = (0..ops.len())
        .filter(|&i| matches!(replies[i], Ok((NOT_HERE, _))))
        .collect();
    // All written in this poll, in the batch's order (see invariant 2).
    let alone = join_all(away.iter().map(|&i| single(link, ops[i], scripts))).await;
    for (i, reply) in away.into_iter().zip(alone) {
        replies[i] = reply;
    }
    replies
}

/// Many plain operations of one node's slots in one `batch_node.lua` call; an
/// operation the node does not serve answers [`NOT_HERE`]. A grant the replicas did
/// not acknowledge in time is that operation's [`Error::NotReplicated`].
async fn node_batch(
    link: &dyn Transport,
    ops: &[&PlainOp],
    scripts: &PlainScripts,
) -> Result<Vec<Result<PlainReply>>> {
    let mut inv = scripts.batch_node.call();
    let lease = common_lease(ops);
    inv.reserve((1, ops[0].name.len()), arg_room(ops, 5));
    inv.key(&*ops[0].name);
    inv.arg(codes(ops))
        .arg(lease.map_or(String::new(), |ms| ms.to_string()));
    for op in ops {
        if lease.is_none() {
            inv.arg(op.lease_ms);
        }
        inv.arg(&*op.holder)
            .arg(&*op.name)
            .arg_derived(keys::WAITERS, &op.name);
        match op.release {
            true => inv.arg_derived(keys::CHANNEL, &op.name),
            false => inv.arg(op.ticket()),
        };
    }
    send_batch(link, ops, &inv).await
}
