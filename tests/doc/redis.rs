// The doc-test helper: included by the examples in the library's documentation with
//     # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
//     # fn main() { doc_redis::run(|url| async move {
//     ... the example, with `url` the server's redis:// URL, also in REDLATCH_REDIS
//         (so an example can read it as an application would: Config::from_env());
//         one example of the merged doc-test process at a time, see `alone` ...
//     # Ok(()) }) }
// (or `doc_redis::run_blocking(|url| { ... })` for the blocking API), so each example runs against a real, private `redis-server` (on a free loopback
// port, never 6379, stopped when the example ends). Not part of the library.

#[allow(dead_code)]
mod doc_redis {
    use std::net::{TcpListener, TcpStream};
    use std::path::PathBuf;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// A private redis-server, killed and its directory removed on drop.
    pub struct Redis {
        child: Child,
        dir: PathBuf,
        /// `redis://127.0.0.1:PORT`
        pub url: String,
    }

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// Starts a redis-server and waits until it accepts connections.
    pub fn start() -> Redis {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let dir = std::env::temp_dir().join(format!("redlatch-doc-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("a temp dir");
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server on PATH (scripts/test.sh installs it)");
            let mut redis = Redis { child, dir, url: format!("redis://127.0.0.1:{port}") };
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if let Ok(Some(_)) = redis.child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return redis;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            drop(redis);
        }
        panic!("redis-server did not start");
    }

    /// Runs an async example against a fresh server.
    pub fn run<F, Fut>(example: F)
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = redlatch::Result<()>>,
    {
        let redis = start();
        let _alone = alone(&redis.url);
        let rt = tokio::runtime::Runtime::new().expect("a runtime");
        rt.block_on(example(redis.url.clone())).expect("the example succeeds");
    }

    /// Makes `url` this process's REDLATCH_REDIS for as long as the returned lock lives.
    /// rustdoc merges the doc tests (edition 2024) into one process whose tests run on
    /// several threads: each example takes an exclusive lock on a file named after the
    /// process, so no other example of it runs meanwhile, and then sets the variable
    /// (every copy of this module takes the same file, where a `static` would be one
    /// copy's own).
    fn alone(url: &str) -> std::fs::File {
        let path = std::env::temp_dir().join(format!("redlatch-doc-{}.lock", std::process::id()));
        let file = std::fs::File::create(path).expect("the doc tests' lock file");
        file.lock().expect("the doc tests' lock");
        // SAFETY: no other example of this process runs while the lock is held, and
        // the test harness's own threads do not read the environment meanwhile.
        unsafe { std::env::set_var("REDLATCH_REDIS", url) };
        file
    }

    /// Runs a blocking example against a fresh server.
    pub fn run_blocking(example: impl FnOnce(String) -> redlatch::Result<()>) {
        let redis = start();
        let _alone = alone(&redis.url);
        example(redis.url.clone()).expect("the example succeeds");
    }
}
