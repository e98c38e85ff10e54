//! The read-only queries over the fake server at a lease's last millisecond.

use std::time::Duration;

use crate::engine::kinds::call::LockSpec;
use crate::engine::tests::*;

/// A lease in its last millisecond reads PTTL 0 (Redis keeps a key until its
/// millisecond clock has passed the expiry): the lock is still held, with no whole
/// millisecond left, not "free or without expiry" as a PTTL of 0 used to be reported.
#[tokio::test(start_paused = true)]
async fn a_lease_in_its_last_millisecond_is_reported_held_with_no_time_left() {
    let server = Server::new();
    server.set_latency(Duration::ZERO);
    let a = client(&server);
    let me = holder(&a, 1);
    let _held = take(&a, "n", &me).await;
    let spec = LockSpec::new("n".into(), Kind::Plain);
    server.expire_in("n", Duration::from_micros(500));
    assert_eq!(a.remaining_ttl(&spec).await.unwrap(), Some(Duration::ZERO));
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(a.remaining_ttl(&spec).await.unwrap(), None, "expired: free");
}
