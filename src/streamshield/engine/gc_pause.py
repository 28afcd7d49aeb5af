"""Python's cyclic garbage collector held off while the ingest driver works on a batch.

At one sp per tuple the driver builds tens of thousands of small objects per batch (sps,
policies, rule words, decision rows). Each allocation burst triggers the generational
collector, and its older generations scan the whole driver heap (py4j, pyspark, the
catalog): measured on 10k sps, pure Python, that was about half of the driver's time
(parse 47 -> 22 us, Arrow rows 28 -> 4 us per sp). Reference counting still frees
everything as usual while paused; only cycles wait, and the collector runs again when
the last batch in flight leaves (nested and concurrent batches share one count).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off the cyclic collector for the block; restored as it was when the last
    holder leaves, also when the block raises."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
