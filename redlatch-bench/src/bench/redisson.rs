//! Redisson itself as a peer of `--workload peers`: the real client (4.7.0), in a JVM
//! running `interop/redisson-bench` (`Bench.java`, which documents its line protocol).
//! The bench builds it with `mvn -q -B package` into `target/redisson-bench/` when the jar
//! is older than its sources, starts one JVM that serves W1, W2 and W3 for the whole run
//! (so its JIT stays warm between rounds), and P more for each W7 run. The JVM times the
//! workloads itself; the server's CPU comes from the master's counters around each call.
//! After every command the bench waits until the JVM has gone quiet (its JIT and GC go
//! on for a while on the bench's core and would slow whichever library ran next:
//! [`Jvm::settle`]), and reports the wait as `jvm_settle_ms`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::server::{counters, deltas};
use super::stats::Samples;
use super::{Ctx, Report};

/// The Redisson release measured (the interop tests' current 4.x).
pub const VERSION: &str = "4.7.0";
const W1_PAIRS: usize = 3_000;
const W2_TASKS: usize = 64;
const W3_TASKS: usize = 16;
/// How long one JVM command may take (a W2 or W3 run, or a warm-up) before the bench
/// gives up instead of hanging.
const REPLY_TIMEOUT: Duration = Duration::from_secs(300);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the bench crate lives in the repository")
        .to_path_buf()
}

fn newest(p: &Path) -> SystemTime {
    let mut t = std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if let Ok(dir) = std::fs::read_dir(p) {
        for e in dir.flatten() {
            t = t.max(newest(&e.path()));
        }
    }
    t
}

/// `-cp` of the bench program, building it first unless its jar is newer than its sources.
pub fn classpath() -> Result<String, String> {
    let project = repo().join("interop/redisson-bench");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { repo().join(p) })
        .unwrap_or_else(|| repo().join("target"));
    let out = target.join("redisson-bench");
    let dir = out.join(VERSION);
    let (jar, cp_file) = (
        dir.join("redisson-bench-1.0.jar"),
        dir.join("classpath.txt"),
    );
    let stamp = dir.join("built.stamp");
    let sources = newest(&project.join("src")).max(newest(&project.join("pom.xml")));
    if !(jar.exists() && cp_file.exists() && newest(&stamp) >= sources) {
        let built = std::process::Command::new("mvn")
            .current_dir(&project)
            .args(["-q", "-B", "package"])
            .arg(format!("-Dredisson.version={VERSION}"))
            .arg(format!("-Dbench.build.dir={}", out.display()))
            .output()
            .map_err(|e| {
                format!("the Redisson peer needs mvn and java on the PATH (--no-redisson skips it): {e}")
            })?;
        if !built.status.success() {
            return Err(format!(
                "mvn package of interop/redisson-bench failed:\n{}{}",
                String::from_utf8_lossy(&built.stdout),
                String::from_utf8_lossy(&built.stderr)
            ));
        }
        std::fs::write(&stamp, VERSION).map_err(|e| e.to_string())?;
    }
    let deps = std::fs::read_to_string(&cp_file).map_err(|e| e.to_string())?;
    Ok(format!("{}:{}", jar.display(), deps.trim()))
}

/// `HOST:PORT` of the first master, as Redisson's `redis://` address takes it.
pub fn address(ctx: &Ctx) -> Result<String, String> {
    ctx.require_masters("the Redisson peer")?;
    let url = &ctx.urls[0];
    let rest = url
        .strip_prefix("redis://")
        .ok_or_else(|| format!("the Redisson peer takes a redis:// URL, not {url}"))?;
    if rest.contains('@') {
        return Err("the Redisson peer takes a URL without credentials".into());
    }
    Ok(rest.split('/').next().unwrap_or(rest).to_string())
}

/// `java -cp CP redlatch.bench.Bench ARGS...`, its stdin and stdout piped.
pub fn command(cp: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("java");
    cmd.args(["-Xmx512m", "-cp", cp, "redlatch.bench.Bench"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// How long the serving JVM may take to go quiet after a command (its JIT compiling,
/// its GC) before the next library's run starts anyway.
const SETTLE_MAX: Duration = Duration::from_secs(20);
/// The JVM counts as quiet once it used at most this much CPU over [`SETTLE_STEP`].
const QUIET_CPU_TICKS: u64 = 2;
const SETTLE_STEP: Duration = Duration::from_millis(250);

/// The user + system CPU ticks a process used so far (`/proc/PID/stat`, every thread).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (in parentheses, which may hold spaces):
    // utime and stime are the 12th and 13th of them.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// The serving JVM: W1, W2 and W3 on one Redisson client.
pub struct Jvm {
    _child: Child,
    pid: Option<u32>,
    stdin: ChildStdin,
    lines: tokio::io::Lines<BufReader<ChildStdout>>,
}

impl Jvm {
    /// Starts the JVM on the first master and waits for its `ready`.
    pub async fn start(ctx: &Ctx, cp: &str) -> Result<Jvm, String> {
        let addr = address(ctx)?;
        let mut child = command(cp, &["serve", &addr])
            .spawn()
            .map_err(|e| format!("starting java: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let pid = child.id();
        let mut jvm = Jvm {
            _child: child,
            pid,
            stdin,
            lines: BufReader::new(stdout).lines(),
        };
        let ready = jvm.line().await?;
        if !ready.starts_with("ready ") {
            return Err(format!("the Redisson JVM said {ready:?}, expected ready"));
        }
        jvm.settle().await;
        Ok(jvm)
    }

    /// Waits until the JVM is quiet: after a burst of work its JIT and GC threads go on
    /// on the bench's core for a while, and would slow whichever library runs next.
    /// Gives up after [`SETTLE_MAX`]; returns how long it waited.
    pub async fn settle(&self) -> Duration {
        let started = std::time::Instant::now();
        let Some(pid) = self.pid else {
            return Duration::ZERO;
        };
        let mut last = cpu_ticks(pid);
        while started.elapsed() < SETTLE_MAX {
            tokio::time::sleep(SETTLE_STEP).await;
            let now = cpu_ticks(pid);
            match (last, now) {
                (Some(a), Some(b)) if b.saturating_sub(a) <= QUIET_CPU_TICKS => break,
                (_, None) => break,
                _ => last = now,
            }
        }
        started.elapsed()
    }

    async fn line(&mut self) -> Result<String, String> {
        match tokio::time::timeout(REPLY_TIMEOUT, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err("the Redisson JVM ended early".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("the Redisson JVM stopped answering".into()),
        }
    }

    /// Sends one command and parses its JSON answer.
    async fn ask(&mut self, cmd: String) -> Result<Report, String> {
        self.stdin
            .write_all(format!("{cmd}\n").as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        self.stdin.flush().await.map_err(|e| e.to_string())?;
        let line = self.line().await?;
        let mut got = match serde_json::from_str::<Value>(&line) {
            Ok(Value::Object(m)) => m,
            _ => return Err(format!("the Redisson JVM answered {cmd:?} with {line}")),
        };
        let settled = self.settle().await;
        got.insert("jvm_settle_ms".into(), json!(settled.as_millis() as u64));
        Ok(got)
    }

    /// W1: `warmup` untimed pairs (the JIT), then 3,000 timed ones.
    pub async fn w1(&mut self, ctx: &Ctx, warmup: u64) -> Result<Report, String> {
        let name = ctx.key("w1-redisson");
        let got = self.ask(format!("w1 {name} {warmup} {W1_PAIRS}")).await?;
        Ok(merge(ctx, "W1", got))
    }

    /// W2: 64 threads on distinct names, with the master's CPU per pair.
    pub async fn w2(&mut self, ctx: &Ctx) -> Result<Report, String> {
        let prefix = ctx.key("w2-redisson");
        let mut probes = ctx.probes().await.map_err(|e| e.to_string())?;
        probes.truncate(1);
        let before = counters(&mut probes).await;
        let millis = ctx.duration.as_millis();
        let got = (self.ask(format!("w2 {prefix} {W2_TASKS} {millis}"))).await?;
        let used = deltas(&before, &counters(&mut probes).await);
        let mut r = merge(ctx, "W2", got);
        let pairs = r["ops"].as_f64().unwrap_or(0.0).max(1.0);
        let server = used.iter().map(|c| c.cpu_us).sum::<u64>() as f64 / pairs;
        r.insert("server_cpu_us_per_pair".into(), json!(server));
        let scripts = used.iter().map(|c| c.scripts).sum::<u64>() as f64;
        r.insert("script_calls_per_pair".into(), json!(scripts / pairs));
        Ok(r)
    }

    /// W3: 16 threads contend for one name with `lock()`.
    pub async fn w3(&mut self, ctx: &Ctx) -> Result<Report, String> {
        let name = ctx.key("w3-redisson");
        let millis = ctx.duration.as_millis();
        let got = self.ask(format!("w3 {name} {W3_TASKS} {millis}")).await?;
        Ok(merge(ctx, "W3", got))
    }
}

/// The common fields of a result with the JVM's own figures over them.
fn merge(ctx: &Ctx, workload: &str, got: Report) -> Report {
    let ops = got.get("ops").and_then(Value::as_u64).unwrap_or(0);
    let secs = got.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
    let took = Duration::from_secs_f64(secs.max(0.0));
    let mut r = ctx.report(workload, ops, took, &mut Samples::default());
    r.extend(got);
    r.insert("lib".into(), json!("redisson"));
    r.insert("redisson_version".into(), json!(VERSION));
    r
}
