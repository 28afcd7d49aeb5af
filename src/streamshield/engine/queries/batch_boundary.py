"""Stopping a streaming query between two micro-batches.

Structured Streaming has no graceful stop: ``StreamingQuery.stop()`` interrupts a batch
in flight. The checkpoint stays consistent (the batch is redone on restart), but the
interrupted batch's work is thrown away and the JVM logs a stack trace. Waiting until
no trigger runs, then stopping, lands the stop on a boundary in practice: the next
trigger is at least a trigger interval away.
"""

from __future__ import annotations

import time
from typing import Any


def at_batch_boundary(streaming: Any, timeout: float, every: float = 0.02) -> bool:
    """Waits (bounded) until ``streaming`` runs no trigger, so that a ``stop()`` right
    after falls between two micro-batches; False when the timeout came first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if not streaming.isActive or not streaming.status.get("isTriggerActive"):
                return True
        except Exception:  # the query is gone already
            return True
        time.sleep(every)
    return False
