"""A plain-Python oracle for SCJoin: windows, ISTREAM pairs and per-consumer visibility.

It works on collected labelled rows (dicts) and decides on *sets* of bit positions read
off the label words (whatever the role codec puts in a bit), so it shares no code with
the engine's word arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.views.labels import denied_column, reader_column
from streamshield.lang.windows import WindowKind, WindowSpec
from streamshield.policy.encoding import RoleCodec

Row = dict


@dataclass
class OracleSide:
    stream: StreamDefinition
    key: str
    window: WindowSpec


class OracleWindow:
    def __init__(self, side: OracleSide) -> None:
        self.side = side
        self.rows: list[tuple[Row, int]] = []  # (row, arrival round)

    def update(self, new: Sequence[Row], instant: int) -> list[tuple[Row, int]]:
        new = [r for r in new if r["reason"] == "pass"]
        window = self.side.window
        if window.kind is WindowKind.NOW:
            self.rows = [(r, instant) for r in new]
        elif window.kind is WindowKind.ROWS:
            # the n latest of the side's stream: by instant (one ingest batch each), then
            # channel, then seq (lang/windows.py StreamPosition)
            rows = self.rows + [(r, instant) for r in new]
            order = sorted(
                rows, key=lambda i: (i[1], i[0]["stream"], i[0]["provider"], i[0]["seq"])
            )
            self.rows = order[-window.size :]
        else:
            rows = self.rows + [(r, instant) for r in new]
            name = self.side.stream.event_time
            times = [r[name].timestamp() for r, _ in rows if r[name] is not None]
            newest = max(times, default=None)
            self.rows = [
                (r, a)
                for r, a in rows
                if newest is not None
                and r[name] is not None
                and r[name].timestamp() > newest - window.size
            ]
        return self.rows


def _position(item: tuple[Row, int]) -> tuple:
    row, instant = item
    return (instant, row["stream"], row["provider"], row["seq"])


class JoinOracle:
    def __init__(self, codec: RoleCodec, left: OracleSide, right: OracleSide) -> None:
        self.codec = codec
        self.sides = (left, right)
        self.windows = (OracleWindow(left), OracleWindow(right))

    def step(self, new_left: Sequence[Row], new_right: Sequence[Row], instant: int) -> list:
        """The ISTREAM pairs of this instant, unfiltered: ``(left row, right row)``."""
        left = self.windows[0].update(new_left, instant)
        right = self.windows[1].update(new_right, instant)
        kl, kr = self.sides[0].key, self.sides[1].key
        return [
            (a, b)
            for a, ta in left
            for b, tb in right
            if a[kl] is not None and a[kl] == b[kr] and instant in (ta, tb)
        ]

    def _sets(self, row: Row, obj: int) -> tuple[frozenset, frozenset]:
        width = self.codec.width
        readers = tuple(row[reader_column(obj, w)] for w in range(width))
        denied = tuple(row[denied_column(obj, w)] for w in range(width))
        return bits(readers), bits(denied)

    def deliver(self, pairs: Iterable[tuple[Row, Row]], roles: Iterable[str]) -> list[tuple]:
        """What a consumer receives: ``(left tuple, right tuple, r0, d0)`` with masking."""
        q = bits(self.codec.query(roles))
        out = []
        for a, b in pairs:
            sets = [
                (self._sets(row, 0), self._sets(row, side.stream.names.index(side.key) + 1))
                for row, side in ((a, self.sides[0]), (b, self.sides[1]))
            ]
            readers = sets[0][0][0] & sets[0][1][0] & sets[1][0][0] & sets[1][1][0]
            denied = sets[0][0][1] | sets[0][1][1] | sets[1][0][1] | sets[1][1][1]
            if not (q & readers) or q & denied:
                continue
            values = []
            for i, row in enumerate((a, b)):
                other = self._sets((a, b)[1 - i], 0)
                masked = []
                for obj, name in enumerate(self.sides[i].stream.names, start=1):
                    r, d = self._sets(row, obj)
                    shown = bool(q & r & other[0]) and not q & (d | other[1])
                    masked.append(row[name] if shown else None)
                values.append(tuple(masked))
            r0 = sets[0][0][0] & sets[1][0][0]
            d0 = sets[0][0][1] | sets[1][0][1]
            out.append(
                (values[0], values[1], words(r0, self.codec.width), words(d0, self.codec.width))
            )
        return sorted(out, key=repr)


def bits(label: Sequence[int]) -> frozenset[int]:
    """Positions of the set bits of a label's signed 64-bit words."""
    return frozenset(
        w * 64 + i for w, word in enumerate(label) for i in range(64) if (word >> i) & 1
    )


def words(positions: Iterable[int], width: int) -> tuple[int, ...]:
    raw = [0] * width
    for p in positions:
        raw[p // 64] |= 1 << (p % 64)
    return tuple(x - (1 << 64) if x >> 63 else x for x in raw)
