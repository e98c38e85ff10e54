//! The CLI's log output: the library's `tracing` events on stderr, filtered by
//! `RUST_LOG` (default `redlatch=warn`, so a lost or at-risk lock is said). Coloured
//! only when stderr is a terminal and `NO_COLOR` is unset or empty (no-color.org).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the subscriber once, before anything logs.
pub fn install() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("redlatch=warn"));
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(std::io::stderr().is_terminal(), no_color))
        .with_target(false)
        .try_init();
}

/// Whether to colour: on a terminal, unless `NO_COLOR` says otherwise.
fn colour(terminal: bool, no_color: bool) -> bool {
    terminal && !no_color
}

#[cfg(test)]
mod tests {
    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(super::colour(true, false));
        assert!(!super::colour(true, true));
        assert!(!super::colour(false, false));
        assert!(!super::colour(false, true));
    }
}
