//! Bringing your own Redis set-up (issue 26): a `redis::ConnectionInfo`, a
//! `redis::Client` or a deadpool-redis `Config` with an ACL user, a database and RESP3
//! configures the client once; `valkey://` URLs work; a wrong password is a typed
//! error that does not show the password.

use redlatch_testkit as common;

use common::RedisServer;
use redis::{IntoConnectionInfo, ProtocolVersion};
use redlatch::{Client, Config, Error};

/// An ACL user that may do everything (the point here is that the user is used).
fn acl_user(server: &RedisServer) -> (String, String) {
    let password = "p@ss:w/rd";
    let rule = format!(">{password}");
    server.cmd::<String>(&[
        "ACL", "SETUSER", "app", "reset", "on", &rule, "~*", "&*", "+@all",
    ]);
    // The default user may no longer run anything: only `app` can have done it.
    server.cmd::<String>(&["ACL", "SETUSER", "default", "-@all"]);
    ("app".into(), password.into())
}

fn info(server: &RedisServer, user: &str, password: &str) -> redis::ConnectionInfo {
    let base = format!("redis://127.0.0.1:{}", server.port());
    let info = base.into_connection_info().unwrap();
    let settings = info
        .redis_settings()
        .clone()
        .set_username(user)
        .set_password(password)
        .set_db(3)
        .set_protocol(ProtocolVersion::RESP3);
    info.set_redis_settings(settings)
}

/// Locks `name` through `config`, checks it landed in database 3 under the user's
/// connection, and unlocks.
async fn lock_in_db3(server: &RedisServer, config: Config, name: &str) {
    let client = Client::connect(config).await.unwrap();
    let guard = client.lock(name).lock().await.unwrap();
    let mut admin = common::conn::sync_conn(info(server, "app", "p@ss:w/rd"));
    let ty: String = redis::cmd("TYPE").arg(name).query(&mut admin).unwrap();
    assert_eq!(ty, "hash", "{name} is in database 3");
    let _: () = redis::cmd("SELECT").arg(0).query(&mut admin).unwrap();
    let ty: String = redis::cmd("TYPE").arg(name).query(&mut admin).unwrap();
    assert_eq!(ty, "none", "{name} is not in database 0");
    guard.unlock().await.unwrap();
    client.close(std::time::Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_connection_info_a_redis_client_and_a_deadpool_config_configure_the_client() {
    let server = RedisServer::start();
    let (user, password) = acl_user(&server);
    let info = info(&server, &user, &password);

    let config = Config::from_connection_info(&info).unwrap();
    assert!(!format!("{config:?}").contains("w/rd"), "{config:?}");
    lock_in_db3(&server, config, "from-info").await;

    let redis_client = redis::Client::open(info.clone()).unwrap();
    lock_in_db3(
        &server,
        Config::from_redis_client(&redis_client).unwrap(),
        "from-client",
    )
    .await;

    let mut pool = deadpool_redis::Config::from_connection_info(info.clone());
    pool.pool = Some(deadpool_redis::PoolConfig::new(3));
    let config = Config::from_deadpool(&pool).unwrap();
    assert_eq!(config.connections_per_master(), 3);
    lock_in_db3(&server, config, "from-deadpool").await;
}

#[tokio::test]
async fn valkey_urls_reach_the_server() {
    let server = RedisServer::start();
    let url = format!("valkey://127.0.0.1:{}/1", server.port());
    let client = Client::connect(Config::single(url)).await.unwrap();
    let guard = client.lock("valkey-scheme").lock().await.unwrap();
    assert!(client.lock("valkey-scheme").is_locked().await.unwrap());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_wrong_password_in_a_connection_info_is_typed_and_not_shown() {
    let server = RedisServer::start();
    let _ = acl_user(&server);
    let wrong = info(&server, "app", "not-the-s3cret");
    let err = Client::connect(Config::from_connection_info(&wrong).unwrap())
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains("not-the-s3cret"), "{text}");
    // Typed, permanent, naming the user (never the password).
    assert!(
        matches!(&err, Error::Authentication { user, .. } if user == "app"),
        "{err:?}"
    );
    assert!(err.is_permanent(), "{text}");
}

#[test]
fn a_deadpool_config_without_a_server_means_deadpools_default_server() {
    let empty = deadpool_redis::Config {
        connection: None,
        ..Default::default()
    };
    let config = Config::from_deadpool(&empty).unwrap();
    assert_eq!(config.urls(), ["redis://127.0.0.1:6379"]);
    let default = Config::from_deadpool(&deadpool_redis::Config::default()).unwrap();
    assert_eq!(default.urls(), config.urls());
}
