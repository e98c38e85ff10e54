//! The Sentinel transport: a primary/replica set managed by Redis Sentinel. The
//! sentinels name the current primary; requests go to it through a [`Standalone`]
//! transport, replaced when the sentinels switch to another primary.
//!
//! Invariants:
//! 1. The primary is the one a sentinel names (`SENTINEL GET-MASTER-ADDR-BY-NAME`) and
//!    that says it is a master (`ROLE`): a sentinel that has not caught up with a
//!    switch cannot send us to a replica.
//! 2. It is looked up again when a sentinel announces `+switch-master` for our name (a
//!    watcher task stays subscribed on one sentinel at a time, moving to the next when
//!    its connection drops, and looks the primary up after every reconnect since a
//!    switch may have been missed), and when the primary fails to answer or answers
//!    READONLY (it was demoted). Look-ups are coalesced and run in the background; a
//!    request never waits for one.
//! 3. When the primary changes, the generation is bumped: subscribers opened on the
//!    old primary end (pubsub.rs then resubscribes on the new one and wakes every
//!    waiter).
//! 4. The watcher stops when the transport is dropped.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::{ConnectionInfo, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::coalesce::Coalesced;
use super::replicas::SyncReplicas;
use super::standalone::{LinkSettings, Standalone};
use super::subscriber::{Classic, Message};
use super::{BoxFuture, Dialect, Lane, Request, Subscriber, Transport};
use crate::error::{Error, Result};

/// The least time between two look-ups of the primary (invariant 2).
const LOOKUP_EVERY: Duration = Duration::from_millis(100);

/// A Sentinel-managed primary.
pub(crate) struct Sentinel {
    inner: Arc<Inner>,
    stop: CancellationToken,
}

/// How a [`Sentinel`] connects: the sentinels, and the primary's settings.
pub(crate) struct SentinelSetup {
    pub(crate) master_name: String,
    /// One client per sentinel (its address, credentials, TLS).
    pub(crate) sentinels: Vec<redis::Client>,
    /// The primary's connection settings; its host and port come from the sentinels.
    pub(crate) master: ConnectionInfo,
    /// How the primary is reached.
    pub(crate) link: LinkSettings,
}

struct Inner {
    me: Weak<Inner>,
    label: String,
    setup: SentinelSetup,
    primary: parking_lot::RwLock<Arc<Standalone>>,
    /// Bumped when the primary changes (invariant 3).
    generation: watch::Sender<u64>,
    /// When the primary last changed.
    switched_at: parking_lot::Mutex<Option<std::time::Instant>>,
    /// The background look-ups (invariant 2).
    lookups: Coalesced,
}

impl Sentinel {
    /// Finds the primary through the sentinels (within the connect timeout each) and
    /// starts the `+switch-master` watcher.
    pub(crate) async fn connect(setup: SentinelSetup) -> Result<Sentinel> {
        let primary = find_primary(&setup).await?;
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            label: format!("sentinel master {}", setup.master_name),
            setup,
            primary: parking_lot::RwLock::new(Arc::new(primary)),
            generation: watch::channel(0).0,
            switched_at: parking_lot::Mutex::new(None),
            lookups: Coalesced::new(LOOKUP_EVERY),
        });
        let stop = CancellationToken::new();
        tokio::spawn(watch_switches(Arc::downgrade(&inner), stop.clone()));
        Ok(Sentinel { inner, stop })
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.stop.cancel(); // invariant 4
    }
}

/// Asks each sentinel in turn for the primary and checks it (invariant 1).
async fn find_primary(setup: &SentinelSetup) -> Result<Standalone> {
    let mut last = None;
    for sentinel in &setup.sentinels {
        match primary_named_by(setup, sentinel).await {
            Ok(primary) => return Ok(primary),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::config("no sentinel given")))
}

async fn primary_named_by(setup: &SentinelSetup, sentinel: &redis::Client) -> Result<Standalone> {
    let at = sentinel.get_connection_info().addr().to_string();
    let settings = sentinel.get_connection_info().redis_settings();
    let err =
        |source| crate::transport::server_errors::from_link(&at, settings.username(), 0, source);
    let ask = async {
        let mut conn = sentinel.get_multiplexed_async_connection().await?;
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&setup.master_name)
            .query_async::<Option<(String, u16)>>(&mut conn)
            .await
    };
    let named = tokio::time::timeout(setup.link.connect_timeout, ask)
        .await
        .map_err(|_| Error::Timeout {
            addr: at.clone(),
            after: setup.link.connect_timeout,
        })?
        .map_err(err)?;
    let Some((host, port)) = named else {
        return Err(Error::config(format!(
            "sentinel {at} knows no master named {:?}",
            setup.master_name
        )));
    };
    let info = super::standalone::settings_at(&setup.master, &host, port);
    let addr = info.addr().to_string();
    let primary = setup.link.open_at(info, Dialect::Classic)?;
    let role = redis::cmd("ROLE");
    let reply = primary
        .send(Lane::Side, setup.link.connect_timeout, Request::Cmd(&role))
        .await?;
    match reply {
        Value::Array(items) if matches!(items.first(), Some(Value::BulkString(r)) if r == b"master") => {
            Ok(primary)
        }
        other => Err(Error::config(format!(
            "sentinel {at} names {addr} as master {:?}, but it is not a master ({other:?})",
            setup.master_name
        ))),
    }
}

impl Inner {
    fn primary(&self) -> Arc<Standalone> {
        self.primary.read().clone()
    }

    /// Looks the primary up again in the background, coalesced (invariant 2).
    fn schedule_lookup(&self) {
        if !self.lookups.claim() {
            return;
        }
        let Some(this) = self.me.upgrade() else {
            self.lookups.unclaim();
            return;
        };
        tokio::spawn(async move { this.lookups.run(this.lookup()).await });
    }

    async fn lookup(&self) {
        match find_primary(&self.setup).await {
            Ok(found) if found.addr() != self.primary().addr() => {
                tracing::warn!(master = %self.setup.master_name, from = %self.primary().addr(),
                    to = %found.addr(), "sentinel switched the primary");
                *self.primary.write() = Arc::new(found);
                *self.switched_at.lock() = Some(std::time::Instant::now());
                self.generation.send_modify(|g| *g += 1); // invariant 3
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(master = %self.setup.master_name, error = %e,
                "primary look-up failed"),
        }
    }
}

/// The watcher of `+switch-master` (invariant 2), until `stop` or the transport goes.
async fn watch_switches(inner: Weak<Inner>, stop: CancellationToken) {
    let mut next = 0usize;
    let mut backoff = Duration::from_millis(50);
    loop {
        let Some(this) = inner.upgrade() else { return };
        let sentinels = this.setup.sentinels.clone();
        let (name, timeout) = (
            this.setup.master_name.clone(),
            this.setup.link.connect_timeout,
        );
        drop(this);
        let sentinel = &sentinels[next % sentinels.len()];
        next += 1;
        let subscribed = tokio::time::timeout(timeout, async {
            let mut pubsub = sentinel.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, redis::RedisError>(pubsub)
        });
        let pubsub = tokio::select! {
            _ = stop.cancelled() => return,
            r = subscribed => r,
        };
        let Ok(Ok(pubsub)) = pubsub else {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(1));
            continue;
        };
        backoff = Duration::from_millis(50);
        // A switch may have happened while no sentinel was watched.
        match inner.upgrade() {
            Some(this) => this.lookup().await,
            None => return,
        }
        let mut messages = pubsub.into_on_message();
        loop {
            let msg = tokio::select! {
                _ = stop.cancelled() => return,
                m = messages.next() => m,
            };
            let Some(msg) = msg else { break };
            let payload: String = msg.get_payload().unwrap_or_default();
            if payload.split(' ').next() == Some(name.as_str()) {
                match inner.upgrade() {
                    Some(this) => this.lookup().await,
                    None => return,
                }
            }
        }
    }
}

/// A subscriber on the primary that ends when the primary changes (invariant 3).
struct SwitchAware {
    classic: Classic,
    generation: watch::Receiver<u64>,
}

impl Subscriber for SwitchAware {
    fn subscribe<'a>(
        &'a mut self,
        channels: &'a [String],
    ) -> BoxFuture<'a, redis::RedisResult<()>> {
        self.classic.subscribe(channels)
    }

    fn unsubscribe<'a>(
        &'a mut self,
        channels: &'a [String],
    ) -> BoxFuture<'a, redis::RedisResult<()>> {
        self.classic.unsubscribe(channels)
    }

    fn next_message(&mut self) -> BoxFuture<'_, Option<Message>> {
        Box::pin(async move {
            tokio::select! {
                m = self.classic.next_message() => m,
                _ = self.generation.changed() => None,
            }
        })
    }
}

impl Transport for Sentinel {
    fn addr(&self) -> &str {
        &self.inner.label
    }

    fn timeout(&self) -> Duration {
        self.inner.setup.link.timeout
    }

    fn connect_timeout(&self) -> Duration {
        self.inner.setup.link.connect_timeout
    }

    fn send<'a>(
        &'a self,
        lane: Lane,
        timeout: Duration,
        request: Request<'a>,
    ) -> BoxFuture<'a, Result<Value>> {
        Box::pin(async move {
            let primary = self.inner.primary();
            let reply = primary.send(lane, timeout, request).await;
            if let Err(e) = &reply {
                let demoted = matches!(e, Error::Redis { source, .. }
                    if source.code() == Some("READONLY"));
                if demoted || e.is_unavailable() {
                    self.inner.schedule_lookup();
                }
            }
            reply
        })
    }

    fn subscriber(&self) -> BoxFuture<'_, redis::RedisResult<Box<dyn Subscriber>>> {
        Box::pin(async move {
            let mut generation = self.inner.generation.subscribe();
            generation.mark_unchanged();
            let primary = self.inner.primary();
            let pubsub = primary.client().get_async_pubsub().await?;
            Ok(Box::new(SwitchAware {
                classic: Classic::new(pubsub),
                generation,
            }) as Box<dyn Subscriber>)
        })
    }

    fn serving(&self, _key: &[u8]) -> String {
        self.inner.primary().addr().to_string()
    }

    fn syncs(&self) -> bool {
        self.inner.setup.link.sync.0 != SyncReplicas::Off
    }

    fn sync_timeout(&self) -> Duration {
        self.inner.setup.link.sync.1
    }

    fn replica_sync(&self, key: &[u8]) -> Option<super::replicas::ReplicaSync> {
        self.inner.primary().replica_sync(key)
    }

    fn syncs_renewals(&self) -> bool {
        self.inner.primary().syncs_renewals()
    }

    fn changed_at(&self, key: &[u8]) -> Option<std::time::Instant> {
        let switched = *self.inner.switched_at.lock();
        switched.max(self.inner.primary().changed_at(key))
    }
}
