//! The library against one redis-server at a time (a few tests also on the shared
//! cluster): every lock kind, the blocking API, errors, bounds of a single master,
//! examples and README. One test binary, one module per former tests/NAME.rs; the
//! harness is redlatch-testkit (`use redlatch_testkit as common;`).
//!
//! Its tests share one process under `cargo test`: none changes the environment, the
//! working directory or a process-wide tracing subscriber or metrics recorder
//! (tests/metrics.rs, which installs one, is a binary of its own), and a test that
//! reruns this binary as a child names itself with `redlatch_testkit::test_name!`.

mod acl;
mod acl_books;
mod acl_kinds;
mod at_risk;
mod blocking;
mod blocking_family;
mod config_sources;
mod durations;
mod election;
mod errors;
mod examples;
mod exclusion;
mod exclusion_in_task;
mod fair;
mod fair_api;
mod faster_multi_lock;
mod fence_kleppmann;
mod fence_postgres;
mod fence_s3;
mod fencing;
mod handover;
mod hardening;
mod harness;
mod jobs;
mod listing;
mod lost_reason;
mod multi_lock;
mod non_reentrant;
mod observe;
mod readme;
mod recovery;
mod reentrancy;
mod regressions;
mod rwlock;
mod scripts;
mod semaphore_methods;
mod semaphores;
mod simple_lock;
mod simple_peers;
mod spin_lock;
mod tls;
mod tracing_spans;
mod waiting;
mod wake_one;
mod watchdog;
