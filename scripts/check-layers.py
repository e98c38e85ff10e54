#!/usr/bin/env python3
"""Checks the layering rules of ARCHITECTURE.md and the size limits of issue 22.

1. Layers: transport/ imports neither the engine nor the API; engine/ never imports
   the API; api/ imports nothing from transport/ and, from the engine, only the
   façade (`crate::engine::facade::Item` or an item `crate::engine::Item`, never an
   inner module such as `crate::engine::master`).
2. No import circles among the engine's modules. A node is one child of engine/ (a
   file, or a folder such as kinds/ counted as one), plus `mod` for engine/mod.rs's
   own items (`Engine`, `Settings`). An edge is any path in the code (`use` or inline)
   that names another module or an item of it: `super::x`, `crate::engine::x`,
   `super::super::x`. A re-export in engine/mod.rs (`pub use kind::Kind`) counts as
   the module it comes from; `mod` declarations are not edges. Test-only modules
   (fake/, tests/) are left out of the cycle check.
3. State (issue 48): each part of the engine keeps its state in a type of its own
   folder (PARTS below), whose fields are private (Rust then keeps them to the folder),
   and `Engine`'s own fields are read only in engine/mod.rs and engine/facade/: any
   other file reaches them through the accessors of engine/mod.rs. A read is
   `self.f` inside an `impl Engine` block, or `x.f` where `x` is bound to an
   `Engine` (`engine`, `inner`, a parameter or binding typed `&Engine`,
   `&Arc<Engine>`, `Arc<Engine>`, `Weak<Engine>`, or `….engine()`), `f` one of
   `Engine`'s fields and not followed by `(`. Nor are `Engine`'s methods written
   elsewhere: an `impl Engine` (or `impl … for Engine`) block outside engine/mod.rs
   and engine/facade/ fails by name; a part's work is a method of its state type, or
   a function of its folder, given what it needs of the engine.
4. Size: no file over 450 lines of code (blank lines, comments and `#[cfg(test)]`
   modules at the end of a file not counted), no function over 80 lines; in src/ of
   every crate and in tests/ and examples/ of every workspace member alike.

Prints what breaks a rule and exits 1; prints a summary and exits 0 otherwise.
Usage: scripts/check-layers.py [--graph]   (from the repository root)
"""

import os
import re
import sys


def read_text(path):
    """The text of `path`, the file closed after."""
    with open(path) as f:
        return f.read()


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
ENGINE = os.path.join(ROOT, "engine")
TEST_ONLY = {"fake", "tests"}
MAX_LOC = 450
MAX_FN = 80


def strip(text):
    """The code without comments and string contents (line structure kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or (c == "r" and re.match(r'r#*"', text[i:i + 8]) and
                          (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            if c == "r":
                m = re.match(r'r(#*)"', text[i:])
                close = '"' + m.group(1)
                j = text.find(close, i + len(m.group(0)))
                j = n if j < 0 else j + len(close)
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j += 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:i + 4])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def rust_files(folder):
    for d, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith(".rs"):
                yield os.path.join(d, f)


CRATES = (  # (crate root file, name), relative to the repository root
    ("src/lib.rs", "redlatch"),
    ("redlatch-cli/src/lib.rs", "redlatch-cli (lib)"),
    ("redlatch-cli/src/main.rs", "redlatch-cli (bin)"),
    ("redlatch-bench/src/main.rs", "redlatch-bench"),
    ("redlatch-testkit/src/lib.rs", "redlatch-testkit"),
)
REPO = os.path.join(ROOT, "..")
MOD_DECL = re.compile(r"^\s*(#\[cfg\(test\)\]\s*)?(?:pub(?:\([\w:]+\))?\s+)?mod\s+(\w+)\s*;",
                      re.M)


def without_tests(code):
    """The code before its first inline `#[cfg(test)] mod x {` (test modules end a file)."""
    return re.split(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", code)[0]


def crate_modules(root_file):
    """Every module of a crate: path tuple -> (file, child names, test-only children)."""
    mods = {}

    def walk(path, file, is_dir_owner):
        code = strip(read_text(file))
        kids, test_kids = [], set()
        for m in MOD_DECL.finditer(code):
            kids.append(m.group(2))
            if m.group(1):
                test_kids.add(m.group(2))
        mods[path] = (file, kids, test_kids)
        base = os.path.dirname(file) if is_dir_owner else file[:-3]
        for k in kids:
            flat, nested = os.path.join(base, k + ".rs"), os.path.join(base, k, "mod.rs")
            if os.path.exists(flat):
                walk(path + (k,), flat, False)
            elif os.path.exists(nested):
                walk(path + (k,), nested, True)

    walk((), os.path.join(REPO, root_file), True)
    return mods


def brace_items(rest):
    """The first segment of each item of `{a, b::c, d as e}` at the start of `rest`."""
    depth, j = 0, 0
    for j, ch in enumerate(rest):
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            break
    items, depth, cur = [], 0, ""
    for ch in rest[1:j]:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    return [seg.group(1) for seg in (re.match(r"\s*(\w+)", it) for it in items) if seg]


def references(code, here, kids):
    """Absolute paths (tuples of segments) named in `code`, written in module `here`."""
    out = []
    pat = r"(?<![\w:])(crate::|(?:super::)+|self::" + \
        ("|(?:" + "|".join(map(re.escape, kids)) + r")::" if kids else "") + ")"
    for m in re.finditer(pat, code):
        prefix, rest = m.group(1), code[m.end():]
        if prefix == "crate::":
            base = ()
        elif prefix == "self::":
            base = here
        elif prefix.startswith("super::"):
            ups = prefix.count("super")
            if ups > len(here):
                continue
            base = here[:len(here) - ups]
        else:  # a child module named without a prefix
            base, rest = here, prefix + rest
        if rest.startswith("{"):
            for seg in brace_items(rest):
                tail = re.match(r"\s*" + seg + r"((?:::\w+)*)", rest[1 + rest[1:].find(seg):])
                out.append(base + (seg,) + tuple(s for s in tail.group(1).split("::") if s))
        else:
            segs = re.match(r"(\w+(?:::\w+)*)", rest)
            if segs:
                out.append(base + tuple(segs.group(1).split("::")))
    return out


def reexports(mods, path):
    """Items a module's own file re-exports from its children: item -> child."""
    file, kids, _ = mods[path]
    code = strip(read_text(file))
    out = {}
    for m in re.finditer(r"pub(?:\([\w:]+\))?\s+use\s+(?:self::)?(\w+)::([^;]+);", code):
        if m.group(1) in kids:
            for item in re.findall(r"(\w+)\s*[,}]?", m.group(2).strip("{} ")):
                out[item] = m.group(1)
    return out


def module_graphs(root_file):
    """For each module with children: child -> children it names (`mod`: its own file)."""
    mods = crate_modules(root_file)
    test_only = {p + (k,) for p, (_, _, t) in mods.items() for k in t}
    test_only |= {p for p in mods if p and p[-1] in TEST_ONLY}
    graphs = {}
    for here, (file, kids, _) in mods.items():
        if any(here[:i] in test_only for i in range(1, len(here) + 1)):
            continue
        code = without_tests(strip(read_text(file)))
        for ref in references(code, here, kids):
            target = ()
            for seg in ref:  # the longest prefix that is a module
                if target + (seg,) not in mods:
                    break
                target += (seg,)
            common = 0
            while common < min(len(here), len(target)) and here[common] == target[common]:
                common += 1
            scope = here[:common]
            src = here[common] if len(here) > common else "mod"
            if len(target) > common:
                dst = target[common]
            else:
                item = ref[len(target)] if len(ref) > len(target) else None
                dst = reexports(mods, scope).get(item, "mod")
            # A module's own file composes its children (declares, re-exports and
            # dispatches to them): only a child's use of it is an edge.
            if src == "mod" or src == dst or scope + (dst,) in test_only or (src != "mod" and scope + (src,) in test_only):
                continue
            graphs.setdefault(scope, {}).setdefault(src, set()).add(dst)
    return graphs


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def shortest_cycle(graph, comp):
    """One shortest cycle inside a component, for the message."""
    best = None
    for start in comp:
        prev, frontier, seen = {start: None}, [start], {start}
        found = None
        while frontier and not found:
            nxt = []
            for v in frontier:
                for w in sorted(graph.get(v, ())):
                    if w not in comp:
                        continue
                    if w == start:
                        found = v
                        break
                    if w not in seen:
                        seen.add(w)
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        if found:
            path, v = [], found
            while v is not None:
                path.append(v)
                v = prev[v]
            path = path[::-1] + [start]
            if best is None or len(path) < len(best):
                best = path
    return best


def layer_errors():
    errs = []
    kids = set(crate_modules("src/lib.rs")[("engine",)][1])
    for layer, banned in (("transport", ("crate::engine", "crate::api")),
                          ("engine", ("crate::api",)),
                          ("api", ("crate::transport",))):
        for path in rust_files(os.path.join(ROOT, layer)):
            code = strip(read_text(path))
            for no, line in enumerate(code.split("\n"), 1):
                for b in banned:
                    if re.search(r"\b" + b + r"\b", line):
                        errs.append(f"{os.path.relpath(path, ROOT)}:{no}: {layer}/ names {b}")
                if layer != "api":
                    continue
                for m in re.finditer(r"\bcrate::engine::(\{)?(\w+)", line):
                    seg = m.group(2)
                    if seg in kids and seg != "facade":
                        errs.append(f"{os.path.relpath(path, ROOT)}:{no}: api/ reaches "
                                    f"the engine's inner module {seg}")
                # `crate::engine::{a, b}`: every item, not only the first.
                for m in re.finditer(r"\bcrate::engine::\{([^}]*)\}", line):
                    for seg in re.findall(r"(\w+)", m.group(1)):
                        if seg in kids and seg != "facade":
                            errs.append(f"{os.path.relpath(path, ROOT)}:{no}: api/ "
                                        f"reaches the engine's inner module {seg}")
    return sorted(set(errs))


FN_RE = re.compile(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
                   r"fn\s+(\w+)")


# Every crate's sources (tests/ and examples/ of each member: test_size_errors).
SIZED = ("src", "redlatch-cli/src", "redlatch-bench/src", "redlatch-testkit/src")


def size_errors(folders=SIZED):
    errs = []
    for path in (p for folder in folders for p in rust_files(os.path.join(REPO, folder))):
        code = strip(read_text(path))
        lines = code.split("\n")
        # A test module at the end of the file is not counted.
        end = len(lines)
        for i, line in enumerate(lines):
            if re.match(r"\s*#\[cfg\(test\)\]", line) and i + 1 < len(lines) and \
                    re.match(r"\s*mod\s+\w+\s*\{", lines[i + 1]):
                end = i
                break
        loc = sum(1 for line in lines[:end] if line.strip())
        rel = os.path.relpath(path, REPO)
        if loc > MAX_LOC:
            errs.append(f"{rel}: {loc} lines of code (over {MAX_LOC})")
        for i, line in enumerate(lines):
            m = FN_RE.match(line)
            if not m:
                continue
            # Find the body's opening brace (or a `;`: a declaration without body).
            depth, opened, j = 0, False, i
            while j < len(lines):
                seg = lines[j] if j != i else line[m.end():]
                for ch in seg:
                    if ch == ";" and not opened and depth == 0:
                        break
                    if ch == "{":
                        depth += 1
                        opened = True
                    elif ch == "}":
                        depth -= 1
                else:
                    if opened and depth == 0:
                        break
                    j += 1
                    continue
                break
            if not opened:
                continue
            length = sum(1 for line in lines[i:j + 1] if line.strip())
            if length > MAX_FN:
                errs.append(f"{rel}:{i + 1}: fn {m.group(1)} is {length} lines (over {MAX_FN})")
    return errs


# The workspace's crates (Cargo.toml's members), whose tests/ and examples/ are sized too.
MEMBERS = (".", "redlatch-cli", "redlatch-bench", "redlatch-testkit")


def test_size_errors():
    """Rule 4 for the test binaries' and examples' own files: every member's tests/ and
    examples/ (with sub-folders), counted as src/ is."""
    folders = [os.path.normpath(os.path.join(m, sub)) for m in MEMBERS
               for sub in ("tests", "examples") if os.path.isdir(os.path.join(REPO, m, sub))]
    return size_errors(folders)


def facade_index_errors():
    """Every `pub(crate) fn` of an `impl Engine` or `impl Held` block in the engine is
    named in the method table of engine/facade/mod.rs: Engine's methods are found from
    that one file."""
    index = read_text(os.path.join(ENGINE, "facade", "mod.rs"))
    listed = set(re.findall(r"`(\w+)`", "\n".join(l for l in index.splitlines() if l.startswith("//! |"))))
    errs = []
    for path in rust_files(ENGINE):
        text = without_tests(read_text(path))
        for block in re.finditer(r"^impl (Engine|Held) \{\n(.*?)^\}", text, re.S | re.M):
            for m in re.finditer(r"^    pub\(crate\) (?:async )?fn (\w+)", block.group(2), re.M):
                if m.group(1) not in listed:
                    rel = os.path.relpath(path, ROOT)
                    errs.append(f"{rel}: {block.group(1)}::{m.group(1)} is not in the method table of engine/facade/mod.rs")
    return errs


# part folder -> the type in its mod.rs that holds the part's state.
PARTS = {"masters": "Masters", "holding": "Holdings", "acquire": "Contenders",
         "observe": "Observe"}
# Where Engine's own fields may be read (relative to engine/).
ENGINE_OWN = ("mod.rs", "facade" + os.sep)


def struct_fields(code, name):
    """The fields of `struct name { ... }` in `code`: [(field, visibility or "")]."""
    m = re.search(r"\bstruct\s+" + name + r"\b[^{;]*\{", code)
    if not m:
        return None
    depth, j = 1, m.end()
    while depth and j < len(code):
        depth += code[j] == "{"
        depth -= code[j] == "}"
        j += 1
    body, out, depth, cur = code[m.end():j - 1], [], 0, ""
    for ch in body + ",":
        if ch == "," and depth == 0:
            f = re.match(r"\s*(?:#\[[^\]]*\]\s*)*(pub(?:\([^)]*\))?\s+)?(\w+)\s*:", cur)
            if f:
                out.append((f.group(2), (f.group(1) or "").strip()))
            cur = ""
            continue
        depth += ch in "<({["
        depth -= ch in ">)}]"
        cur += ch
    return out


# `impl Engine {`, `impl<T> Engine`, `impl Trait for Engine`, `impl … for crate::engine::Engine`.
IMPL_ENGINE = re.compile(r"^[ \t]*impl\b(?:\s*<[^>{]*>)?\s+(?:(?:[\w:]+::)?Engine\b(?!\s*::)"
                         r"|[^{;]*?\bfor\s+(?:[\w:]+::)?Engine\b)", re.M)

ENGINE_BOUND = re.compile(r"\b(\w+)\s*:\s*&?\s*(?:(?:std::sync::)?(?:Arc|Weak)<\s*)?"
                          r"(?:(?:crate|super|engine)::)*Engine\b")


def state_errors(engine=ENGINE):
    """Rule 3: part types keep their fields private; Engine's fields are read, and its
    impl blocks written, only in engine/mod.rs and facade/."""
    errs = []
    rel = lambda p: os.path.relpath(p, os.path.join(engine, ".."))
    for folder, ty in sorted(PARTS.items()):
        path = os.path.join(engine, folder, "mod.rs")
        fields = struct_fields(strip(read_text(path)), ty) if os.path.exists(path) else None
        if fields is None:
            errs.append(f"{rel(path)}: the {folder} part's state type {ty} is not defined here")
            continue
        for f, vis in fields:
            if vis:
                errs.append(f"{rel(path)}: {ty}::{f} is `{vis}`: a part's state is private "
                            f"to its folder (give {ty} a method instead)")
    own = struct_fields(strip(read_text(os.path.join(engine, "mod.rs"))), "Engine") or []
    names = "|".join(f for f, _ in own)
    if not names:
        return errs + [f"{rel(os.path.join(engine, 'mod.rs'))}: struct Engine not found"]
    for path in rust_files(engine):
        where = os.path.relpath(path, engine)
        if where in ENGINE_OWN[:1] or where.startswith(ENGINE_OWN[1]):
            continue
        code = strip(read_text(path))
        for m in IMPL_ENGINE.finditer(code):
            no = code.count("\n", 0, m.start()) + 1
            errs.append(f"{rel(path)}:{no}: `{m.group(0).strip()}` block outside "
                        f"engine/mod.rs and facade/ (make it a method of the part's state "
                        f"type, or an entry point in facade/)")
        bound = {"engine", "inner"} | set(ENGINE_BOUND.findall(code))
        bound |= set(re.findall(r"let\s+(?:Some\()?(\w+)\)?\s*=\s*\w+\.upgrade\(\)", code))
        recv = r"(?:\b(?:" + "|".join(sorted(bound)) + r")|\.engine\(\))"
        reads = [(m.start(), m.group(1)) for m in
                 re.finditer(recv + r"\.(" + names + r")\b(?!\s*[(:])", code)]
        for block in re.finditer(r"^impl(?:<[^>]*>)?\s+(?:[\w:]+::)?Engine\s*\{.*?^\}", code,
                                 re.S | re.M):
            reads += [(block.start() + m.start(), m.group(1)) for m in
                      re.finditer(r"\bself\.(" + names + r")\b(?!\s*[(:])", block.group(0))]
        for at, field in sorted(set(reads)):
            no = code.count("\n", 0, at) + 1
            errs.append(f"{rel(path)}:{no}: reads Engine's field `{field}` outside "
                        f"engine/mod.rs and facade/ (use its accessor)")
    return errs


def main():
    errs = layer_errors() + facade_index_errors() + state_errors()
    modules = 0
    for root_file, crate in CRATES:
        for scope, graph in sorted(module_graphs(root_file).items()):
            where = "::".join(scope) or "the crate root"
            modules += len(graph)
            if "--graph" in sys.argv:
                for v in sorted(graph):
                    print(f"{crate} {where}: {v} -> {', '.join(sorted(graph[v]))}")
            for comp in cycles(graph):
                cyc = shortest_cycle(graph, comp)
                errs.append(f"{crate}: import circle in {where} among {{{', '.join(comp)}}}: "
                            + " -> ".join(cyc))
    errs += size_errors() + test_size_errors()
    for e in errs:
        print(e)
    if errs:
        return 1
    print(f"layers ok; {len(CRATES)} crates, {modules} modules, no import circles; "
          f"no file over {MAX_LOC} lines of code, no fn over {MAX_FN} lines "
          f"(src/, tests/, examples/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
