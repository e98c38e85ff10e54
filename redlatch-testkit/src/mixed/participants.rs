//! The participants of a mixed run ([`super::run`]): Java threads, redlatch tasks,
//! child processes and CLI runners, each a task that takes its rounds of the lock and
//! tells the checker when it enters and leaves.

use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redlatch::Client;
use tokio::task::JoinHandle;

use super::{cli_participant, drive_child, Checker, Kind, Run};
use crate::jvm::{Jvm, Outcome};

/// Java threads on `jvm`, each locking and unlocking through Redisson.
pub(super) fn java(
    run: &Run,
    jvm: &Arc<Jvm>,
    checker: &Checker,
    errors: &Arc<Mutex<usize>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for t in 0..run.java_threads {
        let (jvm, checker, errors) = (jvm.clone(), checker.clone(), errors.clone());
        let (kind, name, rounds, hold) = (run.kind, run.name.clone(), run.rounds, run.hold);
        tasks.push(tokio::spawn(async move {
            let thread = format!("J{t}");
            let holder = jvm.holder(&thread).await;
            let mut done = 0;
            while done < rounds {
                let r = jvm
                    .call(&thread, &format!("lock {} {name}", kind.java()))
                    .await;
                if r.outcome != Outcome::Ok {
                    *errors.lock().unwrap() += 1;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                checker.enter(&thread, &holder);
                tokio::time::sleep(hold).await;
                checker.exit(&thread);
                let r = jvm
                    .call(&thread, &format!("unlock {} {name}", kind.java()))
                    .await;
                if r.outcome != Outcome::Ok {
                    *errors.lock().unwrap() += 1;
                }
                done += 1;
            }
        }));
    }
    tasks
}

/// redlatch tasks, spread over `clients`.
pub(super) fn redlatch(
    run: &Run,
    clients: &[Client],
    checker: &Checker,
    errors: &Arc<Mutex<usize>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for t in 0..run.redlatch_tasks {
        let client = clients[t % clients.len()].clone();
        let (checker, errors) = (checker.clone(), errors.clone());
        let (kind, name, rounds, hold) = (run.kind, run.name.clone(), run.rounds, run.hold);
        tasks.push(tokio::spawn(async move {
            let who = format!("R{t}");
            let lock = match kind {
                Kind::Plain => client.lock(&name),
                Kind::Fair => client.fair_lock(&name),
            };
            let mut done = 0;
            while done < rounds {
                let guard = match lock.lock().await {
                    Ok(g) => g,
                    Err(_) => {
                        *errors.lock().unwrap() += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                checker.enter(&who, guard.holder());
                tokio::time::sleep(hold).await;
                checker.exit(&who);
                if guard.unlock().await.is_err() {
                    *errors.lock().unwrap() += 1;
                }
                done += 1;
            }
        }));
    }
    tasks
}

/// Child processes started from `helper` (this binary's helper test and its spec), each
/// driven by a blocking task; the children are returned to be killed.
pub(super) fn processes(
    run: &Run,
    helper: Option<(&str, &str)>,
    checker: &Checker,
) -> (Vec<Child>, Vec<JoinHandle<()>>) {
    let mut tasks = Vec::new();
    let mut children = Vec::new();
    if let Some((test, spec)) = helper {
        for p in 0..run.processes {
            let (checker, name) = (checker.clone(), run.name.clone());
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", test, "--ignored", "--nocapture"])
                .env(
                    "REDLATCH_MIXED_HELPER",
                    format!(
                        "{}|{name}|{}|{}|{spec}",
                        match run.kind {
                            Kind::Plain => "plain",
                            Kind::Fair => "fair",
                        },
                        run.rounds,
                        run.hold.as_millis()
                    ),
                )
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            let stdout = child.stdout.take().unwrap();
            children.push(child);
            let who = format!("P{p}");
            tasks.push(tokio::task::spawn_blocking(move || {
                drive_child(&who, stdin, BufReader::new(stdout), &checker)
            }));
        }
    }
    (children, tasks)
}

/// CLI runners of `cli` (its binary and connection arguments).
pub(super) fn cli(
    run: &Run,
    cli: Option<(&Path, &[String])>,
    checker: &Checker,
    errors: &Arc<Mutex<usize>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    if let Some((binary, conn)) = cli {
        for c in 0..run.cli {
            let (checker, errors) = (checker.clone(), errors.clone());
            let (binary, conn) = (binary.to_path_buf(), conn.to_vec());
            let (kind, name, rounds, hold) = (run.kind, run.name.clone(), run.rounds, run.hold);
            tasks.push(tokio::task::spawn_blocking(move || {
                cli_participant(
                    &format!("C{c}"),
                    &binary,
                    &conn,
                    kind,
                    &name,
                    rounds,
                    hold,
                    &checker,
                    &errors,
                )
            }));
        }
    }
    tasks
}
