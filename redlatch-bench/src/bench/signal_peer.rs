//! W7's BLPOP-signalled peer: python-redis-lock's wire (release 4.0), the best
//! cross-process peer of earlier runs, sent by bare redis-rs from P processes of this
//! binary (`--w7-child NAME --w7-peer signal`), so the peer's client costs what ours
//! does. To acquire, `SET lock:NAME TOKEN NX EX 10`; refused, `BLPOP lock-signal:NAME
//! 10` and again. To release, one script (lua/bench_signal_release.lua): if the key
//! still holds the token, the signal list is replaced by one element (waking the
//! longest-blocked BLPOP) and the key deleted. Its children count their own `SET`
//! tries: an acquire is not a script there.

use redis::aio::MultiplexedConnection;
use redis::Script;
use serde_json::json;

use super::fleet::{self, FleetLock};
use super::{Ctx, Report};
use redlatch_cli::conn::RedisArgs;
use redlatch_cli::exit::{self, Failure};

/// python-redis-lock's `expire` (seconds) of these runs, also BLPOP's timeout.
const EXPIRE_S: u64 = 10;
/// python-redis-lock's default `signal_expire` (ms).
const SIGNAL_EXPIRE_MS: u64 = 1_000;
const RELEASE: &str = include_str!("../../../lua/bench_signal_release.lua");

/// The name of the peer in results.
pub const LIB: &str = "python-redis-lock-protocol";
/// python-redis-lock itself (Python, redis-py) in results.
pub const PYTHON_LIB: &str = "python-redis-lock";

fn python_child() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/w7_python_redis_lock.py")
}

/// Whether python3 can import python-redis-lock and redis-py here (the peer runs only
/// then; `pip install -r scripts/requirements-bench.txt`).
pub fn python_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import redis, redis_lock"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// W7 with `procs` processes of python-redis-lock itself (the Python library) on the
/// first master, each counting its own `SET` tries.
pub async fn run_python(ctx: &Ctx, procs: usize) -> Result<Report, String> {
    ctx.require_masters("python-redis-lock")?;
    let name = ctx.key(&format!("w7-python-{procs}"));
    let script = python_child();
    let (script, url) = (script.to_string_lossy(), &ctx.urls[0]);
    let launch = |name: &str| fleet::child_command("python3", &[&script, url, name]);
    let mut r = fleet::run_with(ctx, procs, &name, launch).await?;
    r.insert("lib".into(), json!(PYTHON_LIB));
    Ok(r)
}

/// W7 with `procs` processes of the signal peer on the first master.
pub async fn run(ctx: &Ctx, procs: usize) -> Result<Report, String> {
    ctx.require_masters("the python-redis-lock peer")?;
    let name = ctx.key(&format!("w7-signal-{procs}"));
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let url = &ctx.urls[0];
    let launch = |name: &str| {
        let args = ["--w7-peer", "signal", "--w7-child", name, "--redis", url];
        fleet::child_command(&exe, &args)
    };
    let mut r = fleet::run_with(ctx, procs, &name, launch).await?;
    r.insert("lib".into(), json!(LIB));
    Ok(r)
}

struct Signal {
    conn: MultiplexedConnection,
    lock: String,
    signal: String,
    release: Script,
    token: Option<String>,
}

fn failed(what: &str, e: redis::RedisError) -> Failure {
    Failure::new(exit::UNAVAILABLE, format!("W7 signal peer: {what}: {e}"))
}

impl FleetLock for Signal {
    async fn acquire(&mut self) -> Result<Option<u64>, Failure> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut tries = 0;
        loop {
            tries += 1;
            let set: Option<String> = redis::cmd("SET")
                .arg(&self.lock)
                .arg(&token)
                .arg("NX")
                .arg("EX")
                .arg(EXPIRE_S)
                .query_async(&mut self.conn)
                .await
                .map_err(|e| failed("SET", e))?;
            if set.is_some() {
                self.token = Some(token);
                return Ok(Some(tries));
            }
            let _: Option<(String, String)> = redis::cmd("BLPOP")
                .arg(&self.signal)
                .arg(EXPIRE_S)
                .query_async(&mut self.conn)
                .await
                .map_err(|e| failed("BLPOP", e))?;
        }
    }

    async fn release(&mut self) -> Result<(), Failure> {
        let Some(token) = self.token.take() else {
            return Ok(());
        };
        let lost: i64 = (self.release.key(&self.lock).key(&self.signal))
            .arg(token)
            .arg(SIGNAL_EXPIRE_MS)
            .invoke_async(&mut self.conn)
            .await
            .map_err(|e| failed("release", e))?;
        if lost != 0 {
            return Err(Failure::new(
                exit::INTERNAL,
                format!(
                    "W7 signal peer: {} held another token at release",
                    self.lock
                ),
            ));
        }
        Ok(())
    }
}

/// A W7 child of the signal peer: one connection, as python-redis-lock's client has.
pub async fn child(redis: &RedisArgs, name: &str) -> Result<(), Failure> {
    let config = redis.config()?;
    let url = config.urls().first().cloned().unwrap_or_default();
    let client = redis::Client::open(url.as_str()).map_err(|e| failed("URL", e))?;
    // No response timeout: a BLPOP waits for as long as the holder holds (redis-py's
    // default too).
    let no_timeout = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let conn = (client
        .get_multiplexed_async_connection_with_config(&no_timeout)
        .await)
        .map_err(|e| failed("connect", e))?;
    fleet::child_with(Signal {
        conn,
        lock: format!("lock:{name}"),
        signal: format!("lock-signal:{name}"),
        release: Script::new(RELEASE),
        token: None,
    })
    .await
}
