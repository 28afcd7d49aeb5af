"""Statistics-only access in aggregate queries (paper 4's Omega, Borealis' aggregate-read).

An aggregate query over one stream runs on a *statistics view*: it holds every row whose
tuple the query's roles may READ or use for STATISTICS. Each attribute is there twice:
the raw column (masked with the READ mask, as in every secured view) and a hidden stats
column ``_ss_v{i}`` (masked with the STATISTICS mask). This rewrite, run on already
checked SQL, points only *bare column arguments of whitelisted aggregates* at the stats
column; everything else (group keys, WHERE, CASE inside an aggregate, FILTER clauses,
collect_list, first, percentile, max_by, ...) keeps the raw, READ-masked value, so a
statistics-only value can never come out as itself.

Release. A group is released only if, per *measure* (its rows, and each attribute read
through a stats column), the number of contributors the query could not READ raw is 0
or at least ``k``. This is stronger than "all rows readable or >= k rows": with two
readable rows and one statistics-only row, a group of 3 would otherwise give the hidden
value away by subtraction. It is a HAVING condition, so it runs natively after the
aggregation and also in streaming update mode; the helper aggregates never reach the
output. (Known limits of any threshold rule: differencing across successive updates of
one group, and min/max/sum together over exactly k rows.)

Output label (``_ss_r0_*``/``_ss_d0_*``, blocks as in
:class:`~streamshield.policy.encoding.RoleCodec`): per row a contribution is computed
over the tuple and every attribute the query names (raw-used attributes count as READ
only). A consumer role may read the released row if it READs every used object of every
contributor, or, only when every measure has >= k contributors, if it holds STATISTICS
on all of them. A role that READs an object in some contributors but not in all is
*denied* on the output: with it a consumer could subtract the rows it reads. This never
lets a downstream consumer get more than roles holding READ or STATISTICS on every
contributor; mixed role sets are refused rather than approximated.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlglot
from sqlglot import exp

from streamshield.lang.label_propagation import combined, uses_reserved_names
from streamshield.lang.sql_trees import bigint, chain
from streamshield.policy.query_level import QueryLevel

_AGGREGATES = (
    exp.Count,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Stddev,
    exp.StddevSamp,
    exp.StddevPop,
    exp.Variance,
    exp.VariancePop,
)
_ANONYMOUS = frozenset({"mean", "std", "var_samp", "var_pop", "stddev", "variance"})
_WRAPPERS = (exp.Filter, exp.Window, exp.IgnoreNulls, exp.RespectNulls)
_UNSUPPORTED = (exp.Join, exp.Subquery, exp.Union, exp.Intersect, exp.Except, exp.Lateral)
BLOCKS = 3  # READ, STATISTICS, GRANT (policy/privileges.py)


def stats_column(obj: int) -> str:
    """The view column with attribute ``obj`` (1-based) masked by the STATISTICS mask."""
    return f"_ss_v{obj}"


def full_column(obj: int) -> str:
    """Boolean view column: object ``obj`` (0 = the tuple) is READ-readable in this row."""
    return f"_ss_f{obj}"


def _reader(obj: int, word: int) -> str:
    return f"_ss_r{obj}_{word}"


def _denied(obj: int, word: int) -> str:
    return f"_ss_d{obj}_{word}"


def _supported(tree: exp.Expr) -> bool:
    if not isinstance(tree, exp.Select) or tree.args.get("with") or tree.args.get("laterals"):
        return False
    if any(isinstance(node, _UNSUPPORTED) for node in tree.walk()):
        return False
    if any(isinstance(node, exp.Select) and node is not tree for node in tree.walk()):
        return False
    tables = list(tree.find_all(exp.Table))
    return len(tables) == 1


def _is_statistic(node: exp.Expr) -> bool:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower() in _ANONYMOUS and len(node.expressions) == 1
    return isinstance(node, _AGGREGATES) and not node.args.get("expressions")


def _bare_argument(node: exp.Expr) -> exp.Column | None:
    arg = node.expressions[0] if isinstance(node, exp.Anonymous) else node.this
    if not isinstance(arg, exp.Column) or isinstance(node.parent, _WRAPPERS):
        return None
    return arg


def rewrite_statistics(
    sql: str,
    attributes: Sequence[str],
    block_width: int,
    k: int,
    provenance: Sequence[str] = (),
    level: QueryLevel | None = None,
) -> str | None:
    """``sql`` over a statistics view, with release condition and output labels (Spark SQL).

    ``provenance`` names the view's source-stream words; they combine with ``bit_or``
    (the union of the contributors' sources). None when the query's shape is not a plain
    single-stream aggregate: the caller then runs it over the READ-only view, where
    statistics-only rows do not exist.
    """
    out = statistics_tree(
        sqlglot.parse_one(sql, read="spark"), attributes, block_width, k, provenance, level
    )
    return None if out is None else out.sql(dialect="spark")


def statistics_supported(tree: exp.Expr) -> bool:
    """Whether :func:`statistics_tree` can rewrite ``tree``: a plain single-stream SELECT
    (the caller then runs it over a statistics view, else over the READ view)."""
    return _supported(tree) and not uses_reserved_names(tree)


def statistics_tree(
    tree: exp.Expr,
    attributes: Sequence[str],
    block_width: int,
    k: int,
    provenance: Sequence[str] = (),
    level: QueryLevel | None = None,
) -> exp.Expr | None:
    """:func:`rewrite_statistics` on a tree (a new one; ``tree`` is not changed)."""
    if k < 1:
        raise ValueError(f"the minimum group size must be >= 1, got {k}")
    if not isinstance(tree, exp.Select) or not statistics_supported(tree):
        return None
    tree = tree.copy()
    index = {name.lower(): obj for obj, name in enumerate(attributes, start=1)}
    stats_used: set[int] = set()
    for node in list(tree.find_all(exp.AggFunc, exp.Anonymous)):
        if not _is_statistic(node):
            continue
        arg = _bare_argument(node)
        if arg is None or arg.name.lower() not in index:
            continue
        obj = index[arg.name.lower()]
        arg.replace(exp.column(stats_column(obj), table=arg.table or None))
        stats_used.add(obj)
    if not stats_used and not _aggregates(tree):
        return None
    raw_used = {index[c.name.lower()] for c in tree.find_all(exp.Column) if c.name.lower() in index}
    measures = _measures(tree, stats_used)
    tree = tree.having(_release(stats_used, k), append=True, dialect="spark")
    # The row's label covers the tuple, every raw attribute and the measures that choose
    # rows (HAVING); each output column's measures get a slot of their own, so that a
    # recipient who may not read one sees that column masked, not the row withheld.
    in_columns = set().union(*measures) if measures is not None else set()
    row_stats = sorted(stats_used - raw_used - in_columns)
    labels = _output_labels(row_stats, sorted(raw_used), block_width, k)
    for i, objects in enumerate(measures or ()):
        only = sorted(set(objects) - raw_used)
        if only:
            labels += _column_slot(i, only, sorted(raw_used), block_width, k)
    sources = [exp.alias_(combined(c, "_ss_r", level), c) for c in provenance]
    return tree.select(*labels, *sources, append=True, dialect="spark")


def _measures(tree: exp.Select, stats_used: set[int]) -> list[tuple[int, ...]] | None:
    """Per output column, the attributes it reads through stats columns; None when a
    ``*`` hides the columns' positions (then the row's label covers every measure)."""
    out: list[tuple[int, ...]] = []
    for projection in tree.expressions:
        if any(
            isinstance(n, exp.Star) and not isinstance(n.parent, exp.Count)
            for n in projection.walk()
        ):
            return None
        used = {
            obj
            for c in projection.find_all(exp.Column)
            for obj in stats_used
            if c.name == stats_column(obj)
        }
        out.append(tuple(sorted(used)))
    return out


def _aggregates(tree: exp.Select) -> bool:
    return bool(tree.args.get("group")) or any(
        isinstance(node, exp.AggFunc) for e in tree.expressions for node in e.walk()
    )


def _column(name: str) -> exp.Column:
    return exp.column(name)


def _few_or_enough(count: exp.Expr, k: int) -> exp.Expr:
    """``(count = 0 OR count >= k)``: no hidden contributor, or at least k of them."""
    zero = exp.EQ(this=count, expression=exp.Literal.number(0))
    enough = exp.GTE(this=count.copy(), expression=exp.Literal.number(k))
    return exp.Paren(this=exp.Or(this=zero, expression=enough))


def _release(stats_used: set[int], k: int) -> exp.Expr:
    """Per measure: no contributor hidden from READ, or at least k of them."""
    hidden: list[exp.Expr] = [exp.Not(this=_column(full_column(0)))]
    hidden += [
        exp.And(
            this=exp.Not(this=exp.Is(this=_column(stats_column(o)), expression=exp.Null())),
            expression=exp.Not(this=_column(full_column(o))),
        )
        for o in stats_used
    ]
    return chain(exp.And, [_few_or_enough(exp.CountIf(this=h), k) for h in hidden])


def _output_labels(
    stats_only: list[int], raw_used: list[int], width: int, k: int
) -> list[exp.Expr]:
    readers, denied = _label_terms(stats_only, raw_used, width, k)
    columns = []
    for w in range(BLOCKS * width):
        columns.append(exp.alias_(_or_neutral(readers[w], 0), _reader(0, w)))
        columns.append(exp.alias_(_or_neutral(denied[w], -1), _denied(0, w)))
    return columns


def _or_neutral(term: exp.Expr, neutral: int) -> exp.Expr:
    return exp.Coalesce(this=term.copy(), expressions=[bigint(neutral)])


def _column_slot(
    column: int, stats_only: list[int], raw_used: list[int], width: int, k: int
) -> list[exp.Expr]:
    """One dependency slot (lang/recipient_labels.py) of output ``column``: the READ block
    of the label its measures would give the row on their own."""
    readers, denied = _label_terms(stats_only, raw_used, width, k)
    out = []
    for w in range(width):  # the READ block: what delivery checks recipients against
        out.append(exp.alias_(_or_neutral(readers[w], 0), f"_ss_col{column}x0_r{w}"))
        out.append(exp.alias_(_or_neutral(denied[w], -1), f"_ss_col{column}x0_d{w}"))
    return out


def _label_terms(
    stats_only: list[int], raw_used: list[int], width: int, k: int
) -> tuple[dict[int, exp.Expr], dict[int, exp.Expr]]:
    """Readers and denied expressions per label word (all blocks) over the objects."""
    objects = [0, *stats_only, *raw_used]
    every = exp.GTE(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(k))
    measures = [_few_or_enough(exp.Count(this=_column(stats_column(o))), k) for o in stats_only]
    enough = chain(exp.And, [every, *measures])

    def bit_and(term: exp.Expr) -> exp.Expr:
        return exp.func("bit_and", term, dialect="spark")

    def bit_or(term: exp.Expr) -> exp.Expr:
        return exp.func("bit_or", term, dialect="spark")

    readers: dict[int, exp.Expr] = {}
    denied: dict[int, exp.Expr] = {}
    for j in range(width):
        read, stats, grant = (j, width + j, 2 * width + j)

        def both(o: int, j: int = j, stats: int = stats) -> exp.Expr:
            return exp.Paren(
                this=exp.BitwiseOr(
                    this=_column(_reader(o, stats)), expression=_column(_reader(o, j))
                )
            )

        everyone = chain(exp.BitwiseAnd, [bit_and(_column(_reader(o, read))) for o in objects])
        stats_terms = [both(0), *(both(o) for o in stats_only)]
        if raw_used:  # raw values reach the output: their holders need READ
            stats_terms += [_column(_reader(o, read)) for o in (0, *raw_used)]
        by_stats = (
            exp.Case()
            .when(enough.copy(), bit_and(chain(exp.BitwiseAnd, stats_terms)))
            .else_(bigint(0))
        )
        out_read = exp.Paren(
            this=exp.BitwiseOr(this=exp.Paren(this=everyone), expression=exp.Paren(this=by_stats))
        )
        grants = bit_and(chain(exp.BitwiseAnd, [_column(_reader(o, grant)) for o in objects]))
        deny_terms = [bit_or(_column(_denied(o, b))) for o in objects for b in (read, stats, grant)]
        # partial readers: READ an object in some contributors but not in all
        deny_terms += [
            exp.Paren(
                this=exp.BitwiseAnd(
                    this=bit_or(_column(_reader(o, read))),
                    expression=exp.BitwiseNot(this=bit_and(_column(_reader(o, read)))),
                )
            )
            for o in objects
        ]
        out_denied = chain(exp.BitwiseOr, deny_terms)
        readers[read] = readers[stats] = out_read
        readers[grant] = exp.Paren(this=exp.BitwiseAnd(this=out_read.copy(), expression=grants))
        denied[read] = denied[stats] = denied[grant] = out_denied
    return readers, denied
