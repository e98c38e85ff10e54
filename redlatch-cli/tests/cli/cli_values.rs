//! `redlatch run GROUP --values V1,V2 -- CMD`: the faster multi-lock from the shell,
//! against a real redis-server: runners exclude each other on shared values only, a
//! bad value list is a usage error.

use crate::cli_util;
use redlatch_testkit as common;

use std::time::Duration;

use cli_util::{output, run_args, until_file, Bg, TempDir};
use common::{eventually, RedisServer};

#[test]
fn runners_exclude_each_other_on_shared_values_only() {
    let server = RedisServer::start();
    let dir = TempDir::new();
    let hold = run_args(
        "seats",
        &[&server],
        &["--values", "12A,12B"],
        &format!("touch \"$D/started\"; {}", until_file("stop", 60)),
    );
    let bg = Bg::start(&hold, &dir, "holder");
    assert!(eventually(Duration::from_secs(20), || dir
        .file("started")
        .exists()));
    // 12B is held: refused (the conflict exit code); nothing of 12C taken.
    output(
        &run_args(
            "seats",
            &[&server],
            &["--values", "12B,12C", "--wait", "0s"],
            "true",
        ),
        75,
    );
    let fields: i64 = server.cmd(&["HLEN", "seats"]);
    assert_eq!(fields, 6, "only the holder's two values");
    // Disjoint values of the same group run at once.
    output(
        &run_args(
            "seats",
            &[&server],
            &["--values", "12C,12D", "--wait", "0s"],
            "true",
        ),
        0,
    );
    std::fs::write(dir.file("stop"), "").unwrap();
    let ended = bg.wait(Duration::from_secs(30));
    assert!(ended.status.success(), "{}", ended.stderr);
    output(
        &run_args(
            "seats",
            &[&server],
            &["--values", "12B,12C", "--wait", "0s"],
            "true",
        ),
        0,
    );
    let left: i64 = server.cmd(&["EXISTS", "seats"]);
    assert_eq!(left, 0, "every runner released its values");
}

#[test]
fn a_repeated_value_is_a_usage_error() {
    let server = RedisServer::start();
    let out = output(
        &run_args("seats", &[&server], &["--values", "12A,12A"], "true"),
        64,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("repeats"), "{stderr}");
    let keys: i64 = server.dbsize();
    assert_eq!(keys, 0);
}
