//! Runs every example (examples/*.rs) as a user would, against servers started here: a
//! redis-server for the single-server ones, a Redis Cluster, a Sentinel set and a TLS
//! server for the deployment ones. Each must exit 0 within its time bound and print the
//! line that shows what it demonstrates.
//!
//! The examples are built once per test process with `cargo build --workspace
//! --examples` and the features this test was built with (under scripts/test.sh they
//! are already built by its `cargo build --all-targets`, and this build finds nothing
//! to do), then run from `target/<profile>/examples/`, the sibling of this test
//! binary's `deps/` directory.

use redlatch_testkit as common;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use common::cluster::RedisCluster;
use common::sentinel::SentinelSet;
#[cfg(feature = "tls")]
use common::tls::TestCerts;
use common::RedisServer;

/// How long one example may run (they take about a second; a loaded machine may take
/// much longer, a hung one never ends).
const RUN_TIMEOUT: Duration = Duration::from_secs(90);
/// How long building the examples may take (nothing to do after scripts/test.sh's
/// build; a cold build of all of them on a busy 2-core machine takes a few minutes).
const BUILD_TIMEOUT: Duration = Duration::from_secs(900);

/// Variables an example reads; cleared so the caller's environment does not leak in.
const EXAMPLE_VARS: &[&str] = &[
    "REDLATCH_REDIS",
    "REDLATCH_CLUSTER",
    "REDLATCH_SENTINELS",
    "REDLATCH_SENTINEL_MASTER",
    "REDLATCH_MODE",
    "REDLATCH_MASTER_USER",
    "REDLATCH_MASTER_PASSWORD",
    "REDLATCH_TLS_CA",
    "REDLATCH_TLS_CERT",
    "REDLATCH_TLS_KEY",
    "RUST_LOG",
];

/// `target/<profile>/examples/`, built with this test's features (once per process).
fn examples_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        // target/<profile>/deps/examples-<hash> -> target/<profile>/examples
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("the test binary lies in target/<profile>/deps/");
        // The whole workspace, as scripts/test.sh builds it: the same feature
        // resolution (the CLI and the bench turn on features of shared dependencies),
        // so after its build this one finds nothing to do.
        let mut features = Vec::new();
        if cfg!(feature = "tls") {
            features.push("redlatch/tls");
        }
        if cfg!(feature = "metrics") {
            features.push("redlatch/metrics");
        }
        let mut build = Command::new(env!("CARGO"));
        build
            .args(["build", "--quiet", "--workspace", "--examples"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(Stdio::null());
        if !features.is_empty() {
            build.arg("--features").arg(features.join(","));
        }
        // What cargo set for this test, not what the user set: build scripts (ring's,
        // through cc) rerun when CARGO_PKG_NAME, CARGO_MANIFEST_DIR, OUT_DIR, ...
        // differ from the outer build's, which would rebuild half the tree each time.
        for (var, _) in std::env::vars_os() {
            let var = var.to_string_lossy();
            if var.starts_with("CARGO_PKG_")
                || var.starts_with("CARGO_BIN_EXE_")
                || [
                    "CARGO_MANIFEST_DIR",
                    "CARGO_MANIFEST_PATH",
                    "CARGO_MANIFEST_LINKS",
                    "CARGO_CRATE_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "OUT_DIR",
                ]
                .contains(&&*var)
            {
                build.env_remove(&*var);
            }
        }
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            build.arg("--release");
        }
        let out = run_bounded(build, BUILD_TIMEOUT, "cargo build --examples");
        assert!(out.ok, "cargo build --examples failed:\n{}", out.stderr);
        profile_dir.join("examples")
    })
}

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to its end or kills it after `timeout` (then panics with what it printed).
fn run_bounded(mut cmd: Command, timeout: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        let status = child.wait();
        let _ = done.send((status, s));
    });
    match finished.recv_timeout(timeout) {
        Ok((status, stdout)) => Output {
            ok: status.is_ok_and(|s| s.success()),
            stdout,
            stderr: stderr.join().unwrap_or_default(),
        },
        Err(_) => {
            // SAFETY: kill(2) on the PID of our own child, which has not been reaped
            // (the waiting thread is still blocked in wait).
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            let (_, stdout) = finished
                .recv()
                .unwrap_or((Ok(Default::default()), String::new()));
            panic!(
                "{what} did not finish within {timeout:?}\nstdout:\n{stdout}\nstderr:\n{}",
                stderr.join().unwrap_or_default()
            );
        }
    }
}

/// Runs the example `name` with the environment `env`, asserts exit 0 and that every
/// one of `expected` is a substring of some line of its output; returns the output.
fn run_example(name: &str, env: &[(&str, String)], expected: &[&str]) -> String {
    let mut cmd = Command::new(examples_dir().join(name));
    for var in EXAMPLE_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    let out = run_bounded(cmd, RUN_TIMEOUT, &format!("example {name}"));
    assert!(
        out.ok,
        "example {name} failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    for line in expected {
        assert!(
            out.stdout.contains(line),
            "example {name} did not print {line:?}\nstdout:\n{}\nstderr:\n{}",
            out.stdout,
            out.stderr
        );
    }
    out.stdout
}

/// Runs a single-server example against a fresh redis-server.
fn run_single(name: &str, expected: &[&str]) -> String {
    let server = RedisServer::start();
    run_example(name, &[("REDLATCH_REDIS", server.url())], expected)
}

#[test]
fn quickstart() {
    run_single(
        "quickstart",
        &[
            "nested: hold count 2",
            "after both: locked = false",
            "try_lock while held: Ok(false)",
        ],
    );
}

/// The README's Quickstart says what it did.
#[test]
fn readme_quickstart() {
    let out = run_single(
        "readme_quickstart",
        &[
            "locked orders:42 as ",
            "re-entered: hold count 2",
            "unlocked; locked now: false",
            "locked again within 3 s",
        ],
    );
    assert_eq!(out.lines().count(), 4, "{out}");
}

/// An environment that is set but invalid is an error, not a fallback to the local
/// default (`Config::from_env_or`): the Quickstart stops, naming the bad value.
#[test]
fn an_invalid_environment_stops_the_quickstart() {
    let server = RedisServer::start();
    let mut cmd = Command::new(examples_dir().join("readme_quickstart"));
    for var in EXAMPLE_VARS {
        cmd.env_remove(var);
    }
    cmd.env("REDLATCH_REDIS", server.url())
        .env("REDLATCH_MODE", "clusterr")
        .stdin(Stdio::null());
    let out = run_bounded(cmd, RUN_TIMEOUT, "readme_quickstart");
    assert!(
        !out.ok,
        "ran despite REDLATCH_MODE=clusterr: {}",
        out.stdout
    );
    assert!(out.stderr.contains("clusterr"), "{}", out.stderr);
    assert_eq!(out.stdout, "", "it did something");
}

#[test]
fn fair_lock() {
    let out = run_single("fair_lock", &["fair lock served: "]);
    let served = out
        .lines()
        .find(|l| l.starts_with("fair lock served: "))
        .unwrap();
    for who in ["alpha", "beta", "gamma"] {
        assert!(served.contains(who), "{who} was not served: {served}");
    }
}

#[test]
fn list() {
    let out = run_single("list", &["listed 2 locks, complete: true"]);
    assert!(
        out.contains("examples:list:billing (lock): held by"),
        "{out}"
    );
    assert!(out.contains("examples:list:queue (fair): held by"), "{out}");
    assert_eq!(out.matches(", 1 waiting").count(), 2, "{out}");
}

#[test]
fn fenced_lock() {
    run_single(
        "fenced_lock",
        &[
            "storage: accepted write from B",
            "storage: rejected write from A",
            "A: unlock says the lock was no longer held",
        ],
    );
}

#[test]
fn election() {
    run_single(
        "election",
        &[
            "alpha: leading in term",
            "observer: 3 leaders, terms growing",
            "leader now: None",
        ],
    );
}

#[test]
fn guarded_write() {
    run_single(
        "guarded_write",
        &[
            "B: wrote with token",
            "A: late write refused: the lock is not held",
            "ledger owner is B",
        ],
    );
}

#[test]
fn revoke() {
    run_single(
        "revoke",
        &[
            "operator: asked 1 holder(s)",
            "worker: release requested, stopping after batch",
            "operator: got the lock after the worker stopped",
        ],
    );
}

#[test]
fn read_write_lock() {
    run_single(
        "read_write_lock",
        &[
            "writer: got the write lock with 0 readers inside",
            "downgrade: write lock released, still reading (write locked: false)",
            "upgrade refused",
        ],
    );
}

#[test]
fn multi_lock() {
    run_single(
        "multi_lock",
        &[
            "no deadlock: 20 transfers",
            "all or none: pair acquired = false, examples:multi:account-1 locked = false",
            "after the release: holding",
        ],
    );
}

#[test]
fn semaphore() {
    let out = run_single(
        "semaphore",
        &[
            "semaphore: 5 workers done",
            "try_acquire while both permits are taken: false",
        ],
    );
    let most: usize = out
        .lines()
        .find_map(|l| l.split("at most ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the most workers inside at once");
    assert!(
        (1..=2).contains(&most),
        "{most} workers inside a 2-permit semaphore"
    );
    assert!(out.contains("2 permits available"), "{out}");
}

#[test]
fn permits() {
    run_single(
        "permits",
        &[
            "the one of the dead holder came back",
            "permits: 6 builds done, 1 available",
        ],
    );
}

#[test]
fn latch() {
    run_single("latch", &["coordinator: all 3 workers ready = true"]);
}

/// Three nodes firing one cron schedule: each tick run by exactly one of them.
#[test]
fn scheduled_job() {
    let out = run_single("scheduled_job", &["each run once = true"]);
    assert!(out.matches(": ran the tick").count() >= 3, "{out}");
}

#[test]
fn blocking() {
    let out = run_single(
        "blocking",
        &["blocking: try_lock from another thread while held = false"],
    );
    assert_eq!(out.matches("hold count 2").count(), 3, "{out}");
}

#[test]
fn tracing_json() {
    let out = run_single("tracing_json", &["\"lost\":true"]);
    assert!(
        out.lines().all(|l| l.starts_with('{') && l.ends_with('}')),
        "not JSON lines:\n{out}"
    );
    // The library's own spans are in the stream, closed with their outcome. (Its WARN
    // about the lost lock is printed just after `lost()` fires, so it may come after
    // the example's last line; not asserted.)
    assert!(
        out.lines()
            .any(|l| l.contains("\"target\":\"redlatch") && l.contains("examples:tracing:report")),
        "no span of the library:\n{out}"
    );
}

/// docs/observability.md's fmt set-up: exactly one line per operation, in order, each
/// with its outcome, and nothing else at `redlatch=info`.
#[test]
fn operation_log() {
    let out = run_single("operation_log", &["operations: 5"]);
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("operations:"))
        .collect();
    let expected = [
        ("lock{", "acquired"),
        ("try_lock{", "timed_out"),
        ("unlock{", "released"),
        ("try_lock{", "acquired"),
        ("unlock{", "released"),
    ];
    assert_eq!(
        lines.len(),
        expected.len(),
        "one line per operation:\n{out}"
    );
    for (line, (span, outcome)) in lines.iter().zip(expected) {
        assert!(line.contains(&format!(" INFO {span}")), "{span}: {line}");
        assert!(
            line.contains(&format!("outcome=\"{outcome}\"")),
            "{outcome}: {line}"
        );
        assert!(line.contains("lock=examples:operation-log"), "{line}");
        assert!(!line.contains('\x1b'), "{line:?}");
    }
}

#[cfg(feature = "metrics")]
#[test]
fn prometheus() {
    run_single(
        "prometheus",
        &["redlatch_acquired_total", "redlatch_contended_total"],
    );
}

#[test]
fn cluster() {
    let cluster = RedisCluster::start(3, 0);
    let seeds = cluster.urls().join(",");
    let out = run_example(
        "cluster",
        &[("REDLATCH_CLUSTER", seeds)],
        &["cluster: multi-lock over two slots held; other client got one part = false"],
    );
    assert!(out.contains("connected: [\"cluster 127.0.0.1:"), "{out}");
}

#[test]
fn sentinel() {
    let set = SentinelSet::start("examples-primary");
    let primary = set.server(set.primary_index());
    let scripts = || common::calls(primary, "evalsha") + common::calls(primary, "eval");
    let before = scripts();
    run_example(
        "sentinel",
        &[
            ("REDLATCH_SENTINELS", set.sentinel_urls().join(",")),
            ("REDLATCH_SENTINEL_MASTER", set.master_name().to_string()),
        ],
        &["sentinel: 4 turns done on the primary of examples-primary"],
    );
    // The locks were taken on the primary the sentinels name.
    let ran = scripts() - before;
    assert!(ran > 0, "no script ran on the primary {}", primary.addr());
}

#[cfg(feature = "tls")]
#[test]
fn tls() {
    if common::tls::no_tls("the tls example") {
        return;
    }
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs, true);
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    run_example(
        "tls",
        &[
            ("REDLATCH_REDIS", server.tls_url()),
            ("REDLATCH_TLS_CA", path(certs.ca())),
            ("REDLATCH_TLS_CERT", path(certs.client_cert())),
            ("REDLATCH_TLS_KEY", path(certs.client_key())),
        ],
        &["tls: 4 turns done"],
    );
}
