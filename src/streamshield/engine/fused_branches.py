"""Every branch of a shared network computed in one pass over a micro-batch (issue 12,
item 5).

Why: a branch planned on its own is its own Spark job and its own planning per
micro-batch. On one cached batch, 16 prebuilt branch plans cost ~7x one branch in jobs
alone, and building them as much again (``bench/branch_passes.py``); one projection
computing every branch's output as a column of the same row costs ~2x one. So the
branches a network runs together are put side by side in one projection.

How: a branch is its secured view (:class:`~streamshield.engine.secured_view.
SecuredProjection`: the tuple test, the masks, the origin and provenance columns) and
its query's secured SQL over that view. When that SQL is a plain ``SELECT items FROM
view [WHERE condition]`` (what every selection and projection a network shares becomes),
its star is the view's columns and its column references are renamed to the branch's own
copy of the view's columns, so that each branch's view and query sit next to the
others': branch ``b``'s output is
``CASE WHEN test_b AND condition_b THEN struct(items_b) END`` in column ``b``, and the
branch's rows are the rows where that column is not NULL, its fields being the columns
its own plan would output.

Security stays per branch: the same tuple test, masks and WHERE as its own plan. The
tuple test comes first in the conjunction, and Spark evaluates ``AND`` left to right and
stops at the first false operand (generated and interpreted code alike), so the query's
condition never runs on a row the test rejects, as with the Filter beneath the masks of
a plan of its own; items are computed only for the branch's rows. Anything else (a
join, grouping, ordering, DISTINCT, a subquery) is not fused and the branch runs its own
plan.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import sqlglot
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from streamshield.engine.secured_view import SecuredProjection

FIELD, COMMON = "field", "common"
COMMON_PREFIX = "_ss_common_"
"""A column every branch of the pass shares (a label word, the origin, provenance), kept
once per row instead of once per branch: the one write of the pass grows with the
branches' own columns, not with N copies of every row's labels."""
_ONLY = {"expressions", "from_", "where", "kind", "hint"}
"""The parts a fused query may have (a SELECT list, its one view, a WHERE)."""


class NotFused(ValueError):
    """The branch's SQL is not a plain selection over its view: it runs its own plan."""


@dataclass(frozen=True)
class FusedBranch:
    """One branch's part of the network's single projection, built once when it joins."""

    slot: str
    """The column holding its output (a struct; NULL on rows that are not its)."""
    view: tuple[Column, ...]
    """Its secured view's columns, renamed to ``<column>__<slot>``, and its tuple test."""
    output: Column
    """``CASE WHEN test AND condition THEN struct(items) END``, over ``view``."""
    layout: tuple[tuple[str, str, str], ...] = ()
    """Its output columns in order, each ``(name, kind, source)``: a field of its struct
    (``kind`` FIELD) or a column every branch shares (COMMON, named ``source``)."""
    common: tuple[tuple[str, Column], ...] = ()
    """The common columns it reads: the pass's column name and its expression (aliased)."""
    taken: Column | None = None
    """``slot IS NOT NULL``: the rows that are its."""
    selection: tuple[Column, ...] = ()
    """Its rows' columns out of the pass, built once (a Column per column per micro-batch
    cost ~6 ms of Py4J each: 2 s a batch for 16 branches)."""

    @classmethod
    def of(
        cls,
        slot: str,
        projection: SecuredProjection,
        view_columns: Sequence[str],
        sql: str,
    ) -> FusedBranch:
        """``view_columns``: the names of ``projection``'s columns, in order; ``sql``:
        the branch's secured SQL over its view (NotFused when it is not plain)."""
        if len(view_columns) != len(projection.columns):
            raise NotFused("the view's columns are not known")
        items, condition = _plain_select(sql, {c.lower(): c for c in view_columns}, slot)
        renamed = tuple(
            column.alias(_own(name, slot))
            for column, name in zip(projection.columns, view_columns, strict=True)
        )
        test = f"{slot}__test"
        layout, own, common = [], [], {}
        for name, item, source in items:
            if source is not None and source in projection.common:
                layout.append((name, COMMON, f"{COMMON_PREFIX}{source}"))
                name_in_pass = f"{COMMON_PREFIX}{source}"
                common[name_in_pass] = F.col(_own(source, slot)).alias(name_in_pass)
            else:
                layout.append((name, FIELD, name))
                own.append(F.expr(item))
        fields = F.struct(*own) if own else F.struct(F.lit(True).alias("_ss_taken"))
        selected = F.col(test) if condition is None else F.col(test) & F.expr(condition)
        return cls(
            slot,
            (*renamed, projection.condition.alias(test)),
            F.when(selected, fields).alias(slot),
            tuple(layout),
            tuple(common.items()),
            F.col(slot).isNotNull(),
            layout_columns(slot, layout),
        )


def one_pass(batch: DataFrame, branches: Iterable[FusedBranch]) -> DataFrame:
    """Every branch's output as a column of one row per batch row a branch takes, and
    the columns they share once (a plan from parts built at join: no job runs here)."""
    branches = list(branches)
    staged = batch.select(*(c for b in branches for c in b.view))
    common: dict[str, Column] = {}
    for branch in branches:  # equal for every branch: the first one's copy serves all
        for name, column in branch.common:
            common.setdefault(name, column)
    wide = staged.select(*(b.output for b in branches), *common.values())
    tests = [b.taken if b.taken is not None else F.col(b.slot).isNotNull() for b in branches]
    return wide.filter(functools.reduce(lambda a, b: a | b, tests))


def rows_of(wide: DataFrame, branch: FusedBranch) -> DataFrame:
    """One branch's rows of :func:`one_pass`, with its own plan's columns."""
    if branch.taken is None or not branch.selection:
        return select_layout(wide, branch.slot, branch.layout)
    return wide.filter(branch.taken).select(*branch.selection)


def layout_columns(slot: str, layout: Iterable[Sequence[str]]) -> tuple[Column, ...]:
    """The columns ``layout`` names (``(name, kind, source)``) out of a pass."""
    return tuple(
        (F.col(slot).getField(source) if kind == FIELD else F.col(source)).alias(name)
        for name, kind, source in layout
    )


def select_layout(wide: DataFrame, slot: str, layout: Iterable[Sequence[str]]) -> DataFrame:
    """The rows of ``wide`` (a pass, or its stored copy) that are ``slot``'s, as the
    columns ``layout`` names (``(name, kind, source)``; an empty layout: every field)."""
    rows = wide.filter(F.col(slot).isNotNull())
    columns = layout_columns(slot, layout)
    return rows.select(*columns) if columns else rows.select(f"{slot}.*")


def _own(column: str, slot: str) -> str:
    return f"{column}__{slot}"


def _plain_select(
    sql: str, view: dict[str, str], slot: str
) -> tuple[list[tuple[str, str, str | None]], str | None]:
    """The SELECT items and the WHERE of ``sql``, with every column reference renamed to
    the branch's copy of the view. Each item: its output name, its SQL, and the view
    column it is when it is nothing but one (else None)."""
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except sqlglot.errors.ParseError as err:
        raise NotFused(f"unparsable: {err}") from err
    if not isinstance(tree, exp.Select) or any(
        value not in (None, False, [], ()) for key, value in tree.args.items() if key not in _ONLY
    ):
        raise NotFused("not a plain SELECT ... FROM view [WHERE ...]")
    source = tree.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        raise NotFused("not over one view")
    if any(isinstance(n, exp.Subquery | exp.Select) for n in _below(tree)):
        raise NotFused("a subquery")
    if any(n.is_star and n.parent is not tree for n in _below(tree)):
        raise NotFused("a star inside an expression")

    def own(column: exp.Column) -> exp.Column:
        real = view.get(column.name.lower())
        if real is None:
            raise NotFused(f"column {column.name!r} is not in the view")
        return exp.column(_own(real, slot), quoted=True)

    def renamed(node: exp.Expression) -> exp.Expression:
        return node.copy().transform(lambda n: own(n) if isinstance(n, exp.Column) else n)

    named: list[tuple[str, exp.Expression]] = []
    for item in tree.expressions:
        if item.is_star:  # every column of the view, in its order
            named += [(c, exp.column(c, quoted=True)) for c in view.values()]
        else:
            value = item.unalias() if isinstance(item, exp.Alias) else item
            named.append((item.alias_or_name, value))
    names = [name.lower() for name, _ in named]
    if not all(names) or len(set(names)) != len(names):
        raise NotFused("an output column without a name of its own")
    items = [
        (
            n,
            exp.alias_(renamed(v), n, quoted=True).sql(dialect="spark"),
            view.get(v.name.lower()) if isinstance(v, exp.Column) else None,
        )
        for n, v in named
    ]
    where = tree.args.get("where")
    return items, None if where is None else renamed(where.this).sql(dialect="spark")


def _below(tree: exp.Select) -> Iterable[exp.Expression]:
    for node in tree.walk():
        if node is not tree:
            yield node
