"""Compiles an event pattern to native Structured Streaming (docs/cep.md, "On Spark").

No per-event Python: SEQ and AND become a chain of stream-stream inner joins with
event-time bounds (so that Spark can drop state once the watermark passes the window),
NOT becomes a left outer join keeping the rows that found no partner (Spark emits those
only when the watermark guarantees that none can come: an anti-join), OR becomes a
union, and aggregates a tumbling event-time window of the WITHIN length.

Two Spark rules shape the plan. A stream may carry one event-time column only, so every
intermediate result keeps one, ``__time`` (the time of the last event joined so far;
earlier event times stay as plain timestamps), and a watermark cannot be redefined
after a join, so a match is counted at the time of its last positive event in the
pattern's order (``oracle.match_time``). Inner stream-stream joins need an equality,
so every join is keyed: by the partition key when there is one, else by a constant.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.cep.match_labels import LabelLayout, group_labels, match_labels, read_by
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
    attributes,
    read_attributes,
    variables,
)

EVENT_TIME = "__time"  # the one watermarked column of an intermediate result
KEY = "__key"  # the join key: the partition key, or a constant
PRESENT = "__present"  # non-null on every event of a negated type: tells a partner apart


def compile_pattern(
    pattern: Pattern,
    sources: Mapping[str, DataFrame],
    *,
    delay: timedelta,
    key: str | None = None,
    min_group: int = 1,
    labels: LabelLayout | None = None,
) -> DataFrame:
    """A streaming DataFrame of the pattern's output rows (append mode).

    ``sources``: one streaming DataFrame per event type, with the type's attributes as
    columns (``ts`` the event time). ``delay``: how late an event may arrive behind the
    latest event time seen and still be matched. ``key``: an attribute every event of a
    match shares (like Flink's ``keyBy``); it leads every output row. ``min_group``: an
    aggregate row of fewer matches is withheld (the k rule of Omega). ``labels``: the
    sources carry label columns of this layout (:mod:`streamshield.cep.match_labels`)
    and the output rows carry the labels of the events they were built from.
    """
    if pattern.combinator is Combinator.OR:
        matches = _union(pattern, sources, delay, key, labels)
        if pattern.aggregated:  # Spark would count a late event while its window is open
            matches = _on_time(matches, copies_count=True)
    else:
        matches = _joins(pattern, sources, delay, key, labels)
        for negation in pattern.negations:
            matches = _absent(pattern, negation, matches, sources, delay, key, labels)
    return _outputs(pattern, matches, key, min_group, labels)


def _seconds(delta: timedelta) -> Column:
    return F.expr(f"INTERVAL {int(delta // timedelta(microseconds=1))} MICROSECONDS")


def _frame(
    pattern: Pattern,
    item: Item,
    sources: Mapping[str, DataFrame],
    delay: timedelta,
    key,
    labels: LabelLayout | None = None,
) -> DataFrame:
    """One event variable's events: its attributes as ``var__name``, its time twice (a
    plain ``var__ts`` and the watermarked ``__time``), the join key, and the per-event
    conjuncts of WHERE already applied (they read this variable only)."""
    millis = int(delay // timedelta(milliseconds=1))
    source = sources[item.type].withWatermark(TIME, f"{millis} milliseconds")
    needed = sorted({a.name for a in read_attributes(pattern) if a.var == item.var} - {TIME})
    columns = [F.col(name).alias(f"{item.var}__{name}") for name in needed]
    if labels is not None and not item.negated:  # an absent event lends no label
        names = labels.event_columns(read_by(pattern, item.var, key))
        columns += [F.col(name).alias(f"{item.var}__{name}") for name in names]
    frame = source.select(
        *columns,
        F.col(TIME).alias(f"{item.var}__{TIME}", metadata={}),  # a plain copy
        F.col(TIME).alias(EVENT_TIME),
        (F.col(key) if key is not None else F.lit(0)).alias(KEY),
        *([F.lit(True).alias(PRESENT)] if item.negated else []),
    )
    if key is not None:
        frame = frame.where(F.col(KEY).isNotNull())
    if pattern.combinator is not Combinator.OR:
        own = [c for c in pattern.conjuncts() if variables(c) == {item.var}]
        for conjunct in own:
            frame = frame.where(_guarded(_column(conjunct), F.col(f"{item.var}__{TIME}")))
        if item.negated or item not in pattern.positives[:2]:
            frame = _on_time(frame, copies_count=not item.negated)
    return frame


def _on_time(frame: DataFrame, *, copies_count: bool) -> DataFrame:
    """The events of ``frame`` that are later than the query's watermark in force when they
    arrive, for events that Spark would judge by another rule.

    Spark drops late rows in each stateful operator by that operator's own input
    watermark: the query's for an operator over sources, but for a join fed by another
    join the lower bound that join's time bounds give its matches (Spark propagates the
    watermark through each operator). An event read only there, a negated one or the
    third of a SEQ, would still be matched (or break a match) well behind the query's
    watermark, while an event of the first join that late is dropped. A windowed
    aggregation over the events themselves (an OR's) drops an event only once its
    window has closed. So such events pass an operator of their own right above the
    source, which drops by the query's watermark: a deduplication over every column,
    whose state Spark evicts once the watermark passes the event time. For a negated
    event that is all (copies of an event break the same matches); when
    ``copies_count``, the events are joined with those distinct ones, each finding
    exactly its one copy, so that every copy passes and makes its own matches.
    """
    names = frame.columns
    distinct = frame.dropDuplicates(names)
    if not copies_count:
        return distinct
    other = distinct.select(*(F.col(n).alias(f"__once_{n}") for n in names))
    condition = F.col(EVENT_TIME) == F.col(f"__once_{EVENT_TIME}")
    for name in names:
        if name != EVENT_TIME:
            condition &= F.col(name).eqNullSafe(F.col(f"__once_{name}"))
    return frame.join(other, condition, "inner").select(*names)


def _right(frame: DataFrame) -> DataFrame:
    """The right side of a join: its event time and key renamed, so that names stay unique."""
    return frame.withColumnRenamed(EVENT_TIME, "__time_r").withColumnRenamed(KEY, "__key_r")


def _after_join(joined: DataFrame, keep_right_time: bool) -> DataFrame:
    """Back to one event-time column and one key after a join."""
    left_time = F.col(EVENT_TIME)
    right_time = F.col("__time_r")
    others = [c for c in joined.columns if c not in (EVENT_TIME, "__time_r", "__key_r")]
    time = right_time if keep_right_time else left_time
    return joined.select(*others, time.alias(EVENT_TIME))


def _joins(pattern, sources, delay, key, labels=None) -> DataFrame:
    """SEQ and AND: one inner join per further event, bounded in event time both ways."""
    window = _seconds(pattern.within)
    positives = pattern.positives
    first = positives[0]
    matches = _frame(pattern, first, sources, delay, key, labels)
    bound = {first.var}
    applied = {c for c in pattern.conjuncts() if variables(c) <= bound}
    for item in positives[1:]:
        right = _right(_frame(pattern, item, sources, delay, key, labels))
        now, latest = F.col("__time_r"), F.col(EVENT_TIME)
        # Bounds between the two watermarked columns let Spark evict state on both sides.
        condition = (F.col(KEY) == F.col("__key_r")) & now.between(latest - window, latest + window)
        if pattern.combinator is Combinator.SEQ:
            condition &= now > latest  # ``latest`` is the previous event of the SEQ
            condition &= now <= F.col(f"{first.var}__{TIME}") + window
        else:
            for var in bound:
                earlier = F.col(f"{var}__{TIME}")
                condition &= now.between(earlier - window, earlier + window)
        bound.add(item.var)
        for conjunct in pattern.conjuncts():
            if conjunct not in applied and variables(conjunct) <= bound:
                condition &= _join_condition(conjunct)
                applied.add(conjunct)
        matches = _after_join(matches.join(right, condition, "inner"), keep_right_time=True)
    return matches


def _absent(pattern, negation: Item, matches, sources, delay, key, labels=None) -> DataFrame:
    """Matches with no event of the negated type in their gap: a left outer join whose
    unmatched rows (emitted once the watermark passes the gap) are the result."""
    window = _seconds(pattern.within)
    before, after = pattern.gap(negation)
    right = _right(_frame(pattern, negation, sources, delay, key, labels))
    at, latest = F.col(f"{negation.var}__{TIME}"), F.col(EVENT_TIME)
    right_time = F.col("__time_r")
    condition = (F.col(KEY) == F.col("__key_r")) & (at > F.col(f"{before.var}__{TIME}"))
    if after is not None:
        condition &= at < F.col(f"{after.var}__{TIME}")
        # Implied by the window (``latest`` is the last event): bounds for state eviction.
        condition &= (right_time > latest - window) & (right_time <= latest)
    else:  # trailing: up to WITHIN after the first event (``latest`` is ``before``)
        first = pattern.positives[0]
        condition &= at <= F.col(f"{first.var}__{TIME}") + window
        condition &= (right_time > latest) & (right_time <= latest + window)
    for conjunct in pattern.conjuncts():
        used = variables(conjunct)
        if negation.var in used and used != {negation.var}:
            condition &= _join_condition(conjunct)
    joined = matches.join(right, condition, "left_outer").where(F.col(PRESENT).isNull())
    return joined.select(*matches.columns)


def _union(pattern, sources, delay, key, labels=None) -> DataFrame:
    """OR: every event of every listed type, the other variables null, then WHERE."""
    frames = [_frame(pattern, item, sources, delay, key, labels) for item in pattern.positives]
    matches = frames[0]
    for frame in frames[1:]:
        matches = matches.unionByName(frame, allowMissingColumns=True)
    if pattern.where is not None:
        matches = matches.where(_guarded(_column(pattern.where), F.col(EVENT_TIME)))
    return matches


def _outputs(
    pattern: Pattern,
    matches: DataFrame,
    key: str | None,
    min_group: int,
    labels: LabelLayout | None = None,
) -> DataFrame:
    lead = [F.col(KEY).alias(key)] if key is not None else []
    marks = match_labels(pattern, key, labels) if labels is not None else {}
    if not pattern.aggregated:
        return matches.select(
            *lead,
            *(  # every output is an attribute: none aggregates
                F.col(o.value.column).alias(o.name)
                for o in pattern.outputs
                if isinstance(o.value, Attr)
            ),
            *(column.alias(name) for name, (column, _kind) in marks.items()),
        )
    if marks:
        matches = matches.withColumns({name: column for name, (column, _kind) in marks.items()})
    groups = [F.col(KEY)] if key is not None else []
    groups.append(F.window(EVENT_TIME, _duration(pattern.within)).alias("__window"))
    groups.extend(F.col(a.column) for a in pattern.group_by)
    aggregates = [
        _aggregate(o.value).alias(o.name) for o in pattern.outputs if isinstance(o.value, Aggregate)
    ]
    # The k rule reads a hidden count of the group's matches; it is always kept, so that
    # the aggregation's state has the same shape whatever ``min_group`` is (a pattern
    # restarted under new rules resumes from its checkpoint).
    carried = group_labels({name: kind for name, (_column, kind) in marks.items()})
    grouped = matches.groupBy(*groups).agg(
        *aggregates, F.count(F.lit(1)).alias("__matches"), *carried
    )
    if min_group > 1:
        grouped = grouped.where(F.col("__matches") >= min_group)
    values = [
        F.col(o.name) if isinstance(o.value, Aggregate) else F.col(o.value.column).alias(o.name)
        for o in pattern.outputs
    ]
    return grouped.select(
        *lead,
        F.col("__window.start").alias("window_start"),
        F.col("__window.end").alias("window_end"),
        *values,
        *(F.col(name) for name in marks),
    )


def _duration(delta: timedelta) -> str:
    return f"{int(delta // timedelta(microseconds=1))} microseconds"


def _aggregate(aggregate: Aggregate) -> Column:
    if aggregate.attr is None:
        return F.count(F.lit(1))
    column = F.col(aggregate.attr.column)
    return {
        Function.COUNT: F.count,
        Function.SUM: F.sum,
        Function.AVG: F.avg,
        Function.MIN: F.min,
        Function.MAX: F.max,
    }[aggregate.function](column)


FLOOR = datetime(1, 1, 1, tzinfo=UTC)


def _guarded(condition: Column, time: Column) -> Column:
    """``condition``, in a form Catalyst cannot push below the watermark.

    Spark pushes a filter that does not read the event time below ``withWatermark``, so
    the watermark would advance only with the events that pass it (and a filter it
    infers from several, e.g. ``a.k = 1`` from ``a.k = b.k AND b.k = 1``, would move
    another variable's watermark). Read through a CASE on the event time (true for every
    real event), the filter stays above: each watermark advances with every event of its
    type, which is what the oracle models.
    """
    return F.when(time >= F.lit(FLOOR), condition)


def _join_condition(conjunct: Expr) -> Column:
    """Equalities between two attributes stay plain (Spark hashes on them); everything else
    is guarded so that Catalyst infers nothing from it to push below a watermark."""
    column = _column(conjunct)
    if (
        isinstance(conjunct, Comparison)
        and conjunct.op == "="
        and isinstance(conjunct.left, Attr)
        and isinstance(conjunct.right, Attr)
    ):
        return column
    attr = attributes(conjunct)[0]
    return _guarded(column, F.col(f"{attr.var}__{TIME}"))


def _column(expr: Expr) -> Column:
    match expr:
        case Comparison(op=op, left=left, right=right):
            a, b = _operand(left), _operand(right)
            return {
                "=": a == b,
                "!=": a != b,
                "<": a < b,
                "<=": a <= b,
                ">": a > b,
                ">=": a >= b,
            }[op]
        case AllOf(parts=parts):
            result = _column(parts[0])
            for part in parts[1:]:
                result = result & _column(part)
            return result
        case AnyOf(parts=parts):
            result = _column(parts[0])
            for part in parts[1:]:
                result = result | _column(part)
            return result
        case Not(part=part):
            return ~_column(part)
    raise TypeError(type(expr).__name__)


def _operand(operand: Attr | Literal) -> Column:
    if isinstance(operand, Literal):
        return F.lit(operand.value)
    return F.col(operand.column)
