//! Unit tests of the engine's core (waiter, attempt, release, hand-over; the counters'
//! waits) over the fake server (fake/), in paused tokio time: fast and deterministic.
//! The scripts themselves and every deployment are tested against real servers in
//! tests/.

mod counters;
mod faults;
mod queries;
mod waiting;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::engine::acquire::attempt::Grant;
use crate::engine::acquire::waiter::{acquire, Call};
use crate::engine::fake::Server;
use crate::engine::holding::release::release;
use crate::engine::holding::table::Hold;
use crate::engine::{Engine, Kind, Settings};

pub(super) const LEASE: Duration = Duration::from_secs(30);

pub(super) fn settings() -> Settings {
    Settings {
        watchdog_timeout: LEASE,
        drift_factor: 0.01,
        retry_jitter: Duration::from_millis(20),
        connect_timeout: Duration::from_secs(1),
        fair_stale_timeout: Duration::from_secs(5),
        fair_wait_time: Duration::from_secs(5),
        unavailable_after: Duration::from_secs(2),
        release_after: Duration::from_secs(2),
        cluster: false,
        metrics_names: Default::default(),
        app: "engine-tests".into(),
        deadlock_detection: false,
        books: Default::default(),
    }
}

/// A client of `server`.
pub(super) fn client(server: &Arc<Server>) -> Arc<Engine> {
    Engine::start(vec![server.link()], settings())
}

pub(super) fn call(name: &str, holder: &Arc<str>, wait: Option<Duration>) -> Call {
    Call {
        name: name.into(),
        holder: holder.clone(),
        kind: Kind::Plain,
        lease: LEASE,
        watchdog: false,
        wait,
        intent: false,
    }
}

/// A fresh holder id of `engine` (as one async call of a task gets).
pub(super) fn holder(engine: &Engine, n: u64) -> Arc<str> {
    crate::engine::holding::holder_id::owner(&engine.holder_prefix, n)
}

/// Records a grant as the API does (the hold the release gives back).
pub(super) fn hold(engine: &Engine, call: &Call, grant: &Grant) -> Arc<Hold> {
    (engine.holds).acquired(call, grant.fresh, grant.started)
}

/// Takes `name` for `holder`, waiting as long as it takes.
pub(super) async fn take(engine: &Arc<Engine>, name: &str, holder: &Arc<str>) -> Arc<Hold> {
    let call = call(name, holder, None);
    let grant = acquire(engine, &call)
        .await
        .expect("no error")
        .expect("granted");
    hold(engine, &call, &grant)
}

/// Gives one hold back as a guard's unlock does.
pub(super) async fn give_back(engine: &Arc<Engine>, hold: &Arc<Hold>) {
    let left = engine.holds.released(hold, false).expect("not lost");
    release(engine, hold, LEASE.as_millis() as u64, left == 0)
        .await
        .expect("released");
}

/// Lets background work (clean-ups, pub/sub) run for `d` of paused time.
pub(super) async fn settle(d: Duration) {
    tokio::time::sleep(d).await;
}

/// Polls `fut` once.
pub(super) async fn poll_once<F: Future>(fut: &mut Pin<Box<F>>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// Nothing of `engine`'s waits is left locally: no gate, offer, ticket or wanted
/// channel.
pub(super) fn nothing_left_locally(engine: &Engine) {
    assert_eq!(engine.gates.len(), 0, "a gate is left entered");
    for fair in [false, true] {
        assert_eq!(engine.offers(fair).len(), 0, "an offer is left posted");
    }
    assert_eq!(engine.tickets.len(), 0, "a ticket is left issued");
    assert_eq!(engine.pubsub.channel_count(), 0, "a channel is left wanted");
}
