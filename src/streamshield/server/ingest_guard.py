"""Secure ingest halted for its state: one clear, audited, lasting stop, not a retry loop.

When the shield state a batch must start from is missing or unreadable, or the
checkpoint, the labelled store and the shield state are out of step
(:mod:`streamshield.engine.ingest.ingest_consistency`), restarting ingest cannot help: every
restart would meet the same state and fail again (or, worse, start from a guess). So
the server *halts* ingest instead of restarting it:

* the halt is audited once (``QUERY_FAILED`` on ``ingest``, error class
  ``SHIELD_STATE_INVALID``; the reason, which names files and batches but no data, for
  administrators);
* the watch no longer restarts ingest (it still restarts ingest that died of anything
  else, every 10 s at most);
* ``/readyz`` answers 503 with ``ingest`` and ``ingest_state`` false;
* appends and INSERT SP are refused (409 ``ingest_halted``): what lands would never be
  labelled, and a tuple accepted must be a tuple labelled.

The halt lasts until the operator repairs the root (``docs/security.md``: relabel from
the beginning) and restarts the server.
"""

from __future__ import annotations

import logging
import threading

from streamshield.engine.ingest.ingest_consistency import IngestOutOfStep
from streamshield.engine.ingest.tracker_state import ShieldStateError
from streamshield.server import error_codes as codes
from streamshield.server.errors import Conflict

audit = logging.getLogger("streamshield.audit")
ERROR_CLASS = "SHIELD_STATE_INVALID"
_MARKERS = (ShieldStateError.__name__, IngestOutOfStep.__name__)


def is_state_failure(failure: BaseException | None) -> bool:
    """Whether a streaming query died of its shield state (the Python class name travels
    through the JVM's failure text, the exception object does not)."""
    if isinstance(failure, ShieldStateError):
        return True
    return failure is not None and any(marker in str(failure) for marker in _MARKERS)


def reason_of(failure: BaseException) -> str:
    """The state error's own message (files and batches, never data values)."""
    if isinstance(failure, ShieldStateError):
        return str(failure)
    text = str(failure)
    for marker in _MARKERS:
        at = text.rfind(f"{marker}: ")
        if at >= 0:
            return text[at + len(marker) + 2 :].splitlines()[0][:500]
    return "the shield state is missing, unreadable or out of step"


class IngestHalt:
    """Whether ingest is halted for its state, and why."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._lock = threading.Lock()

    @property
    def reason(self) -> str | None:
        return self._reason

    def clear(self) -> None:
        """Not halted (a start looks at the state afresh)."""
        with self._lock:
            self._reason = None

    def halt(self, reason: str) -> bool:
        """Records the halt; True only the first time (audit it then, once)."""
        with self._lock:
            first = self._reason is None
            self._reason = self._reason or reason
        if first:
            audit.error("secure ingest halted, not restarted: %s", reason)
        return first

    def refuse_input(self) -> None:
        """409 while halted: accepted elements would never be labelled."""
        if self._reason is not None:
            raise Conflict(
                "secure ingest is halted because its shield state is missing, unreadable or "
                "out of step; nothing is accepted until an administrator repairs it",
                codes.INGEST_HALTED,
            )
