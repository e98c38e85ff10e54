//! The PostgreSQL fence (redlatch::fence::postgres, feature `postgres`) against a real
//! PostgreSQL server the harness starts (redlatch_testkit::postgres) and real fenced
//! locks on a redis-server: the statement, its row lock, and every refusal typed with
//! nothing of the refused transaction committed.

use redlatch_testkit as common;

use std::time::Duration;

use common::postgres::PgServer;
use common::RedisServer;
use redlatch::fence::postgres::{self, fence};
use redlatch::fence::{HasToken, Token};
use redlatch::{Client, Config, Error, StoreProblem};

/// A PostgreSQL server with the fence migrated and a one-row table `account`
/// (id 1, balance 100); `None` when PostgreSQL is missing (locally).
async fn database(test: &str) -> Option<(PgServer, tokio_postgres::Client)> {
    let pg = PgServer::start_or_skip(test)?;
    let db = pg.connect().await;
    postgres::migrate(&db).await.unwrap();
    db.batch_execute(
        "CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL, by_token bigint);
         INSERT INTO account VALUES (1, 100, NULL);",
    )
    .await
    .unwrap();
    Some((pg, db))
}

/// One transaction: the balance set to `balance` and the fence checked for `token`.
async fn write(
    db: &mut tokio_postgres::Client,
    balance: i32,
    token: &impl HasToken,
) -> Result<(), Error> {
    let tx = db.transaction().await.unwrap();
    let t = token.token().map(|t| t.value() as i64);
    tx.execute(
        "UPDATE account SET balance = $1, by_token = $2 WHERE id = 1",
        &[&balance, &t],
    )
    .await
    .unwrap();
    fence(&tx, "account:1", token).await?;
    tx.commit().await.unwrap();
    Ok(())
}

async fn balance(db: &tokio_postgres::Client) -> i32 {
    db.query_one("SELECT balance FROM account WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn the_newest_or_an_equal_token_commits_and_an_older_one_is_refused_typed() {
    let Some((_pg, mut db)) = database("fence_postgres::newest").await else {
        return;
    };
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    // Run twice: the migration is idempotent.
    postgres::migrate(&db).await.unwrap();
    let lock = client.fenced_lock("ledger");
    let first = lock.lock().await.unwrap();
    let old = first.token().unwrap();
    first.unlock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let new = second.token().unwrap();
    assert!(new.value() > old.value());

    write(&mut db, 110, &second).await.unwrap();
    // The same hold writes twice: equal passes.
    write(&mut db, 120, &second).await.unwrap();
    let row = db
        .query_one(
            "SELECT lock_name, token, holder FROM redlatch_fence WHERE resource = 'account:1'",
            &[],
        )
        .await
        .unwrap();
    let (lock_name, token, holder): (String, i64, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((lock_name.as_str(), token as u64), ("ledger", new.value()));
    assert_eq!(holder, second.holder());

    match write(&mut db, 999, &old).await {
        Err(Error::Fenced {
            resource,
            lock,
            presented,
            newest,
        }) => {
            assert_eq!((resource.as_str(), lock.as_str()), ("account:1", "ledger"));
            assert_eq!((presented, newest), (old.value(), new.value()));
        }
        other => panic!("expected Error::Fenced, got {other:?}"),
    }
    assert_eq!(balance(&db).await, 120, "the stale write committed");
    let e = write(&mut db, 999, &old).await.unwrap_err();
    assert!(
        e.is_fenced() && e.is_permanent() && !e.is_unavailable(),
        "{e}"
    );
    assert!(e.to_string().contains("superseded"), "{e}");
    // The same token from another holder is a token handed out twice: refused.
    let twin = new.clone().with_holder("another holder");
    match write(&mut db, 999, &twin).await {
        Err(Error::Fenced {
            presented, newest, ..
        }) => assert_eq!(presented, newest),
        other => panic!("expected Error::Fenced for a repeated token, got {other:?}"),
    }
    assert_eq!(balance(&db).await, 120);
    second.unlock().await.unwrap();
}

#[tokio::test]
async fn a_refusal_aborts_the_transaction_so_even_a_commit_writes_nothing() {
    let Some((_pg, mut db)) = database("fence_postgres::aborts").await else {
        return;
    };
    write(&mut db, 150, &Token::new("ledger", 7)).await.unwrap();
    let tx = db.transaction().await.unwrap();
    tx.execute("UPDATE account SET balance = 0 WHERE id = 1", &[])
        .await
        .unwrap();
    let e = fence(&tx, "account:1", &Token::new("ledger", 6))
        .await
        .unwrap_err();
    assert!(e.is_fenced(), "{e}");
    // PostgreSQL takes nothing more in the transaction, and its COMMIT rolls back.
    let after = tx
        .execute("UPDATE account SET balance = 1 WHERE id = 1", &[])
        .await
        .unwrap_err();
    assert_eq!(
        after.code(),
        Some(&tokio_postgres::error::SqlState::IN_FAILED_SQL_TRANSACTION)
    );
    let _ = tx.commit().await;
    assert_eq!(balance(&db).await, 150);
    // The fence kept the newest token.
    let newest: i64 = db
        .query_one(
            "SELECT token FROM redlatch_fence WHERE resource = 'account:1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(newest, 7);
}

#[tokio::test]
async fn transactions_fencing_one_resource_take_turns_on_its_row() {
    let Some((pg, mut db)) = database("fence_postgres::turns").await else {
        return;
    };
    let mut other = pg.connect().await;
    // The newer token's transaction checks first and has not committed yet.
    let newer = db.transaction().await.unwrap();
    newer
        .execute("UPDATE account SET balance = 200 WHERE id = 1", &[])
        .await
        .unwrap();
    fence(&newer, "account:1", &Token::new("ledger", 9))
        .await
        .unwrap();
    let older = tokio::spawn(async move {
        let tx = other.transaction().await.unwrap();
        let r = fence(&tx, "account:1", &Token::new("ledger", 8)).await;
        if r.is_ok() {
            tx.execute("UPDATE account SET balance = 1 WHERE id = 1", &[])
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
        r
    });
    // The older one waits on the fence's row lock...
    let watcher = pg.connect().await;
    let waiting = || async {
        let n: i64 = watcher
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        n == 1
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !waiting().await {
        assert!(
            std::time::Instant::now() < deadline,
            "the older check never waited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!older.is_finished());
    // ... and, once the newer commits, reads its token and is refused.
    newer.commit().await.unwrap();
    match older.await.unwrap() {
        Err(Error::Fenced {
            presented: 8,
            newest: 9,
            ..
        }) => {}
        other => panic!("expected Fenced 8 < 9, got {other:?}"),
    }
    assert_eq!(balance(&db).await, 200);
}

#[tokio::test]
async fn bad_tokens_and_resources_are_refused_typed_before_anything_is_sent() {
    let Some((_pg, mut db)) = database("fence_postgres::bad_input").await else {
        return;
    };
    let server = RedisServer::start();
    let client = Client::connect(Config::single(server.url())).await.unwrap();
    let plain = client.lock("ledger").lock().await.unwrap();
    let e = write(&mut db, 1, &plain).await.unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { .. }) && e.to_string().contains("account:1"),
        "{e}"
    );
    plain.unlock().await.unwrap();
    for bad in [0, u64::MAX, i64::MAX as u64 + 1] {
        let e = write(&mut db, 1, &Token::new("ledger", bad))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidCount(_)), "{bad}: {e}");
    }
    let e = write(&mut db, 1, &Token::new("", 5)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidName(_)), "{e}");
    let tx = db.transaction().await.unwrap();
    for resource in [
        String::new(),
        "r".repeat(redlatch::fence::MAX_RESOURCE_LEN + 1),
    ] {
        let e = fence(&tx, &resource, &Token::new("ledger", 5))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::InvalidName(_)), "{e}");
    }
    // Nothing was sent: the transaction is still usable.
    tx.execute("UPDATE account SET balance = 5 WHERE id = 1", &[])
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let untouched: i64 = db
        .query_one("SELECT count(*) FROM redlatch_fence", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!((untouched, balance(&db).await), (0, 100));
}

#[tokio::test]
async fn a_token_of_another_lock_is_refused_and_names_the_fencing_lock() {
    let Some((_pg, mut db)) = database("fence_postgres::other_lock").await else {
        return;
    };
    write(&mut db, 300, &Token::new("ledger", 3)).await.unwrap();
    // A larger token, but of another lock's counter: not comparable.
    match write(&mut db, 1, &Token::new("payroll", 1000)).await {
        Err(Error::FenceMismatch {
            resource,
            lock,
            fenced_by,
        }) => {
            assert_eq!(
                (resource.as_str(), lock.as_str(), fenced_by.as_str()),
                ("account:1", "payroll", "ledger")
            );
        }
        other => panic!("expected FenceMismatch, got {other:?}"),
    }
    assert_eq!(balance(&db).await, 300);
}

#[tokio::test]
async fn a_missing_fence_a_read_only_transaction_and_a_down_server_are_typed() {
    let Some(pg) = PgServer::start_or_skip("fence_postgres::store_errors") else {
        return;
    };
    let mut db = pg.connect().await;
    db.batch_execute("CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL, by_token bigint); INSERT INTO account VALUES (1, 100, NULL);")
        .await
        .unwrap();
    let token = Token::new("ledger", 4);
    let problem = |e: Error| match e {
        Error::FenceStore {
            store: "postgres",
            problem,
            ..
        } => problem,
        other => panic!("expected FenceStore, got {other:?}"),
    };
    // No migration: permanent, names the remedy; the update did not commit.
    let e = write(&mut db, 1, &token).await.unwrap_err();
    assert!(
        e.is_permanent() && e.to_string().contains("migration"),
        "{e}"
    );
    assert_eq!(problem(e), StoreProblem::NotMigrated);
    assert_eq!(balance(&db).await, 100);
    // The function without its table (dropped by hand): the same.
    postgres::migrate(&db).await.unwrap();
    db.batch_execute("DROP TABLE redlatch_fence").await.unwrap();
    assert_eq!(
        problem(write(&mut db, 1, &token).await.unwrap_err()),
        StoreProblem::NotMigrated
    );
    postgres::migrate(&db).await.unwrap();
    // A read-only transaction (a standby answers the same).
    let tx = db
        .build_transaction()
        .read_only(true)
        .start()
        .await
        .unwrap();
    let e = fence(&tx, "account:1", &token).await.unwrap_err();
    assert!(e.is_unavailable() && !e.is_permanent(), "{e}");
    assert_eq!(problem(e), StoreProblem::ReadOnly);
    tx.rollback().await.unwrap();
    // The server stops while a transaction is open.
    let tx = db.transaction().await.unwrap();
    tx.execute("UPDATE account SET balance = 7 WHERE id = 1", &[])
        .await
        .unwrap();
    pg.stop();
    let e = fence(&tx, "account:1", &token).await.unwrap_err();
    assert!(e.is_unavailable(), "{e}");
    assert_eq!(problem(e), StoreProblem::Unavailable);
}

#[tokio::test]
async fn a_lost_lock_is_refused_only_once_a_newer_holder_fenced() {
    let Some((_pg, mut db)) = database("fence_postgres::lost").await else {
        return;
    };
    let server = RedisServer::start();
    // A 3 s watchdog: renewals every second find the lock gone.
    let short = Config::single(server.url()).watchdog_timeout(Duration::from_secs(3));
    let (a, b) = (
        Client::connect(short).await.unwrap(),
        Client::connect(Config::single(server.url())).await.unwrap(),
    );
    let first = a.fenced_lock("ledger").lock().await.unwrap();
    write(&mut db, 101, &first).await.unwrap();
    // An operator breaks the lock: the guard knows it lost it, but the resource has seen
    // no newer token, so the write still passes: the resource decides, not the client.
    assert!(b.fenced_lock("ledger").force_unlock().await.unwrap());
    // Heard at its next renewal at the latest (a third of the 30 s watchdog timeout),
    // with room for a loaded machine.
    assert!(
        tokio::time::timeout(Duration::from_secs(25), first.lost().cancelled())
            .await
            .is_ok()
    );
    write(&mut db, 102, &first).await.unwrap();
    let second = b.fenced_lock("ledger").lock().await.unwrap();
    write(&mut db, 200, &second).await.unwrap();
    let e = write(&mut db, 103, &first).await.unwrap_err();
    assert!(e.is_fenced(), "{e}");
    assert_eq!(balance(&db).await, 200);
    second.unlock().await.unwrap();
}
