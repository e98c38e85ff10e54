//! A throw-away PostgreSQL server per test: `initdb` once per process (a template data
//! directory, copied for each server), then `postgres` on a free 127.0.0.1 port in its
//! own directory, stopped by PID on drop (SIGQUIT, immediate shutdown).
//!
//! The binaries come from `$REDLATCH_PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package, which scripts/test.sh
//! installs), else the PATH. When they are missing, [`PgServer::start_or_skip`] says
//! so and returns `None`, unless `REDLATCH_REQUIRE_POSTGRES=1` (CI) makes it fail.
//! PostgreSQL refuses to run as root: as root the harness runs it as the `postgres`
//! user (made by the package) and hands it the directories.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(30);
const PORT_ATTEMPTS: usize = 5;
static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A running `postgres` (user `postgres`, trust authentication, database `postgres`).
pub struct PgServer {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    pid: u32,
}

/// Where the server binaries are, if anywhere.
pub fn bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("REDLATCH_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("postgres").exists() && bin.join("initdb").exists())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|d| d.join("postgres").exists() && d.join("initdb").exists())
    })
}

/// The uid and gid to run the server as: ours, or `postgres`'s when we are root.
fn run_as() -> Option<(u32, u32)> {
    // SAFETY: getuid(2) cannot fail.
    if unsafe { libc::getuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("running as root, and no `postgres` user to run PostgreSQL as");
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().unwrap(), f[3].parse().unwrap()))
}

fn command(bin: &Path, name: &str) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin.join(name));
    if let Some((uid, gid)) = run_as() {
        cmd.uid(uid).gid(gid);
    }
    cmd.env_remove("PGDATA").env("LC_ALL", "C");
    cmd
}

/// `dir` and everything below it handed to the server's user.
fn hand_over(dir: &Path) {
    if let Some((uid, gid)) = run_as() {
        let status = Command::new("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(dir)
            .status()
            .expect("run chown");
        assert!(status.success(), "chown {} failed", dir.display());
    }
}

fn fresh_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "redlatch-pg-{what}-{}-{}",
        std::process::id(),
        DIR_COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a test dir");
    dir
}

/// The data directory `initdb` made for this process (once), copied for each server.
fn template(bin: &Path) -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = fresh_dir("template");
        hand_over(&dir);
        let data = dir.join("data");
        let out = command(bin, "initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        AT_EXIT.lock().unwrap().push(dir.clone());
        // SAFETY: registers a plain extern "C" fn that removes the template at exit.
        unsafe { libc::atexit(remove_template) };
        data
    })
}

static AT_EXIT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_template() {
    if let Ok(dirs) = AT_EXIT.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl PgServer {
    /// A fresh server, or `None` (with a message naming `test`) when PostgreSQL is not
    /// installed and `REDLATCH_REQUIRE_POSTGRES` is not `1`.
    pub fn start_or_skip(test: &str) -> Option<PgServer> {
        match bin_dir() {
            Some(bin) => Some(PgServer::start_with(&bin)),
            None if std::env::var("REDLATCH_REQUIRE_POSTGRES").as_deref() == Ok("1") => {
                panic!("{test}: PostgreSQL is required (REDLATCH_REQUIRE_POSTGRES=1) but initdb/postgres were not found; run scripts/test.sh (it installs postgresql)")
            }
            None => {
                eprintln!("{test}: SKIPPED, PostgreSQL not installed (no initdb/postgres; scripts/test.sh installs postgresql)");
                None
            }
        }
    }

    fn start_with(bin: &Path) -> PgServer {
        let template = template(bin);
        let dir = fresh_dir("server");
        let status = Command::new("cp")
            .arg("-a")
            .arg(template)
            .arg(dir.join("data"))
            .status()
            .expect("run cp");
        assert!(
            status.success(),
            "copying the template data directory failed"
        );
        hand_over(&dir);
        let mut server = PgServer {
            port: 0,
            dir,
            child: Mutex::new(None),
            pid: 0,
        };
        for _ in 0..PORT_ATTEMPTS {
            server.port = super::free_port();
            if server.spawn_and_wait(bin) {
                return server;
            }
        }
        panic!(
            "postgres did not start on a free port after {PORT_ATTEMPTS} attempts:\n{}",
            server.log()
        );
    }

    /// Starts `postgres` on `self.port`; false when the port was taken.
    fn spawn_and_wait(&mut self, bin: &Path) -> bool {
        let log = std::fs::File::create(self.log_path()).expect("create postgres.log");
        let port = self.port.to_string();
        #[rustfmt::skip]
        let child = command(bin, "postgres")
            .arg("-D").arg(self.dir.join("data"))
            .args(["-p", &port, "-c", "listen_addresses=127.0.0.1"])
            .arg("-c").arg(format!("unix_socket_directories={}", self.dir.display()))
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=60", "-c", "shared_buffers=16MB"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup postgres.log"))
            .stderr(log)
            .spawn()
            .expect("spawn postgres");
        self.pid = child.id();
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let log = self.log();
            if log.contains("database system is ready to accept connections") {
                return true;
            }
            let exited = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                if log.contains("Address already in use")
                    || log.contains("could not create any TCP/IP sockets")
                {
                    return false;
                }
                panic!("postgres exited with {status}:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "postgres not ready within {READY_TIMEOUT:?}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("postgres.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's PID.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A libpq / tokio-postgres connection string for database `postgres`.
    pub fn conn_str(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=10",
            self.port
        )
    }

    /// A `postgresql://` URL of the server (what `psql` takes).
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A new connection (its task spawned on the current runtime).
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.conn_str(), tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to postgres on port {}: {e}", self.port));
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }

    /// Stops the server at once (SIGQUIT: immediate shutdown, its backends too) and
    /// waits for it; a later connection is refused.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            // SAFETY: kill(2) on our own unreaped child (SIGCONT first, if stopped).
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGCONT);
                libc::kill(child.id() as libc::pid_t, libc::SIGQUIT);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kleppmann's cases' resource: a PostgreSQL server with the fence migrated and one
/// document (`doc`: id 1, body, the token it was written with).
pub struct Ledger {
    /// The server.
    pub pg: PgServer,
    /// A connection of the test's own, for reading the outcome.
    pub db: tokio_postgres::Client,
}

/// The resource name the cases fence.
pub const DOC: &str = "doc:1";

impl Ledger {
    /// A fresh ledger, or `None` as [`PgServer::start_or_skip`].
    pub async fn start_or_skip(test: &str) -> Option<Ledger> {
        let pg = PgServer::start_or_skip(test)?;
        let db = pg.connect().await;
        redlatch::fence::postgres::migrate(&db).await.unwrap();
        db.batch_execute(
            "CREATE TABLE doc (id int PRIMARY KEY, body text NOT NULL, token bigint NOT NULL);
             INSERT INTO doc VALUES (1, 'initial', 0);",
        )
        .await
        .unwrap();
        Some(Ledger { pg, db })
    }

    /// The document's body and the token it was written with.
    pub async fn doc(&self) -> (String, u64) {
        let row = self
            .db
            .query_one("SELECT body, token FROM doc WHERE id = 1", &[])
            .await
            .unwrap();
        (row.get(0), row.get::<_, i64>(1) as u64)
    }
}

/// One transaction on `db`: the document rewritten as `body` by `token`'s holder,
/// fenced (`redlatch::fence::postgres::fence`) when `fenced`, then committed.
pub async fn write_doc(
    db: &mut tokio_postgres::Client,
    body: &str,
    token: &redlatch::fence::Token,
    fenced: bool,
) -> redlatch::Result<()> {
    let tx = db.transaction().await.unwrap();
    let value = token.value() as i64;
    tx.execute(
        "UPDATE doc SET body = $1, token = $2 WHERE id = 1",
        &[&body, &value],
    )
    .await
    .unwrap();
    if fenced {
        redlatch::fence::postgres::fence(&tx, DOC, token).await?;
    }
    tx.commit().await.unwrap();
    Ok(())
}

/// The end of a case: the fresh holder (token `fresh`) wrote "fresh" first, then the
/// stale one (token `stale`, older) tried "stale" and got `stale_write`. Fenced: the
/// stale write was refused, typed, naming both tokens, and "fresh" stands. Unfenced
/// (the same case with the guard off): the stale write committed over the fresh one,
/// which is what the fence is for (and shows that the case can fail).
pub async fn assert_outcome(
    ledger: &Ledger,
    fenced: bool,
    stale: u64,
    fresh: u64,
    stale_write: &redlatch::Result<()>,
) {
    judge(ledger.doc().await, DOC, fenced, stale, fresh, stale_write);
}

/// The end of a case on any store: `doc` is the resource `want`'s body and token
/// after the writes; the rest as [`assert_outcome`].
pub fn judge(
    doc: (String, u64),
    want: &str,
    fenced: bool,
    stale: u64,
    fresh: u64,
    stale_write: &redlatch::Result<()>,
) {
    assert!(stale < fresh, "the tokens: stale {stale}, fresh {fresh}");
    if fenced {
        match stale_write {
            Err(redlatch::Error::Fenced {
                resource,
                presented,
                newest,
                ..
            }) => {
                assert_eq!(
                    (resource.as_str(), *presented, *newest),
                    (want, stale, fresh)
                );
            }
            other => panic!("the stale write was not refused as Fenced: {other:?}"),
        }
        assert_eq!(doc, ("fresh".to_string(), fresh), "a stale write committed");
    } else {
        assert!(stale_write.is_ok(), "{stale_write:?}");
        assert_eq!(
            doc,
            ("stale".to_string(), stale),
            "without the fence the stale write commits"
        );
    }
}
