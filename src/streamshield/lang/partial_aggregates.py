"""An aggregate query folded batch by batch: partial aggregates merged into a state.

Why: a query aggregating a stream without a window (``SELECT pid, count(*) FROM s GROUP
BY pid``) ran Spark's own streaming aggregation, whose state lives in the query's own
streaming query, so it could not be a branch of its stream's shared network (one scan
for every query, privacy switches: docs/query-sharing.md). As a branch it keeps its state itself:
each micro-batch's rows are aggregated into *partials* per group, the partials are
merged with the branch's state as of its previous batch into the new state, and the
query's select list and HAVING are evaluated over the merged groups this batch touched,
which is what Spark's update mode emits.

The fold works on the query's final secured SQL (after every rule of
lang/rewrite_rules.py), so the aggregates the rules add (the labels' ``bit_and`` and
``bit_or``, the statistics release's ``count_if``, the level words' LUB) fold like the
user's own, and every expression over aggregates (a CASE WHEN over counts in a
statistics label, the release in HAVING) is evaluated over the merged aggregates, as
Spark evaluates it over its state.

Only aggregates that merge exactly fold: ``count`` (not DISTINCT), ``count_if``,
``sum``, ``min``, ``max``, ``bit_and``, ``bit_or``, and ``avg`` as a sum and a count.
Anything else (a DISTINCT, ``first``, a variance, a FILTER clause, a window function, an
ORDER BY, a subquery) gives None and the query runs on its own, as before. The final
select reads state columns only (checked here), so an aggregate this module does not
know cannot silently run over the state: its query fails to plan and runs on its own.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

KEY = "_ss_k"
PART = "_ss_p"
TOUCHED = "_ss_at"
"""The state column holding the newest batch that updated a group."""

_SAME = {
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
}
"""Aggregates whose partials merge with the aggregate itself."""
_COUNTS = (exp.Count, exp.CountIf)
"""Aggregates whose partials merge by summing."""
_REFUSED = ("with", "joins", "laterals", "order", "limit", "offset", "distinct", "qualify")


@dataclass(frozen=True)
class Fold:
    """How one aggregate query runs as partials merged into a state."""

    keys: tuple[str, ...]
    """The state's key columns, one per GROUP BY expression (none: one global group)."""
    merges: tuple[tuple[str, str], ...]
    """Each partial column of the state and the aggregate that merges it."""
    partial_tree: exp.Select = field(repr=False, compare=False)
    """The partials of a batch: the query's FROM, WHERE and GROUP BY."""
    final_trees: tuple[exp.Expr, ...] = field(repr=False, compare=False)
    """The query's select list over the state, one expression per output column."""
    having_tree: exp.Expr | None = field(repr=False, compare=False)
    """The query's HAVING over the state (None: every touched group is emitted)."""

    @property
    def partial(self) -> str:
        """:attr:`partial_tree` as Spark SQL (what the engine plans per batch)."""
        return self.partial_tree.sql(dialect="spark")

    @property
    def final(self) -> tuple[str, ...]:
        return tuple(e.sql(dialect="spark") for e in self.final_trees)

    @property
    def having(self) -> str | None:
        return None if self.having_tree is None else self.having_tree.sql(dialect="spark")

    def final_sql(self, state: str, names: tuple[str, ...]) -> str:
        """The emitted rows: the final select over the view ``state`` (the touched
        groups), each expression named as the query's own column (``names``)."""
        if len(names) != len(self.final_trees):
            raise ValueError("one name per output column")
        select = exp.select(
            *(
                exp.alias_(e.copy(), n, quoted=True)
                for e, n in zip(self.final_trees, names, strict=True)
            )
        ).from_(state)
        if self.having_tree is not None:
            select = select.where(self.having_tree.copy())
        return select.sql(dialect="spark")


def fold_of(tree: exp.Expr) -> Fold | None:
    """The fold of a secured aggregate SELECT over one view (its tree is not changed),
    or None where it does not fold."""
    if not isinstance(tree, exp.Select) or any(tree.args.get(a) for a in _REFUSED):
        return None
    if any(
        isinstance(n, exp.Select | exp.Subquery | exp.Window | exp.Filter | exp.Union)
        and n is not tree
        for n in tree.walk()
    ):
        return None
    group = tree.args.get("group")
    if group is not None and any(
        group.args.get(a) for a in ("grouping_sets", "cube", "rollup", "totals")
    ):
        return None
    groups = list(group.expressions) if group is not None else []
    if any(isinstance(g, exp.Literal) for g in groups):
        return None  # GROUP BY 1: an ordinal, not an expression
    having = tree.args.get("having")
    outputs = [e.copy() for e in tree.expressions]
    condition = having.this.copy() if having is not None else None
    calls = [
        n
        for root in (*outputs, *([condition] if condition is not None else []))
        for n in root.walk()
        if isinstance(n, exp.AggFunc)
    ]
    if not calls and not groups:
        return None  # not an aggregate
    if any(isinstance(p, exp.AggFunc) for c in calls for p in _ancestors(c)):
        return None  # an aggregate inside another one
    partials: list[exp.Expr] = []
    merges: list[tuple[str, str]] = []
    replaced: dict[int, exp.Expr] = {}
    named: dict[str, str] = {}  # a partial's SQL -> its column: equal calls computed once

    def part(call: exp.Expr, merge: str) -> exp.Column:
        text = call.sql(dialect="spark")
        if text not in named:
            named[text] = f"{PART}{len(partials)}"
            partials.append(exp.alias_(call, named[text]))
            merges.append((named[text], merge))
        return exp.column(named[text])

    for call in calls:
        if isinstance(call, exp.Avg):
            total = part(exp.Sum(this=call.this.copy()), "sum")
            count = part(exp.Count(this=call.this.copy()), "sum")
            nonzero = exp.Nullif(this=count, expression=exp.Literal.number(0))
            replaced[id(call)] = exp.Paren(this=exp.Div(this=total, expression=nonzero))
        elif isinstance(call, _COUNTS) and not isinstance(call.this, exp.Distinct):
            replaced[id(call)] = part(call.copy(), "sum")
        elif type(call) in _SAME:
            replaced[id(call)] = part(call.copy(), _SAME[type(call)])
        else:
            return None
    keys = tuple(f"{KEY}{i}" for i in range(len(groups)))

    def swap(node: exp.Expr) -> exp.Expr:
        if id(node) in replaced:
            return replaced[id(node)]
        for g, key in zip(groups, keys, strict=True):
            if node == g:
                return exp.column(key)
        return node

    final = [_unaliased(o).transform(swap, copy=False) for o in outputs]
    state_columns = {*keys, *(m for m, _ in merges)}
    state_condition = None
    if condition is not None:
        # HAVING may name an output by its alias (Spark resolves it so when no grouped
        # attribute has that name): it reads that output's expression over the state
        aliases = {o.alias.lower(): e for o, e in zip(outputs, final, strict=True) if o.alias}

        def by_alias(node: exp.Expr) -> exp.Expr:
            if (
                isinstance(node, exp.Column)
                and not node.table
                and node.name not in state_columns
                and node.name.lower() in aliases
            ):
                return exp.Paren(this=aliases[node.name.lower()].copy())
            return node

        state_condition = condition.transform(swap, copy=False).transform(by_alias, copy=False)
    for root in (*final, *([state_condition] if state_condition is not None else [])):
        if any(c.name not in state_columns for c in root.find_all(exp.Column)):
            return None  # reads something the state does not keep
        if any(isinstance(n, exp.AggFunc) for n in root.walk()):
            return None
    partial = exp.select(
        *(exp.alias_(g.copy(), k) for g, k in zip(groups, keys, strict=True)), *partials
    )
    partial.set("from_", tree.args["from_"].copy())
    if tree.args.get("where") is not None:
        partial.set("where", tree.args["where"].copy())
    if groups:
        partial.set("group", exp.Group(expressions=[g.copy() for g in groups]))
    return Fold(keys, tuple(merges), partial, tuple(final), state_condition)


def _unaliased(expression: exp.Expr) -> exp.Expr:
    return expression.this if isinstance(expression, exp.Alias) else expression


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    out = []
    parent = node.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out


@dataclass(frozen=True)
class PartialParts:
    """A fold's partial SQL taken apart, so that an engine can build it once as column
    expressions and apply them to every batch instead of planning its SQL per batch
    (engine/sharing/aggregate_pass.py): ``source``'s rows filtered by ``where``, grouped by
    ``keys``, aggregated by ``calls``, each part the SQL text it has in the partial."""

    source: str
    """The name the FROM clause gives the view (its alias, or its own name)."""
    where: str | None
    keys: tuple[tuple[str, str], ...]
    """``(key column, expression)`` per GROUP BY expression."""
    calls: tuple[tuple[str, str], ...]
    """``(partial column, aggregate call)``."""


def partial_parts(fold: Fold) -> PartialParts | None:
    """The parts of a fold's partials (:attr:`Fold.partial_tree`); None where they do
    not take this shape (they are then planned as SQL)."""
    tree = fold.partial_tree
    source = tree.args["from_"].this
    if not isinstance(source, exp.Table):
        return None
    group = tree.args.get("group")
    groups = [g.sql(dialect="spark") for g in group.expressions] if group is not None else []
    where = tree.args.get("where")
    keys, calls = [], []
    for item in tree.expressions:
        if not isinstance(item, exp.Alias):
            return None
        text = item.this.sql(dialect="spark")
        if isinstance(item.this, exp.AggFunc):
            calls.append((item.alias, text))
        elif item.alias.startswith(KEY) and text in groups:
            keys.append((item.alias, text))
        else:
            return None
    if [k for _, k in keys] != groups:
        return None
    return PartialParts(
        source.alias_or_name,
        None if where is None else where.this.sql(dialect="spark"),
        tuple(keys),
        tuple(calls),
    )
