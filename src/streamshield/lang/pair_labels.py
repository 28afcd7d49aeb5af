"""A join query over the pairs of its shared join, labelled as the pairs are.

A join runs as a subscription of a shared SCJoin (engine/queries/scjoin.py), which
joins the two streams' secured windows and hands each subscriber its pairs: one struct
column per alias (``v.hr`` reads a field), the pair's labels (the tuple label of the
pair, one label per attribute of either side), provenance, level words and where each
side came from. The user's query then runs over those pairs: its FROM and JOIN go (the
join happened), and its output carries the pairs' labels on, as a selection or an
aggregate over one stream carries its tuples' (lang/label_propagation.py): plain
selections keep the pair's tuple label, origins and provenance; aggregates AND the
readers and OR the rest; and the dependency slots of each row and column
(lang/recipient_labels.py) over the attributes' labels, which delivery checks against
each recipient's own roles.

Both steps are rules of ``rewrite_rules.RULES`` (binding the views, propagating the
labels) for a query whose :class:`JoinInput` is set.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from streamshield.lang.label_propagation import combined, is_aggregate, label_pair
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.recipient_labels import Dependencies, dependencies, slot_columns, widest
from streamshield.policy.query_level import LEVEL_PREFIX, QueryLevel

ORIGINS = ("_channel", "_seq", "_tid", "_policy")
"""Suffixes of the origin columns of each side (``_ss_<alias>_seq`` ...)."""


@dataclass(frozen=True)
class PairSide:
    """One side of the join as its pairs show it."""

    alias: str
    attributes: tuple[str, ...]
    """Its stream's attributes, in label object order (the left side's first)."""
    key: str
    """The attribute the join matches on."""


@dataclass(frozen=True)
class JoinInput:
    """What a join query reads: the pairs of its SCJoin under the temp view ``view``."""

    view: str
    sides: tuple[PairSide, ...]
    columns: tuple[str, ...]
    """The pairs' label, provenance, level and origin columns (``_ss_*``)."""
    words: int
    """The READ block's width: how many words a label's readers have."""


def over_pairs(checked: exp.Expr, view: str) -> exp.Select:
    """A copy of the user's join query reading the pairs under ``view``: FROM and JOIN
    (the ON condition with them) go, since the join already happened."""
    if not isinstance(checked, exp.Select):
        raise QueryRejected("query_shape", "a join query must be one SELECT")
    tree = checked.copy()
    tree.set("joins", None)
    tree.set("from_", exp.From(this=exp.to_table(view)))
    return tree


def with_pair_labels(
    tree: exp.Select, join: JoinInput, level: QueryLevel | None = None
) -> exp.Select:
    """``tree`` (over the pairs) carrying the pairs' labels (a new tree)."""
    columns = join.columns
    tuple_labels = [
        c for c in columns if c.startswith(("_ss_r0_", "_ss_d0_", "_ss_src_", LEVEL_PREFIX))
    ]
    aggregate = is_aggregate(tree)
    extra: list[exp.Expr]
    if aggregate:  # readers AND; denied, provenance and level (the LUB) OR
        extra = [exp.alias_(combined(c, "_ss_r", level), c) for c in tuple_labels]
    else:
        origins = [c for c in columns if c.startswith("_ss_") and c.endswith(ORIGINS)]
        extra = [exp.column(c) for c in (*tuple_labels, *origins)]
    if join.words and label_pair(1, 0)[0] in columns:
        extra += _pair_slots(tree, join.sides, join.words, aggregate)
    return tree.copy().select(*extra, append=True)


def _pair_slots(
    tree: exp.Select, sides: Sequence[PairSide], words: int, aggregate: bool
) -> list[exp.Expr]:
    """Dependency slots of a query over the pairs (one struct per alias)."""
    objects: dict[str, dict[str, int]] = {}
    obj = 0
    for side in sides:
        names = objects.setdefault(side.alias.lower(), {})
        for name in side.attributes:
            obj += 1
            names[name.lower()] = obj
    every = tuple(range(1, obj + 1))

    def resolve(column: exp.Column) -> tuple[int, ...] | None:
        table, name = column.table.lower(), column.name.lower()
        if table in objects and isinstance(column.this, exp.Star):
            return tuple(objects[table].values())
        if table in objects and name in objects[table]:
            return (objects[table][name],)
        if not table and name in objects:  # the whole struct of one side
            return tuple(objects[name].values())
        return None

    deps = dependencies(tree, resolve, every)
    # The ON condition is gone from the tree (the SCJoin joined already), but a pair
    # still tells its reader that the keys matched: both keys are row dependencies.
    keys = {objects[s.alias.lower()][s.key.lower()] for s in sides}
    deps = Dependencies(tuple(sorted(set(deps.row) | keys)), deps.columns)
    if any(isinstance(e, exp.Star) for e in tree.expressions):
        deps = deps.folded()  # ``*`` is one struct per side: the row needs every attribute
    return slot_columns(deps, widest([deps]), label_pair, words, aggregate)
