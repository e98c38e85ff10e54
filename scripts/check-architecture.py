#!/usr/bin/env python3
"""ARCHITECTURE.md stays true: every path and every Rust name it mentions exists.

Run by .ci/run. Checks, in ARCHITECTURE.md (or the files given):

* paths: a word with a slash ending in a file extension or in `/` (`engine/kinds/plain.rs`,
  `lua/release.lua`, `tests/standalone/`) must name a file or folder, taken from the
  repository's root, from `src/` or from a layer's folder (`src/engine/`, ...); a bare file name (`flow.rs`) must exist somewhere in
  the workspace's sources;
* names: in `code spans` and in the diagrams (```text blocks), a CamelCase name or a path
  of names (`Engine::lock`, `Lane::Lock`, `waiter::acquire`, `Lock::lock()`) must be
  defined in the workspace's Rust sources (a struct, enum, variant, trait, type alias,
  fn, module, const or static of that name; each segment of a path is checked). Names of
  other crates are written with their crate (`tokio::sync::Notify`) and are skipped.

Prints every name and path that does not exist, and exits 1 if any.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ["src", "redlatch-cli/src", "redlatch-bench/src", "redlatch-testkit/src", "tests"]
EXTERNAL = {"std", "core", "tokio", "tokio_util", "redis", "deadpool_redis", "deadpool",
            "futures", "futures_util", "parking_lot", "uuid", "tracing", "serde", "clap"}
# Words of prose or of Redis that look like names but are none of ours.
NOT_NAMES = {"Redisson", "RLock", "RFencedLock", "RFairLock", "RReadWriteLock", "Redlock",
             "RedissonReadLock", "RedissonNonReentrantLock", "RedissonNonReentrantFairLock",
             "RedissonSpinLock", "RedissonFasterMultiLock", "Redis", "Cluster", "Sentinel",
             "ShedLock", "Java", "README", "CI", "TTL", "ACL", "TLS", "OK",
             # std's traits and types, written without their path
             "Drop", "Send", "Sync", "Future", "Arc", "Option", "Result", "Vec", "String"}
EXTENSIONS = (".rs", ".lua", ".md", ".py", ".sh", ".toml", ".java", ".xml", ".txt")
PATH = re.compile(r"(?<![\w/.:-])((?:\.?[\w-]+/)+(?:[\w.-]+)?)")
BARE_FILE = re.compile(r"(?<![\w/.-])([\w-]+\.(?:rs|lua))\b")
NAME = re.compile(r"\b((?:[A-Za-z_][A-Za-z0-9_]*::)*[A-Za-z_][A-Za-z0-9_]*)(\(\))?")
DEFINITION = re.compile(
    r"\b(?:struct|enum|trait|type|fn|mod|const|static|union|macro_rules!)\s+([A-Za-z_][A-Za-z0-9_]*)")
VARIANT = re.compile(r"^\s+([A-Z][A-Za-z0-9_]*)\s*(?:[,({=]|$)", re.M)
FIELD = re.compile(r"^\s+(?:pub(?:\([a-z]+\))?\s+)?([a-z_][a-z0-9_]*)\s*:[^:]", re.M)


def defined_names():
    names, files = set(), set()
    for d in SOURCES:
        for path in (ROOT / d).rglob("*.rs"):
            text = path.read_text(errors="replace")
            names.update(DEFINITION.findall(text))
            names.update(VARIANT.findall(text))
            names.update(FIELD.findall(text))
            files.add(path.name)
            names.add(path.stem)
            if path.name == "mod.rs" or path.name == "main.rs":
                names.add(path.parent.name)
    for path in (ROOT / "lua").glob("*.lua"):
        files.add(path.name)
    return names, files


def path_exists(token):
    token = token.rstrip(".,;:")
    if not (token.endswith("/") or token.endswith(EXTENSIONS)):
        return True  # not a path we check (a fraction, "api → engine", an alias)
    # From the root, from src/, or from a layer's folder (a diagram lists engine/'s
    # folders as kinds/, holding/, ...).
    for base in (ROOT, ROOT / "src", ROOT / "src/api", ROOT / "src/engine", ROOT / "src/transport"):
        if (base / token).exists():
            return True
    return False


def name_exists(name, names):
    segments = name.split("::")
    if segments[0] == "redlatch" and len(segments) > 1:
        segments = segments[1:]  # our crate's public path
    if segments[-1].endswith("_"):
        # `Engine::semaphore_*`: a family of names with that prefix.
        prefix = segments.pop()
        if not any(n.startswith(prefix) for n in names):
            return False
        if not segments:
            return True
    if segments[0] in EXTERNAL or segments[0] in ("crate", "self", "super"):
        return True
    if len(segments) == 1:
        word = segments[0]
        # A lone word is checked only when it looks like a type (CamelCase, not an
        # acronym or a Redis command); `fn` names are checked as `word()` by the caller.
        if not re.match(r"^[A-Z][a-z0-9]+[A-Za-z0-9]*$", word) or word in NOT_NAMES:
            return True
    return all(s in names for s in segments)


def code_texts(doc):
    """The spans and diagram lines names are looked for in."""
    texts, in_text = [], False
    for line in doc.splitlines():
        if line.startswith("```"):
            in_text = line.strip() == "```text" if not in_text else False
            continue
        if in_text:
            texts.append(line)
        else:
            texts.extend(re.findall(r"`([^`]+)`", line))
    return texts


def check(doc_path, names, files):
    doc = (doc_path if doc_path.is_absolute() else ROOT / doc_path).read_text()
    missing = []
    for token in sorted(set(PATH.findall(doc))):
        if "://" in token or not path_exists(token):
            if "://" not in token:
                missing.append(f"path {token}")
    for token in sorted(set(BARE_FILE.findall(doc))):
        if token not in files and not path_exists(token):
            missing.append(f"file {token}")
    seen = set()
    for text in code_texts(doc):
        if re.match(r"^\s*[A-Z]+(\s|$)", text) and "::" not in text:
            continue  # a Redis command (`SET NX PX`, `EVALSHA`)
        for name, call in NAME.findall(text):
            key = name + call
            if key in seen:
                continue
            seen.add(key)
            if call and "::" not in name:
                ok = name in names or name in EXTERNAL
            else:
                ok = name_exists(name, names)
            if not ok:
                missing.append(f"name {key}")
    return missing


def main(argv):
    docs = [pathlib.Path(a) for a in argv[1:]] or [pathlib.Path("ARCHITECTURE.md")]
    names, files = defined_names()
    failed = False
    for doc in docs:
        missing = check(doc, names, files)
        for m in missing:
            print(f"{doc}: no such {m}")
        failed |= bool(missing)
    print("check-architecture: " + ("stale names above" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
