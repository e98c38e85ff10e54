//! What the API layer still calls directly: force-releasing a plain, fenced or fair
//! lock, typing a script error, and (the watchdog) the field renewal. Kept until the
//! engine façade (issue 22 item 1) owns `force_unlock`; every lock kind's calls are in
//! kinds/.

use super::kinds::{fair, plain, yes};
use super::master::Master;
use crate::error::Result;

pub(crate) use super::renew::renew;
pub(crate) use super::wire::typed;

/// Deletes `name` whoever holds it and wakes its waiters; true if it was deleted.
pub(crate) async fn force_release(m: &Master, name: &str, fair: bool) -> Result<bool> {
    let inv = if fair {
        fair::force_release(name)
    } else {
        plain::force_release(name)
    };
    yes(m, name, &inv).await
}
