//! The `redlatch` command against real redis-server, Cluster and Sentinel processes: one
//! test binary, one module per former redlatch-cli/tests/NAME.rs, the binary's helpers
//! in `cli_util` and the workspace's harness in redlatch-testkit
//! (`use redlatch_testkit as common;`).
//!
//! Its tests share one process under `cargo test`: they change neither the environment
//! nor the working directory (each `redlatch` gets its own), and signal only the
//! processes they started.

mod cli;
mod cli_books;
mod cli_bounds;
mod cli_cluster;
mod cli_cluster_faults;
mod cli_conventions;
mod cli_elect;
mod cli_family;
mod cli_fence;
mod cli_job;
mod cli_latch;
mod cli_list;
mod cli_nonreentrant_spin;
mod cli_observe;
mod cli_revoke;
mod cli_secrets;
mod cli_sentinel;
mod cli_sentinel_faults;
mod cli_signals;
mod cli_status;
mod cli_tls;
mod cli_tty;
mod cli_util;
mod cli_values;
