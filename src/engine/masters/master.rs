//! One master as the engine uses it: its transport, with the default timeout applied,
//! one retry for idempotent reads, and the group commit of plain lock operations.

use std::sync::Arc;
use std::time::Duration;

use redis::{FromRedisValue, Value};

use crate::engine::masters::plain_ops::{PlainFlight, PlainScripts};
use crate::engine::masters::replies::{judge_synced, send_acquire};
use crate::error::{Error, Result};
use crate::transport::batch::Batcher;
use crate::transport::{Invocation, Lane, Request, Transport};

/// One independent deployment (a Redlock master, or the only one).
pub(crate) struct Master {
    link: Arc<dyn Transport>,
    /// Group commit of plain acquires and releases (transport/batch.rs).
    pub(crate) plain: Arc<Batcher<PlainFlight>>,
}

impl Master {
    pub(crate) fn new(link: Arc<dyn Transport>, plain: &'static PlainScripts) -> Arc<Master> {
        Arc::new(Master {
            plain: Arc::new(Batcher::new(PlainFlight(link.clone(), plain))),
            link,
        })
    }

    /// The deployment's transport.
    pub(crate) fn link(&self) -> &dyn Transport {
        &*self.link
    }

    /// `host:port`, as shown in errors.
    pub(crate) fn addr(&self) -> &str {
        self.link.addr()
    }

    /// The per-command timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.link.timeout()
    }

    /// The longest one request to this master may take when it answers: the master
    /// timeout, plus the replicas' wait of a synced acquisition when its grants wait
    /// for replicas (not for a master last seen without any). A call is given at
    /// least this long to hear its first answer, however short its wait (waiter/mod.rs
    /// invariant 11).
    pub(crate) fn bound(&self) -> Duration {
        let link = &*self.link;
        match link.grants_need_replicas() {
            true => link.timeout() + link.sync_timeout(),
            false => link.timeout(),
        }
    }

    /// Whether a request to this master begun now may still be unanswered at `end`.
    /// The transport bounds every request by its timeout, plus the replicas' wait of a
    /// synced write; one queued in the group commit waits at most two timeouts and
    /// 10 ms (batch.rs); and 10 ms more for the timer's granularity. A deadline beyond
    /// that cuts nothing, so the engine sets no timer for it (an uncontended `lock()`
    /// and its release: their deadline is the unavailable timeout).
    pub(crate) fn may_outlast(&self, end: tokio::time::Instant) -> bool {
        let link = &*self.link;
        let longest = (link.timeout().checked_add(link.sync_timeout()))
            .and_then(|bound| bound.checked_mul(2))
            .and_then(|bound| bound.checked_add(Duration::from_millis(20)));
        match longest.and_then(|l| tokio::time::Instant::now().checked_add(l)) {
            Some(answered_by) => answered_by > end,
            None => true,
        }
    }

    /// Runs a script on `lane` within the master timeout.
    pub(crate) async fn eval(&self, lane: Lane, inv: &Invocation) -> Result<Value> {
        self.eval_within(lane, self.link.timeout(), inv).await
    }

    /// Runs a script on `lane` within `timeout`. On the lock lane it goes after every
    /// plain operation submitted before it (batch.rs invariant 6).
    pub(crate) async fn eval_within(
        &self,
        lane: Lane,
        timeout: Duration,
        inv: &Invocation,
    ) -> Result<Value> {
        // One bound for both steps; the wait for the batcher is usually ready at once,
        // so its timer is never armed (the transport bounds the send itself).
        let started = std::time::Instant::now();
        if lane == Lane::Lock {
            let drained = tokio::time::timeout(timeout, self.plain.drained()).await;
            if drained.is_err() {
                return Err(Error::Timeout {
                    addr: self.addr().to_string(),
                    after: timeout,
                });
            }
        }
        let left = timeout.saturating_sub(started.elapsed());
        self.link.send(lane, left, Request::Eval(inv)).await
    }

    /// Runs an acquisition script on the lock lane after the batcher's earlier
    /// operations, synced to replicas when the deployment asks for it
    /// ([`send_acquire`]).
    pub(crate) async fn eval_acquire(&self, inv: &Invocation) -> Result<(Value, Option<Error>)> {
        let timeout = self.link.timeout();
        let started = std::time::Instant::now();
        if tokio::time::timeout(timeout, self.plain.drained())
            .await
            .is_err()
        {
            return Err(Error::Timeout {
                addr: self.addr().to_string(),
                after: timeout,
            });
        }
        let left = timeout.saturating_sub(started.elapsed());
        send_acquire(&*self.link, left, inv).await
    }

    /// Runs a renewal script on a side connection within `timeout`, synced to the
    /// replicas when acquisitions are (the transport's `WAIT` in the same round trip,
    /// transport/replicas.rs). Returns the script's reply and, when fewer replicas
    /// acknowledged than were waited for, the [`Error::NotReplicated`] that makes the
    /// renewal not count (watchdog.rs invariant 6).
    pub(crate) async fn eval_renewal(
        &self,
        timeout: Duration,
        inv: &Invocation,
    ) -> Result<(Value, Option<Error>)> {
        let link = &*self.link;
        if !link.syncs_renewals() {
            return Ok((
                link.send(Lane::Side, timeout, Request::Eval(inv)).await?,
                None,
            ));
        }
        // The transport adds the replicas' wait to the timeout; the whole is cut at
        // `timeout` all the same (a renewal round waits for a silent master at most one
        // period, watchdog.rs invariant 1). Replicas that acknowledge answer WAIT at
        // once; a renewal cut short is one they did not acknowledge in time.
        let sent = link.send(Lane::Side, timeout, Request::Synced(inv));
        let v = match tokio::time::timeout(timeout, sent).await {
            Ok(v) => v?,
            Err(_) => {
                return Err(Error::Timeout {
                    addr: self.addr().to_string(),
                    after: timeout,
                })
            }
        };
        judge_synced(link, v, false)
    }

    /// Runs a command on `lane` within `timeout` and decodes its reply.
    pub(crate) async fn cmd<T: FromRedisValue>(
        &self,
        lane: Lane,
        timeout: Duration,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        let v = self.link.send(lane, timeout, Request::Cmd(cmd)).await?;
        self.decode(v)
    }

    /// Runs a pipeline on the lock lane within the master timeout.
    pub(crate) async fn pipe(&self, pipe: &redis::Pipeline) -> Result<Value> {
        (self.link)
            .send(Lane::Lock, self.link.timeout(), Request::Pipe(pipe))
            .await
    }

    /// Runs one read-only command on a side connection within the master timeout. A
    /// read is idempotent, so a connection that turned out broken (the master
    /// restarted since it was last used) costs one retry on a fresh one, not an error.
    pub(crate) async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        let timeout = self.link.timeout();
        match self.cmd(Lane::Side, timeout, cmd).await {
            Err(Error::Redis { source, .. })
                if source.is_io_error() || source.is_connection_dropped() =>
            {
                self.cmd(Lane::Side, timeout, cmd).await
            }
            other => other,
        }
    }

    /// Decodes a reply with redis-rs's `FromRedisValue`; a mismatch is a protocol error
    /// naming this master.
    pub(crate) fn decode<T: FromRedisValue>(&self, v: Value) -> Result<T> {
        redis::from_redis_value(v).map_err(|e| self.err(e.into()))
    }

    /// Wraps a client error with this master's address.
    pub(crate) fn err(&self, source: redis::RedisError) -> Error {
        crate::transport::server_errors::from_master(self.addr(), source)
    }
}
