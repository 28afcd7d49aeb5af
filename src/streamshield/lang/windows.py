"""CQL stream-to-relation windows (``[ROWS n]``, ``[RANGE t]``, ``[RANGE t SLIDE s]``, ``[NOW]``).

A window turns a stream into a relation at every instant. Here an instant is the end
of a micro-batch: the engine evaluates windows on batch boundaries, so a window's
content is a function of the batches seen so far and never of arrival order inside
one batch (Spark does not keep it).

- ``ROWS n``: the ``n`` latest tuples of the stream the query may read, in the stream's
  order (:class:`StreamPosition`; the paper's ``[ROWS n WHERE Level DOMINATED BY C]``
  and CQL's ``[ROWS n]``: n tuples in all, not n per channel);
- ``RANGE t``: tuples whose event time lies within ``t`` seconds of the newest event
  time seen on the stream;
- ``RANGE t SLIDE s``: hopping windows of length ``t`` every ``s`` seconds (aggregates);
- ``NOW``: the tuples of the current micro-batch only.

Time is counted in whole seconds: CQL's ``[RANGE t]`` slides with every new instant,
and the smallest instant here is one second, so ``[RANGE t]`` under an aggregate is the
hopping window ``[RANGE t SLIDE 1]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

UNIT_SECONDS = {
    "SECOND": 1,
    "SECONDS": 1,
    "MINUTE": 60,
    "MINUTES": 60,
    "HOUR": 3600,
    "HOURS": 3600,
}
"""Units a CQL window may name after a number; a bare number is seconds."""

MAX_WINDOW_SIZE = 2**31 - 1
"""Largest row count or number of seconds a window may have, whatever the limits say:
Spark keeps interval seconds and row counts in 32-bit fields in places, and no real
window comes near it (68 years)."""

_SPARK_UNITS = {
    "microsecond": 1e-6,
    "millisecond": 1e-3,
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 604800,
}
_INTERVAL_PART = re.compile(r"(\d{1,12})\s+([a-z]+?)s?(?=\s|$)")


class WindowKind(Enum):
    ROWS = "ROWS"
    RANGE = "RANGE"
    NOW = "NOW"


@dataclass(frozen=True)
class WindowSpec:
    """One window; ``size`` is a row count (ROWS) or seconds (RANGE), ``slide`` seconds."""

    kind: WindowKind
    size: int = 0
    slide: int | None = None

    def __post_init__(self) -> None:
        if self.kind is WindowKind.NOW:
            if self.size or self.slide is not None:
                raise ValueError("[NOW] takes no size")
            return
        for value in (self.size, self.slide):
            if value is not None and (type(value) is not int or value > MAX_WINDOW_SIZE):
                raise ValueError(f"window sizes are whole numbers up to {MAX_WINDOW_SIZE}")
        if self.size <= 0:
            raise ValueError(f"a window size must be positive, got {self.size}")
        if self.slide is not None and (self.kind is not WindowKind.RANGE or self.slide <= 0):
            raise ValueError("only a RANGE window slides, by a positive number of seconds")
        if self.slide is not None and self.slide > self.size:
            # Spark refuses it too: tuples between two windows would belong to none.
            raise ValueError("a window cannot slide further than its range")

    @property
    def hop(self) -> int | None:
        """Seconds between two RANGE windows: the SLIDE, or one second (CQL's every instant)."""
        if self.kind is not WindowKind.RANGE:
            return None
        return self.slide if self.slide is not None else 1

    def text(self) -> str:
        """The CQL form, e.g. ``[RANGE 60 SLIDE 10]``."""
        if self.kind is WindowKind.NOW:
            return "[NOW]"
        slide = f" SLIDE {self.slide}" if self.slide is not None else ""
        return f"[{self.kind.value} {self.size}{slide}]"


NOW = WindowSpec(WindowKind.NOW)


def rows(n: int) -> WindowSpec:
    return WindowSpec(WindowKind.ROWS, n)


def range_(seconds: int, slide: int | None = None) -> WindowSpec:
    return WindowSpec(WindowKind.RANGE, seconds, slide)


def spark_duration(seconds: int) -> str:
    """A number of seconds as a duration string Spark's ``window()`` reads."""
    return f"{int(seconds)} second" + ("" if seconds == 1 else "s")


def duration_seconds(text: str) -> float | None:
    """Seconds in a Spark duration string such as ``'10 minutes'`` or ``'1 hour 30 minutes'``.

    ``None`` when the text is not such a duration: a user-written ``window()`` call whose
    length cannot be read here cannot be checked against a limit, so the caller denies it.
    """
    words = text.strip().lower()
    words = words.removeprefix("interval").strip()
    if not words or len(words) > 200:
        return None
    total, end = 0.0, 0
    for match in _INTERVAL_PART.finditer(words):
        if words[end : match.start()].strip() or match.group(2) not in _SPARK_UNITS:
            return None
        total += int(match.group(1)) * _SPARK_UNITS[match.group(2)]
        end = match.end()
    return total if end and not words[end:].strip() else None


@dataclass(frozen=True, order=True)
class StreamPosition:
    """Where a tuple stands in its stream's order, the order ``[ROWS n]`` counts in.

    Order exists only within a channel (``seq``) and Spark keeps no arrival order, so
    the order across channels is the one the system itself fixes: the ingest
    micro-batch that labelled the tuple (later posts are labelled in later batches),
    then, among the tuples of one ingest batch (which arrived within one ingest
    interval, with no order across channels to recover), the channel's name, then
    ``seq``. Every part is stored with the tuple (the ingest batch is its directory in
    the labelled store), so a restart replays the same order. The fields compare in
    this order; no two tuples share a position.
    """

    ingest: int
    stream: str
    provider: str
    seq: int


ROW_ORDER = ("ingest", "stream", "provider", "seq")
"""The fields of :class:`StreamPosition`, most significant first (the engine sorts on the
same columns: engine/queries/window_state.py)."""


def latest_rows(positions: Iterable[StreamPosition], n: int) -> list[StreamPosition]:
    """The reference ``[ROWS n]``: the ``n`` latest of ``positions`` (the tuples the
    query may read, filtered before the window), oldest first."""
    return sorted(positions)[-n:] if n > 0 else []
