//! Cooperative revocation in the CLI: `redlatch unlock --ask NAME` asks the holders of
//! a lock to release it, and `redlatch run` / `elect` forward such a request to CMD as
//! a signal (`--revoke-signal`, default SIGTERM).

use nix::sys::signal::Signal;

use crate::exit::{self, Failure};
use crate::stdout::out;

/// What `--revoke-signal` says: the signal CMD gets when the lock is asked for, or
/// none (requests are not listened for).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RevokeSignal(pub Option<Signal>);

/// `--revoke-signal SIG`: a signal name (`TERM`, `SIGUSR1`), a number, or `none`.
pub fn parse_signal(s: &str) -> Result<RevokeSignal, String> {
    parse(s).map(RevokeSignal)
}

fn parse(s: &str) -> Result<Option<Signal>, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    if let Ok(n) = s.parse::<i32>() {
        return Signal::try_from(n)
            .map(Some)
            .map_err(|_| format!("no signal number {n}"));
    }
    let upper = s.to_ascii_uppercase();
    let name = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    name.parse::<Signal>()
        .map(Some)
        .map_err(|_| format!("unknown signal {s:?} (e.g. TERM, INT, USR1, HUP, a number, none)"))
}

/// `unlock --ask`: asks the holders of `lock` to release it; exit 0 when a listening
/// holder was told, 1 when the lock is free or no holder listens.
pub async fn ask(lock: &redlatch::Lock) -> Result<u8, Failure> {
    let name = lock.name();
    let asked = lock
        .request_release()
        .await
        .map_err(|e| exit::from_error(&format!("cannot ask the holders of {name:?}"), &e))?;
    if asked.holders.is_empty() {
        out(&format!("lock {name:?} is not held: nobody to ask\n"));
        return Ok(1);
    }
    out(&format!(
        "asked {} to release lock {name:?}; {} listening client(s) told\n",
        asked.holders.join(", "),
        asked.listeners
    ));
    if asked.listeners == 0 {
        out(
            "no holder's client heard the request (Redisson holders never do; a redlatch \
             client always listens unless its ACL refuses its notice channel); the request \
             stands while the lock's lease runs\n",
        );
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_by_name_number_or_none() {
        assert_eq!(parse("TERM"), Ok(Some(Signal::SIGTERM)));
        assert_eq!(parse("sigusr1"), Ok(Some(Signal::SIGUSR1)));
        assert_eq!(parse("2"), Ok(Some(Signal::SIGINT)));
        assert_eq!(parse("none"), Ok(None));
        assert_eq!(parse_signal("none"), Ok(RevokeSignal(None)));
        assert!(parse("BOGUS").is_err());
        assert!(parse("999").is_err());
    }
}
