//! The lock protocol: one [`Script`] per file in `lua/` and a typed async call for
//! each. Every value is passed as KEYS/ARGV; scripts run by SHA (transport/script.rs).

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures_util::future::join_all;
use redis::Value;

use super::master::Master;
use super::Kind;
use crate::error::{Error, Result};
use crate::keys;
use crate::transport::batch::Flight;
use crate::transport::script::lua;
use crate::transport::{BoxFuture, Invocation, Lane, Request, Script, Transport};

static BATCH: LazyLock<Script> = lua!("pass_on.lua", "batch.lua");
static ACQUIRE: LazyLock<Script> = lua!("acquire.lua");
static RELEASE: LazyLock<Script> = lua!("pass_on.lua", "release.lua");
static UNWAIT: LazyLock<Script> = lua!("pass_on.lua", "unwait.lua");
static RENEW: LazyLock<Script> = lua!(cross_slot "renew.lua");
static FORCE: LazyLock<Script> = lua!("force_release.lua");
static FENCED_ACQUIRE: LazyLock<Script> = lua!("fenced_acquire.lua");
static FENCED_SYNC: LazyLock<Script> = lua!("fenced_sync.lua");
static FAIR_ACQUIRE: LazyLock<Script> = lua!("fair_evict.lua", "fair_acquire.lua");
static FAIR_RELEASE: LazyLock<Script> = lua!("fair_evict.lua", "fair_release.lua");
static FAIR_CANCEL: LazyLock<Script> = lua!("fair_evict.lua", "fair_cancel.lua");
static FAIR_FORCE: LazyLock<Script> = lua!("fair_evict.lua", "fair_force_release.lua");
static DROP: LazyLock<Script> = lua!("fair_evict.lua", "drop.lua");

/// Every script, for the transport to load on each new connection before its first
/// call (transport/script.rs): a call never meets NOSCRIPT on a fresh connection, so
/// its reload cannot reorder it behind later calls (issue 11.7).
pub(crate) fn all() -> Vec<&'static Script> {
    let mut all: Vec<&'static Script> = vec![
        &BATCH,
        &ACQUIRE,
        &RELEASE,
        &UNWAIT,
        &RENEW,
        &FORCE,
        &FENCED_ACQUIRE,
        &FENCED_SYNC,
        &FAIR_ACQUIRE,
        &FAIR_RELEASE,
        &FAIR_CANCEL,
        &FAIR_FORCE,
        &DROP,
    ];
    all.extend(super::rw::all().map(|s| &**s));
    all.extend(super::permits::all().map(|s| &**s));
    all
}

/// What an acquire script answered on one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Granted: `fresh` if the key was created, else re-entered; `token` for fenced locks;
    /// `current` for fenced locks under Redlock: the master has not restarted since its
    /// counter was last written back (`lua/fenced_acquire.lua`), else false.
    Granted {
        fresh: bool,
        token: Option<u64>,
        current: bool,
    },
    /// Held by someone else for `pttl_ms` more (-1: no expiry, -2: free but queued).
    Busy { pttl_ms: i64 },
}

/// What a release script answered on one master.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    NotHeld,
    StillHeld,
    Released,
}

/// How the acquire script is chosen.
#[derive(Clone, Copy, Debug)]
pub(crate) enum AcquireMode {
    Plain,
    /// `redlock`: more than one master, so the counter's epoch is read too.
    Fenced {
        redlock: bool,
    },
    /// Fair: `join` the queue when busy; alive for `stale_ms` (also the margin kept
    /// behind another entry), wait time `wait_ms` (Redisson's threadWaitTime), see
    /// `lua/fair_evict.lua`.
    Fair {
        join: bool,
        stale_ms: u64,
        wait_ms: u64,
    },
    /// The read lock of a read-write lock (rw.rs).
    Read,
    /// The write lock of a read-write lock; when refused, record an intent that keeps
    /// new readers out for `intent_ms` (0: none).
    Write {
        intent_ms: u64,
    },
}

impl AcquireMode {
    /// The kind of lock whose release script undoes this acquire.
    pub(crate) fn release_kind(self) -> Kind {
        match self {
            AcquireMode::Plain | AcquireMode::Fenced { .. } => Kind::Plain,
            AcquireMode::Fair { .. } => Kind::Fair,
            AcquireMode::Read => Kind::Read,
            AcquireMode::Write { .. } => Kind::Write,
        }
    }
}

/// Types a script's error by its code: WRONGTYPE, a refused command, unusable data.
pub(crate) fn typed(name: &str, e: Error) -> Error {
    match e {
        Error::Redis { source, addr } if source.code() == Some("WRONGTYPE") => Error::WrongType {
            name: name.to_string(),
            addr,
        },
        // A script that failed at run time: its user may not run a command it calls
        // (Redis reports that as ERR inside scripts), or it met data it cannot use (our
        // scripts raise nothing else). Both are permanent, not an outage to retry.
        Error::Redis { source, addr } if source.code() == Some("ERR") => {
            let detail = source.detail().unwrap_or_default().to_string();
            if detail.contains("can't run this command") {
                Error::PermissionDenied { addr, detail }
            } else {
                Error::BadData {
                    name: name.to_string(),
                    addr,
                    detail,
                }
            }
        }
        other => other,
    }
}

fn protocol(master: &Master, what: &str, v: &Value) -> Error {
    master.err(redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected script reply",
        format!("{what}: {v:?}"),
    )))
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

/// One plain acquire or release, as group commit queues it.
pub(crate) struct PlainOp {
    pub(crate) release: bool,
    pub(crate) name: String,
    pub(crate) holder: String,
    pub(crate) lease_ms: u64,
    /// An acquire of a registering waiter: its ticket (tickets.rs), registered in the
    /// waiter registry when refused, removed when granted, a hand-over to it claimed
    /// (lua/acquire.lua).
    pub(crate) waiting: Option<Arc<str>>,
}

/// A plain operation's answer, as `batch.lua` gives it: (status, value).
pub(crate) type PlainReply = (i64, i64);

/// How group commit sends plain operations: alone with `acquire.lua` / `release.lua`,
/// several with `batch.lua`, on the lock lane.
pub(crate) struct PlainFlight(pub(crate) Arc<dyn Transport>);

impl Flight for PlainFlight {
    type Op = PlainOp;
    type Reply = PlainReply;

    fn one<'a>(&'a self, op: &'a PlainOp) -> BoxFuture<'a, Result<PlainReply>> {
        Box::pin(single(&*self.0, op))
    }

    fn many<'a>(&'a self, ops: &'a [&'a PlainOp]) -> BoxFuture<'a, Vec<Result<PlainReply>>> {
        Box::pin(by_shard(
            &*self.0,
            ops,
            |op| &op.name,
            |link, ops| {
                Box::pin(async move {
                    // A failed group fails its operations: re-sending them one by one
                    // later could put them behind requests sent meanwhile (an undoing
                    // release would then run before the acquire it undoes).
                    match batch(link, &ops).await {
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

    fn timeout(&self) -> Duration {
        self.0.timeout()
    }
}

/// Acquire on one master. Plain acquires go through the master's group commit;
/// `waiting` (plain only): the ticket of a registering waiter, see [`PlainOp`].
pub(crate) async fn acquire(
    m: &Master,
    name: &str,
    lease_ms: u64,
    holder: &str,
    mode: AcquireMode,
    waiting: Option<Arc<str>>,
) -> Result<Acquire> {
    let mut inv = match mode {
        AcquireMode::Plain => {
            let op = PlainOp {
                release: false,
                name: name.into(),
                holder: holder.into(),
                lease_ms,
                waiting,
            };
            let (status, value) = m.plain.submit(op).await?;
            return acquire_reply(m, name, mode, status, value, (None, false));
        }
        AcquireMode::Fenced { redlock } => {
            let mut inv = FENCED_ACQUIRE.call();
            inv.key(name).key(keys::token(name));
            if redlock {
                inv.key(keys::token_epoch(name));
            }
            inv
        }
        AcquireMode::Fair { .. } => fair_call(&FAIR_ACQUIRE, name),
        AcquireMode::Read | AcquireMode::Write { .. } => {
            let write = matches!(mode, AcquireMode::Write { .. });
            let (mut inv, extra) = super::rw::acquire_call(name, holder, write);
            inv.arg(lease_ms).arg(holder);
            for a in extra {
                inv.arg(a);
            }
            if let AcquireMode::Write { intent_ms } = mode {
                inv.arg(intent_ms);
            }
            return eval_acquire(m, name, mode, inv).await;
        }
    };
    inv.arg(lease_ms).arg(holder);
    if let AcquireMode::Fair {
        join,
        stale_ms,
        wait_ms,
    } = mode
    {
        inv.arg(stale_ms)
            .arg(if join { "1" } else { "0" })
            .arg(wait_ms);
    }
    eval_acquire(m, name, mode, inv).await
}

/// Runs an acquire script (waiting for replicas as configured, `Master::eval_acquire`)
/// and reads its `{status, value[, token, current]}` reply.
async fn eval_acquire(
    m: &Master,
    name: &str,
    mode: AcquireMode,
    inv: Invocation,
) -> Result<Acquire> {
    let (v, short) = m.eval_acquire(&inv).await.map_err(|e| typed(name, e))?;
    let Value::Array(items) = &v else {
        return Err(protocol(m, "acquire", &v));
    };
    let (status, value) = match (items.first().and_then(int), items.get(1).and_then(int)) {
        (Some(s), Some(x)) => (s, x),
        _ => return Err(protocol(m, "acquire", &v)),
    };
    let token = items.get(2).and_then(int).map(|t| t as u64);
    let current = items.get(3).and_then(int) == Some(1);
    match (
        acquire_reply(m, name, mode, status, value, (token, current))?,
        short,
    ) {
        (Acquire::Granted { .. }, Some(e)) => Err(e),
        (reply, _) => Ok(reply),
    }
}

fn acquire_reply(
    m: &Master,
    name: &str,
    mode: AcquireMode,
    status: i64,
    value: i64,
    (token, current): (Option<u64>, bool),
) -> Result<Acquire> {
    let fenced = matches!(mode, AcquireMode::Fenced { .. });
    Ok(match status {
        0 => Acquire::Busy { pttl_ms: value },
        1 | 2 => Acquire::Granted {
            fresh: status == 1,
            token: token.filter(|_| fenced),
            current: current && fenced,
        },
        WRONG_TYPE => return Err(wrong_type(m.addr(), name)),
        _ => return Err(protocol(m, "acquire", &Value::Int(status))),
    })
}

/// Release on one master. Plain releases go through the master's group commit.
pub(crate) async fn release(
    m: &Master,
    name: &str,
    lease_ms: u64,
    holder: &str,
    kind: Kind,
) -> Result<Release> {
    if kind.is_rw() {
        return super::rw::release(m, name, lease_ms, holder).await;
    }
    if kind != Kind::Fair {
        let op = PlainOp {
            release: true,
            name: name.into(),
            holder: holder.into(),
            lease_ms,
            waiting: None,
        };
        return match m.plain.submit(op).await?.0 {
            -1 => Ok(Release::NotHeld),
            0 => Ok(Release::StillHeld),
            1 => Ok(Release::Released),
            WRONG_TYPE => Err(wrong_type(m.addr(), name)),
            other => Err(protocol(m, "release", &Value::Int(other))),
        };
    }
    // fair_release.lua without offers: an ordinary release.
    Ok(
        match fair_hand_over(m, name, (holder, lease_ms), 0, &[]).await? {
            HandOver::NotHeld => Release::NotHeld,
            HandOver::StillHeld => Release::StillHeld,
            HandOver::Released | HandOver::To(_) => Release::Released,
        },
    )
}

/// `batch.lua`'s status for a key of another type.
const WRONG_TYPE: i64 = 3;

fn wrong_type(addr: &str, name: &str) -> Error {
    Error::WrongType {
        name: name.to_string(),
        addr: addr.to_string(),
    }
}

/// Sends an acquisition script: synced to replicas when the deployment asks for it
/// (transport/replicas.rs). Returns the script's reply and, when fewer replicas than
/// wanted acknowledged it, the error to report should the reply be a grant.
pub(crate) async fn send_acquire(
    link: &dyn Transport,
    timeout: Duration,
    inv: &Invocation,
) -> Result<(Value, Option<Error>)> {
    if !link.syncs() {
        let v = link.send(Lane::Lock, timeout, Request::Eval(inv)).await?;
        return Ok((v, None));
    }
    let v = link.send(Lane::Lock, timeout, Request::Synced(inv)).await?;
    judge_synced(link, v, true)
}

/// A synced write's answer (`[reply, acked, wanted, node]`): the script's reply and,
/// when fewer replicas than wanted acknowledged it, the error to report should the reply
/// count (counted per primary: an acquisition's, or a renewal's).
pub(crate) fn judge_synced(
    link: &dyn Transport,
    v: Value,
    acquisition: bool,
) -> Result<(Value, Option<Error>)> {
    let Some((reply, acked, wanted, addr)) = crate::transport::synced_parts(v) else {
        return Err(Error::Redis {
            addr: link.addr().to_string(),
            source: redis::RedisError::from((redis::ErrorKind::Parse, "unexpected synced reply")),
        });
    };
    crate::telemetry::replicas_waited(&addr, wanted, acked, acquisition);
    let short = (acked < wanted).then(|| Error::NotReplicated {
        addr,
        acked,
        wanted,
        timeout: link.sync_timeout(),
    });
    Ok((reply, short))
}

/// One plain operation with its own script (acquire.lua / release.lua), answered in
/// `batch.lua`'s terms.
async fn single(link: &dyn Transport, op: &PlainOp) -> Result<PlainReply> {
    let name = &*op.name;
    let inv = if op.release {
        let mut inv = RELEASE.call();
        inv.key(name)
            .key(keys::waiters(name))
            .arg(keys::channel(name))
            .arg("0")
            .arg(op.lease_ms)
            .arg(&*op.holder);
        inv
    } else {
        let mut inv = ACQUIRE.call();
        inv.key(name).arg(op.lease_ms).arg(&*op.holder);
        if let Some(ticket) = &op.waiting {
            inv.key(keys::waiters(name)).arg(&**ticket);
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
            redis::from_redis_value::<(i64, i64)>(v)
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

/// Runs `call` once per group of `items` whose keys may share one script call
/// ([`Transport::shard`]: one hash slot on a cluster), concurrently, and returns one
/// result per item, in order. A single server is one group. Every group's call is polled once before this
/// returns Pending, so all are written in this poll (batch.rs invariant 4).
pub(crate) async fn by_shard<'a, T, R: Clone>(
    link: &'a dyn Transport,
    items: &'a [&'a T],
    key: impl Fn(&T) -> &str,
    call: impl Fn(&'a dyn Transport, Vec<&'a T>) -> BoxFuture<'a, Vec<Result<R>>>,
) -> Vec<Result<R>> {
    grouped(link, items, |i| link.shard(key(i).as_bytes()), call).await
}

/// Renews `(name, holder)` pairs to `lease_ms` with `script` (ARGV[1] the lease, then
/// what `add` declares per pair; the script answers 1 per pair still held), one call
/// per hash slot on a cluster ([`by_shard`]); one result per pair, in order. The
/// watchdog's renewal of read holds and of expirable-semaphore permits.
pub(crate) async fn renew_pairs(
    m: &Master,
    script: &'static Script,
    pairs: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
    add: fn(&mut Invocation, &str, &str),
) -> Vec<Result<bool>> {
    let items: Vec<&(&str, &str)> = pairs.iter().collect();
    by_shard(
        m.link(),
        &items,
        |p| p.0,
        |_, group| {
            Box::pin(async move {
                let mut inv = script.call();
                inv.arg(lease_ms);
                for (name, holder) in &group {
                    add(&mut inv, name, holder);
                }
                let first = group.first().map_or("", |p| p.0);
                let (reply, short) = match m.eval_renewal(timeout, &inv).await {
                    Err(e) => (Err(typed(first, e)), None),
                    Ok((v, short)) => (Ok(v), short),
                };
                let held = match reply {
                    Err(e) => Err(e),
                    Ok(v) => m.decode::<Vec<i64>>(v).and_then(|v| {
                        if v.len() == group.len() {
                            Ok(v)
                        } else {
                            Err(m.err(redis::RedisError::from((
                                redis::ErrorKind::Parse,
                                "unexpected script reply",
                                format!("{} answers for {} holds", v.len(), group.len()),
                            ))))
                        }
                    }),
                };
                // Renewed but not replicated: not a renewal (watchdog.rs invariant 6).
                match held {
                    Err(e) => group.iter().map(|_| Err(e.clone())).collect(),
                    Ok(v) => (v.into_iter())
                        .map(|x| unreplicated(x == 1, &short))
                        .collect(),
                }
            })
        },
    )
    .await
}

/// Runs `call` once per group of `items` with the same `group` number, concurrently;
/// one result per item, in order (see [`by_shard`]).
async fn grouped<'a, T, R: Clone>(
    link: &'a dyn Transport,
    items: &'a [&'a T],
    group: impl Fn(&T) -> usize,
    call: impl Fn(&'a dyn Transport, Vec<&'a T>) -> BoxFuture<'a, Vec<Result<R>>>,
) -> Vec<Result<R>> {
    // One group (always, on a single server): no bookkeeping.
    let first = items.first().map(|i| group(i));
    if items.iter().all(|i| Some(group(i)) == first) {
        return call(link, items.to_vec()).await;
    }
    let shards: Vec<usize> = items.iter().map(|i| group(i)).collect();
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        match groups.iter_mut().find(|(s, _)| s == shard) {
            Some((_, idx)) => idx.push(i),
            None => groups.push((*shard, vec![i])),
        }
    }
    let calls = groups.iter().map(|(_, idx)| {
        let group: Vec<&T> = idx.iter().map(|&i| items[i]).collect();
        call(link, group)
    });
    let replies = join_all(calls).await;
    let mut out: Vec<Option<Result<R>>> = vec![None; items.len()];
    for ((_, idx), replies) in groups.iter().zip(replies) {
        for (&i, r) in idx.iter().zip(replies) {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|r| r.expect("every item has a reply"))
        .collect()
}

/// Many plain operations in one `batch.lua` call. A grant the replicas did not
/// acknowledge in time is that operation's [`Error::NotReplicated`].
async fn batch(link: &dyn Transport, ops: &[&PlainOp]) -> Result<Vec<Result<PlainReply>>> {
    let mut inv = BATCH.call();
    for op in ops {
        inv.key(&*op.name)
            .key(keys::waiters(&op.name))
            .arg(if op.release { "r" } else { "a" })
            .arg(op.lease_ms)
            .arg(&*op.holder);
        match op.release {
            true => inv.arg(keys::channel(&op.name)),
            false => inv.arg(""),
        };
        inv.arg(op.waiting.as_deref().unwrap_or(""));
    }
    let (v, short) = match ops.iter().any(|op| !op.release) {
        true => send_acquire(link, link.timeout(), &inv).await?,
        false => (
            link.send(Lane::Lock, link.timeout(), Request::Eval(&inv))
                .await?,
            None,
        ),
    };
    let ints: Option<Vec<i64>> = match &v {
        Value::Array(items) => items.iter().map(int).collect(),
        _ => None,
    };
    match ints {
        Some(ints) if ints.len() == 2 * ops.len() => Ok(ints
            .chunks(2)
            .zip(ops)
            .map(|(c, op)| match (&short, op.release, c[0]) {
                (Some(e), false, 1 | 2) => Err(e.clone()),
                _ => Ok((c[0], c[1])),
            })
            .collect()),
        _ => Err(Error::Redis {
            addr: link.addr().to_string(),
            source: redis::RedisError::from((
                redis::ErrorKind::Parse,
                "unexpected batch reply",
                format!("{v:?}"),
            )),
        }),
    }
}

/// What a release that may hand the lock over (`release.lua`, `fair_release.lua`) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandOver {
    NotHeld,
    StillHeld,
    /// Released normally (another client waits, or no offered waiter is next): the
    /// next waiter was woken.
    Released,
    /// The offered waiter at this index holds the lock now.
    To(usize),
}

/// Releases `from`'s last hold of `name` and, unless another client waits, gives the
/// lock to `to` in the same script (lock lane, so in order with our other scripts);
/// `to`'s ticket, if it registered one, leaves the waiter registry with it.
pub(crate) async fn hand_over(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    (to, to_lease_ms, ticket): (&str, u64, Option<&str>),
) -> Result<HandOver> {
    let mut inv = RELEASE.call();
    inv.key(name)
        .key(keys::waiters(name))
        .arg(keys::channel(name))
        .arg("0")
        .arg(from_lease_ms)
        .arg(from)
        .arg(to)
        .arg(to_lease_ms);
    if let Some(ticket) = ticket {
        inv.arg(ticket);
    }
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(match m.decode::<Option<i64>>(v)? {
        None => HandOver::NotHeld,
        Some(0) => HandOver::StillHeld,
        Some(1) => HandOver::Released,
        Some(_) => HandOver::To(0),
    })
}

/// Releases `from`'s last hold of a fair `name` and, when the queue head is one of
/// `offered` (holder id, lease in ms; all with wait time `wait_ms`), grants it the lock
/// in the same script.
pub(crate) async fn fair_hand_over(
    m: &Master,
    name: &str,
    (from, from_lease_ms): (&str, u64),
    wait_ms: u64,
    offered: &[(&str, u64)],
) -> Result<HandOver> {
    let mut inv = fair_call(&FAIR_RELEASE, name);
    inv.arg("0").arg(from_lease_ms).arg(from).arg(wait_ms);
    for (holder, lease_ms) in offered {
        inv.arg(*holder).arg(*lease_ms);
    }
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    let to = match &v {
        Value::Nil => return Ok(HandOver::NotHeld),
        Value::Int(0) => return Ok(HandOver::StillHeld),
        Value::Int(_) => return Ok(HandOver::Released),
        Value::BulkString(to) => offered.iter().position(|(h, _)| h.as_bytes() == to),
        _ => None,
    };
    to.map(HandOver::To)
        .ok_or_else(|| protocol(m, "fair_hand_over", &v))
}

/// Renews `(name, holder)` pairs to `lease_ms`; one answer per pair, true = still
/// held. On a cluster, one call per primary (the locks' names travel as arguments, so
/// one call may touch every slot the node serves); a lock the node no longer serves
/// (a slot moved since the map was read) is renewed alone, routed by its own name.
pub(crate) async fn renew(
    m: &Master,
    locks: &[(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Vec<Result<bool>> {
    let items: Vec<&(&str, &str)> = locks.iter().collect();
    let link = m.link();
    grouped(
        link,
        &items,
        |l| link.node(l.0.as_bytes()),
        |_, group| {
            Box::pin(async move {
                let (answers, short) = match renew_group(m, &group, lease_ms, timeout).await {
                    Err(e) => return group.iter().map(|_| Err(e.clone())).collect(),
                    Ok(answers) => answers,
                };
                let elsewhere = group.iter().zip(&answers).filter(|(_, a)| a.is_none());
                let alone = join_all(elsewhere.map(|(l, _)| async move {
                    let (v, short) = renew_group(m, &[*l], lease_ms, timeout).await?;
                    let held = v[0].ok_or_else(|| protocol(m, "renew", &Value::Int(-1)))?;
                    unreplicated(held, &short)
                }))
                .await;
                let mut alone = alone.into_iter();
                answers
                    .into_iter()
                    .map(|a| match a {
                        Some(held) => unreplicated(held, &short),
                        None => alone.next().expect("one answer per lock renewed alone"),
                    })
                    .collect()
            })
        },
    )
    .await
}

/// A renewal's answer for one lock: a lock renewed on a primary whose replicas did
/// not acknowledge it (`short`) is not renewed (watchdog.rs invariant 6).
fn unreplicated(held: bool, short: &Option<Error>) -> Result<bool> {
    match (held, short) {
        (true, Some(e)) => Err(e.clone()),
        (held, _) => Ok(held),
    }
}

/// One renew call for `locks` (all served by one node on a cluster), with one `WAIT`
/// for the node's replicas when renewals are synced: per lock, whether it is still
/// held, or `None` when the node does not serve it; and the error that makes the
/// renewals not count when the replicas did not acknowledge them.
async fn renew_group(
    m: &Master,
    locks: &[&(&str, &str)],
    lease_ms: u64,
    timeout: Duration,
) -> Result<(Vec<Option<bool>>, Option<Error>)> {
    let first = locks.first().map_or("", |l| l.0);
    let mut inv = RENEW.call();
    inv.key(first).arg(lease_ms);
    for (name, holder) in locks {
        inv.arg(*name).arg(*holder);
    }
    let (v, short) = (m.eval_renewal(timeout, &inv).await).map_err(|e| typed(first, e))?;
    let v: Vec<i64> = m.decode(v)?;
    if v.len() != locks.len() {
        return Err(protocol(m, "renew", &Value::Int(v.len() as i64)));
    }
    let answers = v.into_iter().map(|x| (x >= 0).then_some(x == 1)).collect();
    Ok((answers, short))
}

/// `ticket` stops waiting for the plain lock `name` (lua/unwait.lua): it leaves the
/// waiter registry, a hand-over to it nobody claimed is released, and a free lock is
/// passed on to the next waiter.
pub(crate) async fn unwait(m: &Master, name: &str, ticket: &str) -> Result<()> {
    let mut inv = UNWAIT.call();
    inv.key(name)
        .key(keys::waiters(name))
        .arg(keys::channel(name))
        .arg(ticket);
    m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(())
}

/// Deletes `name` whoever holds it and wakes its waiters; true if it was deleted.
pub(crate) async fn force_release(m: &Master, name: &str, fair: bool) -> Result<bool> {
    let mut inv = if fair {
        fair_call(&FAIR_FORCE, name)
    } else {
        let mut inv = FORCE.call();
        inv.key(name)
            .key(keys::waiters(name))
            .arg(keys::channel(name));
        inv
    };
    inv.arg("0");
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// Deletes `name` if `holder` still holds it (a hold declared lost) and wakes the next
/// waiter; true if it was deleted.
pub(crate) async fn drop_lost(m: &Master, name: &str, holder: &str) -> Result<bool> {
    let mut inv = fair_call(&DROP, name);
    inv.arg(holder).arg("0");
    let v = m.eval(Lane::Lock, &inv).await.map_err(|e| typed(name, e))?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// A call of a script over the fair lock's keys: the lock, its queue, its deadlines,
/// its channel prefix and its liveness set (KEYS[1..5] of every fair script and of
/// drop.lua).
fn fair_call(script: &'static Script, name: &str) -> Invocation {
    let mut inv = script.call();
    inv.key(name)
        .key(keys::queue(name))
        .key(keys::timeouts(name))
        .key(keys::channel(name))
        .key(keys::fair_alive(name));
    inv
}

/// Removes `holder` (wait time `wait_ms`) from the fair queue of `name`, taking its
/// wait off the deadlines behind it as Redisson's failed acquire does; true if it was
/// queued.
pub(crate) async fn fair_cancel(
    m: &Master,
    name: &str,
    holder: &str,
    wait_ms: u64,
) -> Result<bool> {
    let mut inv = fair_call(&FAIR_CANCEL, name);
    inv.arg(holder).arg(wait_ms);
    let v = m.eval(Lane::Lock, &inv).await?;
    Ok(m.decode::<i64>(v)? == 1)
}

/// Raises the fencing counter of `name` to at least `token` and, if `holder` holds the
/// lock there, marks the master current (its epoch := its run_id); returns the counter.
/// Redlock only.
pub(crate) async fn fenced_sync(m: &Master, name: &str, holder: &str, token: u64) -> Result<u64> {
    let mut inv = FENCED_SYNC.call();
    inv.key(keys::token(name))
        .key(keys::token_epoch(name))
        .key(name)
        .arg(token)
        .arg(holder);
    let v = m.eval(Lane::Lock, &inv).await?;
    m.decode(v)
}
