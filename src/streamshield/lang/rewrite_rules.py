"""The security rewrites of an admitted query: pure tree-to-tree rules in one ordered tuple.

Each rule takes a sqlglot tree and the query's :class:`Rewrite` context and returns a
new tree (its input is never changed), as sqlglot's optimizer runs its rules; the
engine turns the last tree into the only SQL Spark sees. The order of :data:`RULES`
is part of the security argument:

1. :func:`refuse_reserved_names` looks at the user's own tree, before any rule adds
   ``_ss_`` names of its own: a user naming a label column could forge it. This
   includes the level words ``_ss_lvl_*`` and a ``level`` column that is no input's
   attribute (the level is the system's, never the query's). The level conjunct itself
   is no rule here: it is part of the secured view that rule 3 binds (the view filters
   ``level(t) dominated by C`` next to the tuple label, beneath every user expression),
   and rule 5 carries the level words on as labels (OR, the LUB).
2. :func:`sliding_window` turns ``[RANGE t SLIDE s]`` aggregates into Spark's
   ``window()`` grouping. It names the stream's event time and adds a user-visible
   column, so it runs before the views are bound and before labels are appended.
3. :func:`bind_views` points every stream at this query's own secured (or statistics)
   view and re-checks the generated SQL: from here on the tree reads nothing else, and
   every later rule resolves attribute names against those views.
4. :func:`statistics_only` (aggregates over a statistics view only) points bare
   arguments of whitelisted aggregates at the statistics columns and adds the release
   rule and the output labels. It runs before 5: its output is labelled already.
5. :func:`propagate_labels` appends tuple labels, provenance, dependency slots and
   masks to the final select list; last, since it must see every output column.

A join query reads the pairs of its shared join instead of views of its streams
(:class:`~streamshield.lang.pair_labels.JoinInput`): rule 3 points it at the pairs and
rule 5 labels its rows with the pairs' labels (lang/pair_labels.py).

:func:`secure` then checks that the last tree reads exactly its views
(``query_check.check_reads_only``) and renders it once: the one text Spark parses.
Nothing is rendered and parsed again in between.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from streamshield.lang.continuous import sliding_window_tree
from streamshield.lang.label_propagation import (
    LabelsNotPropagated,
    propagate_tree,
    uses_reserved_names,
)
from streamshield.lang.pair_labels import JoinInput, over_pairs, with_pair_labels
from streamshield.lang.query_check import QueryRejected, check_level_name, check_reads_only
from streamshield.lang.query_check import bind_views as _bind
from streamshield.lang.statistics_rewrite import statistics_supported, statistics_tree
from streamshield.lang.windows import WindowSpec
from streamshield.policy.query_level import QueryLevel


@dataclass(frozen=True)
class Sliding:
    """A ``[RANGE t SLIDE s]`` aggregate's window over the stream's event time."""

    event_time: str
    window: WindowSpec
    seconds: bool
    """The event time is a bigint of seconds (made a timestamp for Spark's window)."""


@dataclass(frozen=True)
class Rewrite:
    """What the rules need to know about one query and the views it runs over."""

    streams: tuple[str, ...]
    views: Mapping[str, str]
    """Stream -> the temp view of this query (secured, statistics or grant view)."""
    attributes: Mapping[str, tuple[str, ...]]
    """Stream -> its attributes, in label object order."""
    label_columns: tuple[str, ...] = ()
    """Tuple label and provenance words the output carries on."""
    provenance: tuple[str, ...] = ()
    block_width: int = 1
    statistics_k: int = 3
    statistics: bool = False
    """The query runs over a statistics view (decided with :func:`runs_on_statistics`)."""
    sliding: Sliding | None = None
    level: QueryLevel | None = None
    """The query's level: its lattice says how aggregates combine the level words."""
    join: JoinInput | None = None
    """A join query: it reads its shared join's pairs (``views`` is then empty)."""
    view_attributes: Mapping[str, tuple[str, ...]] = field(init=False)

    def __post_init__(self) -> None:
        by_view = {self.views[s]: tuple(self.attributes[s]) for s in self.views}
        object.__setattr__(self, "view_attributes", by_view)


Rule = Callable[[exp.Expr, Rewrite], exp.Expr]


def refuse_reserved_names(tree: exp.Expr, rewrite: Rewrite) -> exp.Expr:
    if uses_reserved_names(tree):
        raise QueryRejected("reserved_name", "names starting with _ss_ are reserved")
    check_level_name(tree, [a for s in rewrite.streams for a in rewrite.attributes[s]])
    return tree


def sliding_window(tree: exp.Expr, rewrite: Rewrite) -> exp.Expr:
    if rewrite.sliding is None:
        return tree
    s = rewrite.sliding
    return sliding_window_tree(tree, s.event_time, s.window, seconds=s.seconds)


def bind_views(tree: exp.Expr, rewrite: Rewrite) -> exp.Expr:
    if rewrite.join is not None:
        return over_pairs(tree, rewrite.join.view)
    return _bind(tree, rewrite.streams, rewrite.views)


def statistics_only(tree: exp.Expr, rewrite: Rewrite) -> exp.Expr:
    if not rewrite.statistics:
        return tree
    (stream,) = rewrite.streams
    out = statistics_tree(
        tree,
        rewrite.attributes[stream],
        rewrite.block_width,
        rewrite.statistics_k,
        rewrite.provenance,
        rewrite.level,
    )
    if out is None:  # runs_on_statistics said it would apply: never run it unlabelled
        raise QueryRejected("query_shape", "this aggregate cannot run on statistics")
    return out


def propagate_labels(tree: exp.Expr, rewrite: Rewrite) -> exp.Expr:
    """Labels for every shape that has them; other shapes stay unlabelled, and delivery
    hands unlabelled rows to no one."""
    if rewrite.statistics:
        return tree
    if rewrite.join is not None:
        if not isinstance(tree, exp.Select):
            raise QueryRejected("query_shape", "a join query must be one SELECT")
        return with_pair_labels(tree, rewrite.join, rewrite.level)
    single = rewrite.attributes[rewrite.streams[0]] if len(rewrite.streams) == 1 else ()
    try:
        return propagate_tree(
            tree,
            rewrite.label_columns,
            "_ss_r",
            single,
            rewrite.view_attributes,
            rewrite.block_width,
            rewrite.level,
        )
    except LabelsNotPropagated:
        return tree


RULES: tuple[Rule, ...] = (
    refuse_reserved_names,
    sliding_window,
    bind_views,
    statistics_only,
    propagate_labels,
)


@dataclass(frozen=True)
class Secured:
    """A query after every security rewrite: its tree and that tree rendered, once."""

    tree: exp.Expr = field(repr=False, compare=False)
    """What the engine reads the query's shape from (folds, fused passes); never
    changed (copy it first)."""
    sql: str
    """The one text Spark parses for the query; ``explain`` shows it."""


def secure(tree: exp.Expr, rewrite: Rewrite, rules: tuple[Rule, ...] = RULES) -> Secured:
    """A checked ``tree`` secured: every rule in order, then checked to read exactly
    its views and rendered for Spark."""
    for rule in rules:
        tree = rule(tree, rewrite)
    views = [rewrite.join.view] if rewrite.join is not None else list(rewrite.views.values())
    check_reads_only(tree, views)
    return Secured(tree, tree.sql(dialect="spark", comments=False))


def runs_on_statistics(tree: exp.Expr, streams: tuple[str, ...], aggregate: bool) -> bool:
    """Whether a query's views are statistics views: a supported single-stream aggregate
    (delegating queries never: statistics-only access is not passed on)."""
    return aggregate and len(streams) == 1 and statistics_supported(tree)
