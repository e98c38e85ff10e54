//! The CLI's log output: the library's `tracing` events on stderr, filtered by
//! `RUST_LOG` (default `redlatch=warn`, so a lost or at-risk lock is said).

use tracing_subscriber::EnvFilter;

/// Installs the subscriber once, before anything logs.
pub fn install() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("redlatch=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
