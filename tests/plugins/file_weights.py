"""Writes ``tests/file_weights.json`` from a whole-suite profile (a JUnit XML report).

Why: ``--dist loadfile`` hands whole files to the workers in the order collected
(``--no-loadscope-reorder``); tests/conftest.py collects the longest files first, so
that the run ends on short files on both workers instead of one worker running a
two-minute server test while the other idles. xdist's own order (most tests first)
put the one-test server files (crash, soak, the standalone cluster) last.

Use: ``python -m pytest -n 2 --dist loadfile --junitxml=profile.xml`` once, then
``python -m tests.plugins.file_weights profile.xml``. The seconds depend on the load of
that run; only their ratios matter.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

WEIGHTS = Path(__file__).resolve().parent.parent / "file_weights.json"
MIN_SECONDS = 2
"""Files below this are left out: they weigh their default (tests/conftest.py)."""


def file_seconds(report: Path) -> Counter[str]:
    """Seconds per test file (setup, call and teardown) in a JUnit XML report."""
    per: Counter[str] = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "")
        if not module.startswith("tests."):
            continue
        parts = module.split(".")
        # classname is the module, or the module and a test class: find the file
        for end in range(len(parts), 1, -1):
            path = Path(*parts[:end]).with_suffix(".py")
            if (WEIGHTS.parent.parent / path).exists():
                per[path.as_posix()] += float(case.get("time", 0.0))
                break
    return per


def main() -> None:
    per = file_seconds(Path(sys.argv[1]))
    seconds = {
        name: round(value)
        for name, value in sorted(per.items(), key=lambda item: (-item[1], item[0]))
        if round(value) >= MIN_SECONDS
    }
    about = (
        "Worker seconds per test file, for the order of --dist loadfile (tests/conftest.py: "
        f"longest files first), from {Path(sys.argv[1]).name}; only the ratios matter. Files "
        "not listed weigh 1 s per test. Regenerate: python -m tests.plugins.file_weights X.xml"
    )
    doc = {"about": about, "seconds": seconds}
    WEIGHTS.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(seconds)} files written to {WEIGHTS}")


if __name__ == "__main__":
    main()
