//! Redisson compatibility: the fast path's fixtures (Redisson's own scripts in
//! tests/redisson/*.lua, replayed by EVAL) and the real Redisson client in a JVM
//! (`redisson_jvm*`, skipped without java and mvn unless REDLATCH_REQUIRE_JAVA=1). One
//! test binary, one module per former tests/NAME.rs; the harness is redlatch-testkit.
//! `cargo test --test redisson redisson_jvm_family -- --nocapture` runs one module.

mod fair_interop;
mod redisson_family_interop;
mod redisson_interop;
mod redisson_jvm;
mod redisson_jvm_cluster;
mod redisson_jvm_family;
mod redisson_jvm_family_methods;
mod redisson_jvm_fixtures;
mod redisson_jvm_group;
mod redisson_jvm_mixed;
mod redisson_jvm_nonreentrant_spin;
mod redisson_jvm_pubsub_modes;
mod redisson_jvm_read_wake;
mod redisson_jvm_sentinel;
mod shedlock_jvm;
