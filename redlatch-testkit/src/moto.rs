//! A throw-away S3-compatible server per test: moto's server mode (`moto_server`, from
//! PyPI's `moto[server]`) on a free 127.0.0.1 port, stopped by PID on drop.
//!
//! Authentication is on, as on a real store: at start the harness creates an IAM user
//! with an `s3:*` policy and an access key, and the bucket [`BUCKET`], while moto still
//! takes unsigned requests; then it turns moto's checks on (`/moto-api/reset-auth`), so
//! every later request must carry a valid SigV4 signature of that key (a wrong secret
//! is refused with `SignatureDoesNotMatch`, as S3 refuses it).
//!
//! `moto_server` comes from `$REDLATCH_MOTO_SERVER`, else the virtualenv
//! scripts/ensure-moto.sh makes (`target/moto/bin/moto_server`), else the PATH. When
//! it is missing, [`MotoServer::start_or_skip`] says so and returns `None`, unless
//! `REDLATCH_REQUIRE_MOTO=1` (CI) makes it fail.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redlatch::fence::s3::S3Fence;

const READY_TIMEOUT: Duration = Duration::from_secs(60);
const PORT_ATTEMPTS: usize = 5;
static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The bucket every server starts with.
pub const BUCKET: &str = "fence";
/// The region requests are signed for.
pub const REGION: &str = "us-east-1";

/// A running `moto_server` with authentication on.
pub struct MotoServer {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    pid: u32,
    key_id: String,
    secret: String,
}

/// Where `moto_server` is, if anywhere.
pub fn bin() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("REDLATCH_MOTO_SERVER").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    let venv = target.join("moto/bin/moto_server");
    if venv.exists() {
        return Some(venv);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("moto_server"))
            .find(|p| p.exists())
    })
}

/// One HTTP/1.1 exchange with moto on `port` (Connection: close): status and body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect to moto");
    conn.set_read_timeout(Some(READY_TIMEOUT)).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    conn.write_all(req.as_bytes()).expect("send to moto");
    let mut answer = String::new();
    conn.read_to_string(&mut answer)
        .expect("read moto's answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("moto answered {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    (status, body.unwrap_or_default())
}

/// The text of `<field>` in an XML answer.
fn field(xml: &str, name: &str) -> String {
    let start = xml
        .find(&format!("<{name}>"))
        .unwrap_or_else(|| panic!("no {name} in {xml}"));
    let rest = &xml[start + name.len() + 2..];
    rest[..rest.find('<').unwrap()].to_string()
}

impl MotoServer {
    /// A fresh server with [`BUCKET`], or `None` (with a message naming `test`) when
    /// moto is not installed and `REDLATCH_REQUIRE_MOTO` is not `1`.
    pub fn start_or_skip(test: &str) -> Option<MotoServer> {
        match bin() {
            Some(bin) => Some(MotoServer::start_with(bin)),
            None if std::env::var("REDLATCH_REQUIRE_MOTO").as_deref() == Ok("1") => {
                panic!("{test}: moto is required (REDLATCH_REQUIRE_MOTO=1) but moto_server was not found; run scripts/test.sh (it installs moto[server])")
            }
            None => {
                eprintln!("{test}: SKIPPED, moto not installed (no moto_server; scripts/test.sh installs moto[server])");
                None
            }
        }
    }

    fn start_with(bin: PathBuf) -> MotoServer {
        let dir = std::env::temp_dir().join(format!(
            "redlatch-moto-{}-{}",
            std::process::id(),
            DIR_COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a test dir");
        let mut server = MotoServer {
            port: 0,
            dir,
            child: Mutex::new(None),
            pid: 0,
            key_id: String::new(),
            secret: String::new(),
        };
        for _ in 0..PORT_ATTEMPTS {
            server.port = super::free_port();
            if server.spawn_and_wait(&bin) {
                server.set_up();
                return server;
            }
        }
        panic!(
            "moto_server did not start on a free port after {PORT_ATTEMPTS} attempts:\n{}",
            server.log()
        );
    }

    /// Starts `moto_server` on `self.port`; false when the port was taken.
    fn spawn_and_wait(&mut self, bin: &PathBuf) -> bool {
        let log = std::fs::File::create(self.dir.join("moto.log")).expect("create moto.log");
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &self.port.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .env_remove("INITIAL_NO_AUTH_ACTION_COUNT")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup moto.log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
        self.pid = child.id();
        *self.child.lock().unwrap() = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && self.log().contains("Running on")
            {
                return true;
            }
            let exited = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                if self.log().contains("Address already in use") {
                    return false;
                }
                panic!("moto_server exited with {status}:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "moto_server not ready within {READY_TIMEOUT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The IAM user, its policy and key, the bucket; then authentication on.
    fn set_up(&mut self) {
        let (p, iam) = (self.port, "AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0");
        let form = [
            ("Authorization", iam),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ];
        let policy = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Action%22%3A%22s3%3A*%22%2C%22Resource%22%3A%22*%22%7D%5D%7D";
        for body in [
            "Action=CreateUser&UserName=redlatch&Version=2010-05-08".to_string(),
            format!("Action=PutUserPolicy&UserName=redlatch&PolicyName=s3&PolicyDocument={policy}&Version=2010-05-08"),
        ] {
            let (status, answer) = http(p, "POST", "/", &form, &body);
            assert_eq!(status, 200, "moto's IAM: {answer}");
        }
        let (status, key) = http(
            p,
            "POST",
            "/",
            &form,
            "Action=CreateAccessKey&UserName=redlatch&Version=2010-05-08",
        );
        assert_eq!(status, 200, "moto's IAM: {key}");
        (self.key_id, self.secret) = (field(&key, "AccessKeyId"), field(&key, "SecretAccessKey"));
        let s3 = "AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0";
        let (status, answer) = http(
            p,
            "PUT",
            &format!("/{BUCKET}"),
            &[("Authorization", s3)],
            "",
        );
        assert_eq!(status, 200, "moto's CreateBucket: {answer}");
        let (status, answer) = http(
            p,
            "POST",
            "/moto-api/reset-auth",
            &[("Content-Type", "text/plain")],
            "0",
        );
        assert_eq!(status, 200, "moto's reset-auth: {answer}");
    }

    /// moto's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("moto.log")).unwrap_or_default()
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's PID.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The access key id of the harness's IAM user.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Its secret.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// A fence on [`BUCKET`] at `endpoint` (this server, or a proxy to it), signed
    /// with the harness's key, each call bounded by `timeout`.
    pub fn fence_at(&self, endpoint: &str, timeout: Duration) -> S3Fence {
        S3Fence::new(endpoint, BUCKET, REGION, &self.key_id, &self.secret)
            .expect("a valid S3 fence")
            .timeout(timeout)
    }

    /// A fence on [`BUCKET`] of this server (calls bounded by 30 s: a loaded machine).
    pub fn fence(&self) -> S3Fence {
        self.fence_at(&self.endpoint(), Duration::from_secs(30))
    }

    /// Stops the server at once (SIGCONT, then SIGKILL) and waits for it.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            // SAFETY: kill(2) on our own unreaped child, resumed first if stopped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The object Kleppmann's cases fence.
pub const DOC: &str = "doc/1";

/// The document rewritten as `body` by `token`'s holder through `fence`: a guarded
/// PUT when `fenced`, else the same PUT without the check.
pub async fn write_doc(
    fence: &S3Fence,
    body: &str,
    token: &redlatch::fence::Token,
    fenced: bool,
) -> redlatch::Result<()> {
    match fenced {
        true => fence.put(DOC, body, token).await.map(|_| ()),
        false => fence.put_unfenced(DOC, body, token).await.map(|_| ()),
    }
}

/// The document's body and the token it was written with.
pub async fn doc(fence: &S3Fence) -> (String, u64) {
    let object = fence.get(DOC).await.unwrap().expect("the document exists");
    let token = object.token.expect("the document carries a token");
    (String::from_utf8(object.body).unwrap(), token.value())
}

/// The end of a case: as [`super::postgres::assert_outcome`], on the object [`DOC`].
pub async fn assert_outcome(
    fence: &S3Fence,
    fenced: bool,
    stale: u64,
    fresh: u64,
    stale_write: &redlatch::Result<()>,
) {
    super::postgres::judge(doc(fence).await, DOC, fenced, stale, fresh, stale_write);
}
