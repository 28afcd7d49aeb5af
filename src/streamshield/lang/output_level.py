"""At which level a query at level ``C`` writes its output rows (paper 2's write-equal).

The paper's restricted star-property lets a query at ``C`` write only at ``C``, and its
Theorem 1 rests on that: whatever a query computes from tuples dominated by ``C`` is
information at ``C``. Labelling a row below ``C`` (at the LUB of the tuples it was
computed from) is sound only where the row's existence and every value in it depend on
those tuples alone; otherwise a reader cleared for the row's label learns something
about tuples she may not read. Per shape (docs/chinese-wall.md, "Output levels"):

* a stateless selection/projection over one stream (and ``UNION ALL`` or derived tables
  of such): an output row is a function of one input tuple, and it exists iff that
  tuple passes the secured view and the WHERE clause, both computed from that tuple
  alone. Its own level is sound: :attr:`OutputLevel.ROW`.
* everything else holds state over several tuples, and a row's existence or value
  depends on tuples of other levels: an aggregate's count reveals the absence of
  tuples (an empty group is a fact about every tuple the query may read), a window's
  contents depend on what evicted or did not evict a tuple, a join's pair on both
  windows, NOT/EXCEPT/anti-joins and ``DISTINCT`` on tuples that are *not* in the
  output, ``LIMIT``/``ORDER BY``/window functions on the other rows' ranks, and
  ``rand()``, ``uuid()`` or ``monotonically_increasing_id()`` on a row's position among
  the others. Every such row is written at ``C``: :attr:`OutputLevel.QUERY`.

It fails closed: a shape this module does not recognise as a stateless selection is
:attr:`OutputLevel.QUERY`. Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from enum import Enum

from sqlglot import exp

from streamshield.lang.continuous import Shape, ShapeKind


class OutputLevel(Enum):
    """Where a query's output rows are labelled."""

    ROW = "row"
    """Each row keeps the level of the one tuple it came from (dominated by ``C``)."""
    QUERY = "query"
    """Every row carries the query's level ``C`` (write-equal)."""


_SELECT_PARTS = frozenset({"expressions", "from_", "where"})
"""The only parts a stateless selection has: anything else (DISTINCT, GROUP BY, HAVING,
ORDER BY, LIMIT, OFFSET, QUALIFY, joins, laterals, samples, CTEs, hints) is not one."""
_TABLE_PARTS = frozenset({"this", "alias", "db"})
"""A stream named in FROM, with its alias; a PIVOT or a sample on it is not plain."""
_POSITIONAL = (exp.Rand, exp.Randn, exp.Uuid, exp.Shuffle, exp.Uniform, exp.Randstr)
"""Functions whose value depends on the row's position among the others in its partition."""
_POSITIONAL_NAMES = frozenset({"monotonically_increasing_id", "spark_partition_id", "uuid"})
"""The same among functions sqlglot does not model (``exp.Anonymous``)."""


def output_level(shape: Shape, tree: exp.Expr) -> OutputLevel:
    """The level the output rows of an admitted query of ``shape`` and checked ``tree``
    are written at: ROW only for a stateless selection (see the module docstring)."""
    if shape.kind is not ShapeKind.STREAM or shape.aggregate or shape.windows:
        return OutputLevel.QUERY
    if shape.time_windows or shape.operators:
        return OutputLevel.QUERY
    return OutputLevel.ROW if _stateless(tree) else OutputLevel.QUERY


def _stateless(tree: exp.Expr) -> bool:
    """Whether every output row of ``tree`` is computed from one input row alone."""
    if type(tree) is exp.Union:  # EXCEPT and INTERSECT are subclasses: anti/semi joins
        return not _parts(tree) - {"this", "expression"} and all(
            _stateless(side) for side in (tree.this, tree.expression)
        )
    if not isinstance(tree, exp.Select) or _parts(tree) - _SELECT_PARTS:
        return False
    source = tree.args.get("from_")
    relation = source.this if source is not None else None
    if isinstance(relation, exp.Subquery):
        if _parts(relation) - {"this", "alias"} or not _stateless(relation.this):
            return False
    elif not isinstance(relation, exp.Table) or _parts(relation) - _TABLE_PARTS:
        return False
    return not any(_stateful(node, tree, relation) for node in tree.walk())


def _parts(node: exp.Expr) -> set[str]:
    return {key for key, value in node.args.items() if value}


def _stateful(node: exp.Expr, select: exp.Select, relation: exp.Expr) -> bool:
    """Whether ``node``, in ``select`` over ``relation`` (checked on its own), reads
    more than its own row."""
    if node is select or _within(node, relation):
        return False
    if isinstance(node, exp.AggFunc | exp.Window | exp.Join | exp.Lateral | exp.Query):
        return True  # a nested query: a scalar, IN or EXISTS subquery (semi/anti join)
    if isinstance(node, (exp.Subquery, *_POSITIONAL)):
        return True
    return isinstance(node, exp.Anonymous) and node.name.lower() in _POSITIONAL_NAMES


def _within(node: exp.Expr | None, ancestor: exp.Expr) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False
