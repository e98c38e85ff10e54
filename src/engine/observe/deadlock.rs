//! Deadlocks: every ledger of the deployment read into the wait-for graph
//! (`redlatch deadlocks`), and the opt-in check of one waiter for a cycle through its
//! own task (`Config::deadlock_detection`).
//!
//! Invariants:
//! 1. A lock's holders are read from the lock itself (every kind's inspection), a
//!    task's waits from its client's ledger: a Redisson holder has no ledger, so a
//!    cycle through it cannot be seen.
//! 2. Reading every ledger is bounded by one deadline; the primaries or masters not
//!    scanned by then are named in the answer (it is then incomplete).
//! 3. A waiter gives up only for a cycle seen in two checks in a row (a hand-over in
//!    flight, or a stale wait entry, lasts less than a check), and only if it is the
//!    youngest waiter of that cycle (the latest waiting since, ties to the greater task
//!    id): every other task of the cycle goes on.
//! 4. A task holds a lock when it holds it on a majority of the masters. Under Redlock
//!    a waiter's attempt that took a minority of them (a split vote, undone at once)
//!    holds nothing: counted, it closed a second "cycle" through the waiting task's
//!    own call (its call waits for the lock it "holds", its task holds the lock the
//!    other waits for), seen by `redlatch deadlocks` when a holder's grant on one master
//!    had been taken by the waiter's attempt there first.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::engine::holding::table::HoldTable;
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::fan_out;
use crate::engine::masters::Masters;
use crate::engine::observe::graph::{Graph, Step};
use crate::engine::observe::ledger::parse_field;
use crate::engine::observe::{split_holder, task_of, Observe, Wait, Waiting};
use crate::engine::observe::{Who, DETECT_AFTER, DETECT_EVERY};
use crate::engine::Engine;
use crate::error::Error;
use crate::keys::books::Books;
use crate::transport::{Lane, Request};

/// Tasks a waiter's check follows at most.
const MAX_TASKS: usize = 64;

/// One task of a cycle: it holds `holds` (what the previous task waits for) and waits
/// for `waits_for` (held by the next task).
#[derive(Clone, Debug)]
pub(crate) struct Task {
    /// The task's holder id (`uuid:n`) and its client's record.
    pub(crate) who: Who,
    pub(crate) holds: String,
    pub(crate) waits_for: String,
    /// Since when it waits, ms since the epoch.
    pub(crate) waiting_since: Option<i64>,
}

/// A cycle of tasks, each waiting for a lock the next one holds.
#[derive(Clone, Debug)]
pub(crate) struct Cycle {
    pub(crate) tasks: Vec<Task>,
}

/// What [`Engine::deadlocks`] says with bookkeeping off: no ledger was read.
pub(crate) const BOOKS_OFF: &str =
    "no ledgers read: this client's bookkeeping is off (Config::bookkeeping(false), \
     REDLATCH_BOOKKEEPING=off); give it the deployment's bookkeeping prefix instead";

/// What reading every ledger found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Deadlocks {
    pub(crate) cycles: Vec<Cycle>,
    /// Ledgers read (clients seen).
    pub(crate) ledgers: usize,
    /// Primaries or masters that could not be read in time (invariant 2).
    pub(crate) unread: Vec<String>,
}

/// One client's ledger and record, merged over the masters.
#[derive(Default)]
struct Ledger {
    fields: HashMap<String, i64>,
    record: HashMap<String, String>,
}

impl Ledger {
    fn who(&self, task: &str) -> Who {
        let who = Who {
            id: task.to_string(),
            ..Default::default()
        };
        if self.record.is_empty() {
            return who;
        }
        who.with_record(&self.record)
    }

    /// `(n, lock, since)` of every wait entry.
    fn waits(&self) -> impl Iterator<Item = (u64, &str, i64)> {
        self.fields
            .iter()
            .filter_map(|(f, v)| match parse_field(f) {
                Some(('w', n, name)) => Some((n, name, *v)),
                _ => None,
            })
    }
}

impl Cycle {
    /// `a (app on host, pid p) waits for "L2" held by b (…) waits for "L1" held by a`.
    pub(crate) fn describe(&self) -> String {
        let mut out = String::new();
        for (i, t) in self.tasks.iter().enumerate() {
            let w = &t.who;
            let about = match (&w.app, &w.host, w.pid) {
                (Some(app), Some(host), Some(pid)) => format!("{app} on {host}, pid {pid}"),
                _ => "no record".to_string(),
            };
            if i == 0 {
                out.push_str(&format!("{} ({about})", w.id));
            } else {
                out.push_str(&format!(" ({about})"));
            }
            let next = &self.tasks[(i + 1) % self.tasks.len()].who;
            out.push_str(&format!(" waits for {:?} held by {}", t.waits_for, next.id));
        }
        out
    }

    fn members(&self) -> BTreeSet<String> {
        self.tasks.iter().map(|t| t.who.id.clone()).collect()
    }
}

/// Reads every ledger of `engine`'s deployment (`SCAN` on every primary of every
/// master) within `timeout` and returns the cycles of the wait-for graph (invariants 1,
/// 2).
pub(crate) async fn deadlocks(engine: &Engine, timeout: Duration) -> Deadlocks {
    let (masters, books) = (engine.masters(), &engine.settings().books);
    if !books.is_on() {
        return Deadlocks {
            unread: vec![BOOKS_OFF.to_string()],
            ..Default::default()
        };
    }
    let deadline = Instant::now() + timeout;
    let (uuids, mut unread) = scan_ledgers(masters, books, deadline).await;
    let mut ledgers = HashMap::new();
    for uuid in &uuids {
        if Instant::now() >= deadline {
            let left = uuids.len() - ledgers.len();
            unread.push(format!("the ledgers of {left} clients (out of time)"));
            break;
        }
        ledgers.insert(uuid.clone(), read_ledger(masters, books, uuid).await);
    }
    let mut graph = Graph::default();
    for (uuid, ledger) in &ledgers {
        for (n, name, _) in ledger.waits() {
            let task = format!("{uuid}:{n}");
            graph
                .waits
                .entry(task)
                .or_default()
                .insert(name.to_string());
        }
    }
    let locks: BTreeSet<String> = graph.waits.values().flatten().cloned().collect();
    for lock in locks {
        if Instant::now() >= deadline {
            break;
        }
        let holders = holder_tasks(engine, &lock).await;
        graph.holders.insert(lock, holders);
    }
    let cycles = graph.cycles().into_iter();
    Deadlocks {
        cycles: cycles.map(|c| cycle(c, &ledgers)).collect(),
        ledgers: ledgers.len(),
        unread,
    }
}

/// The client uuids of every ledger key (under `books`) on `masters`, and the servers
/// not fully scanned.
async fn scan_ledgers(
    masters: &Masters,
    books: &Books,
    deadline: Instant,
) -> (BTreeSet<String>, Vec<String>) {
    let mut uuids = BTreeSet::new();
    let mut unread = Vec::new();
    for m in masters.all() {
        for addr in m.link().primary_addrs() {
            match scan_node(m, books, &addr, deadline).await {
                Ok(keys) => uuids.extend(keys),
                Err(e) => {
                    tracing::debug!(target: "redlatch", node = %addr, error = %e,
                        "could not scan for ledgers");
                    unread.push(addr);
                }
            }
        }
    }
    (uuids, unread)
}

/// Client `uuid`'s ledger and record (under `books`), merged over every master of
/// `masters` that answers.
async fn read_ledger(masters: &Masters, books: &Books, uuid: &str) -> Ledger {
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(books.ledger(uuid));
    pipe.cmd("HGETALL").arg(books.record(uuid));
    let pipe = &pipe;
    let answers = fan_out(masters.all(), |m| async move {
        let v = m.link().send(Lane::Side, m.timeout(), Request::Pipe(pipe));
        m.decode::<(HashMap<String, i64>, HashMap<String, String>)>(v.await?)
    })
    .await;
    let mut out = Ledger::default();
    for (fields, record) in answers.into_iter().flatten() {
        out.fields.extend(fields);
        if out.record.is_empty() {
            out.record = record;
        }
    }
    out
}

/// The tasks holding `lock` (every kind's holders, as `engine` inspects it) on a
/// majority of the masters (invariant 4).
async fn holder_tasks(engine: &Engine, lock: &str) -> BTreeSet<String> {
    let answers = engine.inspect(lock).await;
    let mut masters: HashMap<String, usize> = HashMap::new();
    for st in answers.into_iter().filter_map(|a| a.state.ok()) {
        let tasks: BTreeSet<String> = (st.holders.into_iter())
            .filter_map(|(h, _)| task_of(&h))
            .collect();
        for task in tasks {
            *masters.entry(task).or_default() += 1;
        }
    }
    (masters.into_iter())
        .filter(|(_, on)| *on >= engine.masters().quorum())
        .map(|(task, _)| task)
        .collect()
}

impl Observe {
    /// A cycle through `wait`'s task, if its check finds one: what follows the lock it
    /// waits for from holder to ledger to lock, at most [`MAX_TASKS`] tasks.
    async fn cycle_of(&self, engine: &Engine, wait: &Wait) -> Option<Cycle> {
        let (masters, books) = (engine.masters(), &engine.settings().books);
        let me = engine.id().to_string();
        let start: BTreeSet<String> = task_ids(engine.holdings().table(), wait)
            .into_iter()
            .map(|n| format!("{me}:{n}"))
            .collect();
        let mut graph = Graph::default();
        for s in &start {
            graph
                .waits
                .entry(s.clone())
                .or_default()
                .insert(wait.name.to_string());
        }
        let mut ledgers: HashMap<String, Ledger> = HashMap::new();
        let mut todo = vec![wait.name.to_string()];
        while let Some(lock) = todo.pop() {
            if graph.holders.contains_key(&lock) || ledgers.len() >= MAX_TASKS {
                continue;
            }
            let holders = holder_tasks(engine, &lock).await;
            for task in &holders {
                let Some((uuid, n)) = split_holder(task) else {
                    continue;
                };
                if !ledgers.contains_key(uuid) {
                    let ledger = read_ledger(masters, books, uuid).await;
                    ledgers.insert(uuid.to_string(), ledger);
                }
                for (_, name, _) in ledgers[uuid].waits().filter(|(wn, ..)| *wn == n) {
                    graph
                        .waits
                        .entry(task.clone())
                        .or_default()
                        .insert(name.to_string());
                    todo.push(name.to_string());
                }
            }
            graph.holders.insert(lock, holders);
        }
        let steps = graph.cycle_through(&start)?;
        ledgers.entry(me.clone()).or_default();
        let mut found = cycle(steps, &ledgers);
        // This task's own wait is known here, whether or not its entry was read back.
        if let Some(t) = found.tasks.iter_mut().find(|t| start.contains(&t.who.id)) {
            t.waiting_since = Some(wait.since_ms);
            t.who = self.own_who(&t.who.id);
        }
        Some(found)
    }

    fn own_who(&self, task: &str) -> Who {
        let who = &self.who;
        Who {
            id: task.to_string(),
            host: Some(who.host.clone()),
            pid: Some(who.pid),
            app: Some(who.app.to_string()),
            version: Some(env!("CARGO_PKG_VERSION").to_string()),
            since: Some(who.since_ms),
            acquired: None,
        }
    }

    /// Deadlock detection while a call waits (invariant 3): writes its wait entry
    /// after [`DETECT_AFTER`], then checks every [`DETECT_EVERY`]; returns the error
    /// when this task is the youngest waiter of a cycle seen twice. Never returns
    /// otherwise (the wait it races ends it).
    pub(in crate::engine) async fn detect(&self, engine: &Engine, waiting: &mut Waiting) -> Error {
        tokio::time::sleep(DETECT_AFTER).await;
        waiting.written = true;
        self.flush_ledger(engine).await;
        let mut seen: Option<BTreeSet<String>> = None;
        loop {
            tokio::time::sleep(DETECT_EVERY).await;
            let Some(wait) = waiting.get() else {
                continue;
            };
            let Some(cycle) = self.cycle_of(engine, &wait).await else {
                seen = None;
                continue;
            };
            let members = cycle.members();
            if seen.as_ref() == Some(&members)
                && youngest_is_me(&cycle, &wait, &engine.id().to_string())
            {
                return Error::Deadlock {
                    name: wait.name.to_string(),
                    cycle: cycle.describe(),
                };
            }
            seen = Some(members);
        }
    }
}

/// The `n`s of `wait`'s task: its call's, and those of the holds its task took (in
/// `table`).
fn task_ids(table: &HoldTable, wait: &Wait) -> BTreeSet<u64> {
    let held = (table.all().into_iter())
        .filter(|h| !h.permit && h.context == wait.context)
        .filter_map(|h| split_holder(&h.holder).map(|(_, n)| n))
        .take(crate::engine::observe::ledger::TASK_IDS);
    let own = split_holder(&wait.holder).map(|(_, n)| n);
    held.chain(own).collect()
}

/// Whether the youngest waiter of `cycle` (latest waiting since, ties to the greater
/// task id; an unknown time counts as oldest) is `wait`'s task.
fn youngest_is_me(cycle: &Cycle, wait: &Wait, me: &str) -> bool {
    let youngest =
        (cycle.tasks.iter()).max_by_key(|t| (t.waiting_since.unwrap_or(i64::MIN), &t.who.id));
    youngest.is_some_and(|t| t.who.id.starts_with(me) && t.waiting_since == Some(wait.since_ms))
}

/// The steps of a cycle with what the ledgers say of each task.
fn cycle(steps: Vec<Step>, ledgers: &HashMap<String, Ledger>) -> Cycle {
    let last = steps.last().map(|(_, l)| l.clone()).unwrap_or_default();
    let mut holds = last;
    let mut tasks = Vec::new();
    for (task, lock) in steps {
        let (uuid, n) = split_holder(&task).unwrap_or(("", 0));
        let ledger = ledgers.get(uuid);
        let field = crate::engine::observe::ledger::wait_field(n, &lock);
        tasks.push(Task {
            who: ledger.map_or_else(
                || Who {
                    id: task.clone(),
                    ..Default::default()
                },
                |l| l.who(&task),
            ),
            holds: std::mem::replace(&mut holds, lock.clone()),
            waiting_since: ledger.and_then(|l| l.fields.get(&field).copied()),
            waits_for: lock,
        });
    }
    Cycle { tasks }
}

/// Every ledger key on the node `addr` of master `m`, by `SCAN` (never `KEYS`), until
/// `deadline`.
async fn scan_node(
    m: &Master,
    books: &Books,
    addr: &str,
    deadline: Instant,
) -> crate::error::Result<Vec<String>> {
    let pattern = books.ledger_pattern();
    let mut cursor = 0u64;
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::Timeout {
                addr: addr.to_string(),
                after: Duration::ZERO,
            });
        }
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000);
        let reply = m.link().send_to(
            addr,
            Lane::Side,
            left.min(m.timeout().max(Duration::from_secs(1))),
            Request::Cmd(&cmd),
        );
        let (next, keys): (u64, Vec<String>) = m.decode(reply.await?)?;
        out.extend(
            keys.iter()
                .filter_map(|k| books.ledger_owner(k))
                .map(str::to_string),
        );
        if next == 0 {
            return Ok(out);
        }
        cursor = next;
    }
}
