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
HIDDEN_PREFIX = "_ss_hide_"
MASKED_COLUMN = "_ss_masked"
"""Names of the output columns masked in a row; delivery hands it over as ``_masked``."""
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


def hidden_column(attribute: str) -> str:
    """The secured view's flag column: ``attribute`` is masked (hidden) in this row."""
    return f"{HIDDEN_PREFIX}{attribute}"


def masked_expression(select: exp.Select, attributes: Sequence[str]) -> exp.Expression:
    """``_ss_masked``: the names of the output columns of a plain selection whose value is
    NULL because an attribute they read is hidden from the query's roles.

    A column that is an attribute (``hr``, ``v.hr``, ``hr AS beats``, ``*``) is masked
    when the attribute is; an expression is masked when it reads a hidden attribute and
    its value is NULL (a value computed despite the mask is a value). Expressions without
    a name of their own (no alias) are not listed.
    """
    known = {a.lower(): a for a in attributes}
    items: list[str] = []

    def flag(name: str) -> str:
        return exp.column(hidden_column(known[name.lower()]), quoted=True).sql(dialect="spark")

    for projection in select.expressions:
        target = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(target, exp.Star) or (
            isinstance(target, exp.Column) and isinstance(target.this, exp.Star)
        ):
            items += [_named_if(flag(a), a) for a in attributes]
            continue
        name = projection.alias_or_name
        if not name or name.lower().startswith(RESERVED):
            continue
        if isinstance(target, exp.Column) and target.name.lower() in known:
            items.append(_named_if(flag(target.name), name))
            continue
        if isinstance(target, exp.Column) or not isinstance(projection, exp.Alias):
            continue  # not an attribute (e.g. a lateral alias) or no name of its own
        reads = sorted(
            {c.name.lower() for c in target.find_all(exp.Column) if c.name.lower() in known}
        )
        if reads:
            hidden = " OR ".join(flag(r) for r in reads)
            value = target.sql(dialect="spark")
            items.append(_named_if(f"(({value}) IS NULL AND ({hidden}))", name))
    if not items:
        return exp.alias_(
            sqlglot.parse_one("CAST(ARRAY() AS ARRAY<STRING>)", read="spark"), MASKED_COLUMN
        )
    text = f"FILTER(ARRAY({', '.join(items)}), x -> x IS NOT NULL)"
    return exp.alias_(sqlglot.parse_one(text, read="spark"), MASKED_COLUMN)


def _named_if(condition: str, name: str) -> str:
    return f"IF({condition}, {exp.Literal.string(name).sql(dialect='spark')}, NULL)"


def propagate_labels(
    sql: str,
    label_columns: Sequence[str],
    readers_prefix: str,
    attributes: Sequence[str] = (),
) -> str:
    """``sql`` with the label columns appended to its outer SELECT (Spark dialect).

    Columns starting with ``readers_prefix`` combine with ``bit_and`` under aggregation,
    the others (denied and provenance words) with ``bit_or``; the origin columns
    (policy, channel, seq, tuple id) pass through plain selections only. A ``UNION ALL``
    of such selects keeps each tuple's own labels: every branch carries them, in the
    same column order, so the union lines them up.

    ``attributes``: the input stream's attributes, whose hidden flags
    (:func:`hidden_column`) the secured view carries; plain selections over the view
    then also get ``_ss_masked`` (:func:`masked_expression`). Aggregates carry none:
    they skip hidden values (NULLs) as SQL does; nor do selections over derived tables.
    """
    tree = sqlglot.parse_one(sql, read="spark")
    if uses_reserved_names(sql):
        raise LabelsNotPropagated(f"names starting with {RESERVED!r} are reserved")
    return _propagate(tree, label_columns, readers_prefix, attributes)[0].sql(dialect="spark")


def _propagate(
    tree: exp.Expression,
    label_columns: Sequence[str],
    readers_prefix: str,
    attributes: Sequence[str] = (),
) -> tuple[exp.Expression, bool]:
    """The labelled tree, and whether its rows still have one origin each."""
    if isinstance(tree, exp.Union):
        if tree.args.get("distinct") or tree.args.get("by_name"):
            raise LabelsNotPropagated("only UNION ALL keeps each tuple's labels")
        left, left_origin = _propagate(tree.this, label_columns, readers_prefix, attributes)
        right, right_origin = _propagate(tree.expression, label_columns, readers_prefix, attributes)
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
    masked = (
        [masked_expression(tree, attributes)]
        if attributes and not aggregate and not derived
        else []
    )
    if not aggregate and any(isinstance(e, exp.Star) for e in tree.expressions):
        # The star already carries the labels (and the hidden flags, which delivery drops).
        return tree.select(*masked, append=True), origin
    extra: list[exp.Expression] = []
    for column in label_columns:
        if aggregate:
            fn = "bit_and" if column.startswith(readers_prefix) else "bit_or"
            extra.append(exp.alias_(exp.func(fn, exp.column(column)), column))
        else:
            extra.append(exp.column(column))
    if not aggregate and origin:  # where each row came from, for re-punctuating the output
        extra += [exp.column(o) for o in ORIGIN]
    return tree.select(*extra, *masked, append=True), origin and not aggregate


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
