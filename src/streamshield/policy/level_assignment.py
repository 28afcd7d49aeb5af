"""Which level a stream, a channel's tuples and a session have (paper 2, section 3).

A pure snapshot of the catalog's level definitions, read in one transaction by
:meth:`~streamshield.catalog.levels.Levels.level_assignment`, so that secure ingest
(one call per micro-batch) and level-aware queries (one call per registration) decide
against one consistent state without touching the database per tuple.

Defaults:

* a stream without an assigned level is *public* (``[⊥, ..., ⊥]``): the Chinese Wall
  restricts the streams an administrator puts behind it, and every other stream stays
  governed by its role labels alone (not *trusted*, which would hide every unlabelled
  stream, the whole hospital example with it, from every query below the top once a COI
  class exists);
* a channel (stream, provider) without a level of its own sends at its stream's level;
* a user without a clearance is cleared for *public* only, and a session that has not
  activated a level runs at *public*.

A channel's level is always dominated by its stream's (the catalog refuses anything
else), so a tuple's level is dominated by its stream's level, as the paper requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamshield.policy.bitset import Words
from streamshield.policy.coi import BOTTOM, ErrorKind, LatticeError
from streamshield.policy.lattice import Lattice, Level

StoredLevel = Mapping[str, str]
"""A level as the catalog stores it: ``{COI class: company or "T"}``, ``⊥`` left out.

Keyed by class name, not position, so a stored level keeps its meaning when a COI
class is added later (the new class is ``⊥`` in every level stored before)."""


def to_stored(lattice: Lattice, level: Level) -> dict[str, str]:
    """The stored form of a checked level."""
    parts = lattice.check(level).parts
    return {c.name: p for c, p in zip(lattice.classes.classes, parts, strict=True) if p != BOTTOM}


def from_stored(lattice: Lattice, stored: StoredLevel) -> Level:
    """The level of a stored form; a class or company no longer known is an error
    (classes and companies are never removed, so that means a damaged catalog)."""
    names = [c.name for c in lattice.classes.classes]
    unknown = sorted(set(stored) - set(names))
    if unknown:
        raise LatticeError(ErrorKind.UNKNOWN_CLASS, f"stored level names unknown class {unknown}")
    return lattice.level(*(stored.get(n, BOTTOM) for n in names))


@dataclass(frozen=True)
class LevelAssignment:
    """The lattice and the stream and channel levels of one catalog state."""

    lattice: Lattice
    streams: Mapping[str, Level] = field(default_factory=dict)
    channels: Mapping[tuple[str, str], Level] = field(default_factory=dict)

    def stream_level(self, stream: str) -> Level:
        """The stream's level; *public* when none is assigned."""
        return self.streams.get(stream, self.lattice.public)

    def tuple_level(self, stream: str, provider: str) -> Level:
        """The level secure ingest gives a tuple of ``provider`` on ``stream``: the
        channel's level if it has one, else the stream's."""
        return self.channels.get((stream, provider), self.stream_level(stream))

    def tuple_words(self, stream: str, provider: str) -> Words:
        """:meth:`tuple_level` encoded (the ``_ss_lvl_*`` column values)."""
        return self.lattice.encode(self.tuple_level(stream, provider))
