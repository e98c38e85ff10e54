#!/usr/bin/env python3
"""Checks the library's doc examples: docs that teach, tests that test.

1. Every async entry point (a `pub async fn` named for one of the VERBS below: what a
   user calls to connect, hold, release, elect or wait) has a runnable example of its own.
2. Every other public item (type, fn, and a verb's variant such as `lock_with_lease`)
   has an example of its own, or an intra-doc link to an item whose runnable example
   shows it (a fn's name appears in that example's code); a blocking mirror's link to
   its async counterpart counts where the counterpart's own example or link does. Types and async fns need a
   runnable one, either way.
3. At most MAX_SERVERS doc examples start a redis-server (`doc_redis::run...`), in all
   of src/, the blocking layer included: a behaviour is proven in tests/, taught here.

Runnable: a Rust code block not marked `no_run`, `ignore`, `compile_fail` or
`should_panic`; an example of an async fn or a type asserts something."""
import glob
import re
import sys

MAX_SERVERS = 60
VERBS = {
    "connect", "lock", "try_lock", "with", "unlock", "acquire", "try_acquire", "release",
    "campaign", "try_campaign", "observe", "wait", "request_release", "status",
}
FILES = sorted(glob.glob("src/api/**/*.rs", recursive=True)) + [
    "src/error.rs", "src/lost.rs", "src/engine/kinds/backoff.rs", "src/engine/kinds/kind.rs",
    "src/transport/replicas.rs"]

item_re = re.compile(r"^\s*pub (async )?(fn|struct|enum) (\w+)")
impl_re = re.compile(r"^impl\b(?:<[^>]*>)?\s+(?:[\w:<>', ]+ for )?(?:\w+::)*(\w+)")
# [`Lock::try_lock`], [`try_lock`](Self::try_lock), [scope](LockGuard::scope)
link_re = re.compile(r"\[`?([\w:]+)(?:\(\))?`?\](?!\()|\]\(([\w:]+)(?:\(\))?\)")
RUST = {"", "rust"}
NOT_RUN = {"no_run", "ignore", "compile_fail", "should_panic"}


def blocks(doc):
    """The doc's code blocks: (runnable, code lines)."""
    out, inside = [], None
    for line in doc:
        if line.startswith("```"):
            if inside is None:
                tags = set(line[3:].split(","))
                inside = (tags <= RUST | NOT_RUN | {"edition2021"} and not tags & NOT_RUN, [])
            else:
                out.append(inside)
                inside = None
        elif inside is not None:
            inside[1].append(line)
    return out


def parse(path):
    scope = "blocking::" if "/blocking/" in path else ""
    lines = open(path).read().split("\n")
    items, owner = [], None
    for i, line in enumerate(lines):
        m = impl_re.match(line)
        if m:
            owner = m.group(1)
        elif line.startswith("}"):
            owner = None
        m = item_re.match(line)
        if not m or (m.group(2) == "fn" and line.startswith("pub") and owner):
            continue
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("#["):
            j -= 1
        doc = []
        while j >= 0 and lines[j].strip().startswith("///"):
            doc.insert(0, lines[j].strip()[3:].removeprefix(" "))
            j -= 1
        is_type = m.group(2) != "fn"
        name = m.group(3)
        key = name if is_type or not owner else f"{owner}::{name}"
        links, this = [], name if is_type else owner
        for a, b in link_re.findall("\n".join(doc)):
            t = (a or b).removeprefix("crate::")
            if t.startswith("Self::") and this:
                t = this + t[4:]
            elif "::" not in t and this and not t[:1].isupper():
                t = f"{this}::{t}"
            if t.startswith("blocking::"):
                links.append(t)
            elif scope and not (a or b).startswith("crate::"):
                links.extend([scope + t, t])
            else:
                links.append(t)
        items.append(dict(where=f"{path}:{i + 1}", key=scope + key, name=name,
                          is_type=is_type, is_async=bool(m.group(1)),
                          blocks=blocks(doc), links=links))
    return items


items = [it for f in FILES for it in parse(f)]
by_key = {it["key"]: it for it in items}


def shows(key, it, depth=0):
    """Whether the item at `key` has a runnable example that shows `it` (a fn by its
    name); a type's link may go through another type's link (a blocking mirror's)."""
    target = by_key.get(key)
    if not target or key == it["key"]:
        return False
    if depth == 0 and it["key"].startswith("blocking::") and not key.startswith("blocking::"):
        # A blocking mirror linking to its async counterpart: shown where that one is.
        return any(r for r, _ in target["blocks"]) or any(
            shows(t, target, 1) for t in target["links"])
    if any(r and (it["is_type"] or re.search(rf"\b{it['name']}\b", "\n".join(c)))
           for r, c in target["blocks"]):
        return True
    return it["is_type"] and target["is_type"] and depth < 1 and any(
        shows(t, it, depth + 1) for t in target["links"])


servers = {}
for path in glob.glob("src/**/*.rs", recursive=True):
    n = sum(1 for l in open(path) if l.lstrip().startswith("///") and "doc_redis::run" in l)
    if n:
        servers[path] = n

ok, bad = 0, []
for it in items:
    own = [code for runnable, code in it["blocks"] if runnable]
    needs_run = it["is_type"] or it["is_async"]
    if own and needs_run and not any("assert" in "\n".join(c) for c in own):
        bad.append(f"{it['where']} {it['key']}: example has no assert")
    elif own or (it["blocks"] and not needs_run):
        ok += 1
    elif it["is_async"] and it["name"] in VERBS and not it["key"].startswith("blocking::"):
        bad.append(f"{it['where']} {it['key']}: an entry point needs a runnable example")
    else:
        if any(shows(t, it) for t in it["links"]):
            ok += 1
        else:
            bad.append(f"{it['where']} {it['key']}: no example, and no link to one that shows it")
for b in bad:
    print("MISSING", b)
total = sum(servers.values())
for path, n in sorted(servers.items()):
    print(f"{n:4} {path}")
print(f"{ok} public items with or linked to an example, {len(bad)} without; "
      f"{total} doc examples start a redis-server (at most {MAX_SERVERS})")
sys.exit(1 if bad or total > MAX_SERVERS else 0)
