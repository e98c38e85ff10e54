//! A throw-away `redis-server` process per test: free port, private temp dir, killed on drop.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(10);
const FRESH_PORT_ATTEMPTS: usize = 5;

/// On restart the port must stay the same, so a taken port is retried after a short sleep.
const SAME_PORT_ATTEMPTS: usize = 20;
const SAME_PORT_BACKOFF: Duration = Duration::from_millis(250);

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// Why one attempt to bring a server up did not work.
enum StartError {
    /// redis-server exited because another process owns the port.
    PortInUse,
    /// Anything else; the string explains it (the caller adds the log).
    Other(String),
}

pub struct RedisServer {
    port: u16,
    /// `--tls-port`, 0 when the server speaks plain TCP only.
    tls_port: u16,
    dir: PathBuf,
    args: Vec<String>,
    child: Mutex<Option<Child>>,
    pid: u32,
    paused: AtomicBool,
    /// Extra environment of the process (a clock shim's, for a server with its own clock).
    env: Vec<(String, String)>,
}

impl RedisServer {
    /// Start a fresh redis-server on a free 127.0.0.1 port with its own temp dir.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Same as [`RedisServer::start`], with extra redis-server args appended.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        Self::start_in(|_port, _dir| extra.iter().map(|s| s.to_string()).collect())
    }

    /// A server that also serves TLS on a second free port ([`RedisServer::tls_url`]),
    /// with the certificates of `certs`; the plain port stays for the harness's own
    /// commands. `auth_clients`: whether TLS clients must present a certificate signed
    /// by the test CA (`--tls-auth-clients yes`).
    pub fn start_tls(certs: &super::tls::TestCerts, auth_clients: bool) -> RedisServer {
        let (cert, key, ca) = (certs.server_cert(), certs.server_key(), certs.ca());
        #[rustfmt::skip]
        let args: Vec<String> = [
            "--tls-cert-file", &*cert.to_string_lossy(),
            "--tls-key-file", &*key.to_string_lossy(),
            "--tls-ca-cert-file", &*ca.to_string_lossy(),
            "--tls-auth-clients", if auth_clients { "yes" } else { "no" },
        ].iter().map(|s| s.to_string()).collect();
        Self::start_inner(move |_port, _dir| args.clone(), true, 0, Vec::new())
    }

    /// [`RedisServer::start_with`] with extra environment variables for the process
    /// (kept for restarts): e.g. [`crate::clock::FakeClock::env`], for a
    /// server whose clock a test moves.
    pub fn start_with_env(env: &[(&str, &str)], extra: &[&str]) -> RedisServer {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Self::start_inner(
            |_port, _dir| extra.iter().map(|s| s.to_string()).collect(),
            false,
            0,
            env,
        )
    }

    /// Same as [`RedisServer::start_with`], with the extra args computed for each start
    /// attempt from the chosen port and the private dir: for settings tied to them (a
    /// cluster bus port, a config file written into the dir). As on redis-server's own
    /// command line, a first arg not starting with `-` is a config file: it goes before the
    /// harness's args (`--port`, `--dir`, ...), the others after them, so they win.
    /// A restart reuses the args of the attempt that succeeded.
    pub fn start_in(extra: impl FnMut(u16, &Path) -> Vec<String>) -> RedisServer {
        Self::start_inner(extra, false, 0, Vec::new())
    }

    /// [`RedisServer::start_in`] on a port `port + offset` is also free for (a Redis < 7
    /// cluster node's bus port is its port + 10000: it has no `cluster-port`).
    pub fn start_in_with_free(
        offset: u16,
        extra: impl FnMut(u16, &Path) -> Vec<String>,
    ) -> RedisServer {
        Self::start_inner(extra, false, offset, Vec::new())
    }

    /// `offset`: 0, or that of a second port the server needs free ([`Self::start_in_with_free`]).
    fn start_inner(
        mut extra: impl FnMut(u16, &Path) -> Vec<String>,
        tls: bool,
        offset: u16,
        env: Vec<(String, String)>,
    ) -> RedisServer {
        let dir = std::env::temp_dir().join(format!(
            "redlatch-test-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create test dir {}: {e}", dir.display()));
        let mut server = RedisServer {
            port: 0,
            tls_port: 0,
            dir,
            args: Vec::new(),
            child: Mutex::new(None),
            pid: 0,
            paused: AtomicBool::new(false),
            env,
        };
        for attempt in 1..=FRESH_PORT_ATTEMPTS {
            server.port = match offset {
                0 => super::free_port(),
                offset => super::free_port_pair(offset),
            };
            if tls {
                server.tls_port = loop {
                    let p = super::free_port();
                    if p != server.port {
                        break p;
                    }
                };
            }
            server.args = extra(server.port, &server.dir);
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(StartError::PortInUse) if attempt < FRESH_PORT_ATTEMPTS => continue,
                Err(StartError::PortInUse) => server.fail(&format!(
                    "port still taken after {FRESH_PORT_ATTEMPTS} attempts"
                )),
                Err(StartError::Other(why)) => server.fail(&why),
            }
        }
        unreachable!()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:TLS_PORT` of a server started with [`RedisServer::start_tls`].
    pub fn tls_url(&self) -> String {
        assert!(self.tls_port != 0, "this server was not started with TLS");
        format!("rediss://127.0.0.1:{}", self.tls_port)
    }

    /// `127.0.0.1:PORT`
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// PID of the current (or last) redis-server process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's private directory (log, AOF files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A fresh synchronous connection ([`IO_TIMEOUT`](crate::conn::IO_TIMEOUT) to
    /// connect, read and write; a test that waits longer for a message sets its own).
    pub fn conn(&self) -> redis::Connection {
        crate::conn::sync_conn(self.url())
    }

    /// A fresh multiplexed async connection with [`IO_TIMEOUT`](crate::conn::IO_TIMEOUT)
    /// to connect and per reply (not redis-rs's 500 ms default).
    pub async fn async_conn(&self) -> redis::aio::MultiplexedConnection {
        crate::conn::async_conn(self.url()).await
    }

    /// The keys matching `pattern` (`KEYS`: a test server is small) but the records and
    /// ledgers every live redlatch client keeps of itself (`redlatch_client:{uuid}`,
    /// `redlatch_ledger:{uuid}`): what locks, queues and counters left.
    pub fn lock_keys(&self, pattern: &str) -> Vec<String> {
        let keys: Vec<String> = self.cmd(&["KEYS", pattern]);
        keys.into_iter().filter(|k| !is_client_key(k)).collect()
    }

    /// How many keys [`lock_keys`](Self::lock_keys) finds: `DBSIZE` without the
    /// clients' own records and ledgers.
    pub fn dbsize(&self) -> i64 {
        self.lock_keys("*").len() as i64
    }

    /// Run one command on a fresh [`conn`](Self::conn) and return the typed reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        assert!(
            !args.is_empty(),
            "RedisServer::cmd needs at least the command name"
        );
        let mut conn = self.conn();
        redis::cmd(args[0])
            .arg(&args[1..])
            .query::<T>(&mut conn)
            .unwrap_or_else(|e| panic!("redis command {args:?} on {} failed: {e}", self.addr()))
    }

    /// `SET key value`, then `WAIT replicas 5000` on the same connection (WAIT counts
    /// the acknowledgements of the calling connection's own writes: on a fresh one it
    /// returns at once, proving nothing); panics unless `replicas` acknowledged.
    pub fn set_replicated(&self, key: &str, value: &str, replicas: i64) {
        let mut conn = self.conn();
        let (_, acked): ((), i64) = redis::pipe()
            .cmd("SET")
            .arg(key)
            .arg(value)
            .cmd("WAIT")
            .arg(replicas)
            .arg(5000)
            .query(&mut conn)
            .unwrap_or_else(|e| panic!("SET {key} + WAIT on {} failed: {e}", self.addr()));
        assert_eq!(
            acked, replicas,
            "{key} reached {acked} of {replicas} replicas"
        );
    }

    /// Like [`RedisServer::cmd`] but returns the error instead of panicking, with `timeout`
    /// for connecting, reading and writing: for polling servers that may be down or paused.
    pub fn try_cmd<T: redis::FromRedisValue>(
        &self,
        timeout: Duration,
        args: &[&str],
    ) -> redis::RedisResult<T> {
        assert!(
            !args.is_empty(),
            "RedisServer::try_cmd needs at least the command name"
        );
        let mut conn = redis::Client::open(self.url())?.get_connection_with_timeout(timeout)?;
        conn.set_read_timeout(Some(timeout))?;
        conn.set_write_timeout(Some(timeout))?;
        redis::cmd(args[0]).arg(&args[1..]).query::<T>(&mut conn)
    }

    /// Whether the server is paused ([`RedisServer::pause`] without a resume, kill or restart
    /// since).
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Running and not paused: it answers commands.
    pub fn is_live(&self) -> bool {
        !self.is_paused() && self.is_running()
    }

    /// `"running"`, `"paused"` or `"killed"`, for failure messages.
    pub fn state(&self) -> &'static str {
        if self.is_paused() {
            "paused"
        } else if self.is_running() {
            "running"
        } else {
            "killed"
        }
    }

    /// SIGKILL the process and reap it; idempotent.
    pub fn kill(&mut self) {
        let mut guard = self.child_guard();
        if let Some(mut child) = guard.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused.store(false, Ordering::SeqCst);
    }

    /// SIGSTOP: the server keeps its sockets but stops answering.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
        self.paused.store(true, Ordering::SeqCst);
    }

    /// SIGCONT after [`RedisServer::pause`].
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
        self.paused.store(false, Ordering::SeqCst);
    }

    /// Start again on the same port, with the same args and dir; kills first if still running.
    pub fn restart(&mut self) {
        self.kill();
        for attempt in 1..=SAME_PORT_ATTEMPTS {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(StartError::PortInUse) if attempt < SAME_PORT_ATTEMPTS => {
                    thread::sleep(SAME_PORT_BACKOFF)
                }
                Err(StartError::PortInUse) => {
                    self.fail("restart: port stayed taken by another process")
                }
                Err(StartError::Other(why)) => self.fail(&format!("restart: {why}")),
            }
        }
    }

    /// Whether the redis-server process is alive (a paused server counts as running).
    pub fn is_running(&self) -> bool {
        match self.child_guard().as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The server's log file contents (all runs, including restarts).
    pub fn log(&self) -> String {
        std::fs::read(self.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|e| format!("<cannot read {}: {e}>", self.log_path().display()))
    }

    /// The last `lines` lines of [`RedisServer::log`], for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn child_guard(&self) -> MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal(&self, sig: libc::c_int) {
        assert!(
            self.is_running(),
            "redis-server on port {} is not running",
            self.port
        );
        // SAFETY: plain kill(2) on the PID of our own, not yet reaped, child.
        let rc = unsafe { libc::kill(self.pid as libc::pid_t, sig) };
        assert_eq!(
            rc,
            0,
            "kill({}, {sig}) failed: {}",
            self.pid,
            std::io::Error::last_os_error()
        );
    }

    fn fail(&mut self, why: &str) -> ! {
        self.kill();
        let stdio = std::fs::read(self.dir.join("redis.stdio")).unwrap_or_default();
        panic!(
            "redis-server on port {} (dir {}) did not start: {why}\n--- redis.log ---\n{}\n\
             --- stdout/stderr ---\n{}",
            self.port,
            self.dir.display(),
            self.log(),
            String::from_utf8_lossy(&stdio)
        );
    }

    /// Spawn redis-server on `self.port` and wait until it answers PING as *our* process.
    fn spawn_and_wait(&mut self) -> Result<(), StartError> {
        let log_path = self.log_path();
        let log_start = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0) as usize;
        let port = self.port.to_string();
        let dir = self.dir.to_string_lossy().into_owned();
        let logfile = log_path.to_string_lossy().into_owned();
        #[rustfmt::skip]
        let base = [
            "--port", &port, "--bind", "127.0.0.1", "--dir", &dir, "--logfile", &logfile,
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no",
        ];
        // Early failures (bad arguments) happen before the logfile is opened and go to stderr.
        let stdio = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("redis.stdio"))
            .expect("cannot create redis.stdio");
        let tls_port = self.tls_port.to_string();
        let tls = match self.tls_port {
            0 => &[][..],
            _ => &["--tls-port", &tls_port][..],
        };
        let (config, extra) = match self.args.split_first() {
            Some((first, rest)) if !first.starts_with('-') => (Some(first), rest),
            _ => (None, &self.args[..]),
        };
        let child = Command::new("redis-server")
            .args(config)
            .args(base)
            .args(tls)
            .args(extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(stdio.try_clone().expect("dup redis.stdio"))
            .stderr(stdio)
            .spawn()
            .unwrap_or_else(|e| {
                if e.kind() == ErrorKind::NotFound {
                    panic!("`redis-server` not found on PATH; run scripts/test.sh (it installs it)")
                }
                panic!("cannot spawn redis-server: {e}")
            });
        self.pid = child.id();
        *self.child_guard() = Some(child);
        self.paused.store(false, Ordering::SeqCst);

        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let exited = self
                .child_guard()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                self.kill();
                let log = self.log();
                let this_run = log.get(log_start..).unwrap_or(&log);
                if this_run.contains("Address already in use") {
                    return Err(StartError::PortInUse);
                }
                return Err(StartError::Other(format!(
                    "redis-server exited with {status}"
                )));
            }
            if super::serving_pid(&self.url()) == Some(self.pid) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(StartError::Other(format!(
                    "no PING reply within {READY_TIMEOUT:?}"
                )));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let mut guard = self.child_guard();
        if let Some(mut child) = guard.take() {
            if self.paused.load(Ordering::SeqCst) {
                // SAFETY: kill(2) on our own unreaped child.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(guard);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A redlatch client's record or ledger (not a lock's key).
pub fn is_client_key(key: &str) -> bool {
    key.starts_with("redlatch_client:{") || key.starts_with("redlatch_ledger:{")
}
