#!/usr/bin/env python3
"""The layer rule of docs/architecture.md, checked over the source.

- no file outside src/store/ names `redb::` (the store owns the database);
- `impl Workspace` appears only in src/workspace.rs (the facade);
- a module imports only modules of its own layer or below (every `crate::<module>` path
  in code, `use` lines and inline paths alike, comments excluded).
Exits 1 listing every violation.
"""
import pathlib
import re
import sys

# Lowest first. A module may name modules of its own layer or of a lower one.
LAYERS = [
    # The vocabulary: errors, object ids and records, settings, paths of the home, locks.
    ["error", "fault", "object", "progress", "trace", "config", "home", "lock", "test_util"],
    ["scan", "statcache", "watch"],
    ["store"],
    ["capture", "diff", "inverse", "patch", "merge"],
    ["restore"],
    ["working_copy"],
    ["lease", "history"],
    ["retention", "repair", "verify", "maintainer"],
    ["workspace"],
    ["protocol", "ui"],
    ["cli"],
]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "src"
faults = []


def code_lines(text):
    """Lines with comments (//, //!, ///) removed; string contents are kept."""
    for n, line in enumerate(text.splitlines(), 1):
        yield n, re.sub(r"//.*$", "", line)


for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src)
    if rel.parts[0] == "bin" or rel.name == "lib.rs":
        module = None
    else:
        module = rel.parts[0].removesuffix(".rs").removesuffix("_tests")
    text = path.read_text()
    lines = list(code_lines(text))
    for n, line in lines:
        if rel.parts[0] != "store" and "redb::" in line:
            faults.append(f"src/{rel}:{n}: names redb:: outside src/store/")
        if re.search(r"\bimpl(<[^>]*>)?\s+Workspace\b", line) and str(rel) != "workspace.rs":
            faults.append(f"src/{rel}:{n}: `impl Workspace` outside the facade (src/workspace.rs)")
    if module is None:
        continue
    if module not in RANK:
        faults.append(f"src/{rel}: module `{module}` has no layer in .ci/layers.py")
        continue
    # `use crate::{a, b::c}` groups span lines: join the code first.
    code = "\n".join(line for _, line in lines)
    named = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", code))
    for group in re.findall(r"\bcrate::\{([^;]*?)\}\s*;", code, re.S):
        named.update(re.findall(r"(?:^|[{,\s])([a-z_][a-z0-9_]*)\s*(?:::|,|\}|$)", group))
    for other in sorted(named):
        if other in RANK and RANK[other] > RANK[module]:
            faults.append(
                f"src/{rel}: `{module}` (layer {RANK[module]}) imports `{other}` "
                f"(layer {RANK[other]}), a higher layer"
            )

for f in faults:
    print(f)
if faults:
    print(f"{len(faults)} layer violation(s); see docs/architecture.md, \"Layers\"")
    sys.exit(1)
