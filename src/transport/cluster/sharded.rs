//! The cluster's subscriber: sharded pub/sub (Redis >= 7), as Redisson uses on such
//! clusters by default. Classic and sharded pub/sub do not deliver to each other, so
//! waiters `SSUBSCRIBE` where releases `SPUBLISH` (the sharded script dialect), and
//! also listen classic where a Redisson that subscribes classic may publish (invariant
//! 4).
//!
//! Invariants:
//! 1. A channel is subscribed on the primary serving its slot, over one RESP3
//!    connection per primary shared by every channel there; messages of all of them
//!    arrive on one queue.
//! 2. The subscriptions count as lost (`next_message` returns `None`, and the hub
//!    subscribes everything again and wakes every waiter) when any of the connections
//!    closes or the server drops a subscription we did not drop (`SUNSUBSCRIBE` pushed
//!    when the channel's slot moved to another node). A subscription to the wrong node
//!    (`MOVED`) fails and is retried by the hub after the slot map is refreshed.
//! 3. A cluster on Redis < 7 (no sharded pub/sub) subscribes with classic `SUBSCRIBE`,
//!    placed the same way (invariant 1), as Redisson does there. Classic messages reach
//!    every node, but the scripts count listeners on their own node only (`PUBSUB
//!    NUMSUB`, `PUBLISH`'s answer): a waiter subscribed elsewhere would be missed by a
//!    hand-over (pass_on.lua), by a release that must not bypass other clients'
//!    waiters (release.lua), and by a revocation request's count. The server never
//!    drops a classic subscription when its slot moves: it keeps hearing there, and
//!    is placed again with the next resubscription (a lost connection).
//! 4. On Redis >= 7 a channel Redisson's releases may publish on (all but
//!    [`keys::redlatch_only`]'s) is also subscribed classic, on the same connection,
//!    with its classic marker `<channel>:redlatch-waiters`: Redisson 3.27 subscribes and
//!    publishes classic on some starts, 3.29+ always with `shardedSubscriptionMode`
//!    OFF. A classic message wakes the channel as a sharded one does. The scripts count
//!    classic subscribers minus classic markers as foreign listeners
//!    (lua/dialect_sharded.lua), so ours never make a release `PUBLISH` classic; a
//!    subscription is confirmed when every part of it is. The server never drops the
//!    classic parts (invariant 3): a lost sharded part resubscribes them all.
//! 5. A marker is subscribed only while its twin is: subscribing sends the twin first,
//!    unsubscribing the marker first, in order on the primary's one connection. Were a
//!    marker counted without its twin, a release in between would subtract a foreign
//!    classic listener (a Redisson 3.27 waiter) and not `PUBLISH` to it: the waiter
//!    would sleep out the lease. A twin without its marker only costs one `PUBLISH`.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ErrorKind, PushInfo, PushKind, RedisError, RedisResult, Value};
use tokio::sync::mpsc;

use super::super::subscriber::Message;
use super::super::{BoxFuture, Dialect, Subscriber};
use super::Inner;
use crate::error::Error;
use crate::keys;

/// The pub/sub of a dialect: its commands and the pushes they bring.
struct Kind {
    subscribe: &'static str,
    unsubscribe: &'static str,
    /// A message on a subscribed channel.
    message: PushKind,
    /// A subscription ended (ours confirmed, or dropped by the server).
    ended: PushKind,
    /// Classic twins of the channels Redisson may publish on (invariant 4).
    twins: bool,
}

const SHARDED: Kind = Kind {
    subscribe: "SSUBSCRIBE",
    unsubscribe: "SUNSUBSCRIBE",
    message: PushKind::SMessage,
    ended: PushKind::SUnsubscribe,
    twins: true,
};

/// Redis < 7 (invariant 3).
const CLASSIC: Kind = Kind {
    subscribe: "SUBSCRIBE",
    unsubscribe: "UNSUBSCRIBE",
    message: PushKind::Message,
    ended: PushKind::Unsubscribe,
    twins: false,
};

/// Opens the cluster's subscriber: sharded, or classic before Redis 7 (invariant 3).
pub(super) async fn open(inner: Arc<Inner>) -> RedisResult<Box<dyn Subscriber>> {
    let kind = match inner.dialect {
        Dialect::Sharded => &SHARDED,
        Dialect::Classic => &CLASSIC,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    Ok(Box::new(Sharded {
        inner,
        kind,
        conns: HashMap::new(),
        placed: HashMap::new(),
        tx,
        rx,
    }))
}

/// Subscriptions over the primaries, each channel on its slot's (invariant 1).
struct Sharded {
    inner: Arc<Inner>,
    kind: &'static Kind,
    /// One connection per primary that serves a subscribed channel.
    conns: HashMap<String, MultiplexedConnection>,
    /// Each subscribed channel's primary.
    placed: HashMap<String, String>,
    tx: mpsc::UnboundedSender<PushInfo>,
    rx: mpsc::UnboundedReceiver<PushInfo>,
}

impl Sharded {
    /// The subscriber connection to `addr`, opened on first use: the node's settings,
    /// RESP3, pushes to our queue.
    async fn conn(&mut self, addr: &str) -> RedisResult<MultiplexedConnection> {
        if let Some(conn) = self.conns.get(addr) {
            return Ok(conn.clone());
        }
        let node = self.inner.node(addr).map_err(lost)?;
        let info = node.client().get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.inner.link.connect_timeout))
            .set_response_timeout(None)
            .set_push_sender(self.tx.clone());
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        self.conns.insert(addr.to_string(), conn.clone());
        Ok(conn)
    }

    /// `channels` grouped by the primary serving each one's slot.
    fn by_owner<'a>(&self, channels: &'a [String]) -> RedisResult<HashMap<String, Vec<&'a str>>> {
        let mut groups: HashMap<String, Vec<&str>> = HashMap::new();
        for ch in channels {
            let owner = self.inner.owner(Some(ch.as_bytes())).map_err(lost)?;
            groups.entry(owner).or_default().push(ch);
        }
        Ok(groups)
    }
}

/// Runs each `(command, channel)`, concurrently on `conn` (one command per channel:
/// each is answered by exactly one confirmation).
async fn each(conn: &MultiplexedConnection, commands: &[(&str, String)]) -> RedisResult<()> {
    let calls = commands.iter().map(|(command, ch)| {
        let mut conn = conn.clone();
        let cmd = redis::cmd(command).arg(ch).clone();
        async move { cmd.query_async::<Value>(&mut conn).await }
    });
    for reply in join_all(calls).await {
        reply?;
    }
    Ok(())
}

impl Kind {
    /// The commands that (un)subscribe `channels` (`sharded`: the dialect's own command,
    /// else classic's): each channel, and its classic twin and marker (invariant 4).
    /// They go out in this order on one connection, so the server runs them in it: a
    /// subscription's twin before its marker, an unsubscription's marker before its
    /// twin. A marker never counts while its twin does not, so a script never counts
    /// a foreign classic listener away (invariant 5).
    fn commands(&self, channels: &[&str], subscribing: bool) -> Vec<(&'static str, String)> {
        let (sharded, classic) = if subscribing {
            (self.subscribe, "SUBSCRIBE")
        } else {
            (self.unsubscribe, "UNSUBSCRIBE")
        };
        let mut out = Vec::with_capacity(channels.len());
        for ch in channels {
            out.push((sharded, ch.to_string()));
            if self.twins && !keys::redlatch_only(ch) {
                let twin = (classic, ch.to_string());
                let marker = (classic, format!("{ch}{}", keys::MARKER));
                if subscribing {
                    out.extend([twin, marker]);
                } else {
                    out.extend([marker, twin]);
                }
            }
        }
        out
    }
}

impl Subscriber for Sharded {
    fn subscribe<'a>(&'a mut self, channels: &'a [String]) -> BoxFuture<'a, RedisResult<()>> {
        Box::pin(async move {
            for (addr, group) in self.by_owner(channels)? {
                let conn = self.conn(&addr).await?;
                let commands = self.kind.commands(&group, true);
                if let Err(e) = each(&conn, &commands).await {
                    if let Some((to, slot)) = e.redirect_node() {
                        // Invariant 2: learn where it went; the hub retries.
                        self.inner.moved(slot, to);
                        self.inner.schedule_refresh();
                    }
                    return Err(e);
                }
                for ch in group {
                    self.placed.insert(ch.to_string(), addr.clone());
                }
            }
            Ok(())
        })
    }

    fn unsubscribe<'a>(&'a mut self, channels: &'a [String]) -> BoxFuture<'a, RedisResult<()>> {
        Box::pin(async move {
            let mut groups: HashMap<String, Vec<&str>> = HashMap::new();
            for ch in channels {
                // Forgotten first: the confirmation that comes back is ours (invariant 2).
                if let Some(addr) = self.placed.remove(ch) {
                    groups.entry(addr).or_default().push(ch);
                }
            }
            for (addr, group) in groups {
                if let Some(conn) = self.conns.get(&addr) {
                    let commands = self.kind.commands(&group, false);
                    each(conn, &commands).await?;
                }
            }
            Ok(())
        })
    }

    fn next_message(&mut self) -> BoxFuture<'_, Option<Message>> {
        Box::pin(async move {
            loop {
                let push = self.rx.recv().await?;
                let text = |v: Option<&Value>| match v {
                    Some(Value::BulkString(b)) => Some(b.clone()),
                    Some(Value::SimpleString(s)) => Some(s.clone().into_bytes()),
                    _ => None,
                };
                let channel =
                    || text(push.data.first()).map(|b| String::from_utf8_lossy(&b).into_owned());
                if push.kind == self.kind.message
                    || (self.kind.twins && push.kind == PushKind::Message)
                {
                    if let Some(channel) = channel() {
                        let payload = text(push.data.get(1)).unwrap_or_default();
                        return Some(Message { channel, payload });
                    }
                } else if push.kind == PushKind::Disconnection {
                    return None;
                } else if push.kind == self.kind.ended
                    && channel().is_some_and(|ch| self.placed.contains_key(&ch))
                {
                    // Dropped by the server: its slot moved (invariant 2).
                    self.inner.schedule_refresh();
                    return None;
                }
            }
        })
    }
}

/// A routing failure as a client error, for the hub to retry.
fn lost(e: Error) -> RedisError {
    RedisError::from((
        ErrorKind::ClusterConnectionNotFound,
        "cluster subscriber",
        e.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant 5: a marker is never subscribed without its twin.
    #[test]
    fn a_marker_never_outlives_its_twin() {
        let ch = "redisson_rwlock:{rw}";
        let marker = format!("{ch}{}", keys::MARKER);
        let names = |cmds: Vec<(&str, String)>| -> Vec<String> {
            cmds.into_iter().map(|(c, n)| format!("{c} {n}")).collect()
        };
        assert_eq!(
            names(SHARDED.commands(&[ch], true)),
            [
                format!("SSUBSCRIBE {ch}"),
                format!("SUBSCRIBE {ch}"),
                format!("SUBSCRIBE {marker}"),
            ]
        );
        assert_eq!(
            names(SHARDED.commands(&[ch], false)),
            [
                format!("SUNSUBSCRIBE {ch}"),
                format!("UNSUBSCRIBE {marker}"),
                format!("UNSUBSCRIBE {ch}"),
            ]
        );
        assert_eq!(
            names(CLASSIC.commands(&[ch], false)),
            [format!("UNSUBSCRIBE {ch}")]
        );
    }
}
