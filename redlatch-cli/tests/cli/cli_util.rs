//! Helpers for the `redlatch` command-line tests (this binary's modules):
//! running the binary in the foreground (assert_cmd) or in the background with bounded
//! waits, a private temp dir, and signals.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlatch_testkit::RedisServer;

/// Upper bound for any single foreground `redlatch` invocation in the tests.
pub const CMD_TIMEOUT: Duration = Duration::from_secs(60);

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The binary under test.
pub fn bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_redlatch"))
}

/// `--redis URL` for each server.
pub fn redis_args(servers: &[&RedisServer]) -> Vec<String> {
    servers
        .iter()
        .flat_map(|s| ["--redis".to_string(), s.url()])
        .collect()
}

/// `redlatch <args...>` for assert_cmd, with a clean environment (no REDLATCH_* from
/// the caller) and a timeout.
pub fn redlatch(args: &[String]) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::new(bin());
    cmd.args(args)
        .env_remove("REDLATCH_REDIS")
        .env_remove("REDLATCH_WATCHDOG_TIMEOUT")
        .env_remove("REDLATCH_BOOKKEEPING")
        .timeout(CMD_TIMEOUT);
    cmd
}

/// Arguments of `redlatch run NAME <opts> --redis ... -- sh -c SCRIPT`.
/// Runs redlatch with `args`, asserts its exit status, returns what it printed.
pub fn output(args: &[String], code: i32) -> std::process::Output {
    redlatch(args).assert().code(code).get_output().clone()
}

pub fn run_args(name: &str, servers: &[&RedisServer], opts: &[&str], script: &str) -> Vec<String> {
    let mut args = vec!["run".to_string(), name.to_string()];
    args.extend(opts.iter().map(|s| s.to_string()));
    args.extend(redis_args(servers));
    args.extend(["--", "sh", "-c", script].map(String::from));
    args
}

/// A `redlatch` process running in the background; SIGKILLed on drop if still alive.
pub struct Bg {
    child: Option<Child>,
    pub stderr_path: PathBuf,
    pub stdout_path: PathBuf,
}

/// What a background `redlatch` ended with.
#[derive(Debug)]
pub struct Ended {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ended {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

impl Bg {
    /// Starts `redlatch <args>` with `D` set to `dir` (CMD scripts write there).
    pub fn start(args: &[String], dir: &TempDir, tag: &str) -> Bg {
        let stdout_path = dir.path().join(format!("{tag}.stdout"));
        let stderr_path = dir.path().join(format!("{tag}.stderr"));
        let child = Command::new(bin())
            .args(args)
            .env_remove("REDLATCH_REDIS")
            .env_remove("REDLATCH_WATCHDOG_TIMEOUT")
            .env("D", dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
            .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
            .spawn()
            .expect("cannot spawn redlatch");
        Bg {
            child: Some(child),
            stdout_path,
            stderr_path,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends `sig` to the redlatch process.
    pub fn signal(&self, sig: libc::c_int) {
        send(self.pid(), sig);
    }

    /// True while the process has not exited.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Waits at most `within` for the process to exit; panics (after killing it) if it
    /// does not.
    pub fn wait(mut self, within: Duration) -> Ended {
        let mut child = self.child.take().expect("running");
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "redlatch did not exit within {within:?}; stderr: {}",
                    read(&self.stderr_path)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ended {
            status,
            stdout: read(&self.stdout_path),
            stderr: read(&self.stderr_path),
        }
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The file's contents, or "" if it does not exist (yet).
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// kill(2).
pub fn send(pid: u32, sig: libc::c_int) {
    // SAFETY: plain kill(2); the tests only signal processes they started.
    let rc = unsafe { libc::kill(pid as libc::pid_t, sig) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// True if a process with this PID exists (zombies included).
pub fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// EXISTS on one server.
pub fn exists(server: &RedisServer, key: &str) -> bool {
    server.cmd::<i64>(&["EXISTS", key]) == 1
}

/// A private directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "redlatch-cli-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A shell loop that runs until `$D/<stop>` exists, at most ~`secs` seconds.
pub fn until_file(stop: &str, secs: u32) -> String {
    let rounds = secs * 20;
    format!(
        "i=0; while [ ! -e \"$D/{stop}\" ] && [ $i -lt {rounds} ]; do sleep 0.05; i=$((i+1)); done"
    )
}
