//! What a client tells operators about itself: the app name of its client record and
//! deadlock detection (the engine's observe module keeps both).

use crate::api::config::Config;
use crate::error::{Error, Result};

/// Environment variable naming the app in the client record when
/// [`Config::app`] is not set.
pub const ENV_APP: &str = "REDLATCH_APP";

/// The longest app name accepted, in bytes.
pub const MAX_APP_LEN: usize = 128;

impl Config {
    /// The app name this client shows to operators (`redlatch status`, `redlatch list`,
    /// `redlatch deadlocks`) in its client record, beside its host, pid, library
    /// version and connection time. Default: `$REDLATCH_APP`, else the executable's
    /// file name. Checked by [`Client::connect`](crate::Client::connect): 1 to
    /// [`MAX_APP_LEN`] bytes, no control characters.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let config = Config::single("redis://127.0.0.1:7000").app("billing-nightly");
    /// assert_eq!(config.app_name(), "billing-nightly");
    /// ```
    pub fn app(mut self, name: impl Into<String>) -> Self {
        self.app = Some(name.into());
        self
    }

    /// Deadlock detection (default off, and then it costs nothing): a call that waits
    /// for a lock writes its wait at once and, while it waits, looks about once a
    /// second for a cycle of tasks through its own task (each waiting for a lock the
    /// next one holds). On a cycle seen twice in a row, the youngest waiter of the
    /// cycle fails with [`Error::Deadlock`], naming the
    /// cycle; the others go on. Only redlatch clients are seen: a Redisson holder has
    /// no ledger, so a cycle through it is not found.
    ///
    /// # Examples
    /// ```
    /// use redlatch::Config;
    /// let config = Config::single("redis://127.0.0.1:7000").deadlock_detection(true);
    /// assert!(config.detects_deadlocks());
    /// ```
    pub fn deadlock_detection(mut self, on: bool) -> Self {
        self.deadlock_detection = on;
        self
    }

    /// Whether [`deadlock_detection`](Self::deadlock_detection) is on.
    ///
    /// # Examples
    /// See the example on [`deadlock_detection`](Self::deadlock_detection).
    pub fn detects_deadlocks(&self) -> bool {
        self.deadlock_detection
    }

    /// The app name the client record shows: [`app`](Self::app), else
    /// `$REDLATCH_APP`, else the executable's file name (else `unknown`).
    ///
    /// # Examples
    /// See the example on [`app`](Self::app).
    pub fn app_name(&self) -> String {
        if let Some(app) = &self.app {
            return app.clone();
        }
        if let Some(app) = std::env::var(ENV_APP).ok().filter(|a| check(a).is_ok()) {
            return app;
        }
        let exe = std::env::current_exe().ok();
        let name = exe
            .as_deref()
            .and_then(|p| p.file_name()?.to_str().map(str::to_string));
        name.filter(|n| check(n).is_ok())
            .unwrap_or_else(|| "unknown".into())
    }

    /// Checks the app name given to [`app`](Self::app) or in `$REDLATCH_APP`.
    pub(crate) fn check_app(&self) -> Result<()> {
        if let Some(app) = &self.app {
            check(app).map_err(|why| Error::config(format!("app name {why}")))?;
        } else if let Ok(app) = std::env::var(ENV_APP) {
            check(&app).map_err(|why| Error::config(format!("{ENV_APP} {why}")))?;
        }
        Ok(())
    }
}

fn check(app: &str) -> std::result::Result<(), String> {
    if app.is_empty() {
        return Err("must not be empty".into());
    }
    if app.len() > MAX_APP_LEN {
        return Err(format!(
            "must be at most {MAX_APP_LEN} bytes, got {}",
            app.len()
        ));
    }
    if app.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_names_are_checked_with_a_reason() {
        let ok = Config::single("redis://127.0.0.1:7000").app("a");
        assert!(ok.check_app().is_ok());
        for (bad, why) in [
            ("", "empty"),
            ("a\nb", "control"),
            (&*"x".repeat(129), "at most 128"),
        ] {
            let err = Config::single("redis://127.0.0.1:7000")
                .app(bad)
                .validate()
                .unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{err:?}");
            assert!(
                err.to_string().contains("app name") && err.to_string().contains(why),
                "{err}"
            );
        }
        assert!(check(&"x".repeat(128)).is_ok());
    }
}
