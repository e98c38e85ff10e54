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
3. Size: no file over 450 lines of code (blank lines, comments and `#[cfg(test)]`
   modules at the end of a file not counted), no function over 80 lines.

Prints what breaks a rule and exits 1; prints a summary and exits 0 otherwise.
Usage: scripts/check-layers.py [--graph]   (from the repository root)
"""

import os
import re
import sys

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


def module_of(path):
    """Module path of a file under src/engine, as a list (engine/mod.rs: [])."""
    rel = os.path.relpath(path, ENGINE)[:-3].split(os.sep)
    return rel[:-1] if rel[-1] == "mod" else rel


def referenced(code):
    """(prefix, first segment) of every engine-relative path in `code`."""
    refs = []
    for m in re.finditer(r"\b(crate::engine::|(?:super::)+|self::)", code):
        prefix, rest = m.group(1), code[m.end():]
        if rest.startswith("{"):
            depth, j = 0, 0
            for j, ch in enumerate(rest):
                depth += ch == "{"
                depth -= ch == "}"
                if depth == 0:
                    break
            inner, items, depth, cur = rest[1:j], [], 0, ""
            for ch in inner:
                if ch == "," and depth == 0:
                    items.append(cur)
                    cur = ""
                    continue
                depth += ch == "{"
                depth -= ch == "}"
                cur += ch
            items.append(cur)
            for it in items:
                seg = re.match(r"\s*(\w+)", it)
                if seg:
                    refs.append((prefix, seg.group(1)))
        else:
            seg = re.match(r"(\w+)", rest)
            if seg:
                refs.append((prefix, seg.group(1)))
    return refs


def engine_children():
    kids = set()
    for name in os.listdir(ENGINE):
        if name.endswith(".rs") and name != "mod.rs":
            kids.add(name[:-3])
        elif os.path.isdir(os.path.join(ENGINE, name)):
            kids.add(name)
    return kids


def mod_reexports(kids):
    """Items engine/mod.rs re-exports from a child: name -> child."""
    code = strip(open(os.path.join(ENGINE, "mod.rs")).read())
    out = {}
    for m in re.finditer(r"pub(?:\([\w:]+\))?\s+use\s+(\w+)::([^;]+);", code):
        if m.group(1) in kids:
            for item in re.findall(r"(\w+)\s*[,}]?", m.group(2).strip("{} ")):
                out[item] = m.group(1)
    return out


def engine_graph():
    kids = engine_children()
    reexports = mod_reexports(kids)
    graph = {}
    for path in rust_files(ENGINE):
        mod = module_of(path)
        node = mod[0] if mod else "mod"
        if node in TEST_ONLY:
            continue
        code = strip(open(path).read())
        # The `tests` module at the end of a file is test-only too.
        code = re.split(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", code)[0]
        refs = referenced(code)
        if not mod:
            # engine/mod.rs names its children without a prefix.
            refs += [("crate::engine::", k) for k in re.findall(r"(?<![\w:])(\w+)::", code)
                     if k in kids]
        for prefix, seg in refs:
            if prefix == "crate::engine::":
                base = []
            elif prefix == "self::":
                base = mod
            else:
                ups = prefix.count("super")
                if ups > len(mod):
                    continue
                base = mod[:len(mod) - ups]
            if base:
                target = base[0]
            elif seg in kids:
                target = seg
            elif seg in reexports:
                target = reexports[seg]
            else:
                target = "mod"
            if target in TEST_ONLY or target == node:
                continue
            graph.setdefault(node, set()).add(target)
        graph.setdefault(node, set())
    return graph


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
    kids = engine_children()
    for layer, banned in (("transport", ("crate::engine", "crate::api")),
                          ("engine", ("crate::api",)),
                          ("api", ("crate::transport",))):
        for path in rust_files(os.path.join(ROOT, layer)):
            code = strip(open(path).read())
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


def size_errors():
    errs = []
    for path in rust_files(ROOT):
        code = strip(open(path).read())
        lines = code.split("\n")
        # A test module at the end of the file is not counted.
        end = len(lines)
        for i, line in enumerate(lines):
            if re.match(r"\s*#\[cfg\(test\)\]", line) and i + 1 < len(lines) and \
                    re.match(r"\s*mod\s+\w+\s*\{", lines[i + 1]):
                end = i
                break
        loc = sum(1 for line in lines[:end] if line.strip())
        rel = os.path.relpath(path, ROOT)
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


def main():
    graph = engine_graph()
    if "--graph" in sys.argv:
        for v in sorted(graph):
            print(f"{v} -> {', '.join(sorted(graph[v]))}")
    errs = layer_errors()
    for comp in cycles(graph):
        cyc = shortest_cycle(graph, comp)
        errs.append(f"engine import circle among {{{', '.join(comp)}}}: " + " -> ".join(cyc))
    errs += size_errors()
    for e in errs:
        print(e)
    if errs:
        return 1
    print(f"layers ok; {len(graph)} engine modules, no circles; "
          f"no file over {MAX_LOC} lines of code, no fn over {MAX_FN} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
