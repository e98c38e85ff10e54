//! docs/fencing.md's shell job, run as written: `redlatch run --fenced NAME -c 'psql …
//! -v token="$REDLATCH_FENCING_TOKEN" …'` against a real PostgreSQL server and
//! redis-server. The job records its token with the fence's statement; once a newer
//! token was recorded, the same job exits with psql's 3 and writes nothing.

use redlatch_testkit as common;

use crate::cli_util::{redlatch, run_args, TempDir};
use common::postgres::PgServer;
use common::RedisServer;

const JOB: &str = r#"psql "$PGURL" -X -q -1 -v ON_ERROR_STOP=1 -v lock="$REDLATCH_LOCK" -v token="$REDLATCH_FENCING_TOKEN" -v holder="$REDLATCH_HOLDER" -f nightly.sql"#;

const NIGHTLY: &str = "INSERT INTO report VALUES (current_date, 42)
    ON CONFLICT (day) DO UPDATE SET total = EXCLUDED.total;
SELECT redlatch_fence('report:daily', :'lock', :token, :'holder');
";

#[tokio::test]
async fn a_fenced_shell_job_passes_its_token_to_psql_and_a_superseded_one_writes_nothing() {
    let Some(pg) = PgServer::start_or_skip("cli_fence") else {
        return;
    };
    if std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("cli_fence: SKIPPED, no psql on the PATH");
        return;
    }
    let db = pg.connect().await;
    redlatch::fence::postgres::migrate(&db).await.unwrap();
    db.batch_execute("CREATE TABLE report (day date PRIMARY KEY, total int NOT NULL)")
        .await
        .unwrap();
    let server = RedisServer::start();
    let dir = TempDir::new();
    std::fs::write(dir.file("nightly.sql"), NIGHTLY).unwrap();
    let args = run_args("nightly-report", &[&server], &["--fenced"], JOB);
    let run = || {
        redlatch(&args)
            .env("PGURL", pg.url())
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let issued: u64 = server.cmd(&["GET", "redisson_lock_token:{nightly-report}"]);
    let row = db
        .query_one("SELECT lock_name, token, holder FROM redlatch_fence", &[])
        .await
        .unwrap();
    let (lock, token, holder): (String, i64, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((lock.as_str(), token as u64), ("nightly-report", issued));
    assert!(!holder.is_empty());
    // A newer holder recorded a larger token and wrote its own total.
    db.batch_execute("UPDATE redlatch_fence SET token = token + 10; UPDATE report SET total = 7")
        .await
        .unwrap();
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("superseded"), "{stderr}");
    let total: i32 = db
        .query_one("SELECT total FROM report", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 7, "the superseded job wrote");
}
