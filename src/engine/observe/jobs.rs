//! `Engine::job_scan`: the scheduled jobs of a deployment (`redlatch jobs`): every
//! job record (`redlatch_job:*`) and every job lock under a prefix, by `SCAN`.

use std::time::Duration;

use tokio::time::Instant;

use super::listing::Unread;
use super::{classify, scan};
use crate::engine::coordination::job::RECORD_PREFIX;
use crate::engine::Engine;

impl Engine {
    /// The lock keys of the jobs whose key matches the glob `pattern`: those with a
    /// record, and those held now under `locks` (a `SCAN MATCH` pattern such as
    /// `job-lock:default:*`); what could not be read within `within` is named.
    pub(crate) async fn job_scan(
        &self,
        pattern: &str,
        locks: &str,
        within: Duration,
    ) -> (Vec<String>, Vec<Unread>) {
        let deadline = Instant::now() + within;
        let records = format!("{RECORD_PREFIX}:*");
        let (found, unread) = scan::keys(self.masters().all(), &[&records, locks], deadline).await;
        let mut keys: Vec<String> = (found.into_iter())
            .map(|k| {
                let record = k
                    .strip_prefix(RECORD_PREFIX)
                    .and_then(|r| r.strip_prefix(':'));
                match record {
                    Some(rest) => classify::underived(rest).to_string(),
                    None => k,
                }
            })
            .filter(|k| classify::glob(pattern.as_bytes(), k.as_bytes()))
            .collect();
        keys.sort();
        keys.dedup();
        (keys, unread)
    }
}
