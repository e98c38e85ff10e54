//! CMD under the lock (`run`, `elect`): waits for it to end, forwards signals to it,
//! and terminates it when the lock is lost, when renewals have failed until the end of
//! its validity is a grace away, or (with `--revoke-signal`) when someone asks for the
//! lock.
//!
//! One loop, two steps a turn: [`Supervisor::next`] waits for the next [`Event`], and
//! [`Supervisor::handle`] acts on it and says whether CMD's run has ended.

use std::time::Duration;

use nix::sys::signal::Signal;
use redlatch::Hold;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::child::{self, Signals};
use crate::duration::human;
use crate::exit::{self, Failure};

/// How CMD's run under the lock ended.
pub(crate) struct Ended {
    pub(crate) status: std::process::ExitStatus,
    /// Why the lock was lost while CMD ran, if it was, and the exit status that says so
    /// (76, or 77 when renewals were refused for lack of permission).
    pub(crate) lost: Option<(String, u8)>,
}

/// What happened while CMD ran.
enum Event {
    Exited(std::io::Result<std::process::ExitStatus>),
    Signal(Signal),
    GraceOver,
    /// The lock is lost (or will be at the given instant): SIGTERM now, SIGKILL at that
    /// instant or after the grace.
    Lost(String, u8, Option<Instant>),
    /// Renewals started or stopped failing on a majority (`Some(end of validity)`).
    Risk(Option<Instant>),
    /// Someone asked for the lock (`unlock --ask`): CMD gets --revoke-signal.
    Revoke,
}

/// What a supervision needs of `run`'s arguments.
pub(crate) struct Terms<'a> {
    /// The lock's name, for messages.
    pub(crate) name: &'a str,
    /// The fixed lease (`--lease`), if not renewed by the watchdog.
    pub(crate) lease: Option<Duration>,
    /// Between SIGTERM and SIGKILL (`--kill-grace`).
    pub(crate) kill_grace: Duration,
    /// Sent to CMD when someone asks for the lock (`--revoke-signal`).
    pub(crate) revoke_signal: Option<Signal>,
}

/// Waits for CMD to end, forwarding signals, and terminates it if the lock is lost.
pub(crate) async fn supervise(
    child: Child,
    guard: &dyn Hold,
    args: &Terms<'_>,
    signals: &mut Signals,
) -> Result<Ended, Failure> {
    let mut supervisor = Supervisor::new(child, guard, args);
    loop {
        let event = supervisor.next(signals).await;
        if let Some(ended) = supervisor.handle(event).await {
            return ended;
        }
    }
}

/// The state of one supervision: what is known of the lock, and what CMD was sent.
struct Supervisor<'a> {
    child: Child,
    guard: &'a dyn Hold,
    args: &'a Terms<'a>,
    lost_token: CancellationToken,
    /// With a fixed lease nobody renews the lock: it is lost when its validity ends.
    lease_end: Option<Instant>,
    lost: Option<(String, u8)>,
    kill_at: Option<Instant>,
    /// While renewals fail on a majority: CMD is terminated a grace before the
    /// validity ends and killed when it ends, unless a renewal succeeds first.
    risk: watch::Receiver<Option<std::time::Instant>>,
    risk_end: Option<Instant>,
    /// Listening for release requests only when they are forwarded (revoke.rs).
    revoke: CancellationToken,
    revoked: bool,
}

impl<'a> Supervisor<'a> {
    fn new(child: Child, guard: &'a dyn Hold, args: &'a Terms<'a>) -> Self {
        Supervisor {
            child,
            guard,
            args,
            lost_token: guard.lost(),
            lease_end: args.lease.map(|_| Instant::now() + guard.validity()),
            lost: None,
            kill_at: None,
            risk: guard.at_risk(),
            risk_end: None,
            revoke: match args.revoke_signal {
                Some(_) => guard.revoke_requested(),
                None => CancellationToken::new(),
            },
            revoked: false,
        }
    }

    /// The next thing that happens to CMD or to the lock.
    async fn next(&mut self, signals: &mut Signals) -> Event {
        let args = self.args;
        let risk_end = self.risk_end;
        let term_at = risk_end.map(|end| end.checked_sub(args.kill_grace).unwrap_or(end));
        let lost = self.lost.is_some();
        tokio::select! {
            status = self.child.wait() => Event::Exited(status),
            sig = signals.recv() => Event::Signal(sig),
            _ = sleep_until(self.kill_at) => Event::GraceOver,
            _ = self.lost_token.cancelled(), if !lost => {
                let (why, code) = lost_message(self.guard.lost_reason());
                Event::Lost(why, code, None)
            }
            _ = sleep_until(self.lease_end), if !lost => Event::Lost(format!(
                "its --lease of {} ran out",
                human(args.lease.unwrap_or_default())
            ), exit::LOST, None),
            end = risk_changed(&mut self.risk), if !lost => Event::Risk(end),
            _ = self.revoke.cancelled(), if !self.revoked => Event::Revoke,
            _ = sleep_until(term_at), if !lost => Event::Lost(
                "renewals failed on a majority and its validity is about to end".into(),
                exit::LOST,
                risk_end,
            ),
        }
    }

    /// Acts on `event`; `Some` once CMD's run has ended.
    async fn handle(&mut self, event: Event) -> Option<Result<Ended, Failure>> {
        let name = self.args.name;
        match event {
            Event::Exited(Ok(status)) => {
                self.settle_loss().await;
                return Some(Ok(Ended {
                    status,
                    lost: self.lost.take(),
                }));
            }
            Event::Exited(Err(e)) => {
                child::send(&self.child, Signal::SIGKILL);
                let why = format!("cannot wait for CMD: {e}; killed it");
                return Some(Err(Failure::new(exit::INTERNAL, why)));
            }
            Event::Signal(sig) => child::send(&self.child, sig),
            Event::Revoke => {
                self.revoked = true;
                if let Some(sig) = self.args.revoke_signal {
                    eprintln!("redlatch: release of lock {name:?} requested; sending {sig} to CMD");
                    child::send(&self.child, sig);
                }
            }
            Event::GraceOver => {
                eprintln!(
                    "redlatch: CMD still running {} after SIGTERM; sending SIGKILL",
                    human(self.args.kill_grace)
                );
                child::send(&self.child, Signal::SIGKILL);
                self.kill_at = None;
            }
            Event::Risk(end) => {
                if let Some(end) = end {
                    let left = end.saturating_duration_since(Instant::now());
                    eprintln!(
                        "redlatch: lock {name:?} at risk: renewals fail on a majority; its \
                         validity ends in {} unless one succeeds",
                        human(left)
                    );
                } else if self.risk_end.is_some() {
                    eprintln!("redlatch: lock {name:?} renewed again");
                }
                self.risk_end = end;
            }
            Event::Lost(reason, code, by) => self.terminate(reason, code, by),
        }
        None
    }

    /// The lock is lost: SIGTERM to CMD now, SIGKILL at the end of the validity (`by`),
    /// or a grace after now if it ended.
    fn terminate(&mut self, reason: String, code: u8, by: Option<Instant>) {
        let kill = by.unwrap_or_else(|| Instant::now() + self.args.kill_grace);
        eprintln!(
            "redlatch: lock {:?} lost while CMD ran: {reason}; sending SIGTERM to CMD, \
             SIGKILL after {}",
            self.args.name,
            human(kill.saturating_duration_since(Instant::now()))
        );
        child::send(&self.child, Signal::SIGTERM);
        self.kill_at = Some(kill);
        self.lost = Some((reason, code));
    }

    /// CMD ended after it was stopped because the lock was at risk: the loss follows
    /// at the end of the validity, and its reason (a refusal: exit 77) is the better
    /// report, unless a renewal saved the lock meanwhile.
    async fn settle_loss(&mut self) {
        let (Some(_), Some(end)) = (&self.lost, self.risk_end) else {
            return;
        };
        let by = end + Duration::from_millis(500);
        if tokio::time::timeout_at(by, self.lost_token.cancelled())
            .await
            .is_ok()
        {
            let (why, code) = lost_message(self.guard.lost_reason());
            eprintln!("redlatch: lock {:?} lost: {why}", self.args.name);
            self.lost = Some((why, code));
        }
    }
}

/// The next change of the at-risk state; pending forever once the guard is gone.
async fn risk_changed(risk: &mut watch::Receiver<Option<std::time::Instant>>) -> Option<Instant> {
    match risk.changed().await {
        Ok(()) => (*risk.borrow_and_update()).map(Instant::from_std),
        Err(_) => std::future::pending().await,
    }
}

/// What the CLI says of a lost hold, and its exit status.
fn lost_message(reason: Option<redlatch::LostReason>) -> (String, u8) {
    use redlatch::LostReason as R;
    match reason {
        Some(r @ R::PermissionDenied(_)) => (r.to_string(), exit::NO_PERMISSION),
        Some(r) => (r.to_string(), exit::LOST),
        None => ("the watchdog could not renew it".into(), exit::LOST),
    }
}

/// Sleeps until `at`, or forever if it is `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
