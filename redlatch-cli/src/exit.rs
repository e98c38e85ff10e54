//! Exit codes (sysexits.h where one fits) and the one-line failure every subcommand
//! reports through.

use std::process::ExitCode;

/// Bad flags, a bad duration, a missing `--`, an invalid name or URL (EX_USAGE).
pub const USAGE: u8 = 64;
/// The key named by NAME holds something that is not a lock, or a lock key holds
/// data the scripts cannot use (EX_DATAERR).
pub const DATA: u8 = 65;
/// Redis unreachable, no quorum of masters, a cluster down (CLUSTERDOWN), or a
/// server that does not speak the Redis protocol (EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// A bug or an unexpected condition in redlatch itself (EX_SOFTWARE).
pub const INTERNAL: u8 = 70;
/// The lock was not acquired within `--wait` (EX_TEMPFAIL).
pub const NOT_ACQUIRED: u8 = 75;
/// The lock was lost while CMD ran; CMD was terminated (or had already ended).
pub const LOST: u8 = 76;
/// The ACL user lacks a command, key or channel the lock needs, or the master refused
/// the credentials (no password, a wrong one, an unknown user) (EX_NOPERM).
pub const NO_PERMISSION: u8 = 77;
/// A master is out of memory and refused the write (EX_TEMPFAIL-like, but distinct).
pub const OUT_OF_MEMORY: u8 = 71;
/// The operation is not supported in this deployment (e.g. a semaphore under Redlock)
/// (EX_CONFIG).
pub const UNSUPPORTED: u8 = 78;
/// CMD exists but cannot be executed (as sh).
pub const NOT_EXECUTABLE: u8 = 126;
/// CMD was not found (as sh).
pub const NOT_FOUND: u8 = 127;

/// The exit-code table shown by `--help`.
pub const TABLE: &str = "\
Exit status of `redlatch run`:
  N        CMD's own exit status
  128+S    CMD was killed by signal S (e.g. 143 for SIGTERM), or redlatch got
           signal S while still waiting for the lock (CMD never ran)
  64       usage error: bad flag, bad duration, missing `--`, invalid URL or name
  65       the key NAME holds a value that is not a lock, or unusable data
           (e.g. a fencing counter that is not a number)
  69       Redis unreachable, no majority of the masters answered, the cluster
           is down (CLUSTERDOWN), or the address is not a Redis server
  70       internal error
  71       a master is out of memory (OOM) and refused the write
  75       the lock was not acquired within --wait (--conflict-exit-code N: N,
           and nothing is printed, as flock -E)
  76       the lock was lost while CMD ran (CMD was sent SIGTERM, then SIGKILL after
           --kill-grace; while renewals fail, SIGTERM --kill-grace before the validity
           ends and SIGKILL at its end), or the release found it already gone
  77       permission denied: the ACL user lacks a command, key or channel (NOPERM),
           or authentication failed (no password, wrong password, unknown user)
  78       not supported in this deployment (e.g. a semaphore under Redlock),
           also when the lock was lost because its renewals were refused
  126      CMD is not executable
  127      CMD was not found
`unlock` and `latch` use 0 for success and the same codes for errors (`latch set` and
`latch wait`: 75 when the latch is counting already / still counting); `status` exits 0
when NAME is held and 1 when it is free, as `leader` does when someone leads or nobody.";

/// A failure to report: one line on stderr, then exit with `code`.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// The lock (election, latch) was busy past the wait: with `-E N` given, exit N
    /// and say nothing, as flock(1) does; without it, exit 75 with `message`.
    pub fn conflict(code: Option<u8>, message: impl Into<String>) -> Self {
        match code {
            Some(code) => Self::new(code, ""),
            None => Self::new(NOT_ACQUIRED, message),
        }
    }

    /// Prints `redlatch: <message>` on stderr (nothing for a silent conflict) and
    /// returns the exit code.
    pub fn report(self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("redlatch: {}", self.message);
        }
        ExitCode::from(self.code)
    }
}

/// The exit code of a subcommand that succeeds or fails with a [`Failure`].
pub fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.report(),
    }
}

/// Maps a library error to the exit code a script can act on.
pub fn code_of(e: &redlatch::Error) -> u8 {
    use redlatch::Error as E;
    match e {
        E::Config { .. }
        | E::InvalidUrl { .. }
        | E::InvalidName(_)
        | E::InvalidLease(_)
        | E::InvalidCount(_) => USAGE,
        E::WrongType { .. } | E::BadData { .. } => DATA,
        E::PermissionDenied { .. } | E::Authentication { .. } => NO_PERMISSION,
        E::OutOfMemory { .. } => OUT_OF_MEMORY,
        E::Unsupported { .. } => UNSUPPORTED,
        // Every master that failed did so for the same kind of cause as the first.
        E::NoQuorum { errors, .. } if e.is_permanent() => code_of(&errors[0].error),
        E::NotHeld { .. } => LOST,
        E::Redis { .. }
        | E::Timeout { .. }
        | E::NoQuorum { .. }
        | E::NotReplicated { .. }
        | E::ClusterDown { .. }
        | E::NotRedis { .. } => UNAVAILABLE,
        _ => INTERNAL,
    }
}

/// A library error as a failure, `context` first: `"cannot reach redis: ..."`.
pub fn from_error(context: &str, e: &redlatch::Error) -> Failure {
    Failure::new(code_of(e), format!("{context}: {}", chain(e)))
}

/// The error and its sources on one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlatch::{Error, MasterError};

    fn no_quorum(errors: Vec<Error>) -> Error {
        let errors = (errors.into_iter().enumerate())
            .map(|(i, e)| MasterError::new(format!("a:{i}"), e))
            .collect::<Vec<_>>();
        Error::NoQuorum {
            acquired: 1,
            needed: 3,
            errors: errors.into(),
        }
    }

    #[test]
    fn a_quorum_failure_exits_for_its_masters_cause() {
        let refused = || Error::PermissionDenied {
            addr: "a:0".into(),
            detail: "no".into(),
        };
        let down = || Error::Timeout {
            addr: "a:1".into(),
            after: std::time::Duration::from_secs(1),
        };
        // Every master refused: the ACL's exit code, as with one master.
        assert_eq!(
            code_of(&no_quorum(vec![refused(), refused()])),
            NO_PERMISSION
        );
        // One is only down: retrying may help, so unavailable.
        assert_eq!(code_of(&no_quorum(vec![refused(), down()])), UNAVAILABLE);
        assert_eq!(code_of(&no_quorum(vec![])), UNAVAILABLE);
        let text = chain(&no_quorum(vec![refused(), down()]));
        assert_eq!(text.matches("a:1").count(), 1, "{text}");
    }
}
