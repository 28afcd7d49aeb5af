"""Tells load from a fault in the server tests: each ``poll`` prints how long it took
against its timeout, with the load average then; ``POLL_FACTOR`` (default 1) lets every
poll wait that many times longer.

Why: on a loaded machine a server test's poll times out and nothing says whether a batch
was lost or only late. With a factor of, say, 6 a late batch still arrives (the printed
time says how late) and a lost one still fails. Use:
``POLL_FACTOR=6 python -m pytest -s -p tests.plugins.poll_timing tests/server/test_x.py``
(docs/query-sharing.md, "Why the lifecycle test timed out").
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

FACTOR = float(os.environ.get("POLL_FACTOR", "1"))


def _load() -> str:
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def _timed(poll: Callable, module: str) -> Callable:
    def timed(condition: Callable[[], object], timeout: float = 90.0, every: float = 0.5):
        start = time.monotonic()
        try:
            return poll(condition, timeout * FACTOR, every)
        finally:
            took = time.monotonic() - start
            late = " LATE" if took > timeout else ""
            print(f"POLL {module} {took:.1f}s of {timeout:.0f}s{late} load {_load()}", flush=True)

    return timed


def pytest_collection_finish(session: object) -> None:
    from tests.server import conftest

    original = conftest.poll  # the test modules hold it by name: each one is wrapped
    for name, module in list(sys.modules.items()):
        if name.startswith("tests.server.") and getattr(module, "poll", None) is original:
            module.poll = _timed(original, name.rsplit(".", 1)[-1])
