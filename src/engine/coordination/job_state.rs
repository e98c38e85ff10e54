//! Reading a scheduled job's state for operators (`redlatch jobs`, `Job::state`): its
//! lock (who runs it now) and its record (the last completed tick, the last run).
//! Under Redlock each master keeps its own record: the one with the most runs counts.

use std::collections::HashMap;

use redis::Value;

use crate::engine::kinds::inspect::text;
use crate::engine::masters::master::Master;
use crate::engine::masters::quorum::{answers, fan_out};
use crate::engine::masters::replies::typed;
use crate::engine::masters::Masters;
use crate::error::{Error, Result};

/// What one master holds of a job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct JobState {
    /// The lock's value, while a run (ours or ShedLock's) holds it.
    pub(crate) value: Option<String>,
    /// The lock's lease left in ms (-1: no expiry).
    pub(crate) pttl_ms: Option<i64>,
    /// The record's fields (job_acquire.lua, job_release.lua).
    pub(crate) record: HashMap<String, String>,
}

impl JobState {
    /// A record field as a number.
    pub(crate) fn num(&self, field: &str) -> Option<i64> {
        self.record.get(field).and_then(|v| v.parse().ok())
    }
}

/// One master's state of the job `key` with record `record`.
async fn read(m: &Master, key: &str, record: &str) -> Result<JobState> {
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(record);
    pipe.cmd("TYPE").arg(key);
    pipe.cmd("PTTL").arg(key);
    let v = m.pipe(&pipe).await.map_err(|e| typed(record, e))?;
    let Value::Array(parts) = v else {
        return Err(crate::engine::masters::replies::protocol(
            m.addr(),
            "job state",
            &v,
        ));
    };
    let mut st = JobState::default();
    if let Some(Value::Array(kv) | Value::Set(kv)) = parts.first() {
        for pair in kv.chunks(2) {
            if let [k, v] = pair {
                st.record
                    .insert(text(k).unwrap_or_default(), text(v).unwrap_or_default());
            }
        }
    }
    if let Some(Value::Map(kv)) = parts.first() {
        for (k, v) in kv {
            st.record
                .insert(text(k).unwrap_or_default(), text(v).unwrap_or_default());
        }
    }
    match parts.get(1).and_then(text).as_deref() {
        Some("string") => {
            let value: Option<String> = m.query(redis::cmd("GET").arg(key)).await?;
            st.value = value;
            st.pttl_ms = parts.get(2).and_then(crate::engine::masters::replies::int);
        }
        Some("none") | None => {}
        Some(_) => {
            return Err(Error::WrongType {
                name: key.to_string(),
                addr: m.addr().to_string(),
            })
        }
    }
    Ok(st)
}

/// The job `key`'s state (record `record`) on `masters`: a majority must answer; the
/// record with the most runs and the first value found count.
pub(crate) async fn state(masters: &Masters, key: &str, record: &str) -> Result<JobState> {
    let results = fan_out(masters.all(), |m| read(m, key, record)).await;
    let states = answers(masters.all(), results, masters.quorum())?;
    let value = states.iter().find(|s| s.value.is_some()).cloned();
    let mut best = (states.into_iter())
        .max_by_key(|s| s.num("runs").unwrap_or(0))
        .unwrap_or_default();
    if let Some(v) = value {
        best.value = v.value;
        best.pttl_ms = v.pttl_ms;
    }
    Ok(best)
}
