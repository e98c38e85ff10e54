//! [`Peer`]: the real clients that take the simple lock's `SET NX PX` key, run as
//! processes beside redlatch on one name: redis-py's `Lock` (PyPI), go-redsync v4 (the Go
//! module proxy) and node-redlock (npm). Each is installed from its registry into
//! `target/peers/` on first use (once across test binaries: an flock), as the Redisson
//! JVM's Maven artifacts are (jvm.rs), and runs `interop/peers/`'s program: for N seconds
//! it takes the name with its own retry (every 2-10 ms), INCRs an "inside" key (more
//! than 1 is an overlap), holds 2 ms, DECRs it and releases, then prints
//! `entered N overlaps M`.
//!
//! A missing toolchain (python3, go, node and npm) skips the test with a message;
//! `REDLATCH_REQUIRE_PEERS=1` (set by .ci/run) makes it a failure.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::jvm::{repo, target_dir};

/// redis-py's version (PyPI).
pub const REDIS_PY: &str = "8.1.0";
/// go-redsync's version (Go module proxy), and the go-redis it is driven through.
pub const REDSYNC: &str = "v4.18.1";
pub const GO_REDIS: &str = "v9.23.0";
/// node-redlock's version (npm; ioredis is pinned in interop/peers/node_redlock/package.json).
pub const NODE_REDLOCK: &str = "5.0.0-beta.2";

/// A real client of the simple lock's wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    RedisPy,
    Redsync,
    NodeRedlock,
}

/// How long an install or a peer's run may take before the test fails (a cold module
/// download on a loaded machine included).
const INSTALL: Duration = Duration::from_secs(600);

impl Peer {
    /// Its name in messages.
    pub fn label(self) -> &'static str {
        match self {
            Peer::RedisPy => "redis-py Lock",
            Peer::Redsync => "go-redsync",
            Peer::NodeRedlock => "node-redlock",
        }
    }

    fn tools(self) -> &'static [&'static str] {
        match self {
            Peer::RedisPy => &["python3"],
            Peer::Redsync => &["go"],
            Peer::NodeRedlock => &["node", "npm"],
        }
    }

    /// Whether its toolchain is here; says why not (or panics when required).
    pub fn available(self) -> bool {
        let missing: Vec<&str> = (self.tools().iter().copied())
            .filter(|t| !on_path(t))
            .collect();
        if missing.is_empty() {
            return true;
        }
        if std::env::var("REDLATCH_REQUIRE_PEERS").is_ok_and(|v| v == "1") {
            panic!(
                "REDLATCH_REQUIRE_PEERS=1 but {missing:?} (for {}) is not on the PATH",
                self.label()
            );
        }
        eprintln!(
            "SKIPPED: the {} interop needs {missing:?} on the PATH",
            self.label()
        );
        false
    }

    /// Starts it contending for `name` on the server at `port` for `seconds`, counting
    /// overlaps on `inside`; installed first if needed. Its stdout is piped.
    pub fn contend(self, port: u16, name: &str, seconds: f64, inside: &str) -> std::process::Child {
        let mut cmd = self.command();
        cmd.arg(port.to_string())
            .arg(name)
            .arg(seconds.to_string())
            .arg(inside)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.label()))
    }

    /// The command that runs it (without its arguments), after installing it.
    fn command(self) -> Command {
        let dir = target_dir().join("peers");
        std::fs::create_dir_all(&dir).unwrap();
        let _lock = Flock::take(&dir.join("install.lock"));
        let sources = repo().join("interop/peers");
        match self {
            Peer::RedisPy => {
                let site = dir.join("python");
                let stamp = site.join(format!("redlatch-redis-{REDIS_PY}.stamp"));
                if !stamp.exists() {
                    run(Command::new("python3")
                        .args([
                            "-m",
                            "pip",
                            "install",
                            "--quiet",
                            "--disable-pip-version-check",
                            "--target",
                        ])
                        .arg(&site)
                        .arg(format!("redis=={REDIS_PY}")));
                    std::fs::write(&stamp, "").unwrap();
                }
                let mut cmd = Command::new("python3");
                cmd.env("PYTHONPATH", &site)
                    .arg(sources.join("redis_py_peer.py"));
                cmd
            }
            Peer::Redsync => redsync(&dir, &sources),
            Peer::NodeRedlock => {
                let node = dir.join("node");
                std::fs::create_dir_all(&node).unwrap();
                for file in ["package.json", "peer.mjs"] {
                    std::fs::copy(sources.join("node_redlock").join(file), node.join(file))
                        .unwrap();
                }
                let stamp = node.join(format!("redlock-{NODE_REDLOCK}.stamp"));
                if !stamp.exists() || !node.join("node_modules/redlock").exists() {
                    run(Command::new("npm").current_dir(&node).args([
                        "install",
                        "--no-audit",
                        "--no-fund",
                        "--loglevel=error",
                    ]));
                    std::fs::write(&stamp, "").unwrap();
                }
                let mut cmd = Command::new("node");
                cmd.arg(node.join("peer.mjs"));
                cmd
            }
        }
    }
}

/// go-redsync's peer, built once per version (and whenever its main.go changes).
fn redsync(dir: &std::path::Path, sources: &std::path::Path) -> Command {
    let go = dir.join("go");
    let src = go.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let main = std::fs::read(sources.join("redsync/main.go")).unwrap();
    let bin = go.join("redsync-peer");
    let stamp = go.join(format!("redsync-{REDSYNC}-{GO_REDIS}.stamp"));
    let fresh = bin.exists()
        && std::fs::read(src.join("main.go")).is_ok_and(|m| m == main)
        && stamp.exists();
    if !fresh {
        std::fs::write(src.join("main.go"), &main).unwrap();
        let go_cmd = |args: &[&str]| {
            let mut c = Command::new("go");
            c.current_dir(&src)
                .env("GOMODCACHE", go.join("mod"))
                .env("GOFLAGS", "-mod=mod")
                .args(args);
            c
        };
        if !src.join("go.mod").exists() {
            run(&mut go_cmd(&["mod", "init", "redlatch.test/redsync-peer"]));
        }
        let redsync = format!("github.com/go-redsync/redsync/v4@{REDSYNC}");
        let redis = format!("github.com/redis/go-redis/v9@{GO_REDIS}");
        run(&mut go_cmd(&["get", &redsync, &redis]));
        run(&mut go_cmd(&["build", "-o", bin.to_str().unwrap(), "."]));
        std::fs::write(&stamp, "").unwrap();
    }
    Command::new(bin)
}

/// What a peer's run printed: `(entered, overlaps)`, once it exited 0 (within
/// `within`); panics with its output otherwise.
pub fn finished(peer: Peer, child: std::process::Child, within: Duration) -> (u64, u64) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out: Output = rx
        .recv_timeout(within)
        .unwrap_or_else(|_| panic!("{} did not finish within {within:?}", peer.label()))
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{} failed ({}): {stdout}{stderr}",
        peer.label(),
        out.status
    );
    let words: Vec<&str> = stdout.split_whitespace().collect();
    match words[..] {
        ["entered", n, "overlaps", m] => (n.parse().unwrap(), m.parse().unwrap()),
        _ => panic!("{} said {stdout:?} {stderr:?}", peer.label()),
    }
}

/// Runs `cmd` to its end within [`INSTALL`]; panics with its output when it fails.
fn run(cmd: &mut Command) {
    let shown = format!("{cmd:?}");
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let child = child.unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out =
        (rx.recv_timeout(INSTALL)).unwrap_or_else(|_| panic!("{shown} took over {INSTALL:?}"));
    let out = out.unwrap();
    assert!(
        out.status.success(),
        "{shown} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn on_path(tool: &str) -> bool {
    crate::jvm::runs(tool, "--version")
}

/// An exclusive flock on a file, held until dropped (one install at a time across
/// test binaries and threads).
struct Flock {
    _file: std::fs::File,
}

impl Flock {
    fn take(path: &Path) -> Flock {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::create(path).unwrap();
        // SAFETY: flock on a descriptor we own; released when the file is closed.
        assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) }, 0);
        Flock { _file: file }
    }
}
