//! The plumbing the `redlatch` command-line tool shares with the repository's benchmark
//! harness (`redlatch-bench`, not published): the `--redis` / TLS arguments, durations
//! as people write them, and the exit codes. The tool itself is `src/main.rs`; this
//! library is not a stable API.

#![deny(unsafe_code)]

pub mod conn;
pub mod duration;
pub mod exit;
pub mod foreign;
