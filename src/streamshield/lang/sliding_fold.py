"""A ``[RANGE t SLIDE s]`` aggregate folded batch by batch, keyed by its window.

Why: a sliding-window aggregate ran Spark's own windowed streaming aggregation, one
streaming query per query. As a branch of its stream's network it folds as an
aggregate without a window does (lang/partial_aggregates.py), with the window as one
more group key. Its secured SQL (after :func:`~streamshield.lang.rewrite_rules.secure`,
whose ``sliding_window`` rule groups by Spark's ``window(<time>, <range>, <slide>)``)
is rewritten so that the state keys are the window's start and end (plain timestamps:
the driver's merge takes no struct key) and its output ``window`` column is rebuilt
from them as the struct Spark gives (``named_struct('start', .., 'end', ..)``, same
type: checked by the engine against the query's own plan).

With an event-time watermark (a timestamp event time, whose secured view Spark
watermarks), the partials also carry each group's newest event time, from which the
engine keeps the watermark (engine/sharing/aggregate_fold.py). Spark's watermark grows with
every row that reaches its ``withWatermark`` node, which sits on the secured view below
the user's WHERE; Spark pushes the WHERE's conjuncts below it except those reading the
event time. So a query whose WHERE reads the event time is not folded (its watermark
would come from rows the partials do not see): it runs on its own.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from streamshield.lang.partial_aggregates import Fold, fold_of

LATEST = "_ss_latest"
"""The partial (and state) column: the newest event time of a group's rows."""


@dataclass(frozen=True)
class SlidingFold:
    """How a sliding-window aggregate folds: its fold, and which columns hold what."""

    fold: Fold
    start: str
    """The state key holding its window's start."""
    end: str
    """The state key holding its window's end (a window closes when the watermark
    reaches it: rows for it come late, its group is evicted)."""
    latest: str | None
    """The partial column of a group's newest event time (None: no watermark)."""


def sliding_fold(tree: exp.Expr, event_time: str, watermark: bool) -> SlidingFold | None:
    """The fold of a secured sliding-window aggregate's ``tree`` (one ``window(...)``
    call in its GROUP BY, over the stream's ``event_time``; the tree is not changed);
    None where it does not fold."""
    if not isinstance(tree, exp.Select) or tree.args.get("group") is None:
        return None
    groups = list(tree.args["group"].expressions)
    calls = [i for i, g in enumerate(groups) if _is_window(g)]
    if len(calls) != 1:
        return None
    (at,) = calls
    call = groups[at]
    if not call.expressions:
        return None
    where = tree.args.get("where")
    read = [c.name.lower() for c in where.find_all(exp.Column)] if where is not None else []
    if watermark and event_time.lower() in read:
        return None  # Spark's watermark would see rows the WHERE drops
    start, end = _field(call, "start"), _field(call, "end")
    struct = exp.Struct(  # named_struct('start', <start>, 'end', <end>)
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier(name), expression=field.copy())
            for name, field in (("start", start), ("end", end))
        ]
    )

    def rebuilt(node: exp.Expr) -> exp.Expr:
        return struct.copy() if node == call else node

    tree = tree.copy()
    tree.set("expressions", [e.transform(rebuilt) for e in tree.expressions])
    having = tree.args.get("having")
    if having is not None:
        tree.set("having", having.transform(rebuilt))
    keys = [*(g.copy() for g in groups[:at]), start, end, *(g.copy() for g in groups[at + 1 :])]
    tree.set("group", exp.Group(expressions=keys))
    if any(_is_window(n) and n.parent is not None and not _field_of(n) for n in tree.walk()):
        return None  # a window call left whole somewhere: not one the state keys hold
    fold = fold_of(tree)
    if fold is None or len(fold.keys) != len(groups) + 1:
        return None
    latest = None
    if watermark:
        partial = fold.partial_tree.copy()
        time = call.expressions[0].copy()
        partial.set("expressions", [*partial.expressions, exp.alias_(exp.Max(this=time), LATEST)])
        fold = replace(fold, partial_tree=partial, merges=(*fold.merges, (LATEST, "max")))
        latest = LATEST
    return SlidingFold(fold, fold.keys[at], fold.keys[at + 1], latest)


def _field(call: exp.Expr, name: str) -> exp.Expr:
    """``<call>.<name>``: a field of the struct the window call gives."""
    return exp.Dot(this=call.copy(), expression=exp.to_identifier(name))


def _is_window(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "window"


def _field_of(node: exp.Expr) -> bool:
    """Whether a window call is read as its ``start`` or ``end`` field."""
    parent = node.parent
    return (
        isinstance(parent, exp.Dot)
        and parent.this is node
        and parent.expression.name.lower() in ("start", "end")
    )
