//! A master that becomes unreachable: [`Route`], a TCP relay on a 127.0.0.1 port of its
//! own in front of a [`RedisServer`](crate::RedisServer), which a test can cut as a lost
//! route would. Cut, the connections already open stay open and carry nothing either
//! way (what reaches them is read and dropped, as a black-holed path drops packets),
//! and a new connection is never established: the port's listener accepts nothing and
//! its queue is full, so the kernel drops every SYN and `connect()` hangs until the
//! caller's timeout. Neither a killed server (connection refused at once) nor a
//! SIGSTOPped one (connections are still established by the kernel) looks like this.
//!
//! Only loopback: the relay forwards to the server's 127.0.0.1 port.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;

/// How often the relay's threads look at the cut flag while idle.
const TICK: Duration = Duration::from_millis(10);

/// A relay to a server's port that can be cut (see the module docs). Dropped, it
/// closes every connection it carries.
pub struct Route {
    port: u16,
    cut: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
    /// Both sides of every relayed connection, shut down on drop.
    streams: Arc<Mutex<Vec<TcpStream>>>,
    /// After the cut: the full listener that holds the port, and what fills its queue.
    holding: Mutex<Vec<TcpStream>>,
    holder: Mutex<Option<TcpListener>>,
}

impl Route {
    /// A relay from a free 127.0.0.1 port to `target_port`.
    pub fn to(target_port: u16) -> Route {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let route = Route {
            port,
            cut: Arc::default(),
            stopped: Arc::default(),
            streams: Arc::default(),
            holding: Mutex::default(),
            holder: Mutex::default(),
        };
        let (cut, stopped, streams) = (
            route.cut.clone(),
            route.stopped.clone(),
            route.streams.clone(),
        );
        thread::spawn(move || accept(listener, target_port, cut, stopped, streams));
        route
    }

    /// The relay's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:{port}`: the master as the client sees it.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Cuts the route: nothing passes on the open connections, and new ones hang in
    /// `connect()` (see the module docs).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        // The accepting thread lets go of the port within a tick.
        let mut bound = None;
        for _ in 0..500 {
            match full_listener(self.port) {
                Ok(l) => {
                    bound = Some(l);
                    break;
                }
                Err(_) => thread::sleep(TICK),
            }
        }
        let listener = bound.expect("take the relay's port for the cut");
        // Fill its queue (a backlog of 0 queues one connection): later SYNs are dropped.
        let mut holding = self.holding.lock();
        for _ in 0..2 {
            let addr = format!("127.0.0.1:{}", self.port);
            if let Ok(s) = TcpStream::connect_timeout(&addr.parse().unwrap(), TICK * 10) {
                holding.push(s);
            }
        }
        *self.holder.lock() = Some(listener);
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        for s in self.streams.lock().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// A listener on `port` that never accepts, with the shortest queue there is.
fn full_listener(port: u16) -> std::io::Result<TcpListener> {
    // SAFETY: plain socket calls on a descriptor this function owns; on any failure it
    // is closed before returning.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) != 0
            || libc::listen(fd, 0) != 0
        {
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(TcpListener::from_raw_fd(fd))
    }
}

/// Accepts and relays until the cut (then drops the listener: [`Route::cut`] takes
/// the port) or the route's drop.
fn accept(
    listener: TcpListener,
    target: u16,
    cut: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
) {
    while !cut.load(Ordering::SeqCst) && !stopped.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(TICK);
                continue;
            }
            Err(_) => return,
        };
        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
            continue; // the server is down: the client sees its connection closed
        };
        let _ = client.set_nonblocking(false);
        let _ = server.set_nodelay(true);
        let _ = client.set_nodelay(true);
        let mut all = streams.lock();
        for (from, to) in [(&client, &server), (&server, &client)] {
            let (from, to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
            all.push(from.try_clone().unwrap());
            let (cut, stopped) = (cut.clone(), stopped.clone());
            thread::spawn(move || pump(from, to, cut, stopped));
        }
    }
}

/// Copies `from` to `to` until either closes or the route is dropped; after the cut
/// it reads and drops.
fn pump(mut from: TcpStream, mut to: TcpStream, cut: Arc<AtomicBool>, stopped: Arc<AtomicBool>) {
    let _ = from.set_read_timeout(Some(TICK * 5));
    let mut buf = [0u8; 16 * 1024];
    while !stopped.load(Ordering::SeqCst) {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if !cut.load(Ordering::SeqCst) && to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    // Closed on one side: close the other, unless cut (a cut route never says so).
    if !cut.load(Ordering::SeqCst) {
        let _ = to.shutdown(Shutdown::Both);
    }
}
