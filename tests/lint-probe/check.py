#!/usr/bin/env python3
"""Reads `cargo clippy --message-format=json` for this crate (built with `--cfg lint_probe`)
from stdin and compares its findings in src/lib.rs with the `// lint: NAME ...` marks there:
every mark must be found on its line, and nothing else (a lint the attribute's own code
raises, or one reported at the attribute, is a failure). Exit status 1 on a difference."""

import json
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
source = os.path.join(here, "src", "lib.rs")

expected = set()
with open(source) as f:
    for number, line in enumerate(f, start=1):
        m = re.match(r"\s*[^/\s].*// lint: ([a-z_ ]+)$", line)
        if m:
            for name in m.group(1).split():
                expected.add((number, "clippy::" + name))

found = set()
for line in sys.stdin:
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        continue
    if message.get("reason") != "compiler-message":
        continue
    diagnostic = message["message"]
    code = (diagnostic.get("code") or {}).get("code")
    if diagnostic.get("level") not in ("warning", "error") or code is None:
        continue
    for span in diagnostic.get("spans", []):
        if span.get("is_primary") and span["file_name"].endswith("lint-probe/src/lib.rs"):
            found.add((span["line_start"], code))

missing = sorted(expected - found)
unexpected = sorted(found - expected)
for number, code in missing:
    print(f"src/lib.rs:{number}: {code} was not reported")
for number, code in unexpected:
    print(f"src/lib.rs:{number}: {code} was reported, and is not marked")
if not expected:
    print("no marks read")
    sys.exit(1)
if missing or unexpected:
    sys.exit(1)
print(f"{len(expected)} lints found where marked, none elsewhere")
