//! Issue 11.2: no output of any `redlatch` command, and no library error or `Debug`,
//! shows the password of a Redis URL, whether it comes from `--redis` or from
//! REDLATCH_REDIS, and whatever goes wrong (bad password, wrong user, Redis down, a bad
//! URL, a key that is not a lock).

use crate::cli_util;
use redlatch_testkit as common;

use common::RedisServer;

const PASSWORD: &str = "Pa55-w0rd-that-must-not-show";

/// Every subcommand with `url`, by flag and by environment; stdout and stderr must not
/// contain the password, whatever the exit code.
fn assert_never_printed(url: &str, what: &str) {
    let commands: [&[&str]; 4] = [
        &["run", "secret:lock", "--wait", "1s", "--", "true"],
        &["status", "secret:lock"],
        &["status", "secret:lock", "--json"],
        &["unlock", "secret:lock", "--force"],
    ];
    for command in commands {
        let mut by_flag: Vec<String> = vec![command[0].to_string()];
        by_flag.extend(["--redis".to_string(), url.to_string()]);
        by_flag.extend(command[1..].iter().map(|s| s.to_string()));
        let by_env: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        for (args, env) in [(by_flag, None), (by_env, Some(url))] {
            let mut cmd = cli_util::redlatch(&args);
            cmd.env_remove("REDLATCH_REDIS");
            if let Some(url) = env {
                cmd.env("REDLATCH_REDIS", url);
            }
            let out = cmd
                .timeout(std::time::Duration::from_secs(60))
                .output()
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                !text.contains(PASSWORD),
                "{what}: `redlatch {args:?}` (env: {}) printed the password:\n{text}",
                env.is_some()
            );
        }
    }
}

/// A server that requires `password` (set after start: the harness pings without one).
fn protected(password: &str) -> RedisServer {
    let server = RedisServer::start();
    server.cmd::<String>(&["CONFIG", "SET", "requirepass", password]);
    server
}

#[test]
fn no_command_prints_the_password_whatever_fails() {
    let server = protected(PASSWORD);
    let port = server.port();
    // Works: the password is right.
    assert_never_printed(
        &format!("redis://:{PASSWORD}@127.0.0.1:{port}"),
        "right password",
    );
    // A key that is not a lock.
    let mut admin = common::conn::sync_conn(format!("redis://:{PASSWORD}@127.0.0.1:{port}"));
    redis::cmd("SET")
        .arg("secret:lock")
        .arg("x")
        .exec(&mut admin)
        .unwrap();
    assert_never_printed(
        &format!("redis://:{PASSWORD}@127.0.0.1:{port}"),
        "wrong type",
    );
    // The password of another user, or wrong.
    assert_never_printed(
        &format!("redis://alice:{PASSWORD}@127.0.0.1:{port}"),
        "no such user",
    );
    let wrong = protected("something-else");
    assert_never_printed(
        &format!("redis://:{PASSWORD}@127.0.0.1:{}", wrong.port()),
        "wrong password",
    );
    // Nobody listening.
    drop(wrong);
    assert_never_printed(&format!("redis://:{PASSWORD}@127.0.0.1:1"), "down");
    // Bad URLs that carry it.
    assert_never_printed(
        &format!("http://:{PASSWORD}@127.0.0.1:{port}"),
        "bad scheme",
    );
    assert_never_printed(&format!(":{PASSWORD}@127.0.0.1:{port}"), "no scheme");
    assert_never_printed(
        &format!("redis://:{PASSWORD}@127.0.0.1:notaport"),
        "bad port",
    );
}

#[test]
fn library_errors_and_debug_never_show_the_password() {
    let config = redlatch::Config::single(format!("redis://:{PASSWORD}@127.0.0.1:1"));
    assert!(!format!("{config:?}").contains(PASSWORD));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for url in [
        format!("redis://:{PASSWORD}@127.0.0.1:1"),
        format!("http://:{PASSWORD}@127.0.0.1:1"),
        format!("redis://:{PASSWORD}@127.0.0.1:notaport"),
    ] {
        let config = redlatch::Config::single(url.clone())
            .connect_timeout(std::time::Duration::from_millis(300));
        let err = runtime
            .block_on(redlatch::Client::connect(config))
            .unwrap_err();
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains(PASSWORD), "{url}: {text}");
        }
    }
}

/// A refused authentication (no password, a wrong one, an unknown user) exits 77 with
/// one short line naming the user and the master, not 69 with a page of pipeline errors.
#[test]
fn authentication_failures_exit_77_naming_the_user() {
    let server = protected(PASSWORD);
    let port = server.port();
    for (url, user) in [
        (format!("redis://127.0.0.1:{port}"), "default"),
        (
            format!("redis://:wrong-{PASSWORD}@127.0.0.1:{port}"),
            "default",
        ),
        (
            format!("redis://nobody:{PASSWORD}@127.0.0.1:{port}"),
            "nobody",
        ),
    ] {
        let args: Vec<String> = ["run", "auth:lock", "--redis", &url, "--", "true"]
            .map(String::from)
            .to_vec();
        let out = cli_util::output(&args, 77);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("authentication failed"), "{stderr}");
        assert!(stderr.contains(&format!("user {user:?}")), "{stderr}");
        assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
}
