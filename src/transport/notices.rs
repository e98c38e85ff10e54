//! A client's notice channel on the pub/sub hub (pubsub.rs invariant 7): subscribed
//! by a SUBSCRIBE of its own, so that an ACL refusing it refuses nothing else; and
//! the bounded (un)subscribe both use.

use std::collections::HashSet;
use std::time::Duration;

use super::Subscriber;

/// Subscribes each notice channel by a command of its own (pubsub.rs invariant 7): those
/// confirmed; a refused one goes into `refused`, with a WARN.
pub(super) async fn subscribe(
    sink: &mut Box<dyn Subscriber>,
    addr: &str,
    timeout: Duration,
    notices: Vec<String>,
    refused: &mut HashSet<String>,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for channel in notices {
        match within(timeout, sink.subscribe(std::slice::from_ref(&channel))).await {
            Ok(()) => out.push(channel),
            Err(e) if e.starts_with(DENIED) => {
                tracing::warn!(master = addr, %channel, why = &e[DENIED.len()..],
                    "cannot listen for notices about this client's locks: the ACL refuses its \
                     notice channel, so its holders learn of a \
                     force-unlock at their next renewal and hear no release request; allow \
                     the channel (&<prefix>_client__channel*), or set \
                     Config::bookkeeping_prefix to one it allows, or bookkeeping(false) \
                     (docs/errors.md)");
                refused.insert(channel);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Prefix of a reconcile error that is a refusal (ACL NOPERM), not an outage.
pub(super) const DENIED: &str = "NOPERM ";

pub(super) async fn within<F>(timeout: Duration, f: F) -> Result<(), String>
where
    F: std::future::Future<Output = redis::RedisResult<()>>,
{
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(())) => Ok(()),
        // Tagged: the actor tells waiters that this master refuses them (invariant 6).
        Ok(Err(e)) if e.code() == Some("NOPERM") => Err(format!("{DENIED}{e}")),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("subscribe timed out".into()),
    }
}
