#![cfg(feature = "tls")]
//! TLS (`rediss://`, cargo feature `tls`) against real redis-server processes that serve
//! TLS with certificates of a CA the test generates (redlatch-testkit/src/tls.rs). Each server
//! also keeps a plain port, used only by the harness (readiness, PUBSUB NUMSUB).

use redlatch_testkit as common;

use std::time::{Duration, Instant};

use common::tls::TestCerts;
use common::RedisServer;
use redlatch::{Client, Config, Error};

/// Bound on a connect attempt that must fail: the connect timeout plus slack.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const FAIL_WITHIN: Duration = Duration::from_secs(5);

fn trusting(server: &RedisServer, certs: &TestCerts) -> Config {
    Config::single(server.tls_url()).tls_root_ca_file(certs.ca())
}

/// Connects, expecting an error within [`FAIL_WITHIN`] (never a panic or a hang).
async fn connect_err(config: Config) -> Error {
    let config = config.connect_timeout(CONNECT_TIMEOUT);
    let started = Instant::now();
    let result = tokio::time::timeout(FAIL_WITHIN, Client::connect(config))
        .await
        .expect("Client::connect hung past the connect timeout");
    let Err(err) = result else {
        panic!("connect should have failed");
    };
    assert!(
        started.elapsed() < FAIL_WITHIN,
        "took {:?}",
        started.elapsed()
    );
    err
}

/// Display of the whole error chain and Debug of the error.
fn rendered(e: &Error) -> String {
    let mut text = format!("{e} / {e:?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(" / {s}"));
        source = s.source();
    }
    text
}

/// The base64 body of a PEM file (what must never show up in an error or a Debug).
fn pem_body(pem: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(pem)
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() > 16)
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn lock_unlock_and_a_pubsub_wakeup_over_tls_with_the_test_ca() {
    if common::tls::no_tls("lock unlock and a pubsub wakeup over tls with the test ca") {
        return;
    }
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs, false);
    let a = Client::connect(trusting(&server, &certs)).await.unwrap();
    // The other client gets the CA as in-memory PEM.
    let ca_pem = TestCerts::read(&certs.ca());
    let b = Client::connect(Config::single(server.tls_url()).tls_root_ca_pem(ca_pem))
        .await
        .unwrap();

    let guard = a.lock("tls-lock").lock().await.unwrap();
    let exists: i64 = server.cmd(&["EXISTS", "tls-lock"]);
    assert_eq!(exists, 1, "the lock is written through the TLS connection");
    assert!(b
        .lock("tls-lock")
        .try_lock(Duration::ZERO)
        .await
        .unwrap()
        .is_none());

    // A waiter on b subscribes over its TLS pub/sub connection and is woken by a's
    // unlock message long before the 30 s watchdog lease could run out.
    let waiter = common::subscribed_waiter(&server, b.lock("tls-lock")).await;
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let woke = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter was not woken by the unlock message")
        .unwrap();
    assert!(woke.duration_since(released) < Duration::from_secs(2));
    let exists: i64 = server.cmd(&["EXISTS", "tls-lock"]);
    assert_eq!(exists, 0);
}

#[tokio::test]
async fn redlock_over_three_tls_masters() {
    if common::tls::no_tls("redlock over three tls masters") {
        return;
    }
    let certs = TestCerts::generate();
    let servers: Vec<_> = (0..3)
        .map(|_| RedisServer::start_tls(&certs, true))
        .collect();
    // The master timeout of common::redlock::config: Redlock's 50 ms default is short
    // for a TLS handshake on a loaded machine, and this test is not about latency.
    let config = Config::redlock(servers.iter().map(|s| s.tls_url()))
        .master_timeout(Duration::from_millis(250))
        .tls_root_ca_file(certs.ca())
        .tls_client_cert_files(certs.client_cert(), certs.client_key());
    let client = Client::connect(config).await.unwrap();
    let guard = client.fair_lock("tls-redlock").lock().await.unwrap();
    // Granted by a majority; a master answering past the master timeout (a loaded
    // machine) runs the acquisition just after.
    let everywhere = || (servers.iter()).all(|s| s.cmd::<i64>(&["EXISTS", "tls-redlock"]) == 1);
    assert!(
        common::eventually_async(Duration::from_secs(5), everywhere).await,
        "the lock on every master"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn an_untrusted_server_certificate_is_a_typed_error_without_secrets() {
    if common::tls::no_tls("an untrusted server certificate is a typed error without secrets") {
        return;
    }
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs, false);
    let password = "s3cret-tls-password";
    server.cmd::<()>(&["CONFIG", "SET", "requirepass", password]);
    let url = server
        .tls_url()
        .replace("rediss://", &format!("rediss://:{password}@"));
    let key = TestCerts::read(&certs.client_key());
    let config = Config::single(url)
        .tls_root_ca_file(certs.other_ca())
        .tls_client_cert_pem(TestCerts::read(&certs.client_cert()), key.clone());

    let err = connect_err(config.clone()).await;
    let text = rendered(&err);
    assert!(matches!(err, Error::Redis { .. }), "{text}");
    assert!(
        !err.is_timeout(),
        "the handshake failed, it did not time out: {text}"
    );
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert!(!text.contains(password), "{text}");
    for line in pem_body(&key) {
        assert!(!text.contains(&line), "{text}");
    }
    // The configuration's Debug does not show the key either.
    let debug = format!("{config:?}");
    for line in pem_body(&key) {
        assert!(!debug.contains(&line), "{debug}");
    }

    // Without any CA setting the bundled public roots do not trust the test CA either.
    let err = connect_err(Config::single(server.tls_url())).await;
    assert!(matches!(err, Error::Redis { .. }), "{}", rendered(&err));
}

#[tokio::test]
async fn a_server_that_requires_client_certificates() {
    if common::tls::no_tls("a server that requires client certificates") {
        return;
    }
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs, true);

    let err = connect_err(trusting(&server, &certs)).await;
    assert!(
        matches!(err, Error::Redis { .. } | Error::Timeout { .. }),
        "{}",
        rendered(&err)
    );

    let from_files =
        trusting(&server, &certs).tls_client_cert_files(certs.client_cert(), certs.client_key());
    let client = Client::connect(from_files).await.unwrap();
    let guard = client.lock("tls-mtls").lock().await.unwrap();
    let exists: i64 = server.cmd(&["EXISTS", "tls-mtls"]);
    assert_eq!(exists, 1);
    guard.unlock().await.unwrap();

    let in_memory = trusting(&server, &certs).tls_client_cert_pem(
        TestCerts::read(&certs.client_cert()),
        TestCerts::read(&certs.client_key()),
    );
    let client = Client::connect(in_memory).await.unwrap();
    let guard = client.lock("tls-mtls").lock().await.unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn rediss_to_a_port_that_does_not_speak_tls_fails_within_the_connect_timeout() {
    if common::tls::no_tls(
        "rediss to a port that does not speak tls fails within the connect timeout",
    ) {
        return;
    }
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs, false);
    // The connect timeout plus a loaded machine's margin; the alternative, a wait on
    // TCP for a server that never speaks, does not end.
    let within = CONNECT_TIMEOUT + Duration::from_secs(4);

    // The server's plain port: it never answers the TLS ClientHello (it waits for the
    // end of an inline command), so the handshake is cut off by the connect timeout.
    let plain = server.url().replace("redis://", "rediss://");
    let started = Instant::now();
    let err = connect_err(Config::single(plain).tls_root_ca_file(certs.ca())).await;
    assert!(
        matches!(err, Error::Redis { .. } | Error::Timeout { .. }),
        "{}",
        rendered(&err)
    );
    assert!(started.elapsed() < within, "took {:?}", started.elapsed());

    // A listener that accepts and never says a word: the same, not a wait on TCP.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("rediss://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let started = Instant::now();
    let err = connect_err(Config::single(url).tls_root_ca_file(certs.ca())).await;
    assert!(err.is_timeout(), "{}", rendered(&err));
    assert!(started.elapsed() < within, "took {:?}", started.elapsed());
    drop(silent);
}

#[tokio::test]
async fn bad_tls_settings_are_config_errors_before_connecting() {
    let certs = TestCerts::generate();
    // Nothing listens there: every case must fail before any connection attempt.
    let url = "rediss://127.0.0.1:1";
    let config_err = |config: Config| async move {
        match connect_err(config).await {
            Error::Config { reason: msg, .. } => msg,
            other => panic!("expected a configuration error, got {other:?}"),
        }
    };

    let missing = certs.ca().with_file_name("missing.crt");
    let msg = config_err(Config::single(url).tls_root_ca_file(&missing)).await;
    assert!(msg.contains("missing.crt"), "{msg}");

    // A key where the CA should be: no certificate in it, and the key is not quoted.
    let key = TestCerts::read(&certs.client_key());
    let msg = config_err(Config::single(url).tls_root_ca_file(certs.client_key())).await;
    assert!(msg.contains("no CERTIFICATE"), "{msg}");
    let msg = config_err(Config::single(url).tls_root_ca_pem(b"not a pem".to_vec())).await;
    assert!(msg.contains("no CERTIFICATE"), "{msg}");

    // A key that does not belong to the certificate.
    let msg = config_err(
        Config::single(url).tls_client_cert_files(certs.client_cert(), certs.server_key()),
    )
    .await;
    assert!(msg.contains("client.crt"), "{msg}");
    let msg = config_err(
        Config::single(url).tls_client_cert_files(certs.client_cert(), certs.client_cert()),
    )
    .await;
    assert!(msg.contains("no PEM private key"), "{msg}");
    for line in pem_body(&key) {
        assert!(!msg.contains(&line), "{msg}");
    }

    // TLS settings with no rediss:// master: refused rather than silently unused.
    let msg = config_err(Config::single("redis://127.0.0.1:1").tls_root_ca_file(certs.ca())).await;
    assert!(msg.contains("rediss://"), "{msg}");
}
