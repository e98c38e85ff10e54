//! Standard output for reports (`status`, `leader`, `unlock`, `revoke`): written whole,
//! and a closed pipe (`redlatch status x | head -1`) is not an error.

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
pub fn out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
