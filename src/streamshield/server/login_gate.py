"""Password checks off the event loop, a few at a time, with a bounded queue.

An argon2id check costs ~0.1 s of one core and 64 MiB (:mod:`streamshield.catalog.
passwords`). Run in the framework's shared pool of 40 threads, fifty logins at once on
two cores would run 40 checks side by side (2.5 GiB of argon2 memory), each 20 times
slower, and hold every thread the other synchronous routes need: answers would take
minutes and clients time out. Here at most ``workers``
checks run at once (about one per core: more only slows each down), at most
``waiting`` more wait their turn, and a login beyond that is answered at once with
503 ``login_busy`` and a ``Retry-After`` of the expected wait, never left to time
out. Nothing about the password is checked or counted for a refused attempt (the
failed-login throttle is untouched).
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from streamshield.server import error_codes as codes
from streamshield.server.errors import ApiError

T = TypeVar("T")
DEFAULT_WAITING = 32


class LoginBusy(ApiError):
    """503: too many logins already waiting; ``retry_after`` seconds is the expected wait."""

    status, code = 503, codes.LOGIN_BUSY

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            "too many logins are being checked; try again after the Retry-After seconds"
        )
        self.retry_after = retry_after


def default_workers() -> int:
    """One check per core, at most 4 (each is single-threaded: parallelism 1)."""
    return max(1, min(4, os.cpu_count() or 1))


class LoginGate:
    """``await gate.run(fn, ...)``: ``fn`` in the gate's own threads, or :class:`LoginBusy`."""

    def __init__(self, workers: int | None = None, waiting: int = DEFAULT_WAITING) -> None:
        self.workers = workers or default_workers()
        if self.workers < 1 or waiting < 0:
            raise ValueError("a login gate needs a worker and a non-negative queue")
        self.limit = self.workers + waiting
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="login")
        self._lock = threading.Lock()
        self._pending = 0
        self._seconds = 0.5  # a check's recent duration (moving average), for Retry-After

    @property
    def pending(self) -> int:
        with self._lock:
            return self._pending

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        with self._lock:
            if self._pending >= self.limit:
                raise LoginBusy(self._retry_after())
            self._pending += 1
        try:
            # A client that leaves while waiting cancels its check before it starts.
            return await asyncio.wrap_future(self._pool.submit(self._timed, fn, *args))
        finally:
            with self._lock:
                self._pending -= 1

    def _timed(self, fn: Callable[..., T], *args: object) -> T:
        began = time.monotonic()
        try:
            return fn(*args)
        finally:
            took = time.monotonic() - began
            with self._lock:
                self._seconds = 0.8 * self._seconds + 0.2 * took

    def _retry_after(self) -> int:
        """Seconds until the queue has room again, as the recent checks went (>= 1)."""
        return max(1, math.ceil(self._pending / self.workers * self._seconds))
