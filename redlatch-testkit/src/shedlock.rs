//! ShedLock's real Redis `LockProvider` in a JVM (`interop/shedlock/`, ShedDriver.java
//! documents its line protocol), for the scheduled jobs' interop tests
//! (tests/redisson/shedlock_jvm.rs). Built and skipped as the Redisson JVM is
//! ([`crate::jvm::available`], [`crate::jvm::maven_classpath`]).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

/// The ShedLock version under test (`shedlock-provider-redis-spring`, Maven Central).
pub const VERSION: &str = "7.10.1";

/// How long one command may take before the test fails instead of hanging.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<String>>>>;

/// A ShedLock `RedisLockProvider` in its own JVM, killed (SIGKILL) on drop.
pub struct ShedLock {
    child: Child,
    stdin: Mutex<ChildStdin>,
    waiting: Waiting,
    next: AtomicU64,
    /// ShedLock's idea of this machine's host name (what its lock values carry).
    pub hostname: String,
}

/// The answer to a `run`: the JVM's `nanoTime` (CLOCK_MONOTONIC) when the job's work
/// began and ended, or `None` when the lock was busy.
pub type Ran = Option<(i64, i64)>;

impl ShedLock {
    /// Starts a provider on the server at `addr` (`host:port`) with ShedLock's
    /// `environment` and `keyPrefix`.
    pub async fn start(addr: &str, env: &str, prefix: &str) -> ShedLock {
        let cp = crate::jvm::maven_classpath(
            "shedlock",
            "shedlock.version",
            VERSION,
            "shedlock-driver-1.0.jar",
        );
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        let mut child = Command::new("java")
            .args([
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xmx256m",
                "-cp",
                &cp,
            ])
            .args(["redlatch.interop.ShedDriver", host, port, env, prefix])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start java");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let waiting: Waiting = Default::default();
        let (ready_tx, ready_rx) = oneshot::channel::<String>();
        let replies = waiting.clone();
        std::thread::spawn(move || {
            let mut ready = Some(ready_tx);
            for line in lines.map_while(Result::ok) {
                let Some((id, body)) = line.split_once(' ') else {
                    continue;
                };
                let tx = match id.parse::<u64>() {
                    Ok(id) => replies.lock().unwrap().remove(&id),
                    Err(_) => None,
                };
                match (id, tx) {
                    ("-", _) => drop(ready.take().map(|r| r.send(body.to_string()))),
                    (_, Some(tx)) => drop(tx.send(body.to_string())),
                    _ => {}
                }
            }
            replies.lock().unwrap().clear();
        });
        let ready = tokio::time::timeout(REPLY_TIMEOUT, ready_rx)
            .await
            .expect("the ShedLock JVM did not start within a minute")
            .expect("the ShedLock JVM exited at start");
        let hostname = ready
            .strip_prefix("ready ")
            .expect("- ready HOSTNAME")
            .to_string();
        ShedLock {
            stdin: Mutex::new(child.stdin.take().unwrap()),
            child,
            waiting,
            next: AtomicU64::new(1),
            hostname,
        }
    }

    /// Sends `cmd` and waits for its reply's body.
    pub async fn call(&self, cmd: &str) -> String {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id, tx);
        {
            let mut stdin = self.stdin.lock().unwrap();
            writeln!(stdin, "{id} {cmd}").expect("cannot write to the JVM");
            stdin.flush().unwrap();
        }
        match tokio::time::timeout(REPLY_TIMEOUT, rx).await {
            Ok(Ok(body)) => body,
            Ok(Err(_)) => panic!("the ShedLock JVM died before answering {cmd:?}"),
            Err(_) => panic!("no reply to {cmd:?} within {REPLY_TIMEOUT:?}"),
        }
    }

    /// `LockProvider.lock(name, lockAtMostFor, lockAtLeastFor)`: the held lock's handle,
    /// or `None` when busy.
    pub async fn lock(&self, name: &str, at_most: Duration, at_least: Duration) -> Option<u64> {
        let body = self
            .call(&format!(
                "lock {name} {} {}",
                at_most.as_millis(),
                at_least.as_millis()
            ))
            .await;
        match body.split_once(' ') {
            Some(("held", h)) => Some(h.parse().unwrap()),
            _ if body == "busy" => None,
            _ => panic!("lock {name}: {body}"),
        }
    }

    /// `SimpleLock.unlock()` of a lock [`lock`](Self::lock) took.
    pub async fn unlock(&self, handle: u64) {
        let body = self.call(&format!("unlock {handle}")).await;
        assert_eq!(body, "ok", "unlock {handle}");
    }

    /// A scheduled run: lock, hold `hold`, unlock.
    pub async fn run(
        &self,
        name: &str,
        at_most: Duration,
        at_least: Duration,
        hold: Duration,
    ) -> Ran {
        let cmd = format!(
            "run {name} {} {} {}",
            at_most.as_millis(),
            at_least.as_millis(),
            hold.as_millis()
        );
        let body = self.call(&cmd).await;
        if body == "busy" {
            return None;
        }
        let mut w = body.split(' ');
        assert_eq!(w.next(), Some("ran"), "run {name}: {body}");
        let mut nanos = w.map(|n| n.parse::<i64>().unwrap());
        Some((nanos.next().unwrap(), nanos.next().unwrap()))
    }
}

impl Drop for ShedLock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
