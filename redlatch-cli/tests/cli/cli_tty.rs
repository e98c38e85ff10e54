//! What `redlatch run` says when its lock is force-unlocked: one loss, at once (the
//! force-unlock tells the holder's client, which renews and finds it gone), with its
//! reason, and no "at risk" after it; in colour only when stderr is a terminal (a
//! pseudo-terminal here) and `NO_COLOR` is unset.

use crate::cli_util;
use redlatch_testkit as common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_util::{bin, output, redis_args, TempDir};
use common::{eventually, RedisServer};

/// The slack a loaded machine may need to notice the force-unlock "at once" (a message,
/// then one renewal call); well under the default watchdog's renewal period (10 s), by
/// which the next renewal round would have noticed it anyway.
const SLACK: Duration = Duration::from_secs(5);

/// Where the runner's stderr goes.
#[derive(Clone, Copy, PartialEq)]
enum Stderr {
    Terminal,
    TerminalNoColor,
    File,
}

/// Runs `redlatch run NAME -- sleep 60` with stderr on `to`, force-unlocks NAME from
/// another process, and returns the runner's stderr and exit code.
fn force_unlocked_run(to: Stderr) -> (String, Option<i32>) {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let name = "forced";
    let mut args: Vec<String> = ["run", name, "--kill-grace", "5s"].map(String::from).into();
    args.extend(redis_args(&[&server]));
    args.extend(["--", "sh", "-c", "touch \"$D/started\"; exec sleep 60"].map(String::from));
    let mut cmd = Command::new(bin());
    cmd.args(&args)
        .env_remove("REDLATCH_REDIS")
        .env_remove("REDLATCH_WATCHDOG_TIMEOUT")
        .env_remove("RUST_LOG")
        .env("D", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let stderr_file = dir.file("stderr");
    let reader = match to {
        Stderr::Terminal | Stderr::TerminalNoColor => {
            let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
            // Close-on-exec: no other test's child may keep the terminal open (the
            // reader ends when every holder of its other end has closed it).
            for fd in [&pty.master, &pty.slave] {
                use nix::fcntl::{fcntl, FcntlArg, FdFlag};
                fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).expect("close-on-exec");
            }
            cmd.stderr(Stdio::from(pty.slave));
            if to == Stderr::TerminalNoColor {
                cmd.env("NO_COLOR", "1");
            } else {
                cmd.env_remove("NO_COLOR");
            }
            let mut master = std::fs::File::from(pty.master);
            // Until every holder of the terminal's other end has closed it (EIO).
            Some(std::thread::spawn(move || {
                let mut text = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = master.read(&mut buf) {
                    text.extend_from_slice(&buf[..n]);
                }
                String::from_utf8_lossy(&text).into_owned()
            }))
        }
        Stderr::File => {
            cmd.env_remove("NO_COLOR");
            cmd.stderr(std::fs::File::create(&stderr_file).unwrap());
            None
        }
    };
    let mut child = cmd.spawn().expect("cannot spawn redlatch");
    drop(cmd); // our copy of the terminal's end: the reader ends when the runner's does
    assert!(
        eventually(Duration::from_secs(20), || dir.file("started").exists()),
        "the runner did not start"
    );
    let mut unlock: Vec<String> = ["unlock", "--force", name].map(String::from).into();
    unlock.extend(redis_args(&[&server]));
    output(&unlock, 0);
    let forced = Instant::now();
    // Told by the force-unlock and noticed at once, not at the next renewal round.
    let bound = SLACK;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if forced.elapsed() > bound + Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the runner did not notice the force-unlock");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // CMD ended on SIGTERM at once: the runner's exit is when it noticed.
    assert!(
        forced.elapsed() <= bound,
        "noticed {:?} after the force-unlock, promised within {bound:?}",
        forced.elapsed()
    );
    let text = match reader {
        Some(reader) => reader.join().unwrap(),
        None => std::fs::read_to_string(&stderr_file).unwrap(),
    };
    (text, status.code())
}

/// One loss, with its reason, and nothing said of a risk.
fn assert_one_loss(text: &str) {
    assert_eq!(text.matches("lost while CMD ran").count(), 1, "{text}");
    assert!(text.contains("expired or deleted on the masters"), "{text}");
    assert_eq!(text.matches("lock lost").count(), 1, "{text}");
    assert!(!text.contains("at risk"), "{text}");
}

#[test]
fn on_a_terminal_the_warnings_are_coloured() {
    let (text, code) = force_unlocked_run(Stderr::Terminal);
    assert_eq!(code, Some(76), "{text}");
    assert_one_loss(&text);
    assert!(text.contains("\x1b["), "no colour on a terminal: {text:?}");
}

#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    let (text, code) = force_unlocked_run(Stderr::TerminalNoColor);
    assert_eq!(code, Some(76), "{text}");
    assert_one_loss(&text);
    assert!(!text.contains('\x1b'), "colour despite NO_COLOR: {text:?}");
}

#[test]
fn stderr_in_a_file_has_no_colour_codes() {
    let (text, code) = force_unlocked_run(Stderr::File);
    assert_eq!(code, Some(76), "{text}");
    assert_one_loss(&text);
    assert!(!text.contains('\x1b'), "colour codes in a file: {text:?}");
}
