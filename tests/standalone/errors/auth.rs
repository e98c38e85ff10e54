//! Who may connect: a password missing or wrong, an unknown user, a database the
//! server lacks, a server that is not Redis; each a typed, permanent, one-line error
//! naming its cause and never the password (part of `errors`).

use std::time::{Duration, Instant};

use redlatch::{Client, Config, Error};
use redlatch_testkit::RedisServer;

/// The password of [`protected`].
const PASSWORD: &str = "pw-never-shown";

/// A server that requires [`PASSWORD`] of user `default`, with the ACL user `locker`
/// (password [`PASSWORD`] too); set after start (the harness checks it without one).
fn protected() -> RedisServer {
    let server = RedisServer::start();
    server.cmd::<String>(&[
        "ACL",
        "SETUSER",
        "locker",
        "on",
        ">pw-never-shown",
        "~*",
        "&*",
        "+@all",
    ]);
    server.cmd::<String>(&["CONFIG", "SET", "requirepass", PASSWORD]);
    server
}

/// One short line (no pipeline of 49 script errors), without the password.
fn assert_short(err: &Error) {
    let text = err.to_string();
    assert!(
        !text.contains('\n') && text.len() < 200,
        "one short line: {text}"
    );
    for shown in [text, format!("{err:?}")] {
        assert!(
            !shown.contains(PASSWORD) && !shown.contains("wrong-pw"),
            "{shown}"
        );
    }
}

/// No password, a wrong one, an unknown user: each a typed, permanent authentication
/// error naming the user and the master, returned at once (it is not an outage).
#[tokio::test]
async fn authentication_failures_are_typed_permanent_and_name_the_user() {
    let server = protected();
    let port = server.port();
    for (url, user) in [
        (format!("redis://127.0.0.1:{port}"), "default"),
        (format!("redis://:wrong-pw@127.0.0.1:{port}"), "default"),
        (
            format!("redis://nobody:{PASSWORD}@127.0.0.1:{port}"),
            "nobody",
        ),
        (
            format!("redis://locker:wrong-pw@127.0.0.1:{port}"),
            "locker",
        ),
    ] {
        let started = Instant::now();
        let err = Client::connect(Config::single(url.clone()))
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        match &err {
            Error::Authentication { addr, user: u, .. } => {
                assert_eq!((addr.as_str(), u.as_str()), (server.addr().as_str(), user));
            }
            other => panic!(
                "{}: not an authentication error: {other:?}",
                redlatch::redact_url(&url)
            ),
        }
        assert!(err.is_permanent() && !err.is_unavailable(), "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("{user:?}")) && text.contains(&server.addr()),
            "{text}"
        );
        assert_short(&err);
    }
    let ok = format!("redis://locker:{PASSWORD}@127.0.0.1:{port}");
    let client = Client::connect(Config::single(ok)).await.unwrap();
    client
        .lock("auth")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

/// A database the server does not have: a configuration error naming it and the master.
#[tokio::test]
async fn a_database_out_of_range_is_a_configuration_error() {
    let server = RedisServer::start();
    let err = Client::connect(Config::single(format!("{}/99", server.url())))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("database 99") && text.contains(&server.addr()),
        "{text}"
    );
    assert!(err.is_permanent(), "{err}");
    assert_short(&err);
}

/// An address where an HTTP server answers: an error saying it does not speak RESP.
#[tokio::test]
async fn a_server_that_is_not_redis_is_named_as_such() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Answers the first few connections as an HTTP server answers a request it cannot
    // read, then stops (bounded: the test opens one or two).
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = stream.read(&mut [0; 1024]);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let err = Client::connect(Config::single(format!("redis://{addr}")))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotRedis { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("does not speak RESP") && text.contains(&addr.to_string()),
        "{text}"
    );
    assert!(err.is_permanent(), "{err}");
    assert_short(&err);
}
