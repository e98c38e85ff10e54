//! [`LostSignal`]: whether a hold is lost, and the token that fires when it is, made only
//! when someone asks for it (a guard's `lost()`): a `CancellationToken` made and dropped
//! with every acquisition was ~330 instructions of a W1 / W2 pair (its tree node, an
//! allocation with a mutex), and most holds are released without anyone watching.
//!
//! Invariant: once [`cancel`](LostSignal::cancel) has begun, every token handed out,
//! before or after, is cancelled (the flag and the token are set under one lock).

use tokio_util::sync::CancellationToken;

/// A hold's lost state (holding/table.rs invariant 2).
#[derive(Default)]
pub(crate) struct LostSignal(parking_lot::Mutex<State>);

#[derive(Default)]
struct State {
    cancelled: bool,
    token: Option<CancellationToken>,
}

impl LostSignal {
    /// Whether the hold was declared lost.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.0.lock().cancelled
    }

    /// Declares it lost: the token, if one was handed out, fires (outside the lock).
    pub(crate) fn cancel(&self) {
        let token = {
            let mut s = self.0.lock();
            s.cancelled = true;
            s.token.clone()
        };
        if let Some(token) = token {
            token.cancel();
        }
    }

    /// The token that fires when the hold is lost (already cancelled if it is).
    pub(crate) fn token(&self) -> CancellationToken {
        let mut s = self.0.lock();
        let token = s.token.get_or_insert_with(CancellationToken::new).clone();
        if s.cancelled {
            token.cancel();
        }
        token
    }
}

#[cfg(test)]
mod tests {
    use super::LostSignal;

    #[test]
    fn a_token_asked_for_before_or_after_the_loss_fires() {
        let lost = LostSignal::default();
        assert!(!lost.is_cancelled());
        let before = lost.token();
        assert!(!before.is_cancelled());
        lost.cancel();
        assert!(lost.is_cancelled() && before.is_cancelled());
        assert!(lost.token().is_cancelled());
        // Never asked for: the flag alone says it.
        let unwatched = LostSignal::default();
        unwatched.cancel();
        assert!(unwatched.is_cancelled() && unwatched.token().is_cancelled());
    }
}
