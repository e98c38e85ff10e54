//! A mixed contention run on one lock name: Java threads of a real Redisson client
//! ([`super::jvm::Jvm`]), redlatch tasks, and a redlatch process (this test binary run as
//! a child, [`helper_main`]), every one taking the lock `rounds` times.
//!
//! One checker sees every section. A participant reports `enter` once it holds the lock and
//! `exit` before it releases, and waits for the checker's acknowledgement of each: the Java
//! threads and the child process are driven step by step by this process (the checker
//! answers by sending the next command), the tasks call it directly. So each section as
//! the checker sees it (from processing `enter` to processing `exit`) lies inside a real
//! hold of the lock, and the checker, one `Mutex`, processes events one at a time: two
//! holds overlapping during their checked sections show up as an `enter` while someone is
//! inside, for sure, whatever the clocks say. Stamps (CLOCK_MONOTONIC, the JVM's
//! `nanoTime` clock) are logged for the report only.
//!
//! For the fair lock the checker also reads Redisson's queue (`LRANGE`) inside each
//! section: the next one to enter must be the head of that snapshot when it was not empty
//! (queue entries time out only after the fair wait time, minutes here): FIFO.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlatch::{Client, Config, SyncReplicas};

use super::jvm::{mono_nanos, Jvm};

mod participants;

/// Which lock the run contends for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Fair,
}

impl Kind {
    fn java(self) -> &'static str {
        match self {
            Kind::Plain => "lock",
            Kind::Fair => "fair",
        }
    }
}

#[derive(Default)]
struct State {
    inside: Option<String>,
    overlaps: Vec<String>,
    fifo: Vec<String>,
    /// Entries checked against a non-empty queue snapshot.
    fifo_checks: usize,
    entries: HashMap<String, usize>,
    /// Head of the fair queue read during the last section (fair runs).
    next_expected: Option<String>,
    log: Vec<(i64, String, &'static str)>,
}

/// The one checker of a run.
#[derive(Clone)]
pub struct Checker {
    state: Arc<Mutex<State>>,
    kind: Kind,
    name: String,
    /// For the fair queue snapshot.
    queue_reader: Option<Arc<dyn Fn() -> Vec<String> + Send + Sync>>,
}

/// What a run ends with.
#[derive(Debug)]
pub struct Report {
    pub overlaps: Vec<String>,
    pub fifo_violations: Vec<String>,
    pub fifo_checks: usize,
    pub entries: HashMap<String, usize>,
    pub errors: usize,
    pub sections: usize,
    pub elapsed: Duration,
}

impl Checker {
    /// `queue`: reads Redisson's fair queue of the lock (fair runs only).
    pub fn new(
        kind: Kind,
        name: &str,
        queue: Option<Arc<dyn Fn() -> Vec<String> + Send + Sync>>,
    ) -> Checker {
        Checker {
            state: Default::default(),
            kind,
            name: name.to_string(),
            queue_reader: queue,
        }
    }

    /// The name of the lock the run contends on.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `who` (lock field `holder`) holds the lock.
    pub fn enter(&self, who: &str, holder: &str) {
        let mut s = self.state.lock().unwrap();
        let at = mono_nanos();
        if let Some(other) = &s.inside {
            let msg = format!("{who} entered at {at} while {other} was inside");
            s.overlaps.push(msg);
        }
        if self.kind == Kind::Fair {
            if let Some(expected) = s.next_expected.take() {
                s.fifo_checks += 1;
                if expected != holder {
                    let msg =
                        format!("{who} ({holder}) entered ahead of the queue's head {expected}");
                    s.fifo.push(msg);
                }
            }
        }
        s.inside = Some(who.to_string());
        *s.entries.entry(who.to_string()).or_default() += 1;
        s.log.push((at, who.to_string(), "enter"));
        drop(s);
        if let Some(read) = &self.queue_reader {
            // Inside the section: whoever is queued now is served in this order.
            let head = read().into_iter().next();
            self.state.lock().unwrap().next_expected = head;
        }
    }

    /// `who` is about to release.
    pub fn exit(&self, who: &str) {
        let mut s = self.state.lock().unwrap();
        let at = mono_nanos();
        if s.inside.as_deref() != Some(who) {
            let msg = format!("{who} exited at {at} but {:?} was inside", s.inside);
            s.overlaps.push(msg);
        }
        s.inside = None;
        s.log.push((at, who.to_string(), "exit"));
    }

    /// What the checker saw so far.
    pub fn report(&self, errors: usize, elapsed: Duration) -> Report {
        let s = self.state.lock().unwrap();
        Report {
            overlaps: s.overlaps.clone(),
            fifo_violations: s.fifo.clone(),
            fifo_checks: s.fifo_checks,
            entries: s.entries.clone(),
            errors,
            sections: s.log.len() / 2,
            elapsed,
        }
    }

    /// The section log, `stamp who enter|exit`, for a failure message.
    pub fn log_tail(&self, n: usize) -> String {
        let s = self.state.lock().unwrap();
        let from = s.log.len().saturating_sub(n);
        s.log[from..]
            .iter()
            .map(|(t, w, e)| format!("{t} {w} {e}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A run's shape.
pub struct Run {
    pub kind: Kind,
    pub name: String,
    pub rounds: usize,
    pub hold: Duration,
    /// Java thread names (on one JVM).
    pub java_threads: usize,
    /// redlatch tasks, spread over `redlatch_clients` clients.
    pub redlatch_tasks: usize,
    /// redlatch child processes (this test binary, [`helper_main`]).
    pub processes: usize,
    /// `redlatch run` participants (the CLI, one process per round; see [`cli_binary`]).
    pub cli: usize,
    /// The whole run's bound: a participant still short of its rounds then is starved.
    pub deadline: Duration,
}

/// How the child processes reach the deployment: `single|URL`, `cluster|URL,URL..`,
/// `sentinel|MASTER|URL,URL..` (replica-synced), with the watchdog's lease in ms.
pub fn helper_spec(deployment: &str, watchdog_ms: u64) -> String {
    format!("{deployment}#{watchdog_ms}")
}

/// The redlatch config a helper spec describes.
pub fn config_of(spec: &str) -> Config {
    let (deployment, watchdog) = spec.split_once('#').unwrap();
    let watchdog = Duration::from_millis(watchdog.parse().unwrap());
    let parts: Vec<&str> = deployment.split('|').collect();
    let config = match parts[0] {
        "single" => Config::single(parts[1]),
        "cluster" => Config::cluster(parts[1].split(',')),
        "sentinel" => Config::sentinel(parts[1], parts[2].split(','))
            .sync_replicas(SyncReplicas::Auto, Duration::from_secs(2))
            .unavailable_timeout(Duration::from_secs(25)),
        other => panic!("unknown deployment {other}"),
    };
    config.watchdog_timeout(watchdog)
}

/// Runs `run` with Java threads on `jvm` and redlatch on `clients` (tasks spread over them)
/// and `processes` children started from `helper` (this binary's helper test's name and the
/// spec for [`config_of`]). Transient errors (a failover) are counted and retried.
pub async fn run(
    run: &Run,
    jvm: &Arc<Jvm>,
    clients: &[Client],
    helper: Option<(&str, &str)>,
    cli: Option<(&Path, &[String])>,
    checker: &Checker,
) -> Report {
    let started = Instant::now();
    let errors = Arc::new(Mutex::new(0usize));
    let mut tasks = participants::java(run, jvm, checker, &errors);
    tasks.extend(participants::redlatch(run, clients, checker, &errors));
    let (children, driven) = participants::processes(run, helper, checker);
    tasks.extend(driven);
    tasks.extend(participants::cli(run, cli, checker, &errors));
    let all = futures_util::future::join_all(tasks);
    let finished = tokio::time::timeout(run.deadline, all).await;
    for mut c in children {
        // SAFETY: signalling our own child by PID.
        unsafe {
            libc::kill(c.id() as i32, libc::SIGKILL);
        }
        let _ = c.wait();
    }
    let errors = *errors.lock().unwrap();
    let report = checker.report(errors, started.elapsed());
    if let Ok(results) = finished {
        for r in results {
            r.expect("a participant panicked");
        }
    }
    report
}

/// The CLI binary of this workspace (`target/debug/redlatch`), if it was built
/// (`scripts/test.sh` builds the workspace first); `None` (said on stderr) otherwise.
pub fn cli_binary() -> Option<PathBuf> {
    let path = super::jvm::target_dir().join("debug").join("redlatch");
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "no {}: the mixed run goes without a redlatch CLI participant",
            path.display()
        );
        None
    }
}

/// One `redlatch run NAME -- bash -c ...` per round: the command connects to a listener of
/// this process and reports `enter $REDLATCH_HOLDER` / `exit`, each acknowledged, as the
/// other participants do.
#[allow(clippy::too_many_arguments)]
fn cli_participant(
    who: &str,
    binary: &Path,
    conn: &[String],
    kind: Kind,
    name: &str,
    rounds: usize,
    hold: Duration,
    checker: &Checker,
    errors: &Mutex<usize>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port}; echo \"enter $REDLATCH_HOLDER\" >&3; read -r _ <&3; \
         sleep {}; echo exit >&3; read -r _ <&3",
        hold.as_secs_f64()
    );
    let mut done = 0;
    let mut tries = 0;
    while done < rounds && tries < rounds * 5 {
        tries += 1;
        let mut cmd = Command::new(binary);
        cmd.arg("run").arg(name).args(conn);
        if kind == Kind::Fair {
            cmd.arg("--fair");
        }
        let mut child = cmd
            .args(["--", "bash", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Bounded: a `redlatch run` that fails before its command connects is an error.
        let Some(stream) = accept_or_exit(&listener, &mut child) else {
            *errors.lock().unwrap() += 1;
            continue;
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        let mut line = String::new();
        let mut steps = 0;
        while steps < 2 {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let l = line.trim_end();
            if let Some(holder) = l.strip_prefix("enter ") {
                checker.enter(who, holder);
            } else if l == "exit" {
                checker.exit(who);
            }
            steps += 1;
            if writeln!(writer, "go").is_err() {
                break;
            }
        }
        let status = child.wait().unwrap();
        if status.success() && steps == 2 {
            done += 1;
        } else {
            *errors.lock().unwrap() += 1;
        }
    }
}

/// The connection of `child`'s command, or `None` once `child` has exited without one
/// (the listener is polled: a failed `redlatch run` never connects).
fn accept_or_exit(
    listener: &TcpListener,
    child: &mut std::process::Child,
) -> Option<std::net::TcpStream> {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                return Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("accept: {e}"),
        }
        if child.try_wait().unwrap().is_some() || Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The checker's side of a child process: `enter HOLDER` / `exit` lines, each answered
/// `go` once recorded; `done` at the end.
fn drive_child(
    who: &str,
    mut stdin: ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    checker: &Checker,
) {
    for line in out.lines() {
        let Ok(line) = line else { return };
        if let Some(holder) = line.strip_prefix("enter ") {
            checker.enter(who, holder);
        } else if line == "exit" {
            checker.exit(who);
        } else if line == "done" {
            return;
        } else {
            continue;
        }
        if writeln!(stdin, "go").and_then(|_| stdin.flush()).is_err() {
            return;
        }
    }
}

/// The child process's main (called from an `#[ignore]`d test of the binary that runs
/// [`run`]): `REDLATCH_MIXED_HELPER=kind|name|rounds|hold_ms|spec`.
pub async fn helper_main() {
    let Ok(env) = std::env::var("REDLATCH_MIXED_HELPER") else {
        return;
    };
    let parts: Vec<&str> = env.splitn(5, '|').collect();
    let (kind, name, rounds, hold) = (
        parts[0],
        parts[1],
        parts[2].parse::<usize>().unwrap(),
        Duration::from_millis(parts[3].parse().unwrap()),
    );
    let client = Client::connect(config_of(parts[4])).await.unwrap();
    let lock = if kind == "fair" {
        client.fair_lock(name)
    } else {
        client.lock(name)
    };
    let mut input = BufReader::new(std::io::stdin()).lines();
    let mut out = std::io::stdout();
    let mut done = 0;
    while done < rounds {
        let Ok(guard) = lock.lock().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        writeln!(out, "enter {}", guard.holder()).unwrap();
        out.flush().unwrap();
        input.next().unwrap().unwrap();
        tokio::time::sleep(hold).await;
        writeln!(out, "exit").unwrap();
        out.flush().unwrap();
        input.next().unwrap().unwrap();
        let _ = guard.unlock().await;
        done += 1;
    }
    writeln!(out, "done").unwrap();
    out.flush().unwrap();
}

impl Report {
    /// Panics on an overlap, a FIFO violation or a starved participant (fewer entries
    /// than `rounds`); prints the summary.
    pub fn check(&self, run: &Run, context: &str, checker: &Checker) {
        println!(
            "{context}: {} sections in {:?}, {} transient errors, {} FIFO checks, entries {:?}",
            self.sections, self.elapsed, self.errors, self.fifo_checks, self.entries
        );
        assert!(
            self.overlaps.is_empty(),
            "{context}: overlaps {:?}\n{}",
            self.overlaps,
            checker.log_tail(40)
        );
        assert!(
            self.fifo_violations.is_empty(),
            "{context}: FIFO violated {:?}",
            self.fifo_violations
        );
        if run.kind == Kind::Fair {
            // Someone was always queued behind a holder in a run this contended: a run that
            // checked nothing proves nothing.
            assert!(
                self.fifo_checks > 0,
                "{context}: no entry was checked against the queue"
            );
        }
        let participants = run.java_threads + run.redlatch_tasks + run.processes + run.cli;
        assert_eq!(
            self.entries.len(),
            participants,
            "{context}: someone never entered: {:?}",
            self.entries
        );
        for (who, n) in &self.entries {
            assert_eq!(
                *n, run.rounds,
                "{context}: {who} starved ({n} of {} rounds)",
                run.rounds
            );
        }
    }
}
