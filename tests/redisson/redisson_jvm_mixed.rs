//! Mixed contention on one name between the real Redisson client (Java threads of one JVM)
//! and redlatch (tasks on two clients, and a redlatch process), on a standalone Redis: every
//! section seen by one checker (redlatch-testkit/src/mixed.rs): zero overlaps, nobody starved, and
//! FIFO for the fair lock.

use redlatch_testkit as common;

use std::sync::Arc;
use std::time::Duration;

use common::jvm::{self, addr_of, Deployment, Jvm};
use common::mixed::{self, Checker, Kind, Run};
use common::RedisServer;
use redlatch::Client;

const WATCHDOG_MS: u64 = 5000;

#[tokio::test]
#[ignore = "the redlatch process of the mixed runs (REDLATCH_MIXED_HELPER)"]
async fn helper_mixed_participant() {
    mixed::helper_main().await;
}

async fn mixed_on_standalone(kind: Kind, version: &str) {
    let label = match kind {
        Kind::Plain => "RLock",
        Kind::Fair => "RFairLock",
    };
    let id = format!("redisson_jvm_mixed-{label}-{version}");
    jvm::clear_record(&id);
    let server = RedisServer::start();
    let opts = format!("watchdog={WATCHDOG_MS}");
    let java =
        Arc::new(Jvm::start(version, &Deployment::Single(addr_of(&server.url())), &opts).await);
    let spec = mixed::helper_spec(&format!("single|{}", server.url()), WATCHDOG_MS);
    let clients = vec![
        Client::connect(mixed::config_of(&spec)).await.unwrap(),
        Client::connect(mixed::config_of(&spec)).await.unwrap(),
    ];
    let name = "mixed";
    let queue = {
        let url = server.url();
        let key = format!("redisson_lock_queue:{{{name}}}");
        Arc::new(move || {
            let mut conn = common::conn::sync_conn(url.as_str());
            redis::cmd("LRANGE")
                .arg(&key)
                .arg(0)
                .arg(-1)
                .query::<Vec<String>>(&mut conn)
                .unwrap()
        }) as Arc<dyn Fn() -> Vec<String> + Send + Sync>
    };
    let checker = Checker::new(kind, name, (kind == Kind::Fair).then_some(queue));
    let cli = mixed::cli_binary();
    let run = Run {
        kind,
        name: name.to_string(),
        rounds: 8,
        hold: Duration::from_millis(3),
        java_threads: 3,
        redlatch_tasks: 3,
        processes: 1,
        cli: usize::from(cli.is_some()),
        deadline: Duration::from_secs(90),
    };
    let conn = [
        "--redis".to_string(),
        server.url(),
        "--watchdog".into(),
        "5s".into(),
    ];
    let report = mixed::run(
        &run,
        &java,
        &clients,
        Some((
            redlatch_testkit::test_name!("helper_mixed_participant").as_str(),
            &spec,
        )),
        cli.as_deref().map(|b| (b, &conn[..])),
        &checker,
    )
    .await;
    report.check(
        &run,
        &format!("Redisson {version} {label} mixed run"),
        &checker,
    );
    assert_eq!(report.errors, 0, "errors on a healthy standalone server");
    jvm::record(&id, label, version, "standalone", "pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_plain_lock_4_7() {
    if jvm::available() {
        mixed_on_standalone(Kind::Plain, jvm::V4).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fair_lock_4_7() {
    if jvm::available() {
        mixed_on_standalone(Kind::Fair, jvm::V4).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_plain_lock_3_27() {
    if jvm::available() {
        mixed_on_standalone(Kind::Plain, jvm::OLD).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fair_lock_3_52() {
    if jvm::available() {
        mixed_on_standalone(Kind::Fair, jvm::LAST3).await;
    }
}

/// The checker itself: an enter while someone is inside is an overlap, an exit by someone
/// not inside too, an entry other than the queue's head a FIFO violation (no JVM needed).
#[test]
fn the_checker_sees_an_overlap_and_a_queue_jump() {
    let queue =
        Arc::new(|| vec!["B-holder".to_string()]) as Arc<dyn Fn() -> Vec<String> + Send + Sync>;
    let checker = Checker::new(Kind::Fair, "x", Some(queue));
    checker.enter("A", "A-holder");
    checker.exit("A");
    assert!(checker.report(0, Duration::ZERO).overlaps.is_empty());
    checker.enter("C", "C-holder"); // the queue's head was B
    checker.enter("A", "A-holder"); // C is inside
    checker.exit("A");
    checker.exit("C"); // nobody is inside any more
    let report = checker.report(0, Duration::ZERO);
    assert_eq!(report.overlaps.len(), 2, "{:?}", report.overlaps);
    assert_eq!(
        report.fifo_violations.len(),
        2,
        "{:?}",
        report.fifo_violations
    );
    assert_eq!(report.fifo_checks, 2);
}
