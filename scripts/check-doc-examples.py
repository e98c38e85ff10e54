#!/usr/bin/env python3
"""Checks that every `pub fn` / `pub async fn` in the given files has a `# Examples`
section in its rustdoc with a code block that runs (not `no_run`, `ignore`,
`compile_fail`, `should_panic` or a non-Rust language). A getter or a blocking mirror may
instead link to the item whose example shows it: a doc with an intra-doc link and the word
"example" (e.g. "as [`LockGuard::lost`], whose example shows the use") counts."""
import re, sys, glob

files = sys.argv[1:] or sorted(glob.glob("src/api/*.rs") + glob.glob("src/api/*/*.rs")) + ["src/error.rs"]
sig = re.compile(r"^\s*pub (async )?fn (\w+)")
link = re.compile(r"\[`[^`]+`\]")
ok, bad = [], []
for path in files:
    lines = open(path).read().split("\n")
    for i, line in enumerate(lines):
        m = sig.match(line)
        if not m:
            continue
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("#["):  # attributes
            j -= 1
        doc = []
        while j >= 0 and lines[j].strip().startswith("///"):
            doc.insert(0, lines[j].strip()[3:].strip())
            j -= 1
        where = f"{path}:{i + 1} {m.group(2)}"
        text = " ".join(doc)
        if "# Examples" not in doc and "example" in text.lower() and link.search(text):
            ok.append(where)  # links to the example it mirrors
            continue
        if "# Examples" not in doc:
            bad.append(f"{where}: no # Examples")
            continue
        after = doc[doc.index("# Examples") + 1:]
        fences = [l for l in after if l.startswith("```")]
        opening = fences[0::2]
        runnable = [f for f in opening
                    if f[3:] in ("", "rust") or (f[3:].startswith("rust,")
                    and not set(f[3:].split(",")) & {"no_run", "ignore", "compile_fail", "should_panic"})]
        body = "\n".join(after)
        if not runnable:
            bad.append(f"{where}: no runnable code block ({opening})")
        elif "assert" not in body:
            bad.append(f"{where}: example has no assert")
        else:
            ok.append(where)
for b in bad:
    print("MISSING", b)
print(f"{len(ok)} public fns with a runnable example, {len(bad)} without")
sys.exit(1 if bad else 0)
