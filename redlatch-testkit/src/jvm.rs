//! The real Redisson client in a JVM, for the interop tests (tests/redisson/redisson_jvm*.rs).
//!
//! The Java side is `interop/redisson/` (a Maven project; `Driver.java` documents the line
//! protocol). [`Jvm::start`] builds it once per Redisson version and run (`mvn -q package`,
//! Maven Central only; skipped while the jar is newer than its sources, so the classpath
//! is cached in `target/interop-redisson/VERSION/`), then starts
//! `java -cp JAR:CLASSPATH redlatch.interop.Driver` and commands it over stdin/stdout.
//! Each command names the Java thread it runs on (Redisson ties lock holds to threads).
//!
//! Without `java` and `mvn` on the PATH the tests print that they skip and return, unless
//! `REDLATCH_REQUIRE_JAVA=1` (set by `.ci/run`): then they fail.
//!
//! [`record`] writes the compatibility matrix's result lines to `target/interop-matrix/`
//! (`scripts/interop_matrix.py` renders them into docs/redisson-compat.md).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use tokio::sync::oneshot;

/// The Redisson versions under test: one before 3.44 that production still runs, the last
/// 3.x, and the current 4.x.
pub const OLD: &str = "3.27.2";
pub const LAST3: &str = "3.52.0";
pub const V4: &str = "4.7.0";
pub const VERSIONS: [&str; 3] = [OLD, LAST3, V4];

/// How long one command may take before the test fails instead of hanging.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// The repository's root (this crate lies in its redlatch-testkit/).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("redlatch-testkit/ lies in the repository")
        .to_path_buf()
}

/// The cargo target directory (`CARGO_TARGET_DIR` or `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { repo().join(p) })
        .unwrap_or_else(|| repo().join("target"))
}

fn on_path(tool: &str) -> bool {
    Command::new(tool)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Whether the JVM tests can run here; prints why not (or panics when required).
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    let ok = *AVAILABLE.get_or_init(|| on_path("java") && on_path("mvn"));
    if !ok {
        if std::env::var("REDLATCH_REQUIRE_JAVA").is_ok_and(|v| v == "1") {
            panic!("REDLATCH_REQUIRE_JAVA=1 but java or mvn is not on the PATH");
        }
        eprintln!("SKIPPED: the JVM interop (Redisson, ShedLock) needs java and mvn on the PATH");
    }
    ok
}

/// Newest modification time under `dir` (files only).
fn newest(dir: &Path) -> SystemTime {
    let mut t = SystemTime::UNIX_EPOCH;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            let m = if p.is_dir() {
                newest(&p)
            } else {
                e.metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            };
            t = t.max(m);
        }
    }
    t
}

/// `-cp` for `version`, building the driver first unless its jar is up to date. One build
/// at a time across test binaries (an flock on target/interop-redisson/build.lock).
pub fn classpath(version: &str) -> String {
    maven_classpath(
        "redisson",
        "redisson.version",
        version,
        "redisson-driver-1.0.jar",
    )
}

/// `-cp` for the Maven project `interop/<project>` built with `-D<property>=<version>`
/// into `target/interop-<project>/<version>/` (its jar `jar`), building it first unless
/// the jar is newer than its sources. One build at a time per project across test
/// binaries (an flock on its build.lock).
pub fn maven_classpath(project: &str, property: &str, version: &str, jar: &str) -> String {
    static BUILT: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap();
    let id = format!("{project}/{version}");
    if let Some(cp) = built.get(&id) {
        return cp.clone();
    }
    let sources_dir = repo().join("interop").join(project);
    let out = target_dir().join(format!("interop-{project}"));
    std::fs::create_dir_all(&out).unwrap();
    let lock_file = std::fs::File::create(out.join("build.lock")).unwrap();
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; released when the file is closed.
        assert_eq!(
            unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX) },
            0
        );
    }
    let dir = out.join(version);
    let jar = dir.join(jar);
    let cp_file = dir.join("classpath.txt");
    // Written after each successful build: Maven leaves an unchanged jar and classpath
    // file untouched, so their own times say nothing.
    let stamp = dir.join("built.stamp");
    let sources = newest(&sources_dir.join("src")).max(newest_file(&sources_dir.join("pom.xml")));
    let fresh = jar.exists() && cp_file.exists() && newest_file(&stamp) >= sources;
    if !fresh {
        let started = std::time::Instant::now();
        let out_put = Command::new("mvn")
            .current_dir(&sources_dir)
            .args(["-q", "-B", "package"])
            .arg(format!("-D{property}={version}"))
            .arg(format!("-Dinterop.build.dir={}", out.display()))
            .output()
            .expect("cannot run mvn");
        assert!(
            out_put.status.success(),
            "mvn package of interop/{project} for {version} failed:\n{}{}",
            String::from_utf8_lossy(&out_put.stdout),
            String::from_utf8_lossy(&out_put.stderr)
        );
        std::fs::write(&stamp, version).unwrap();
        eprintln!(
            "built the {project} {version} driver in {:?}",
            started.elapsed()
        );
    }
    drop(lock_file);
    let deps = std::fs::read_to_string(&cp_file).unwrap();
    let cp = format!("{}:{}", jar.display(), deps.trim());
    built.insert(id, cp.clone());
    cp
}

fn newest_file(p: &Path) -> SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// CLOCK_MONOTONIC in nanoseconds, read as the JVM's `System.nanoTime()` reads it on Linux,
/// so stamps from both sides compare.
pub fn mono_nanos() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) },
        0
    );
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// What a command answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Bool(bool),
    Val(String),
    Err(String),
}

/// One reply line: the JVM's `nanoTime` after the call, before it (for releases), the outcome.
#[derive(Debug, Clone)]
pub struct Reply {
    pub nanos: i64,
    pub before: Option<i64>,
    pub outcome: Outcome,
}

impl Reply {
    fn parse(rest: &str) -> Reply {
        let mut words = rest.splitn(2, ' ');
        let nanos = words.next().unwrap().parse().unwrap();
        let tail = words.next().unwrap_or("");
        let mut before = None;
        let mut body = tail.to_string();
        if let Some(i) = tail.rfind(" before=") {
            before = tail[i + 8..].parse().ok();
            body = tail[..i].to_string();
        }
        let outcome = match body.as_str() {
            "ok" => Outcome::Ok,
            "true" => Outcome::Bool(true),
            "false" => Outcome::Bool(false),
            b => match b.split_once(' ') {
                Some(("val", v)) => Outcome::Val(v.to_string()),
                Some(("err", e)) => Outcome::Err(e.to_string()),
                _ => Outcome::Err(format!("unparsed reply {b:?}")),
            },
        };
        Reply {
            nanos,
            before,
            outcome,
        }
    }

    /// Panics unless the outcome is `ok`.
    pub fn ok(&self) -> &Self {
        assert_eq!(self.outcome, Outcome::Ok, "{self:?}");
        self
    }

    /// The boolean outcome (panics on anything else).
    pub fn bool(&self) -> bool {
        match self.outcome {
            Outcome::Bool(b) => b,
            _ => panic!("expected true/false, got {self:?}"),
        }
    }

    /// The value outcome (panics on anything else).
    pub fn val(&self) -> &str {
        match &self.outcome {
            Outcome::Val(v) => v,
            _ => panic!("expected a value, got {self:?}"),
        }
    }

    /// The error outcome (panics on anything else).
    pub fn err(&self) -> &str {
        match &self.outcome {
            Outcome::Err(e) => e,
            _ => panic!("expected an error, got {self:?}"),
        }
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// A Redisson client in its own JVM, killed (SIGKILL) on drop.
pub struct Jvm {
    child: Child,
    stdin: Mutex<ChildStdin>,
    pending: Pending,
    next: AtomicU64,
    version: String,
    client_id: String,
}

/// A command sent and not yet answered.
pub struct Call {
    rx: oneshot::Receiver<Reply>,
    line: String,
}

impl Call {
    /// The reply (the test fails after a minute without one).
    pub async fn reply(self) -> Reply {
        match tokio::time::timeout(REPLY_TIMEOUT, self.rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => panic!("the JVM died before answering {:?}", self.line),
            Err(_) => panic!("no reply to {:?} within {REPLY_TIMEOUT:?}", self.line),
        }
    }

    /// Whether the reply came within `d` (the call stays pending otherwise).
    pub async fn answered_within(&mut self, d: Duration) -> Option<Reply> {
        tokio::time::timeout(d, &mut self.rx)
            .await
            .ok()
            .map(|r| r.expect("the JVM died"))
    }
}

/// Where a Redisson client connects.
#[derive(Debug, Clone)]
pub enum Deployment {
    /// `host:port` of a single master.
    Single(String),
    /// Seed `host:port`s of a cluster.
    Cluster(Vec<String>),
    /// Master name and sentinel `host:port`s.
    Sentinel(String, Vec<String>),
}

impl Deployment {
    fn connect_line(&self, opts: &str) -> String {
        match self {
            Deployment::Single(a) => format!("connect single {a} {opts}"),
            Deployment::Cluster(seeds) => format!("connect cluster {} {opts}", seeds.join(",")),
            Deployment::Sentinel(name, s) => {
                format!("connect sentinel {name},{} {opts}", s.join(","))
            }
        }
    }

    /// The deployment's name in the compatibility matrix.
    pub fn label(&self) -> &'static str {
        match self {
            Deployment::Single(_) => "standalone",
            Deployment::Cluster(_) => "cluster",
            Deployment::Sentinel(..) => "sentinel",
        }
    }
}

/// `host:port` from a `redis://host:port[/...]` URL.
pub fn addr_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    rest.split('/').next().unwrap().to_string()
}

impl Jvm {
    /// Starts Redisson `version` in a JVM and connects it to `deployment` with the driver's
    /// `key=value` options (`watchdog=MS`, `synced=true`, `sharded=ON`, `fairwait=MS`...).
    pub async fn start(version: &str, deployment: &Deployment, opts: &str) -> Jvm {
        let cp = classpath(version);
        let mut child = Command::new("java")
            // A short-lived test client: fast start and little JIT work on a shared core.
            .args([
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xss512k",
                "-Xmx256m",
            ])
            .arg("-cp")
            .arg(&cp)
            .arg("redlatch.interop.Driver")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start java");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let pending: Pending = Default::default();
        let (ready_tx, ready_rx) = oneshot::channel();
        {
            let pending = pending.clone();
            std::thread::spawn(move || {
                let mut ready = Some(ready_tx);
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let Some((id, rest)) = line.split_once(' ') else {
                        continue;
                    };
                    if id == "-" {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(rest.to_string());
                        }
                        continue;
                    }
                    let Ok(id) = id.parse::<u64>() else { continue };
                    if let Some(tx) = pending.lock().unwrap().remove(&id) {
                        let _ = tx.send(Reply::parse(rest));
                    }
                }
                // EOF: the JVM is gone; dropping the senders fails the pending calls.
                pending.lock().unwrap().clear();
            });
        }
        let ready = tokio::time::timeout(REPLY_TIMEOUT, ready_rx)
            .await
            .expect("the JVM did not start within a minute")
            .expect("the JVM exited at start");
        assert!(
            ready.split(' ').nth(1) == Some("ready"),
            "unexpected first line from the JVM: {ready:?}"
        );
        let mut jvm = Jvm {
            child,
            stdin: Mutex::new(stdin),
            pending,
            next: AtomicU64::new(1),
            version: version.to_string(),
            client_id: String::new(),
        };
        let r = jvm.call("-", &deployment.connect_line(opts)).await;
        jvm.client_id = r.val().to_string();
        jvm
    }

    /// Shuts the Redisson client down and starts a new one in the same JVM (connected
    /// as [`Jvm::start`] does): what a client decides once at start-up (3.27's probe for
    /// sharded pub/sub) is decided again, without a JVM's start-up time.
    pub async fn reconnect(&mut self, deployment: &Deployment, opts: &str) {
        let r = self.call("-", &deployment.connect_line(opts)).await;
        self.client_id = r.val().to_string();
    }

    /// The Redisson version this JVM runs.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The Redisson client's id (the first half of its lock-hash fields).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The JVM's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `cmd` to run on Java thread `thread`; await [`Call::reply`] for the answer.
    pub fn send(&self, thread: &str, cmd: &str) -> Call {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let line = format!("{id} {thread} {cmd}");
        let mut stdin = self.stdin.lock().unwrap();
        writeln!(stdin, "{line}").expect("cannot write to the JVM");
        stdin.flush().unwrap();
        Call { rx, line }
    }

    /// Sends `cmd` on `thread` and waits for the reply.
    pub async fn call(&self, thread: &str, cmd: &str) -> Reply {
        self.send(thread, cmd).reply().await
    }

    /// Whether Java thread `thread` sleeps on Redisson's latch (a `Semaphore` in its
    /// lock entry), asked on the driver's process-wide thread.
    pub async fn parked(&self, thread: &str) -> bool {
        self.call("-", &format!("parked {thread}")).await.bool()
    }

    /// Waits until Java thread `thread` sleeps on Redisson's latch; panics after `within`.
    ///
    /// A test that releases to wake a Java waiter must wait for this, not only for a
    /// subscription: Redisson's answer to a read-unlock message (`LockPubSub`, message 1,
    /// which every write unlock sends, Redisson's and ours) is
    /// `latch.release(latch.getQueueLength())`, so a message that lands after the
    /// waiter's retry failed but before its thread is queued on the latch releases no
    /// permit, and the waiter sleeps out the lease its retry saw (30 s).
    pub async fn until_parked(&self, thread: &str, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        while !self.parked(thread).await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "Java thread {thread} never slept on Redisson's latch within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `CLIENT_ID:THREAD_ID`: the field Java thread `thread` holds a lock hash with.
    pub async fn holder(&self, thread: &str) -> String {
        self.call(thread, "holder").await.val().to_string()
    }

    /// Kills the JVM with SIGKILL (no shutdown hook, no unlock) and reaps it.
    pub fn kill9(&mut self) {
        // SAFETY: signalling our own child by PID.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One result line for the compatibility matrix: `primitive|version|deployment|result`,
/// `result` being `pass` or `diff: one line`. Written by a test once its checks passed, to
/// `target/interop-matrix/<test>.txt` (one file per test, rewritten each run).
pub fn record(test: &str, primitive: &str, version: &str, deployment: &str, result: &str) {
    let dir = target_dir().join("interop-matrix");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}.txt", test.replace("::", "-")));
    let line = format!("{primitive}|{version}|{deployment}|{result}\n");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

/// Clears a test's matrix file (at its start, so a failed run leaves no stale pass).
pub fn clear_record(test: &str) {
    let file = target_dir()
        .join("interop-matrix")
        .join(format!("{}.txt", test.replace("::", "-")));
    let _ = std::fs::remove_file(file);
}

/// One `#[tokio::test]` per Redisson version for each named `async fn(version: &str)` of
/// the calling test file (skipped where no JVM is installed, unless
/// `REDLATCH_REQUIRE_JAVA` makes that a failure: [`available`]):
/// `per_version!(a, b)` runs each against [`OLD`], [`LAST3`] and [`V4`];
/// `per_version!(since_3_52: a, b)` against [`LAST3`] and [`V4`] only (what 3.27 lacks).
#[macro_export]
macro_rules! per_version {
    (@test $test:ident, $version:ident, $name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            if $crate::jvm::available() {
                super::$name($crate::jvm::$version).await
            }
        }
    };
    (since_3_52: $($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::per_version!(@test redisson_3_52, LAST3, $name);
            $crate::per_version!(@test redisson_4_7, V4, $name);
        }
    )*};
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            $crate::per_version!(@test redisson_3_27, OLD, $name);
            $crate::per_version!(@test redisson_3_52, LAST3, $name);
            $crate::per_version!(@test redisson_4_7, V4, $name);
        }
    )*};
}
