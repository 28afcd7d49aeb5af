"""How many refusals that anyone can cause one client may have written to the audit trail.

Anyone can send a made-up bearer token, or keep logging in while throttled, and each
refusal is an audit entry: a durable catalog write. Unbounded, a loop from one address
would fill the catalog and keep its writer busy for everyone. So each client address
gets ``per_window`` entries per ``window_seconds``; the refusals past that are refused
alike (the same answer) but only counted, and the address's next entry says how many
were not written (``suppressed``). An administrator still sees that an address is
hammering, at a cost bounded per address and minute.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

PER_WINDOW = 20
WINDOW_SECONDS = 60.0
MAX_CLIENTS = 10_000
"""Addresses followed at once; past that the oldest windows are forgotten (their next
refusal is audited as a first one)."""


@dataclass
class _Window:
    started: float
    written: int = 0
    suppressed: int = 0


class RefusalBudget:
    """``take(client)``: None when this refusal is not to be audited, else the number of
    refusals from ``client`` left unwritten since its last audited one (one budget for
    every kind of refusal the catalog bounds this way)."""

    def __init__(
        self,
        per_window: int = PER_WINDOW,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_window, self.window_seconds, self.clock = per_window, window_seconds, clock
        self._windows: dict[str, _Window] = {}
        self._lock = threading.Lock()

    def take(self, client: str | None) -> int | None:
        key, now = client or "", self.clock()
        with self._lock:
            window = self._windows.get(key)
            if window is None or now - window.started >= self.window_seconds:
                carried = window.suppressed if window is not None else 0
                if window is None and len(self._windows) >= MAX_CLIENTS:
                    del self._windows[next(iter(self._windows))]
                window = self._windows[key] = _Window(now, suppressed=carried)
            if window.written >= self.per_window:
                window.suppressed += 1
                return None
            window.written += 1
            suppressed, window.suppressed = window.suppressed, 0
            return suppressed
