//! The script catalogue: [`all`], every script of every lock kind (tests only: nothing
//! is loaded in advance; a script's first call on a server loads it, transport/script.rs).
//! Each kind declares its scripts beside its typed calls
//! (kinds/plain.rs, kinds/renew.rs, kinds/, kinds/rw_layout.rs, election.rs, guarded.rs, revoke.rs); this file only lists them,
//! and no engine file imports it (it would close a circle through the kinds).

use crate::transport::Script;

/// Every script.
pub(crate) fn all() -> Vec<&'static Script> {
    use crate::engine::{kinds, kinds::renew};
    let mut all: Vec<&'static Script> = vec![&renew::RENEW];
    all.extend(kinds::plain::scripts().map(|s| &**s));
    all.extend(kinds::fenced::scripts().map(|s| &**s));
    all.extend(kinds::fair::scripts().map(|s| &**s));
    all.extend(kinds::nonreentrant::scripts().map(|s| &**s));
    all.extend(kinds::spin::scripts().map(|s| &**s));
    all.extend(crate::engine::kinds::rw_layout::all().map(|s| &**s));
    all.extend(kinds::semaphore::scripts().map(|s| &**s));
    all.extend(kinds::expirable_semaphore::scripts().map(|s| &**s));
    all.extend(kinds::latch::scripts().map(|s| &**s));
    all.extend(kinds::group::scripts().map(|s| &**s));
    all.extend(kinds::simple::scripts().map(|s| &**s));
    all.extend(crate::engine::coordination::election::scripts().map(|s| &**s));
    all.extend(crate::engine::coordination::guarded::scripts().map(|s| &**s));
    all.extend(crate::engine::coordination::revoke::scripts().map(|s| &**s));
    all.extend(crate::engine::coordination::job::scripts().map(|s| &**s));
    all.extend(crate::engine::observe::waiters::scripts().map(|s| &**s));
    all
}

#[cfg(test)]
mod tests {
    /// A server's `Cached` knows at most `KNOWN` scripts; a script numbered past it
    /// would be sent as if known (EVALSHA alone) and meet NOSCRIPT on every fresh
    /// server, whose reload can reorder it (transport/standalone.rs invariant 6).
    #[test]
    fn every_script_fits_a_servers_cache_with_room_for_the_tests() {
        let all = super::all();
        assert!(all.len() > 40, "{}", all.len());
        assert!(
            2 * all.len() < crate::transport::script::KNOWN,
            "{}",
            all.len()
        );
    }
}
