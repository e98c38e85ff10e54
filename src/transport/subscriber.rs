//! A deployment's subscriber, as the pub/sub hub (pubsub.rs) drives it: subscribe and
//! unsubscribe channels, and read the next message (its channel and payload).
//!
//! [`Classic`] is one classic pub/sub connection (a standalone server, a Sentinel
//! master, a cluster without sharded pub/sub). The cluster's sharded subscriber
//! (cluster/sharded.rs) spreads `SSUBSCRIBE`s over the primaries that own the channels.

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use redis::RedisResult;

use super::BoxFuture;

/// Subscriptions on one deployment.
///
/// Invariant: once [`next_message`](Subscriber::next_message) returns `None`, messages
/// may have been missed and the subscriptions may be gone (the connection closed, a
/// slot moved, the master changed); the hub drops the subscriber, opens a new one,
/// subscribes everything again and wakes every waiter.
pub(crate) trait Subscriber: Send {
    /// Subscribes `channels`; returns when the server confirmed them.
    fn subscribe<'a>(&'a mut self, channels: &'a [String]) -> BoxFuture<'a, RedisResult<()>>;

    /// Unsubscribes `channels`.
    fn unsubscribe<'a>(&'a mut self, channels: &'a [String]) -> BoxFuture<'a, RedisResult<()>>;

    /// The next message, or `None` when the subscriptions are lost (see the
    /// invariant). Cancel safe.
    fn next_message(&mut self) -> BoxFuture<'_, Option<Message>>;
}

/// A message: the channel it came on and its payload.
pub(crate) struct Message {
    pub(crate) channel: String,
    pub(crate) payload: Vec<u8>,
}

/// One classic pub/sub connection.
pub(crate) struct Classic {
    sink: PubSubSink,
    stream: PubSubStream,
}

impl Classic {
    pub(crate) fn new(pubsub: redis::aio::PubSub) -> Self {
        let (sink, stream) = pubsub.split();
        Classic { sink, stream }
    }
}

impl Subscriber for Classic {
    fn subscribe<'a>(&'a mut self, channels: &'a [String]) -> BoxFuture<'a, RedisResult<()>> {
        Box::pin(self.sink.subscribe(channels))
    }

    fn unsubscribe<'a>(&'a mut self, channels: &'a [String]) -> BoxFuture<'a, RedisResult<()>> {
        Box::pin(self.sink.unsubscribe(channels))
    }

    fn next_message(&mut self) -> BoxFuture<'_, Option<Message>> {
        Box::pin(async {
            let msg = self.stream.next().await?;
            Some(Message {
                channel: msg.get_channel_name().to_string(),
                payload: msg.get_payload_bytes().to_vec(),
            })
        })
    }
}
