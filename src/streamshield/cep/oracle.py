"""The reference matcher: every match of a pattern over a finite list of events.

Pure Python and deliberately naive (it tries every combination of events), so that
it can be read against docs/cep.md line by line; the Spark engine is tested to find
exactly its matches. :func:`admitted` models which events a streaming run keeps when
some arrive behind the watermark, so that the same oracle also judges late data.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from streamshield.cep.pattern import (
    TIME,
    Aggregate,
    AllOf,
    AnyOf,
    Attr,
    Combinator,
    Comparison,
    Expr,
    Function,
    Item,
    Literal,
    Not,
    Pattern,
    variables,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Event:
    """One event: its type and its attribute values (``ts``, the event time, among them)."""

    type: str
    values: Mapping[str, Any] = field(hash=False)
    serial: int = 0  # tells apart two events with equal values

    @property
    def ts(self) -> datetime:
        return self.values[TIME]


Match = Mapping[str, Event | None]  # variable -> event (None: unbound branch of an OR)


def stateful(pattern: Pattern) -> bool:
    """Whether the streaming plan keeps state (and so drops events behind the watermark)."""
    return pattern.combinator is not Combinator.OR or pattern.aggregated


def admitted(
    batches: Sequence[Sequence[Event]],
    types: Collection[str],
    delay: timedelta,
    *,
    key: str | None = None,
    drops: bool = True,
    settled: bool = True,
) -> list[Event]:
    """The events of ``types`` (every event type the query reads) a streaming query keeps
    when they arrive in these micro-batches (docs/cep.md, "Watermark and late events").

    Structured Streaming's rule: each source's watermark is its largest event time so far
    minus ``delay``; the query's watermark is the smallest over its sources (``types``),
    none until every source has seen data, computed at the end of a micro-batch for the
    next one; a stateful plan (``drops``, see :func:`stateful`) drops an event whose time
    is not after the watermark the *previous* micro-batch ran with (Spark's watermark
    for late events with several stateful operators), whichever of the pattern's events
    it is (the compiler gives each variable Spark would judge by a lower watermark an
    operator of its own over its source). ``settled``: each batch was processed to
    completion before the next one arrived, so that Spark ran a micro-batch without data
    after each that moved the watermark (``noDataMicroBatches``, its default) and an
    event is judged by the watermark after every earlier batch; otherwise the batches
    are the query's micro-batches exactly as Spark ran them (an empty one a micro-batch
    without data), as when data keeps arriving on a processing-time trigger. With a
    partition ``key``, events without a key value are ignored altogether (they advance
    no watermark either).
    """
    latest: dict[str, datetime] = {}
    watermark: datetime | None = None  # what the next micro-batch runs with
    ran_with: datetime | None = None  # what the latest micro-batch ran with
    kept: list[Event] = []
    for batch in batches:
        batch = [
            e for e in batch if e.type in types and (key is None or e.values.get(key) is not None)
        ]
        late = watermark if settled else ran_with
        kept.extend(e for e in batch if not drops or late is None or e.ts > late)
        ran_with = watermark
        for event in batch:
            latest[event.type] = max(latest.get(event.type, event.ts), event.ts)
        if latest and len(latest) == len(set(types)):  # a source without data: 0
            candidate = min(latest.values()) - delay
            watermark = candidate if watermark is None else max(watermark, candidate)
    return kept


def matches(pattern: Pattern, events: Iterable[Event], key: str | None = None) -> list[Match]:
    """Every match (skip-till-any-match: an event may take part in many matches)."""
    by_type: dict[str, list[Event]] = {}
    for event in events:
        if key is None or event.values.get(key) is not None:  # keyed: keyless events ignored
            by_type.setdefault(event.type, []).append(event)
    positives = pattern.positives
    found: list[Match] = []
    if pattern.combinator is Combinator.OR:
        for item in positives:
            for event in by_type.get(item.type, []):
                alone = {i.var: (event if i is item else None) for i in positives}
                if _true(_eval(pattern.where, alone)):
                    found.append(alone)
        return found
    for combination in itertools.product(*(by_type.get(i.type, []) for i in positives)):
        binding = {item.var: event for item, event in zip(positives, combination, strict=True)}
        if not _in_window(pattern, combination, key):
            continue
        if not _true(_eval(_positive_part(pattern), binding)):
            continue
        if any(_present(pattern, n, binding, by_type, key) for n in pattern.negations):
            continue
        found.append(binding)
    return found


def _in_window(pattern: Pattern, events: Sequence[Event], key: str | None) -> bool:
    """Event-time order (SEQ), the window, and one shared key value (when keyed)."""
    times = [event.ts for event in events]
    in_order = pattern.combinator is not Combinator.SEQ or all(
        earlier < later for earlier, later in itertools.pairwise(times)
    )
    if not in_order or max(times) - min(times) > pattern.within:
        return False
    if key is None:
        return True
    keys = {event.values.get(key) for event in events}
    return len(keys) == 1 and None not in keys


def _positive_part(pattern: Pattern) -> Expr | None:
    negated = {i.var for i in pattern.negations}
    if not negated:
        return pattern.where
    parts = tuple(c for c in pattern.conjuncts() if not variables(c) & negated)
    return AllOf(parts) if parts else None


def _present(
    pattern: Pattern,
    negation: Item,
    binding: Mapping[str, Event],
    by_type: Mapping[str, list[Event]],
    key: str | None,
) -> bool:
    """Whether an event of the negated type stands in its gap and meets its conjuncts."""
    before, after = pattern.gap(negation)
    low = binding[before.var].ts
    if after is None:  # trailing NOT: up to the end of the window, inclusive
        first = binding[pattern.positives[0].var].ts
        high, last = first + pattern.within, True
    else:
        high, last = binding[after.var].ts, False
    conjuncts = [c for c in pattern.conjuncts() if negation.var in variables(c)]
    anchor = binding[before.var].values.get(key) if key is not None else None
    for event in by_type.get(negation.type, []):
        if not (low < event.ts <= high if last else low < event.ts < high):
            continue
        if key is not None and event.values.get(key) != anchor:
            continue
        extended = {**binding, negation.var: event}
        if all(_true(_eval(c, extended)) for c in conjuncts):
            return True
    return False


# ------------------------------------------------------------ three-valued logic (SQL)

COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _true(value: bool | None) -> bool:
    return value is True


def _value(operand: Attr | Literal, binding: Match) -> Any:
    if isinstance(operand, Literal):
        return operand.value
    event = binding.get(operand.var)
    return None if event is None else event.values.get(operand.name)


def _eval(expr: Expr | None, binding: Match) -> bool | None:
    """SQL's three-valued logic: a comparison with NULL is unknown (None)."""
    match expr:
        case None:
            return True
        case Comparison(op=op, left=left, right=right):
            a, b = _value(left, binding), _value(right, binding)
            return None if a is None or b is None else COMPARE[op](a, b)
        case AllOf(parts=parts):
            values = [_eval(p, binding) for p in parts]
            return False if False in values else (None if None in values else True)
        case AnyOf(parts=parts):
            values = [_eval(p, binding) for p in parts]
            return True if True in values else (None if None in values else False)
        case Not(part=part):
            value = _eval(part, binding)
            return None if value is None else not value
    raise TypeError(type(expr).__name__)


# ----------------------------------------------------------------------------- output


def match_time(pattern: Pattern, binding: Match) -> datetime:
    """The time a match is counted at: its last positive event in the pattern's order
    (the latest one in a SEQ; the one bound in an OR)."""
    bound = [binding[i.var] for i in pattern.positives if binding[i.var] is not None]
    return bound[-1].ts  # type: ignore[union-attr]


def window_of(pattern: Pattern, at: datetime) -> tuple[datetime, datetime]:
    """The tumbling window (length WITHIN, aligned to the epoch) a match time falls in."""
    size = pattern.within // timedelta(microseconds=1)
    offset = (at - EPOCH) // timedelta(microseconds=1)
    start = EPOCH + timedelta(microseconds=offset - offset % size)
    return start, start + pattern.within


def results(
    pattern: Pattern, found: Sequence[Match], key: str | None = None, min_group: int = 1
) -> list[tuple]:
    """The rows a pattern returns for these matches: ``(key?, outputs...)`` per match, or
    ``(key?, window_start, window_end, outputs...)`` per group when RETURN aggregates;
    groups of fewer than ``min_group`` matches are withheld (the k rule of Omega)."""

    def key_of(binding: Match) -> tuple:
        if key is None:
            return ()
        return (next(e.values.get(key) for e in binding.values() if e is not None),)

    if not pattern.aggregated:
        return [
            (*key_of(b), *(_value(o.value, b) for o in pattern.outputs))  # type: ignore[arg-type]
            for b in found
        ]
    groups: dict[tuple, list[Match]] = {}
    for binding in found:
        window = window_of(pattern, match_time(pattern, binding))
        group = (*key_of(binding), *window, *(_value(a, binding) for a in pattern.group_by))
        groups.setdefault(group, []).append(binding)
    rows = []
    for group, members in groups.items():
        if len(members) < min_group:
            continue
        head = group[: len(group) - len(pattern.group_by)]
        values = dict(zip(pattern.group_by, group[len(head) :], strict=True))
        row = list(head)
        for output in pattern.outputs:
            if isinstance(output.value, Aggregate):
                row.append(_aggregate(output.value, members))
            else:
                row.append(values[output.value])
        rows.append(tuple(row))
    return rows


def _aggregate(aggregate: Aggregate, members: Sequence[Match]) -> Any:
    if aggregate.attr is None:
        return len(members)
    values = [v for m in members if (v := _value(aggregate.attr, m)) is not None]
    if aggregate.function is Function.COUNT:
        return len(values)
    if not values:
        return None
    match aggregate.function:
        case Function.SUM:
            return sum(values)
        case Function.AVG:
            return sum(values) / len(values)
        case Function.MIN:
            return min(values)
        case Function.MAX:
            return max(values)
    raise ValueError(aggregate.function)
