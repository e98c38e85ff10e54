//! A wall clock a test can move for one server process: a small preload library
//! (`shim.c`, compiled with `cc` once per test process) that adds the seconds written in
//! a file to `clock_gettime(CLOCK_REALTIME)`, `gettimeofday` and `time`, reading the file
//! at every call, so rewriting it jumps the process's wall clock at once (an NTP step;
//! the monotonic clocks are left alone). Used for Kleppmann's clock-jump case: a
//! master's key expiring early. (libfaketime cannot start inside Debian's redis-server,
//! which is linked with jemalloc: see shim.c.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// One process's movable clock; see the module docs.
pub struct FakeClock {
    lib: &'static Path,
    file: PathBuf,
}

/// The preload library, compiled once per test process; `None` without a C compiler.
fn library() -> Option<&'static Path> {
    static LIB: OnceLock<Option<PathBuf>> = OnceLock::new();
    LIB.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("redlatch-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let source = dir.join("shim.c");
        std::fs::write(&source, include_str!("shim.c")).ok()?;
        let lib = dir.join("libredlatch_clock.so");
        let built = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&lib)
            .arg(&source)
            .status()
            .ok()?;
        built.success().then_some(lib)
    })
    .as_deref()
}

impl FakeClock {
    /// A clock at offset 0, or `None` (saying so, naming `test`) without a C compiler
    /// to build the preload library, unless `REDLATCH_REQUIRE_POSTGRES=1` (CI, for the
    /// fencing tests) makes that a failure.
    pub fn new_or_skip(test: &str) -> Option<FakeClock> {
        let Some(lib) = library() else {
            if std::env::var("REDLATCH_REQUIRE_POSTGRES").as_deref() == Ok("1") {
                panic!("{test}: the clock shim is required (REDLATCH_REQUIRE_POSTGRES=1) but `cc` could not build it");
            }
            eprintln!("{test}: SKIPPED, no C compiler (`cc`) to build the clock shim");
            return None;
        };
        let file = std::env::temp_dir().join(format!(
            "redlatch-clock-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let clock = FakeClock { lib, file };
        clock.set_offset(0);
        Some(clock)
    }

    /// The environment of a process on this clock.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".into(), self.lib.to_string_lossy().into_owned()),
            (
                "REDLATCH_CLOCK_FILE".into(),
                self.file.to_string_lossy().into_owned(),
            ),
        ]
    }

    /// Puts the wall clock `secs` seconds ahead of the real one, at once for every
    /// clock call after this returns (the file is replaced whole).
    pub fn set_offset(&self, secs: i64) {
        let tmp = self.file.with_extension("tmp");
        std::fs::write(&tmp, format!("{secs:+}\n")).expect("write the clock file");
        std::fs::rename(&tmp, &self.file).expect("move the clock file in place");
    }
}

impl Drop for FakeClock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}
