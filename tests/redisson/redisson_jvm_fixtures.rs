//! The fast path's fixtures (tests/redisson/*.lua, Redisson's scripts replayed by EVAL in
//! redisson_interop.rs, redisson_family_interop.rs and fair_interop.rs) are the scripts the
//! real Redisson 4.7 sends: each fixture's body, whitespace aside, is one of the string
//! constants of Redisson's classes (read from the jar with `javap`, part of the JDK).

use redlatch_testkit as common;

use std::process::Command;

use common::jvm;

const CLASSES: &[&str] = &[
    "org.redisson.RedissonLock",
    "org.redisson.RedissonBaseLock",
    "org.redisson.RedissonFairLock",
    "org.redisson.RedissonReadLock",
    "org.redisson.RedissonWriteLock",
    "org.redisson.RedissonSemaphore",
    "org.redisson.RedissonPermitExpirableSemaphore",
    "org.redisson.RedissonCountDownLatch",
];

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn fixtures_are_redisson_4_7s_scripts() {
    if !jvm::available() {
        return;
    }
    let cp = jvm::classpath(jvm::V4);
    let jar = cp
        .split(':')
        .find(|p| p.ends_with("redisson-4.7.0.jar"))
        .expect("redisson-4.7.0.jar on the driver's classpath");
    let out = Command::new("javap")
        .args(["-v", "-cp", jar])
        .args(CLASSES)
        .output()
        .expect("javap (JDK) on the PATH");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Constant-pool lines: `#12 = String #34 // <the string, quotes escaped>`.
    let constants: Vec<String> = text
        .lines()
        .filter(|l| l.contains("= String"))
        .filter_map(|l| l.split_once("// "))
        .map(|(_, s)| squeeze(&s.replace("\\'", "'")))
        .collect();
    assert!(
        constants.len() > 20,
        "too few constants read: {}",
        constants.len()
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redisson");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "lua") {
            continue;
        }
        let body: String = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        let body = squeeze(&body);
        assert!(
            constants
                .iter()
                .any(|c| *c == body || c.trim_end_matches(';') == body.trim_end_matches(';')),
            "{} is not a script of Redisson 4.7",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 16, "only {checked} fixtures found");
}
