//! [`RedlockPeer`]: another process holding a lock the way the Redlock reference
//! clients do (redis-py's `Lock`, Go's redsync: `SET name token NX PX lease` on each
//! master, compare-and-delete to release, compare-and-pexpire to extend), for the
//! simple lock's interop tests. It runs `peers/redlock_peer.py`, which speaks RESP over
//! raw sockets (redis-py is not installed on the test machines), commanded over
//! stdin/stdout; every answer is awaited with a bound and the process is killed on drop.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use crate::RedisServer;

/// How long an answer of the peer may take (a loaded machine included).
const ANSWER: Duration = Duration::from_secs(20);

/// A reference client's lock in another process.
pub struct RedlockPeer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl RedlockPeer {
    /// Starts a peer that tries to take `name` on a majority of `servers` for `lease`,
    /// retrying every 50 ms for up to `wait`, and returns it with its first answer:
    /// `held TOKEN` or `timeout`.
    pub fn start(servers: &[&RedisServer], name: &str, lease: Duration, wait: Duration) -> Self {
        let ports: Vec<String> = servers.iter().map(|s| s.port().to_string()).collect();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/redlock_peer.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(ports.join(","))
            .arg(name)
            .arg(lease.as_millis().to_string())
            .arg(wait.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the peer");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        RedlockPeer {
            child,
            stdin,
            lines,
        }
    }

    /// Its next answer, waited for in a blocking thread so a runtime is not blocked.
    pub async fn answer(&self) -> String {
        tokio::task::block_in_place(|| self.lines.recv_timeout(ANSWER))
            .unwrap_or_else(|e| panic!("the peer did not answer within {ANSWER:?}: {e}"))
    }

    /// Its first answer: its token if it took the lock, `None` if its wait ran out.
    pub async fn held(&self) -> Option<String> {
        let first = self.answer().await;
        match first.strip_prefix("held ") {
            Some(token) => Some(token.to_string()),
            None => {
                assert_eq!(first, "timeout", "unexpected peer answer");
                None
            }
        }
    }

    /// Releases by compare-and-delete: how many masters' keys it deleted.
    pub async fn release(&mut self) -> usize {
        self.send("release");
        let answer = self.answer().await;
        let n = answer.strip_prefix("released ").expect("a release answer");
        n.parse().unwrap()
    }

    /// Extends by compare-and-pexpire to `lease`: on how many masters it still held.
    pub async fn extend(&mut self, lease: Duration) -> usize {
        self.send(&format!("extend {}", lease.as_millis()));
        let answer = self.answer().await;
        let n = answer.strip_prefix("extended ").expect("an extend answer");
        n.parse().unwrap()
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("the peer reads its commands");
        self.stdin.flush().unwrap();
    }
}

impl Drop for RedlockPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
