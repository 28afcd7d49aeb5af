"""Bounded polling for the tests that wait on another thread or process.

Why one helper: a test waits on a condition that something else makes true (a server
answering, a background pruner, a stopping query); a fixed sleep would be too short on a
loaded machine and too long on a quiet one. Spark tests wait with
``processAllAvailable()`` or ``availableNow`` triggers instead, never here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(condition: Callable[[], T], timeout: float = 90.0, every: float = 0.5) -> T:
    """The condition's first truthy value within ``timeout`` seconds, or AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("condition not met in time")
        time.sleep(every)
