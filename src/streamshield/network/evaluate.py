"""A small reference evaluator of operator trees and merged networks over lists of rows.

Why: merging must never change any query's result. This evaluator gives every operator one
plain meaning over a finite, ordered input (the instant at the end of the input, as in CQL),
so property tests can compare each query evaluated on its own with the same query read off
the merged network. It is a specification, not an engine: Spark executes the networks.

Semantics, per operator:
- window: ROWS n keeps the last n rows; RANGE t keeps rows with ``now - t < time <= now``
  where ``now`` is the largest time seen, rounded down to a multiple of the slide when the
  window slides; UNBOUNDED keeps all rows. Rows without a numeric time are dropped.
- select keeps the rows its conjunction holds on (missing values fail, as SQL NULL);
- project keeps the listed attributes a row has;
- join pairs left and right rows (each windowed by the join's synopsis) whose condition
  attributes are equal and present; left values win a name clash;
- aggregate groups by its attributes in order of first appearance; a group's rows with no
  value for the attribute do not count (SQL), COUNT(*) counts every row;
- union merges its inputs by time (``ts``), then by the row's sorted items, so that its
  result does not depend on the order or the spelling of its inputs: decomposing a
  select below a union renames that input and must not reorder the union's rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from streamshield.network.merge import Network
from streamshield.network.operators import (
    Aggregate,
    Aggregation,
    Join,
    Operator,
    Project,
    Select,
    Union,
    Window,
    WindowKind,
    WindowSpec,
)

Row = dict[str, object]
Streams = Mapping[str, Sequence[Mapping[str, object]]]


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def apply_window(spec: WindowSpec, rows: list[Row]) -> list[Row]:
    if spec.kind is WindowKind.UNBOUNDED:
        return rows
    if spec.kind is WindowKind.ROWS:
        assert spec.size is not None
        return rows[-spec.size :] if rows else []
    assert spec.size is not None
    timed = [(t, r) for r in rows if _number(t := r.get(spec.time_attribute))]
    if not timed:
        return []
    now = max(t for t, _ in timed)
    if spec.slide is not None:
        now = math.floor(now / spec.slide) * spec.slide
    return [r for t, r in timed if now - spec.size < t <= now]


def _join(node: Join, left: list[Row], right: list[Row]) -> list[Row]:
    if node.window is not None:
        left, right = apply_window(node.window, left), apply_window(node.window, right)
    pairs = sorted(node.condition)
    out = []
    for lrow in left:
        for rrow in right:
            if all(lrow.get(a) is not None and lrow.get(a) == rrow.get(b) for a, b in pairs):
                out.append({**rrow, **lrow})
    return out


def _aggregate(node: Aggregate, rows: list[Row]) -> list[Row]:
    keys = sorted(node.group_by)
    groups: dict[tuple[object, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    out = []
    for key, members in groups.items():
        if node.attribute == "*":
            value: object = len(members)
        else:
            values = [r[node.attribute] for r in members if _number(r.get(node.attribute))]
            value = _fold(node.function, values)
        out.append({**dict(zip(keys, key, strict=True)), node.output_attribute: value})
    return out


def _fold(function: Aggregation, values: list[object]) -> object:
    if function is Aggregation.COUNT:
        return len(values)
    if not values:
        return None
    numbers: list[float] = values  # type: ignore[assignment]
    if function is Aggregation.SUM:
        return sum(numbers)
    if function is Aggregation.MIN:
        return min(numbers)
    if function is Aggregation.MAX:
        return max(numbers)
    return sum(numbers) / len(numbers)


def _union_order(row: Row) -> tuple[int, float, str]:
    ts = row.get("ts")
    if _number(ts):
        return (0, float(ts), repr(sorted(row.items())))
    return (1, 0.0, repr(sorted(row.items())))


def _compute(node: Operator, inputs: list[list[Row]]) -> list[Row]:
    if isinstance(node, Window):
        return apply_window(node.spec, inputs[0])
    if isinstance(node, Select):
        return [r for r in inputs[0] if node.predicate.holds(r)]
    if isinstance(node, Project):
        return [{a: r[a] for a in sorted(node.attributes) if a in r} for r in inputs[0]]
    if isinstance(node, Join):
        return _join(node, inputs[0], inputs[1])
    if isinstance(node, Aggregate):
        return _aggregate(node, inputs[0])
    if isinstance(node, Union):
        return sorted((r for rows in inputs for r in rows), key=_union_order)
    raise TypeError(f"no evaluation for {node.kind}")  # pragma: no cover


class _Evaluator:
    """Evaluates each distinct node once and counts how often each was computed."""

    def __init__(self, streams: Streams, off: frozenset[Operator] = frozenset()) -> None:
        self.streams = streams
        self.off = off
        self.results: dict[Operator, list[Row]] = {}
        self.computed: Counter[Operator] = Counter()

    def rows(self, item: str | Operator) -> list[Row]:
        if isinstance(item, str):
            return [dict(r) for r in self.streams.get(item, ())]
        if item not in self.results:
            if item in self.off:
                self.results[item] = []
            else:
                self.results[item] = _compute(item, [self.rows(i) for i in item.inputs])
                self.computed[item] += 1
        return self.results[item]


def evaluate(node: Operator, streams: Streams) -> list[Row]:
    """One query's tree on its own."""
    return _Evaluator(streams).rows(node)


@dataclass(frozen=True)
class NetworkResult:
    outputs: dict[str, list[Row]]
    computed: Counter[Operator]


def evaluate_network(
    network: Network, streams: Streams, off: frozenset[Operator] = frozenset()
) -> NetworkResult:
    """Every query's output from one pass over the shared network.

    Each node is computed at most once (``computed`` shows it); operators in ``off`` (a
    switched-off branch) are not computed at all and produce nothing.
    """
    evaluator = _Evaluator(streams, off)
    outputs = {q: evaluator.rows(root) for q, root in network.roots.items()}
    return NetworkResult(outputs, evaluator.computed)
