"""Carry tuple labels through a user query so that its output is a labelled stream again.

DESIGN.md section 1: select/project keep a tuple's labels; an aggregate's readers are
the intersection over its contributors (``bit_and``) and its denied roles the union
(``bit_or``). The rewrite adds those label columns to the outermost SELECT of a query
over one secured view, or to every branch of a ``UNION ALL`` of such selects. Joins
are the SCJoin's (which labels pairs itself); for other shapes the output carries no
labels and :func:`propagate_labels` says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

RESERVED = "_ss_"
ORIGIN = ("_ss_policy", "_ss_channel", "_ss_seq", "_ss_tid")


class LabelsNotPropagated(ValueError):
    """The query's shape is one whose output labels are not derived yet."""


def _is_aggregate(select: exp.Select) -> bool:
    return bool(select.args.get("group")) or any(
        isinstance(node, exp.AggFunc) for e in select.expressions for node in e.walk()
    )


def uses_reserved_names(sql: str) -> bool:
    """Whether user SQL names a label or origin column itself (it could forge labels)."""
    tree = sqlglot.parse_one(sql, read="spark")
    return any(
        isinstance(node, exp.Identifier) and node.name.lower().startswith(RESERVED)
        for node in tree.walk()
    )


def is_aggregate(sql: str) -> bool:
    """Whether the outer SELECT aggregates (decides the streaming output mode)."""
    tree = sqlglot.parse_one(sql, read="spark")
    return isinstance(tree, exp.Select) and _is_aggregate(tree)


def propagate_labels(sql: str, label_columns: Sequence[str], readers_prefix: str) -> str:
    """``sql`` with the label columns appended to its outer SELECT (Spark dialect).

    Columns starting with ``readers_prefix`` combine with ``bit_and`` under aggregation,
    the others (denied and provenance words) with ``bit_or``; the origin columns
    (policy, channel, seq, tuple id) pass through plain selections only. A ``UNION ALL``
    of such selects keeps each tuple's own labels: every branch carries them, in the
    same column order, so the union lines them up.
    """
    tree = sqlglot.parse_one(sql, read="spark")
    if uses_reserved_names(sql):
        raise LabelsNotPropagated(f"names starting with {RESERVED!r} are reserved")
    return _propagate(tree, label_columns, readers_prefix)[0].sql(dialect="spark")


def _propagate(
    tree: exp.Expression, label_columns: Sequence[str], readers_prefix: str
) -> tuple[exp.Expression, bool]:
    """The labelled tree, and whether its rows still have one origin each."""
    if isinstance(tree, exp.Union):
        if tree.args.get("distinct") or tree.args.get("by_name"):
            raise LabelsNotPropagated("only UNION ALL keeps each tuple's labels")
        left, left_origin = _propagate(tree.this, label_columns, readers_prefix)
        right, right_origin = _propagate(tree.expression, label_columns, readers_prefix)
        if left_origin != right_origin:
            raise LabelsNotPropagated("a union of an aggregate and a selection has no labels")
        return exp.union(left, right, distinct=False), left_origin
    if not isinstance(tree, exp.Select) or any(True for _ in tree.find_all(exp.Join)):
        raise LabelsNotPropagated("labels propagate through single-stream SELECTs only")
    origin = True
    source = tree.args.get("from_")
    derived = source.this if source is not None and isinstance(source.this, exp.Subquery) else None
    if any(_outside(node, tree, derived) for node in tree.find_all(exp.Select)):
        raise LabelsNotPropagated("subqueries outside FROM carry no labels")
    if derived is not None:
        # A derived table: label its rows first, then combine them here as usual.
        inner, origin = _propagate(derived.this, label_columns, readers_prefix)
        derived.set("this", inner)
    aggregate = _is_aggregate(tree)
    if not aggregate and any(isinstance(e, exp.Star) for e in tree.expressions):
        return tree, origin  # the star already carries the labels
    extra: list[exp.Expression] = []
    for column in label_columns:
        if aggregate:
            fn = "bit_and" if column.startswith(readers_prefix) else "bit_or"
            extra.append(exp.alias_(exp.func(fn, exp.column(column)), column))
        else:
            extra.append(exp.column(column))
    if not aggregate and origin:  # where each row came from, for re-punctuating the output
        extra += [exp.column(o) for o in ORIGIN]
    return tree.select(*extra, append=True), origin and not aggregate


def _outside(node: exp.Expression, top: exp.Select, derived: exp.Subquery | None) -> bool:
    """Whether ``node`` is a SELECT nested in ``top`` other than in its derived table."""
    if node is top:
        return False
    parent = node.parent
    while parent is not None and parent is not top:
        if parent is derived:
            return False
        parent = parent.parent
    return True
