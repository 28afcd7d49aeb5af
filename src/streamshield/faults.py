"""Crash points: where the fault-injection harness may kill the server, by name.

A crash test must stop the process at a precise point (between a landing file's rename
and the catalog update, between a batch's files and its commit marker, ...); a random
SIGKILL hits such a window rarely. Each window the recovery code has to get right is
marked with :func:`crash_point`, and ``STREAMSHIELD_CRASH_AT=<point>[:<n>]`` in the
server's environment makes the ``n``-th pass (default the first) SIGKILL the process
itself: no clean-up, no flush, exactly what a power cut or the OOM killer does.

Off by default and free when off: without the variable, :func:`crash_point` is a
function that returns at once. Nothing the API accepts reads or sets the variable (it
is read once, when this module is imported, from the process environment), so only
whoever starts the server can arm it; an unknown point name stops the import, so a typo
never runs a "crash test" that crashes nowhere. ``bench/crash.py`` is the harness.
"""

from __future__ import annotations

import os
import signal

VARIABLE = "STREAMSHIELD_CRASH_AT"

POINTS = {
    "landing.before_rename": "a landing file is written and fsynced in _tmp, not in place",
    "landing.before_seq": "a landing file is in place, the catalog's last_seq not advanced",
    "ingest.before_marker": "a labelling batch's files are in place, its commit marker not",
    "ingest.after_marker": "the commit marker is written, the shield state snapshot not",
    "result.before_rename": "a query's output batch is staged, not renamed into place",
    "result.delivered": "a query's batch reached its subscribers, not yet stored",
    "result.after_rename": "a query's output batch is in place, Spark has not committed it",
    "subscriber.serving": "rows of a batch are being handed to a subscriber",
    "catalog.schema": "a schema is in the catalog or its file is written, not both",
    "catalog.query": "a query is recorded, its definition or run not complete",
    "kafka.before_commit": "Kafka records have landed, their offsets are not committed",
    "mqtt.before_ack": "MQTT messages have landed and are recorded, not yet acknowledged",
}
"""Every crash point and the window it stands for (the harness reports them by name)."""


class CrashSpecError(ValueError):
    """``STREAMSHIELD_CRASH_AT`` names no known point or has a bad count."""


def parse(spec: str) -> tuple[str, int]:
    """``point[:n]`` as (point, n); n >= 1 is the pass that kills."""
    point, _, count = spec.strip().partition(":")
    if point not in POINTS:
        raise CrashSpecError(f"{VARIABLE}: unknown crash point {point!r}; known: {sorted(POINTS)}")
    try:
        n = int(count) if count else 1
    except ValueError:
        raise CrashSpecError(f"{VARIABLE}: the count after ':' must be an integer") from None
    if n < 1:
        raise CrashSpecError(f"{VARIABLE}: the count after ':' must be at least 1")
    return point, n


def _armed(point: str, n: int):
    passes = 0

    def crash_point(name: str) -> None:
        nonlocal passes
        if name != point:
            return
        passes += 1
        if passes == n:
            os.kill(os.getpid(), signal.SIGKILL)

    return crash_point


def _off(name: str) -> None:
    """Not armed: nothing to do."""


_spec = os.environ.get(VARIABLE, "").strip()
crash_point = _armed(*parse(_spec)) if _spec else _off
"""``crash_point(name)``: SIGKILL the process here when armed for ``name`` (see above)."""
