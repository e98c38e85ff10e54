//! Which keys a listing reads, and what each is, both from the one list of kinds
//! (kinds/listed.rs, `kinds::LISTED`): by name shape first (a key that is a part of
//! another name's layout, such as a fair lock's queue or a fencing counter, is skipped;
//! an election lives under `redlatch_election:{name}`), then by what its inspection
//! read (kinds/inspect.rs): the first entry whose layout it is.

use crate::engine::kinds::inspect::State;
use crate::engine::kinds::listed::Listed;
use crate::engine::kinds::LISTED;

/// The prefix of redlatch's own keys (records, ledgers, registries, an election's
/// parts): no lock of their own, never listed themselves.
const OWN: &str = "redlatch_";

/// The prefix of an election's lock (engine/election.rs).
const ELECTION: &str = "redlatch_election:";

/// A key worth inspecting: the name it is used under, and whether it is an election.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Candidate {
    pub(super) key: String,
    pub(super) name: String,
    pub(super) election: bool,
}

/// What `key` (found under `pattern`) is worth: `None` for a derived key, or an
/// election whose name does not match `pattern`.
pub(super) fn candidate(key: &str, pattern: &str) -> Option<Candidate> {
    if let Some(rest) = key.strip_prefix(ELECTION) {
        let name = underived(rest).to_string();
        return glob(pattern.as_bytes(), name.as_bytes()).then(|| Candidate {
            key: key.to_string(),
            name,
            election: true,
        });
    }
    let derived = key.starts_with(OWN)
        || LISTED.iter().any(|l| (l.part)(key))
        || !glob(pattern.as_bytes(), key.as_bytes());
    (!derived).then(|| Candidate {
        key: key.to_string(),
        name: key.to_string(),
        election: false,
    })
}

/// The name a derived key's suffix was made of (keys.rs `derived`): `{x}` is `x` when
/// `x` has no brace, else the suffix itself.
pub(crate) fn underived(suffix: &str) -> &str {
    match suffix.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        Some(inner) if !inner.contains(['{', '}']) => inner,
        _ => suffix,
    }
}

/// What a key's inspection says it is (`election`: the key is an election's lock): the
/// first entry of the one list whose layout it is; `None`: gone, or no lock of any kind
/// (another type, a hash that holds no hold counts or has no lease, a string that is no
/// number).
pub(crate) fn kind(st: &State, election: bool) -> Option<&'static Listed> {
    LISTED.iter().copied().find(|l| (l.is)(st, election))
}

/// Whether `text` matches the glob `pattern` as Redis's `SCAN MATCH` does: `*`, `?`,
/// `[abc]`, `[^a-z]`, and `\` quoting the next character.
pub(crate) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it now stands for up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => class(pattern, p, text[t]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(p + 2),
            Some(&c) => (c == text[t]).then_some(p + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                p = next;
                t += 1;
            }
            (None, Some((sp, st))) => {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// A `[...]` class at `pattern[p]` against `c`: the position after it when it matches.
fn class(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    let mut i = p + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    while i < pattern.len() && pattern[i] != b']' {
        if pattern[i] == b'\\' && i + 1 < pattern.len() {
            hit |= pattern[i + 1] == c;
            i += 2;
        } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']' {
            let (a, b) = (
                pattern[i].min(pattern[i + 2]),
                pattern[i].max(pattern[i + 2]),
            );
            hit |= (a..=b).contains(&c);
            i += 3;
        } else {
            hit |= pattern[i] == c;
            i += 1;
        }
    }
    (hit != negate).then_some(i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        glob(p.as_bytes(), t.as_bytes())
    }

    #[test]
    fn globs_match_as_scan_match_does() {
        assert!(m("*", ""));
        assert!(m("*", "orders:42"));
        assert!(m("orders:*", "orders:42"));
        assert!(!m("orders:*", "order:42"));
        assert!(m("o?ders:4[0-9]", "orders:42"));
        assert!(!m("orders:4[^0-9]", "orders:42"));
        assert!(m("*:4*2", "a:b:4x2"));
        assert!(m("a\\*", "a*"));
        assert!(!m("a\\*", "ab"));
        assert!(m("[abc]x", "bx"));
        assert!(!m("[abc]x", "dx"));
    }

    #[test]
    fn derived_keys_are_skipped_and_elections_named() {
        assert_eq!(candidate("redisson_lock_queue:{a}", "*"), None);
        assert_eq!(candidate("redisson_lock_token:{a}", "*"), None);
        assert_eq!(candidate("{a}:u:1:rwlock_timeout:1", "*"), None);
        assert_eq!(candidate("redlatch_client:{u}", "*"), None);
        assert_eq!(candidate("orders:1", "jobs:*"), None);
        let e = candidate("redlatch_election:{jobs:a}", "jobs:*").expect("an election");
        assert_eq!((e.name.as_str(), e.election), ("jobs:a", true));
        let e = candidate("redlatch_election:{t}x", "*").expect("an election");
        assert_eq!(e.name, "{t}x");
        assert_eq!(candidate("redlatch_election:{x}", "jobs:*"), None);
        assert_eq!(
            candidate("jobs:a", "jobs:*").map(|c| c.election),
            Some(false)
        );
    }
}
