//! A throw-away Redis Cluster per test: `primaries * (1 + replicas)` [`RedisServer`]s in
//! cluster mode (free ports, private dirs, killed on drop) joined by
//! `redis-cli --cluster create`, with failover and slot-migration helpers. Nodes are named
//! by their index in start order; roles come from the cluster itself (`CLUSTER NODES`), as
//! they change with failovers. Every wait is bounded and panics with each node's view and
//! log tail.

use std::fmt::Write as _;
use std::fs::File;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::{info_field, RedisServer};

mod migrate;
mod settle;
mod slots;

use settle::parse_nodes;
pub use slots::{key_in_slot, key_slot};

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;
/// `cluster-node-timeout`: a node silent this long is suspected failing (`fail?`); a failover
/// of a dead primary completes about 2 to 4 s after its death.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(1500);
/// Bound of each wait for the cluster to settle (start, failover, end of a migration).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound of `redis-cli --cluster create` (it polls the join once a second).
const CREATE_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);
/// Connect/read timeout of the probes in waits, so that a paused node cannot stall them.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
const LOG_TAIL_LINES: usize = 25;
/// MIGRATE batch size and timeout (ms) in [`RedisCluster::move_slot_keys`].
const MIGRATE_BATCH: usize = 100;
const MIGRATE_TIMEOUT_MS: &str = "5000";

/// A node's role in the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Primary,
    Replica,
}

/// One node as a line of `CLUSTER NODES` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// Index of the node in [`RedisCluster::node`] (start order).
    pub index: usize,
    /// The 40-hex-digit node id.
    pub id: String,
    pub port: u16,
    pub role: Role,
    /// For a replica: index of its primary.
    pub primary: Option<usize>,
    /// Slot ranges served, inclusive bounds (primaries only; empty for replicas).
    pub slots: Vec<(u16, u16)>,
    /// Raw flags: `myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`, ...
    pub flags: Vec<String>,
}

impl ClusterNode {
    /// Whether this node serves `slot`.
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }

    /// Flagged `fail` or `fail?` by the node whose view this is.
    pub fn is_failing(&self) -> bool {
        self.flags.iter().any(|f| f == "fail" || f == "fail?")
    }
}

/// What every node's view must agree on about a live node: role, primary, slots.
type Shape = (Role, Option<usize>, Vec<(u16, u16)>);

/// The entry for node `index` in a view, if the view has it.
pub fn entry(view: &[ClusterNode], index: usize) -> Option<&ClusterNode> {
    view.iter().find(|n| n.index == index)
}

pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    ids: Vec<String>,
    replicas_per_primary: usize,
    startup: Duration,
    /// The topology the last time the cluster was seen settled.
    settled: Mutex<Vec<ClusterNode>>,
}

impl RedisCluster {
    /// Start `primaries` primaries (at least 3, as `redis-cli --cluster create` wants) with
    /// `replicas_per_primary` replicas each, and wait until every node says
    /// `cluster_state:ok`, knows every other node, agrees on roles and slots, and every
    /// replica's link to its primary is up. Node settings: `cluster-node-timeout`
    /// [`NODE_TIMEOUT`], replica validity factor 0 (a replica can always take over), no
    /// replica migration (the topology only changes when a test changes it), diskless sync
    /// without delay; no persistence, like [`RedisServer`].
    pub fn start(primaries: usize, replicas_per_primary: usize) -> RedisCluster {
        assert!(
            primaries >= 3,
            "redis-cli --cluster create needs at least 3 primaries, not {primaries}"
        );
        let began = Instant::now();
        let nodes = start_nodes(primaries * (1 + replicas_per_primary));
        let ids = nodes
            .iter()
            .map(|n| n.cmd::<String>(&["CLUSTER", "MYID"]))
            .collect();
        let mut cluster = RedisCluster {
            nodes,
            ids,
            replicas_per_primary,
            startup: Duration::ZERO,
            settled: Mutex::new(Vec::new()),
        };
        cluster.create();
        let (view, ()) = cluster.wait_settled("the new cluster to form", |_| Ok(()));
        let primaries_seen: Vec<usize> = view
            .iter()
            .filter(|n| n.role == Role::Primary)
            .map(|n| n.index)
            .collect();
        assert_eq!(
            primaries_seen.len(),
            primaries,
            "primaries of the new cluster: {view:#?}"
        );
        for &p in &primaries_seen {
            let replicas = view.iter().filter(|n| n.primary == Some(p)).count();
            assert_eq!(
                replicas, replicas_per_primary,
                "replicas of primary {p}: {view:#?}"
            );
        }
        cluster.startup = began.elapsed();
        cluster
    }

    /// Wall time [`RedisCluster::start`] took, from the first spawn to settled.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// Number of nodes (primaries and replicas).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes: never once started ([`Self::len`]'s companion).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn replicas_per_primary(&self) -> usize {
        self.replicas_per_primary
    }

    /// Node `i` (start order) for commands, logs, kill, pause, restart.
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    pub fn node_mut(&mut self, i: usize) -> &mut RedisServer {
        &mut self.nodes[i]
    }

    /// Node `i`'s id (fixed for the cluster's life: a restart keeps nodes.conf).
    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Index of the node listening on `port`, if it is one of ours.
    pub fn index_of_port(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// Seed URLs: `redis://127.0.0.1:PORT` of every node, in start order.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// The topology as the first live node sees it (no waiting: views of other nodes may
    /// lag right after a change; [`RedisCluster::wait_until_settled`] waits for agreement).
    pub fn nodes(&self) -> Vec<ClusterNode> {
        let mut errors = String::new();
        for i in self.live() {
            match self.view_of(i) {
                Ok(view) => return view,
                Err(e) => {
                    let _ = writeln!(errors, "{e}");
                }
            }
        }
        panic!(
            "no live node gave its CLUSTER NODES view:\n{errors}\n{}",
            self.diagnostics()
        )
    }

    /// `CLUSTER NODES` of node `i`, parsed and sorted by index.
    pub fn view_of(&self, i: usize) -> Result<Vec<ClusterNode>, String> {
        let text: String = self.nodes[i]
            .try_cmd(PROBE_TIMEOUT, &["CLUSTER", "NODES"])
            .map_err(|e| format!("node {i}: CLUSTER NODES: {e}"))?;
        parse_nodes(&text, &self.ids).map_err(|e| format!("node {i}: {e}"))
    }

    /// Primaries per [`RedisCluster::nodes`], not flagged `fail` (a dead primary stays a
    /// `master,fail` without slots in the views after its failover).
    pub fn primaries(&self) -> Vec<usize> {
        self.nodes()
            .iter()
            .filter(|n| n.role == Role::Primary && !n.flags.iter().any(|f| f == "fail"))
            .map(|n| n.index)
            .collect()
    }

    /// Replicas of `primary` per [`RedisCluster::nodes`].
    pub fn replicas_of(&self, primary: usize) -> Vec<usize> {
        self.nodes()
            .iter()
            .filter(|n| n.primary == Some(primary))
            .map(|n| n.index)
            .collect()
    }

    /// The first replica of `primary`; panics if it has none.
    pub fn replica_of(&self, primary: usize) -> usize {
        match self.replicas_of(primary).first() {
            Some(&r) => r,
            None => panic!("node {primary} has no replica: {:#?}", self.nodes()),
        }
    }

    /// The primary serving `slot` per [`RedisCluster::nodes`]; during a migration that is
    /// still the source until [`RedisCluster::finish_migration`].
    pub fn primary_for_slot(&self, slot: u16) -> usize {
        assert!(slot < SLOTS, "slot {slot} out of range");
        let view = self.nodes();
        match view
            .iter()
            .find(|n| n.role == Role::Primary && n.owns(slot))
        {
            Some(n) => n.index,
            None => panic!("no primary serves slot {slot}: {view:#?}"),
        }
    }

    /// The primary serving `key`'s slot ([`key_slot`]).
    pub fn primary_for_key(&self, key: &str) -> usize {
        self.primary_for_slot(key_slot(key.as_bytes()))
    }

    /// Subscribers of `channel` on the primary serving its slot, in the pub/sub a client
    /// uses on this cluster: sharded (`PUBSUB SHARDNUMSUB`) on Redis >= 7, classic
    /// (`PUBSUB NUMSUB`, which counts this node's own subscribers only) before. That node
    /// is where redlatch and Redisson subscribe, and where the scripts count listeners.
    pub fn channel_subscribers(&self, channel: &str) -> i64 {
        let sub = if super::server_major() >= 7 {
            "SHARDNUMSUB"
        } else {
            "NUMSUB"
        };
        let node = self.node(self.primary_for_key(channel));
        let (_, n): (String, i64) = node.cmd(&["PUBSUB", sub, channel]);
        n
    }

    /// A key `prefix0`, `prefix1`, ... that node `primary` serves.
    pub fn key_on(&self, primary: usize, prefix: &str) -> String {
        let view = self.nodes();
        let me = entry(&view, primary)
            .filter(|n| n.role == Role::Primary && !n.slots.is_empty())
            .unwrap_or_else(|| panic!("node {primary} serves no slot: {view:#?}"));
        (0u64..)
            .map(|n| format!("{prefix}{n}"))
            .find(|k| me.owns(key_slot(k.as_bytes())))
            .expect("some key hashes to a served slot")
    }

    /// SIGKILL node `i` ([`RedisServer::kill`]).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Kills `primary` and its replica, then waits (30 s) until every other node says
    /// `cluster_state:fail` (the default `cluster-require-full-coverage yes`: every
    /// node answers CLUSTERDOWN).
    pub fn take_down_shard(&mut self, primary: usize) {
        let replica = self.replica_of(primary);
        self.kill(replica);
        self.kill(primary);
        let live: Vec<usize> = (0..self.len())
            .filter(|&i| i != primary && i != replica)
            .collect();
        assert!(
            super::eventually(Duration::from_secs(30), || live.iter().all(|&i| {
                let info: String = self.node(i).cmd(&["CLUSTER", "INFO"]);
                info_field(&info, "cluster_state") == Some("fail")
            })),
            "the cluster never went down: {}",
            self.diagnostics()
        );
    }

    /// SIGSTOP node `i`; past [`NODE_TIMEOUT`] the others flag it failing, and a paused
    /// primary gets failed over.
    pub fn pause(&self, i: usize) {
        self.nodes[i].pause();
    }

    /// SIGCONT node `i`.
    pub fn resume(&self, i: usize) {
        self.nodes[i].resume();
    }

    /// Restart node `i` on its port with its nodes.conf: it rejoins with its id (a primary
    /// that was failed over comes back as a replica of its successor). Does not wait; use
    /// [`RedisCluster::wait_until_settled`].
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
    }

    /// Wait until the live nodes (running, not paused) all say `cluster_state:ok`, know
    /// every node, agree on the roles, primaries and slots of the live nodes, flag none of
    /// them failing, every slot is served by exactly one live primary, and every live
    /// replica's link to its primary is up. Returns the agreed view.
    pub fn wait_until_settled(&self) -> Vec<ClusterNode> {
        self.wait_settled("the cluster to settle", |_| Ok(())).0
    }

    /// Every node's state, `CLUSTER NODES` view and log tail, for failure messages.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let _ = writeln!(
                out,
                "=== node {i}: 127.0.0.1:{} pid {} id {} ({}), dir {}",
                node.port(),
                node.pid(),
                self.ids[i],
                node.state(),
                node.dir().display()
            );
            if node.is_live() {
                let view: Result<String, _> = node.try_cmd(PROBE_TIMEOUT, &["CLUSTER", "NODES"]);
                let _ = writeln!(
                    out,
                    "--- CLUSTER NODES ---\n{}",
                    view.unwrap_or_else(|e| format!("<{e}>"))
                );
            }
            let _ = writeln!(
                out,
                "--- last {LOG_TAIL_LINES} log lines ---\n{}",
                node.log_tail(LOG_TAIL_LINES)
            );
        }
        out
    }

    /// Indices of the nodes that answer commands (running, not paused).
    fn live(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_live())
            .collect()
    }

    fn settled_guard(&self) -> MutexGuard<'_, Vec<ClusterNode>> {
        self.settled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `redis-cli --cluster create` over every node, bounded by [`CREATE_TIMEOUT`].
    fn create(&self) {
        let out_path = self.nodes[0].dir().join("cluster-create.out");
        let out = File::create(&out_path).expect("cannot create cluster-create.out");
        let mut child = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(self.nodes.iter().map(|n| n.addr()))
            .arg("--cluster-replicas")
            .arg(self.replicas_per_primary.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("dup cluster-create.out"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn redis-cli (scripts/ensure-redis.sh): {e}"));
        let deadline = Instant::now() + CREATE_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for redis-cli") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            thread::sleep(POLL);
        };
        if status.is_some_and(|s| s.success()) {
            return;
        }
        let output = std::fs::read(&out_path).unwrap_or_default();
        panic!(
            "redis-cli --cluster create {}\n--- redis-cli output ---\n{}\n{}",
            match status {
                Some(s) => format!("failed: {s}"),
                None => format!("did not finish within {CREATE_TIMEOUT:?}"),
            },
            String::from_utf8_lossy(&output),
            self.diagnostics()
        );
    }

    /// Poll [`RedisCluster::settled_view`] plus `check` until both pass, within
    /// [`SETTLE_TIMEOUT`]; records and returns the view and `check`'s value.
    fn wait_settled<T>(
        &self,
        what: &str,
        check: impl Fn(&[ClusterNode]) -> Result<T, String>,
    ) -> (Vec<ClusterNode>, T) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            let why = match self.settled_view() {
                Ok(view) => match check(&view) {
                    Ok(value) => {
                        *self.settled_guard() = view.clone();
                        return (view, value);
                    }
                    Err(why) => why,
                },
                Err(why) => why,
            };
            if Instant::now() >= deadline {
                panic!(
                    "waited {SETTLE_TIMEOUT:?} for {what}; last reason: {why}\n{}",
                    self.diagnostics()
                );
            }
            thread::sleep(POLL);
        }
    }
}

/// The cluster shared by the tests of one test binary: 3 primaries with 1 replica each,
/// started on first use and killed when the process exits. Only for tests that leave the
/// topology and configuration alone (no kill, pause, failover, migration, restart,
/// FLUSHALL, CONFIG SET) and use their own keys, and that count nothing server-wide:
/// every module of the binary uses it at the same time (a file whose tests need more
/// takes [`cluster_of`] with a cell of its own). Under nextest every test is its own
/// process, so each still starts one; under `cargo test` the tests of a binary share it.
pub fn shared_cluster() -> &'static RedisCluster {
    static SHARED: OnceLock<RedisCluster> = OnceLock::new();
    cluster_of(&SHARED)
}

/// A cluster like [`shared_cluster`]'s, but the one in `cell`: the cluster of the
/// callers of that cell alone (e.g. one test file's tests, taking turns on it), started
/// on first use and killed when the process exits.
pub fn cluster_of(cell: &'static OnceLock<RedisCluster>) -> &'static RedisCluster {
    cell.get_or_init(|| {
        let cluster = RedisCluster::start(3, 1);
        let mut started = AT_EXIT.lock();
        if started.is_empty() {
            // SAFETY: registers a plain extern "C" fn; statics are never dropped, so
            // this is what stops the nodes.
            unsafe { libc::atexit(kill_static_clusters) };
        }
        started.extend(
            cluster
                .nodes
                .iter()
                .map(|n| (n.pid(), n.dir().to_path_buf())),
        );
        cluster
    })
}

/// The nodes of the clusters in statics (PID, data directory), killed at exit.
static AT_EXIT: parking_lot::Mutex<Vec<(u32, std::path::PathBuf)>> =
    parking_lot::Mutex::new(Vec::new());

extern "C" fn kill_static_clusters() {
    for (pid, dir) in AT_EXIT.lock().iter() {
        // SAFETY: kill(2) on the PID of our own child (SIGKILL also ends a paused one).
        unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Start `n` cluster-mode nodes in parallel.
fn start_nodes(n: usize) -> Vec<RedisServer> {
    thread::scope(|s| {
        let handles: Vec<_> = (0..n).map(|_| s.spawn(start_node)).collect();
        let mut nodes = Vec::with_capacity(n);
        let mut failure = None;
        for handle in handles {
            match handle.join() {
                Ok(node) => nodes.push(node),
                Err(panic) => failure = failure.or(Some(panic)),
            }
        }
        if let Some(panic) = failure {
            drop(nodes);
            std::panic::resume_unwind(panic);
        }
        nodes
    })
}

/// One empty cluster-mode node; its bus port is another free port (`--cluster-port`), not
/// port + 10000, which may be above 65535 or taken. A Redis < 7 node has no
/// `cluster-port`: its port is chosen with port + 10000 free as well.
fn start_node() -> RedisServer {
    let args = |dir: &std::path::Path, bus: Option<u16>| {
        #[rustfmt::skip]
        let mut args: Vec<String> = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", &dir.join("nodes.conf").to_string_lossy(),
            "--cluster-node-timeout", &NODE_TIMEOUT.as_millis().to_string(),
            "--cluster-replica-validity-factor", "0",
            "--cluster-allow-replica-migration", "no",
            "--repl-diskless-sync-delay", "0",
        ]
        .map(String::from)
        .to_vec();
        if let Some(bus) = bus {
            args.extend(["--cluster-port".to_string(), bus.to_string()]);
        }
        args
    };
    if super::server_major() < 7 {
        return RedisServer::start_in_with_free(10_000, move |_port, dir| args(dir, None));
    }
    RedisServer::start_in(move |port, dir| {
        let bus = loop {
            let p = super::free_port();
            if p != port {
                break p;
            }
        };
        args(dir, Some(bus))
    })
}
