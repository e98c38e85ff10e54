//! Redlock helpers: hand-written locks on chosen masters, and the delayed restart of a
//! master through `scripts/delayed-restart.sh` (SPEC §3.9).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redlatch::Config;

use super::RedisServer;

/// A holder id of some other client (the Redisson layout: UUID, `:`, thread id).
pub const OTHER: &str = "00000000-0000-4000-8000-000000000000:1";

static RESTARTS: AtomicUsize = AtomicUsize::new(0);

/// The repository's root: the parent of this crate's directory (redlatch-testkit/).
fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("scripts/delayed-restart.sh").is_file())
        .expect("scripts/delayed-restart.sh in the package directory or above it")
}

/// A Redlock configuration over `servers`, in order, with a master timeout of 250 ms
/// instead of 50 ms: opening a connection counts against it, and a test machine busy
/// with parallel tests can take longer than 50 ms for that. Tests about timing set it.
pub fn config(servers: &[RedisServer]) -> Config {
    Config::redlock(servers.iter().map(|s| s.url())).master_timeout(Duration::from_millis(250))
}

/// Cuts `server` off the lock scripts: it refuses every write at once, as a replica of
/// a master that does not exist (READONLY, an outage the client retries; its data and
/// run_id stay). (A paused master is no good here: the calls queued on its socket would
/// all run when it resumes, bringing its counter up to date or granting a late lock; a
/// partition loses them. An ACL refusal is no good either: it is a permanent error,
/// not an outage.) [`reconnect`] undoes it.
pub fn cut_off(server: &RedisServer) {
    let _: String = server.cmd(&["REPLICAOF", "127.0.0.1", "1"]);
}

/// Undoes [`cut_off`]: the server is a master again, with its data.
pub fn reconnect(server: &RedisServer) {
    let _: String = server.cmd(&["REPLICAOF", "NO", "ONE"]);
}

/// Writes a lock as another holder would: `HSET name holder 1` + `PEXPIRE name lease`.
pub fn prelock(server: &RedisServer, name: &str, holder: &str, lease: Duration) {
    let _: i64 = server.cmd(&["HSET", name, holder, "1"]);
    let _: i64 = server.cmd(&["PEXPIRE", name, &lease.as_millis().to_string()]);
}

/// The holder ids in the lock hash `name` on `server`, sorted (empty: no lock).
pub fn holders(server: &RedisServer, name: &str) -> Vec<String> {
    let mut h: Vec<String> = server.cmd(&["HKEYS", name]);
    h.sort();
    h
}

/// `holder`'s hold count in `name` on `server` (0 if absent).
pub fn count(server: &RedisServer, name: &str, holder: &str) -> i64 {
    server
        .cmd::<Option<i64>>(&["HGET", name, holder])
        .unwrap_or(0)
}

/// Waits (at most 5 s) until `name`'s holders on master i are `want(i)` on every master,
/// and panics with what each master shows otherwise. `lock()` and `unlock()` return once
/// a majority answered; the slower masters' answers land just after, in the background.
pub async fn settle_holders(
    servers: &[RedisServer],
    name: &str,
    want: impl Fn(usize) -> Vec<String>,
) {
    let all = || (0..servers.len()).all(|i| holders(&servers[i], name) == want(i));
    if !super::eventually_async(Duration::from_secs(5), all).await {
        let seen: Vec<Vec<String>> = servers.iter().map(|s| holders(s, name)).collect();
        let wanted: Vec<Vec<String>> = (0..servers.len()).map(&want).collect();
        panic!("holders of {name}: {seen:?}, want {wanted:?}");
    }
}

/// Number of keys on `server`.
pub fn dbsize(server: &RedisServer) -> i64 {
    server.dbsize()
}

/// A master being restarted by `scripts/delayed-restart.sh`: the script waits out the
/// longest lease, then execs a fresh, empty `redis-server` on the same port and dir, so
/// the child process becomes the new master. Killed on drop.
pub struct DelayedRestart {
    child: Child,
    url: String,
    output: PathBuf,
    started: Instant,
}

impl DelayedRestart {
    /// Crashes `server` (SIGKILL: it loses every lock it granted), then starts the
    /// script with `--max-lease max_lease --margin margin`.
    pub fn crash(server: &mut RedisServer, max_lease: Duration, margin: Duration) -> Self {
        server.kill();
        Self::spawn(server, max_lease, margin, &[])
    }

    /// Lets the script stop the running `server` itself (`--stop`: shutdown nosave).
    pub fn stop(server: &RedisServer, max_lease: Duration, margin: Duration) -> Self {
        Self::spawn(server, max_lease, margin, &["--stop"])
    }

    /// Runs the script for `server` with extra flags; the caller checks the outcome.
    pub fn spawn(
        server: &RedisServer,
        max_lease: Duration,
        margin: Duration,
        flags: &[&str],
    ) -> Self {
        let n = RESTARTS.fetch_add(1, Ordering::SeqCst);
        let dir = server.dir().to_string_lossy().into_owned();
        let port = server.port().to_string();
        let output = server.dir().join(format!("delayed-restart-{n}.out"));
        let log = server.dir().join(format!("restarted-{n}.log"));
        let out = File::create(&output).expect("create script output file");
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let script = repo_root().join("scripts/delayed-restart.sh");
        let started = Instant::now();
        #[rustfmt::skip]
        let child = Command::new(script)
            .args(["--port", &port, "--max-lease", &ms(max_lease), "--margin", &ms(margin)])
            .args(flags)
            .args([
                "--", "redis-server", "--port", &port, "--bind", "127.0.0.1", "--dir", &dir,
                "--logfile", &log.to_string_lossy(), "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--protected-mode", "no",
            ])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup output file"))
            .stderr(out)
            .spawn()
            .expect("cannot run scripts/delayed-restart.sh");
        DelayedRestart {
            child,
            url: server.url(),
            output,
            started,
        }
    }

    /// When the script was started (the old master was already gone or being stopped).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// True once the restarted master answers PING as the script's (exec'd) process.
    pub fn is_up(&self) -> bool {
        super::serving_pid(&self.url) == Some(self.child.id())
    }

    /// The script's exit status, if it has exited (it only exits on error).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until the restarted master answers; returns when it was first seen up.
    /// Panics with the script's output after `within`.
    pub async fn wait_up(&self, within: Duration) -> Instant {
        if !super::eventually_async(within, || self.is_up()).await {
            panic!(
                "restart not up within {within:?}; script said:\n{}",
                self.output()
            );
        }
        Instant::now()
    }

    /// What the script printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }
}

impl Drop for DelayedRestart {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `lock`'s client talks to master `idx` again after that master restarted:
/// the first command on a connection to the old process fails, then the client
/// reconnects. Two answers in a row cover both connections of the default pool.
pub async fn reconnected(lock: &redlatch::Lock, idx: usize) {
    let mut ok = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while ok < 2 {
        assert!(
            Instant::now() < deadline,
            "master {idx} never answered again"
        );
        let status = lock.status().await.expect("status");
        ok = if status[idx].error.is_none() {
            ok + 1
        } else {
            0
        };
    }
}
