//! The scheduled jobs of a deployment (`redlatch jobs`, `Engine::job_scan` in
//! facade/observe.rs): every job record (`redlatch_job:*`) and every job lock under a
//! prefix, by `SCAN`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::listing::Unread;
use super::{classify, scan};
use crate::engine::coordination::job::RECORD_PREFIX;
use crate::engine::masters::master::Master;

/// The lock keys of the jobs whose key matches the glob `pattern`, on `masters`: those
/// with a record, and those held now under `locks` (a `SCAN MATCH` pattern such as
/// `job-lock:default:*`); what could not be read within `within` is named.
pub(crate) async fn job_scan(
    masters: &[Arc<Master>],
    pattern: &str,
    locks: &str,
    within: Duration,
) -> (Vec<String>, Vec<Unread>) {
    let deadline = Instant::now() + within;
    let records = format!("{RECORD_PREFIX}:*");
    let (found, unread) = scan::keys(masters, &[&records, locks], deadline).await;
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
