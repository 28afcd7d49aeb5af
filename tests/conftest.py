"""Settings for the whole suite.

Hypothesis' per-example deadline measures the machine's load as much as the code: on
2 shared cores a pure check can take 10x its usual time. Examples stay bounded by
``max_examples``; the deadline is off so that load never fails a correct test.

Long mode: a test marked ``long`` repeats, at a larger size, what a shorter test of the
suite already checks (every crash point instead of two, a path that is off by default
through every hostile input). The suite must stay well under 30 minutes on 2 cores, so
these run only with ``STREAMSHIELD_LONG_TESTS=1`` (README, "Long modes"), as the nightly
fuzz and soak do.

Order: the longest test files first (``tests/file_weights.json``). ``make test`` runs
``--dist loadfile --no-loadscope-reorder``: xdist hands the workers whole files in
this order, so the run ends on short files on every worker. xdist's own order (files
with the most tests first) put the one-test server files last, and the run ended with
one worker on a two-minute crash or soak test while the other idled.
"""

import json
import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("streamshield", deadline=None)
settings.load_profile("streamshield")

LONG = "STREAMSHIELD_LONG_TESTS"


def long_mode() -> bool:
    """Whether the long tests run (``STREAMSHIELD_LONG_TESTS=1``)."""
    return os.environ.get(LONG, "") not in ("", "0")


WEIGHTS = Path(__file__).resolve().parent / "file_weights.json"
SECONDS_PER_TEST = 1.0
"""The weight of a test in a file the weights do not list (short files, new files)."""


def file_weights() -> dict[str, float]:
    """Seconds per test file (path from the repository root) of the last profile."""
    try:
        return json.loads(WEIGHTS.read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return {}


def longest_files_first(items: list[pytest.Item]) -> None:
    """Reorders ``items`` in place: whole files, heaviest first; the tests of a file
    keep their order (some server tests build on the ones before them in their file)."""
    weights = file_weights()
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def weight(name: str) -> float:
        return weights.get(name, SECONDS_PER_TEST * len(files[name]))

    ordered = sorted(files, key=lambda name: -weight(name))  # stable: ties as collected
    items[:] = [item for name in ordered for item in files[name]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_files_first(items)
    if long_mode():
        return
    skip = pytest.mark.skip(reason=f"long mode only: set {LONG}=1 (README, 'Long modes')")
    for item in items:
        if item.get_closest_marker("long") is not None:
            item.add_marker(skip)
