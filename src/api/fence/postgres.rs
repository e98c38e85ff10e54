//! The fence in PostgreSQL (cargo feature `postgres`): one statement inside the
//! caller's own transaction ([`fence`]) on a small table of ours ([`MIGRATION`],
//! [`migrate`]), so the check and the caller's writes commit or roll back together.
//!
//! The statement ([`STATEMENT`]) calls the function the migration creates,
//! `redlatch_fence(resource, lock, token, holder)`: it records the token if it is the
//! newest seen for the resource (equal passes: one hold writing twice) and otherwise
//! raises an error, which aborts the transaction: a stale holder's writes cannot
//! commit, whatever the caller does next. It locks the resource's row until the
//! transaction ends, so transactions fencing one resource take turns.
//!
//! Through tokio-postgres here; any other driver (sqlx, diesel, psql) runs the same
//! SQL: `SELECT redlatch_fence($1, $2, $3, $4)` with the resource, the lock's name, the
//! token as a `bigint` and the holder, and reads SQLSTATE `RLF01` (stale: the detail is
//! the newest token) and `RLF02` (another lock's token: the detail is that lock).

use tokio_postgres::error::SqlState;
use tokio_postgres::GenericClient;

use super::{token_of, HasToken, Token};
use crate::error::{Cause, Error, Result, StoreProblem};

/// The migration: the table `redlatch_fence` (resource, lock_name, token, holder,
/// updated_at) and the function `redlatch_fence(text, text, bigint, text)`, created in
/// the first schema of the search path. Idempotent; run it with [`migrate`] or your
/// own migration tool (as one transaction: `psql -1 -f`).
///
/// # Examples
/// ```
/// assert!(redlatch::fence::postgres::MIGRATION.contains("CREATE TABLE IF NOT EXISTS redlatch_fence"));
/// ```
pub const MIGRATION: &str = include_str!("postgres.sql");

/// The check, for any driver: `$1` the resource (text), `$2` the lock's name (text),
/// `$3` the token (bigint), `$4` the holder (text). Run inside the transaction whose
/// writes it guards; it returns the token, or fails with SQLSTATE `RLF01` / `RLF02`.
///
/// # Examples
/// See the example on [`fence`].
pub const STATEMENT: &str = "SELECT redlatch_fence($1, $2, $3, $4)";

/// The SQLSTATE of a stale token: the error's detail is the newest token seen.
pub const STALE: &str = "RLF01";
/// The SQLSTATE of a token of another lock: the error's detail is the fencing lock.
pub const OTHER_LOCK: &str = "RLF02";

/// Runs [`MIGRATION`] on `client`: creates the fence's table and function if missing
/// (concurrent calls wait for each other). Run it on a plain client (it is then its
/// own transaction), or inside a transaction of yours.
///
/// # Errors
/// [`Error::FenceStore`] when PostgreSQL refuses it (no `CREATE` permission on the
/// schema: [`StoreProblem::Refused`]; a read-only server; a lost connection).
///
/// # Examples
/// See the example on [`fence`].
pub async fn migrate(client: &impl GenericClient) -> Result<()> {
    client
        .batch_execute(MIGRATION)
        .await
        .map_err(|e| store_error(e, "the migration"))
}

/// Lets the transaction `tx` commit only if `token`'s token is the newest seen for
/// `resource`: one statement, recorded in the transaction, so the caller's writes in
/// `tx` and the check commit or roll back together. Returns the token recorded.
///
/// `token` is anything with a token ([`HasToken`]): a fenced lock's guard, a
/// leadership, a [`Token`]. Run it before or after the writes it guards, as long as
/// it is in the same transaction; once it failed, the transaction is aborted
/// (PostgreSQL refuses everything but a rollback), so none of its writes commit.
///
/// # Errors
/// * [`Error::Fenced`] when a newer token was seen for `resource`: it names the
///   resource, the token presented and the newest seen.
/// * [`Error::FenceMismatch`] when `resource` is fenced by another lock's tokens.
/// * [`Error::Unsupported`] for a guard without a token (a plain lock's),
///   [`Error::InvalidName`] for a resource name that is empty or over
///   [`MAX_RESOURCE_LEN`](super::MAX_RESOURCE_LEN) bytes, [`Error::InvalidCount`] for a
///   token of 0 or over `i64::MAX`: nothing is sent.
/// * [`Error::FenceStore`] when PostgreSQL fails the statement otherwise: no fence
///   (the migration has not run: [`StoreProblem::NotMigrated`]), a read-only
///   transaction or server ([`StoreProblem::ReadOnly`]), a serialization failure or
///   deadlock to retry the transaction for ([`StoreProblem::Conflict`]), a lost
///   connection ([`StoreProblem::Unavailable`]).
///
/// # Cancel safety
/// Dropping the future leaves the statement's outcome unknown: roll the transaction
/// back (dropping a tokio-postgres transaction does).
///
/// # Examples
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doc/redis.rs"));
/// # fn main() { doc_redis::run(|url| async move {
/// # // A private PostgreSQL server (skipped, said plainly, where none is installed).
/// # let Some(server) = redlatch_testkit::postgres::PgServer::start_or_skip("fence") else { return Ok(()) };
/// # let mut pg = server.connect().await;
/// # pg.batch_execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int); INSERT INTO accounts VALUES (7, 100)").await.unwrap();
/// use redlatch::fence::postgres;
/// use redlatch::{Client, Config, Error};
/// let client = Client::connect(Config::from_env()?).await?; // REDLATCH_REDIS
/// postgres::migrate(&pg).await?; // once, at deploy time
/// let lock = client.fenced_lock("ledger");
/// let stale = lock.lock().await?; // a holder that will pause past its lease
/// lock.force_unlock().await?; // (as its lease running out would)
/// let guard = lock.lock().await?; // the next holder: a newer token
///
/// let tx = pg.transaction().await.unwrap();
/// tx.execute("UPDATE accounts SET balance = balance - 10 WHERE id = 7", &[]).await.unwrap();
/// postgres::fence(&tx, "accounts:7", &guard).await?; // the newest token: passes
/// tx.commit().await.unwrap();
///
/// // The paused holder wakes up and writes: its transaction cannot commit.
/// let tx = pg.transaction().await.unwrap();
/// tx.execute("UPDATE accounts SET balance = 0 WHERE id = 7", &[]).await.unwrap();
/// match postgres::fence(&tx, "accounts:7", &stale).await {
///     Err(Error::Fenced { resource, presented, newest, .. }) => {
///         assert_eq!((resource.as_str(), Some(presented), Some(newest)),
///                    ("accounts:7", stale.fencing_token(), guard.fencing_token()));
///     }
///     other => panic!("expected Error::Fenced, got {other:?}"),
/// }
/// drop(tx); // rolled back (a commit would roll back too)
/// let row = pg.query_one("SELECT balance FROM accounts WHERE id = 7", &[]).await.unwrap();
/// assert_eq!(row.get::<_, i32>(0), 90);
/// guard.unlock().await?;
/// # Ok(()) }) }
/// ```
pub async fn fence(
    tx: &impl GenericClient,
    resource: &str,
    token: &(impl HasToken + ?Sized),
) -> Result<u64> {
    let token = token_of(token, resource)?;
    let value = token.checked(resource)?;
    let row = tx
        .query_one(
            STATEMENT,
            &[&resource, &token.lock(), &value, &token.holder()],
        )
        .await
        .map_err(|e| refusal(e, resource, &token))?;
    let recorded: i64 = row
        .try_get(0)
        .map_err(|e| store_error(e, "the fence's answer"))?;
    Ok(recorded as u64)
}

/// The typed error of a failed check: the function's own refusals, else the store's.
fn refusal(e: tokio_postgres::Error, resource: &str, token: &Token) -> Error {
    let db = e.as_db_error();
    let detail = db.and_then(|d| d.detail()).unwrap_or_default();
    match db.map(|d| d.code().code()) {
        Some(STALE) => match detail.parse() {
            Ok(newest) => Error::Fenced {
                resource: resource.to_string(),
                lock: token.lock().to_string(),
                presented: token.value(),
                newest,
            },
            Err(_) => store_error(e, "the fence"),
        },
        Some(OTHER_LOCK) => Error::FenceMismatch {
            resource: resource.to_string(),
            lock: token.lock().to_string(),
            fenced_by: detail.to_string(),
        },
        _ => store_error(e, "the fence"),
    }
}

/// An [`Error::FenceStore`] for `e`, met running `what`.
fn store_error(e: tokio_postgres::Error, what: &str) -> Error {
    let problem = match e.code() {
        Some(c) if *c == SqlState::UNDEFINED_FUNCTION || *c == SqlState::UNDEFINED_TABLE => {
            StoreProblem::NotMigrated
        }
        Some(c) if *c == SqlState::READ_ONLY_SQL_TRANSACTION => StoreProblem::ReadOnly,
        Some(c)
            if *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED =>
        {
            StoreProblem::Conflict
        }
        Some(c) if c.code().starts_with("08") || *c == SqlState::ADMIN_SHUTDOWN => {
            StoreProblem::Unavailable
        }
        None if e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) =>
        {
            StoreProblem::Unavailable
        }
        _ => StoreProblem::Refused,
    };
    let detail = match e.as_db_error() {
        Some(db) => format!("{what}: {} ({})", db.message(), db.code().code()),
        None => format!("{what}: {e}"),
    };
    Error::FenceStore {
        store: "postgres",
        problem,
        detail,
        source: Some(Cause::new(e)),
    }
}
