#!/usr/bin/env python3
"""The library's public API, as `cargo doc` shows it, against `.ci/public-api.txt`.

Run after `cargo doc --no-deps` (default features). Lists every public item of the crate
(`all.html`), and of each type its inherent methods, variants and public fields, one line
each, and compares with the checked-in list. An item, method or field added to (or removed
from) the API outside the curated `pub use` list of `src/lib.rs` shows up here: update the
list with `python3 .ci/public_api.py --bless` when the change is meant.
Exits 1 with the difference otherwise.
"""
import difflib
import os
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
doc = pathlib.Path(os.environ.get("CARGO_TARGET_DIR") or root / "target") / "doc" / "retrace"
expected_path = root / ".ci" / "public-api.txt"


def section(html, name):
    """The HTML of the `<div id="NAME">` block (up to the next list div), or ''."""
    start = html.find(f'id="{name}"')
    if start < 0:
        return ""
    ends = [html.find(f'id="{other}"', start + 1) for other in
            ("synthetic-implementations-list", "trait-implementations-list",
             "blanket-implementations-list")]
    ends = [e for e in ends if e > 0]
    return html[start:min(ends) if ends else len(html)]


def api():
    all_html = (doc / "all.html").read_text()
    lines = []
    for href, name in re.findall(r'<li><a href="([^"]+)">([^<]+)</a></li>', all_html):
        kind = href.split(".", 1)[0]
        lines.append(f"{kind} {name}")
        page = (doc / href).read_text()
        for member in ("variant", "structfield"):
            for m in re.findall(rf'id="{member}\.([A-Za-z_0-9]+)"', page):
                lines.append(f"{kind} {name} {member} {m}")
        inherent = section(page, "implementations-list")
        for m in re.findall(r'id="(method|associatedconstant|associatedtype)\.([A-Za-z_0-9]+)"', inherent):
            lines.append(f"{kind} {name} {m[0]} {m[1]}")
    return sorted(set(lines))


if not (doc / "all.html").exists():
    sys.exit("no target/doc/retrace/all.html: run `cargo doc --no-deps` first")
found = api()
if "--bless" in sys.argv:
    expected_path.write_text("\n".join(found) + "\n")
    print(f"{len(found)} lines written to {expected_path.relative_to(root)}")
    sys.exit(0)
expected = expected_path.read_text().splitlines() if expected_path.exists() else []
if found != expected:
    sys.stdout.writelines(difflib.unified_diff(
        [l + "\n" for l in expected], [l + "\n" for l in found],
        ".ci/public-api.txt", "cargo doc"))
    print("The public API changed. Items belong in src/lib.rs's `pub use` list; if the change"
          " is meant, run `python3 .ci/public_api.py --bless` and commit the list.")
    sys.exit(1)
print(f"public API: {len(found)} lines, as listed")
