#!/usr/bin/env python3
"""The layer rule of docs/architecture.md, checked over the source.

- no file outside src/store/ names `redb::` (the store owns the database);
- `impl Workspace` appears only in src/workspace.rs (the facade);
- a module imports only modules of its own layer or below (every `crate::<module>` path
  in code, `use` lines and inline paths alike, comments excluded);
- no import cycle between modules, within a layer included (a cycle is one concept split
  in two files, or a shared type that belongs lower);
- the binaries (src/bin/) name nothing of the crate but `retrace::cli`: they are shims;
- no file of src/store/ names (as a string literal) a table or meta key that a layer above
  declares (`RowsTable::new("turns")` and its kin, `MetaKey::new(..)`): the store knows
  only its own tables.
Exits 1 listing every violation.
"""
import pathlib
import re
import sys

# Lowest first. A module may name modules of its own layer or of a lower one.
LAYERS = [
    # The vocabulary: errors, object ids and records, settings, paths of the home, locks.
    ["platform"],
    ["error", "fault", "object", "dirent", "vouch", "progress", "trace", "config", "home", "lock",
     "test_util"],
    ["scan", "statcache", "watch"],
    ["store"],
    ["capture", "diff", "inverse", "patch", "merge"],
    ["restore"],
    ["working_copy"],
    ["lease", "history"],
    ["retention", "repair", "verify", "maintainer", "format", "local_history", "share"],
    ["workspace"],
    ["protocol", "ui"],
    ["cli"],
]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}
# The calls only Linux offers: named in src/platform.rs alone (docs/platforms.md).
LINUX_ONLY = re.compile(r'renameat_with|openat2|OFlags::PATH\b|fs::inotify|"/proc|libc::syscall'
                        r'|ioprio|mallopt|target_os\s*=\s*"linux"'
                        r'|rustix::[\w:{}, ]*\binotify\b|\bf_type\b|\bstatfs\b')

root = pathlib.Path(__file__).resolve().parent.parent
src = root / "src"
faults = []
# module -> the modules it names, for the cycle check.
graph = {}


def code_lines(text):
    """Lines with comments (//, //!, ///) removed; string contents are kept."""
    for n, line in enumerate(text.splitlines(), 1):
        yield n, re.sub(r"//.*$", "", line)


for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src)
    if rel.parts[0] == "bin":
        for n, line in code_lines(path.read_text()):
            for used in re.findall(r"\bretrace::([a-z_][a-z0-9_]*)", line):
                if used != "cli":
                    faults.append(f"src/{rel}:{n}: a binary names `retrace::{used}`; "
                                  "binaries only call into `retrace::cli`")
        continue
    if rel.name == "lib.rs":
        module = None
    else:
        module = rel.parts[0].removesuffix(".rs").removesuffix("_tests")
    text = path.read_text()
    lines = list(code_lines(text))
    for n, line in lines:
        if rel.parts[0] not in ("platform.rs", "platform_tests.rs") and LINUX_ONLY.search(line):
            faults.append(f"src/{rel}:{n}: a Linux-only call outside src/platform.rs "
                          f"(docs/platforms.md): {LINUX_ONLY.search(line).group(0)}")
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
    graph.setdefault(module, set()).update(o for o in named if o in RANK and o != module)
    for other in sorted(named):
        if other in RANK and RANK[other] > RANK[module]:
            faults.append(
                f"src/{rel}: `{module}` (layer {RANK[module]}) imports `{other}` "
                f"(layer {RANK[other]}), a higher layer"
            )

# Tables and meta keys of the layers above: declared outside src/store/, never named inside.
HANDLE = re.compile(r'\b(?:RowsTable|KeyedTable|BytesTable|NamedTable|MetaKey)::new\(\s*"([^"]+)"')
declared = {}
store_literals = []
for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src)
    lines = list(code_lines(path.read_text()))
    if rel.parts[0] == "store":
        for n, line in lines:
            store_literals.extend((f"src/{rel}:{n}", lit) for lit in re.findall(r'"([^"\\]*)"', line))
    else:
        for n, line in lines:
            for name in HANDLE.findall(line):
                declared.setdefault(name, f"src/{rel}:{n}")
for where, lit in store_literals:
    if lit in declared:
        faults.append(f"{where}: names \"{lit}\", a table or meta key declared above the store "
                      f"({declared[lit]}); the store knows only its own")

# Import cycles: a depth-first search reporting each cycle once (by its smallest rotation).
seen_cycles = set()


def visit(node, stack, on_stack, done):
    stack.append(node)
    on_stack.add(node)
    for nxt in sorted(graph.get(node, ())):
        if nxt in on_stack:
            cycle = stack[stack.index(nxt):]
            k = cycle.index(min(cycle))
            key = tuple(cycle[k:] + cycle[:k])
            if key not in seen_cycles:
                seen_cycles.add(key)
                faults.append("import cycle: " + " -> ".join(key + (key[0],)))
        elif nxt not in done:
            visit(nxt, stack, on_stack, done)
    stack.pop()
    on_stack.discard(node)
    done.add(node)


done = set()
for m in sorted(graph):
    if m not in done:
        visit(m, [], set(), done)

for f in faults:
    print(f)
if faults:
    print(f"{len(faults)} layer violation(s); see docs/architecture.md, \"Layers\"")
    sys.exit(1)
