//! CMD as a child process: finding it, starting it, signalling it, and turning its end
//! into an exit status.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};

use crate::exit::{self, Failure};

/// Checks, before the lock is taken, that CMD can be run: the same search `execvp`
/// does, so a typo fails fast (127 / 126) instead of after waiting for the lock.
pub fn check_runnable(program: &OsStr) -> Result<(), Failure> {
    let shown = program.to_string_lossy();
    let candidates: Vec<PathBuf> = if program.as_encoded_bytes().contains(&b'/') {
        vec![PathBuf::from(program)]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .collect()
    };
    let mut found_unrunnable = false;
    for candidate in &candidates {
        match runnable(candidate) {
            Some(true) => return Ok(()),
            Some(false) => found_unrunnable = true,
            None => {}
        }
    }
    if found_unrunnable {
        Err(Failure::new(
            exit::NOT_EXECUTABLE,
            format!("{shown}: permission denied (not an executable file)"),
        ))
    } else {
        Err(Failure::new(
            exit::NOT_FOUND,
            format!("{shown}: command not found"),
        ))
    }
}

/// `Some(true)`: an executable file; `Some(false)`: exists but cannot be run; `None`:
/// absent.
fn runnable(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    Some(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Starts CMD with inherited stdio and the extra environment `env`.
pub fn spawn(cmd: &[OsString], env: &[(&str, String)]) -> Result<Child, Failure> {
    let mut command = Command::new(&cmd[0]);
    command
        .args(&cmd[1..])
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    die_with_parent(&mut command);
    command.spawn().map_err(|e| spawn_failure(&cmd[0], &e))
}

fn spawn_failure(program: &OsStr, e: &io::Error) -> Failure {
    let code = match e.kind() {
        io::ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::NOT_EXECUTABLE,
    };
    Failure::new(code, format!("{}: {e}", program.to_string_lossy()))
}

/// Linux: CMD gets SIGKILL if redlatch itself dies (is SIGKILLed, crashes), so CMD
/// never goes on running after nobody keeps its lock any more. The death signal is
/// tied to the thread that forks: `main` runs a current-thread runtime, so that is the
/// main thread, which lives as long as the process.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // the crate's only `unsafe`: std has no safe pre-exec hook
fn die_with_parent(command: &mut Command) {
    use nix::errno::Errno;
    use nix::sys::prctl::set_pdeathsig;
    use nix::unistd::getppid;

    let parent = Pid::this();
    // SAFETY: the closure runs in the forked child before exec and only makes two
    // async-signal-safe system calls (prctl, getppid) through nix; it allocates nothing
    // (an `Errno` becomes an `io::Error` without allocating) and touches no lock.
    unsafe {
        command.pre_exec(move || {
            set_pdeathsig(Signal::SIGKILL)?;
            // The parent may have died between fork and prctl: then CMD must not start
            // (the spawn fails in this child, which exits without running CMD).
            if getppid() != parent {
                return Err(Errno::ESRCH.into());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// Sends `sig` to CMD if it has not been reaped yet (so its PID cannot have been
/// reused by another process).
pub fn send(child: &Child, sig: Signal) {
    if let Some(pid) = child.id().and_then(|pid| i32::try_from(pid).ok()) {
        // It can only fail if CMD has just exited (ESRCH): then there is nothing to do.
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// The exit status redlatch passes on: CMD's code, or 128+signal like a shell.
pub fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code.clamp(0, 255) as u8,
        (None, Some(sig)) => (128 + sig).clamp(0, 255) as u8,
        (None, None) => exit::INTERNAL,
    }
}

/// The signals redlatch forwards to CMD: SIGINT, SIGTERM, SIGHUP, SIGQUIT. Installed
/// before the lock is requested, so a signal while waiting ends the wait cleanly.
pub struct Signals {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    pub fn install() -> Result<Self, Failure> {
        let kinds = [
            (Signal::SIGINT, SignalKind::interrupt()),
            (Signal::SIGTERM, SignalKind::terminate()),
            (Signal::SIGHUP, SignalKind::hangup()),
            (Signal::SIGQUIT, SignalKind::quit()),
        ];
        let mut streams = Vec::with_capacity(kinds.len());
        for (no, kind) in kinds {
            let s = signal(kind)
                .map_err(|e| Failure::new(exit::INTERNAL, format!("cannot handle {no}: {e}")))?;
            streams.push((no, s));
        }
        Ok(Signals { streams })
    }

    /// The next signal received.
    pub async fn recv(&mut self) -> Signal {
        let waits = self.streams.iter_mut().map(|(no, s)| {
            let no = *no;
            Box::pin(async move {
                s.recv().await;
                no
            })
        });
        futures_util::future::select_all(waits).await.0
    }
}
