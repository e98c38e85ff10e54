//! `redlatch` over TLS: --tls-ca / --tls-cert / --tls-key and their environment
//! variables against a redis-server that requires client certificates (cargo feature
//! `tls`), and the flags refused without the feature. A file of its own so that it
//! moves with the other CLI tests.

use crate::cli_util;
#[cfg(feature = "tls")]
use redlatch_testkit as common;

/// `redlatch ARGS` with no REDLATCH_TLS_* from the caller's environment.
fn redlatch(args: &[String]) -> assert_cmd::Command {
    let mut cmd = cli_util::redlatch(args);
    cmd.env_remove("REDLATCH_TLS_CA")
        .env_remove("REDLATCH_TLS_CERT")
        .env_remove("REDLATCH_TLS_KEY");
    cmd
}

fn stderr_of(cmd: &mut assert_cmd::Command, code: i32) -> String {
    let out = cmd.assert().code(code).get_output().clone();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[cfg(feature = "tls")]
#[test]
fn the_cli_runs_a_command_under_a_lock_over_tls() {
    if common::tls::no_tls("the cli runs a command under a lock over tls") {
        return;
    }
    use common::tls::TestCerts;
    use common::RedisServer;

    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs, true);
    let path = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let run = |url: String, ca: String| -> Vec<String> {
        vec![
            "run".into(),
            "tls-cli".into(),
            "--redis".into(),
            url,
            "--tls-ca".into(),
            ca,
            "--tls-cert".into(),
            path(certs.client_cert()),
            "--tls-key".into(),
            path(certs.client_key()),
            "--".into(),
            "sh".into(),
            "-c".into(),
            "echo \"held $REDLATCH_LOCK\"".into(),
        ]
    };

    let out = redlatch(&run(server.tls_url(), path(certs.ca())))
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "held tls-cli");
    let exists: i64 = server.cmd(&["EXISTS", "tls-cli"]);
    assert_eq!(exists, 0, "released after the command");

    // The wrong CA: Redis unavailable (69), and the URL's password is not printed.
    let password = "s3cret-cli-password";
    let with_password = server
        .tls_url()
        .replace("rediss://", &format!("rediss://:{password}@"));
    let stderr = stderr_of(
        &mut redlatch(&run(with_password.clone(), path(certs.other_ca()))),
        69,
    );
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(!stderr.contains(password), "{stderr}");

    // A CA file that does not exist: a usage error naming it, before connecting.
    let missing = path(certs.ca().with_file_name("missing-ca.crt"));
    let stderr = stderr_of(&mut redlatch(&run(with_password, missing)), 64);
    assert!(stderr.contains("missing-ca.crt"), "{stderr}");
    assert!(!stderr.contains(password), "{stderr}");

    // --tls-cert without --tls-key: refused by the argument parser.
    let half = vec![
        "status".to_string(),
        "tls-cli".into(),
        "--redis".into(),
        server.tls_url(),
        "--tls-cert".into(),
        path(certs.client_cert()),
    ];
    stderr_of(&mut redlatch(&half), 64);

    // The same settings from the environment.
    let status = vec![
        "status".to_string(),
        "tls-cli".into(),
        "--redis".into(),
        server.tls_url(),
    ];
    redlatch(&status)
        .env("REDLATCH_TLS_CA", certs.ca())
        .env("REDLATCH_TLS_CERT", certs.client_cert())
        .env("REDLATCH_TLS_KEY", certs.client_key())
        .assert()
        .code(1); // read over TLS: the lock is free
}

#[cfg(not(feature = "tls"))]
#[test]
fn without_the_tls_feature_the_tls_flags_are_a_usage_error() {
    let args: Vec<String> = ["status", "x", "--redis", "redis://127.0.0.1:1", "--tls-ca"]
        .iter()
        .map(|s| s.to_string())
        .chain([std::env::temp_dir().join("ca.crt").display().to_string()])
        .collect();
    let stderr = stderr_of(&mut redlatch(&args), 64);
    assert!(stderr.contains("tls"), "{stderr}");
}
