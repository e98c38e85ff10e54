//! A TCP proxy on loopback that delays what clients send until the test lets it through
//! ([`DelayProxy`]): a write held in the network while other things happen (Kleppmann's
//! delayed packet), then delivered, in order. Threads, not tasks: it works under any
//! runtime and while the test's runtime waits.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

#[derive(Default)]
struct Gate {
    held: Mutex<bool>,
    opened: Condvar,
    /// Chunks read from a client while held, not yet forwarded.
    waiting: AtomicUsize,
    stop: AtomicBool,
    streams: Mutex<Vec<TcpStream>>,
    /// A prefix that turns the hold on when a client's chunk starts with it.
    trigger: Mutex<Option<Vec<u8>>>,
}

/// A proxy from a free 127.0.0.1 port to `target`. While [`hold`](Self::hold) is on,
/// bytes from clients are read but not forwarded (the server's answers still flow);
/// [`release`](Self::release) forwards them in order. Every connection is closed on drop.
pub struct DelayProxy {
    addr: SocketAddr,
    gate: Arc<Gate>,
}

impl DelayProxy {
    /// Starts forwarding to `target` (`host:port`).
    pub fn start(target: &str) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("the proxy's address");
        let gate = Arc::new(Gate::default());
        let target = target.to_string();
        let g = gate.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                if g.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let pair = (client.try_clone(), server.try_clone());
                let (Ok(c2), Ok(s2)) = pair else { continue };
                g.streams.lock().unwrap().extend(
                    [client.try_clone(), server.try_clone()]
                        .into_iter()
                        .flatten(),
                );
                let up = g.clone();
                thread::spawn(move || pump(client, server, Some(up)));
                thread::spawn(move || pump(s2, c2, None));
            }
        });
        DelayProxy { addr, gate }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `host:port` clients connect to.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// From now on, bytes from clients wait in the proxy.
    pub fn hold(&self) {
        *self.gate.held.lock().unwrap() = true;
    }

    /// From the first chunk a client sends that starts with `prefix` (an HTTP method:
    /// `b"PUT "`), bytes from clients wait in the proxy; what came before flows.
    pub fn hold_from(&self, prefix: &[u8]) {
        *self.gate.trigger.lock().unwrap() = Some(prefix.to_vec());
    }

    /// Forwards what waited, in order, and everything after it.
    pub fn release(&self) {
        *self.gate.held.lock().unwrap() = false;
        self.gate.opened.notify_all();
    }

    /// How many chunks sent by clients wait in the proxy now.
    pub fn waiting(&self) -> usize {
        self.gate.waiting.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to`; client to server (`gate` given) waits while the gate holds.
fn pump(mut from: TcpStream, mut to: TcpStream, gate: Option<Arc<Gate>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(g) = &gate {
            let mut trigger = g.trigger.lock().unwrap();
            if trigger.as_ref().is_some_and(|p| buf[..n].starts_with(p)) {
                *trigger = None;
                *g.held.lock().unwrap() = true;
            }
            drop(trigger);
            let mut held = g.held.lock().unwrap();
            if *held {
                g.waiting.fetch_add(1, Ordering::SeqCst);
                while *held && !g.stop.load(Ordering::SeqCst) {
                    held = g.opened.wait(held).unwrap();
                }
                g.waiting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.gate.stop.store(true, Ordering::SeqCst);
        self.release();
        for s in self.gate.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        // Wakes the accept loop so it sees the stop.
        let _ = TcpStream::connect(self.addr);
    }
}
