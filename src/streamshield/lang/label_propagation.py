"""Carry tuple labels through a user query so that its output is a labelled stream again.

DESIGN.md section 1: select/project keep a tuple's labels; an aggregate's readers are
the intersection over its contributors (``bit_and``) and its denied roles the union
(``bit_or``). The rewrite adds those label columns to the outermost SELECT of a query
over one secured view, or to every branch of a ``UNION ALL`` of such selects. Joins
are the SCJoin's (which labels pairs itself); for other shapes the output carries no
labels and :func:`propagate_labels` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from streamshield.lang.recipient_labels import (
    Dependencies,
    column_slot,
    dependencies,
    row_slot,
    slot_columns,
    slot_of,
    widest,
)
from streamshield.lang.sql_trees import chain, empty_strings, is_null, not_null_elements
from streamshield.policy.query_level import LEVEL_PREFIX, QueryLevel

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


def uses_reserved_names(sql: str | exp.Expr) -> bool:
    """Whether user SQL names a label or origin column itself (it could forge labels)."""
    tree = sqlglot.parse_one(sql, read="spark") if isinstance(sql, str) else sql
    return any(
        isinstance(node, exp.Identifier) and node.name.lower().startswith(RESERVED)
        for node in tree.walk()
    )


def is_aggregate(tree: exp.Expr) -> bool:
    """Whether the outer SELECT aggregates (decides the streaming output mode)."""
    return isinstance(tree, exp.Select) and _is_aggregate(tree)


def hidden_column(attribute: str) -> str:
    """The secured view's flag column: ``attribute`` is masked (hidden) in this row."""
    return f"{HIDDEN_PREFIX}{attribute}"


def masked_expression(select: exp.Select, attributes: Sequence[str]) -> exp.Expr:
    """``_ss_masked``: the names of the output columns of a plain selection whose value is
    NULL because an attribute they read is hidden from the query's roles.

    A column that is an attribute (``hr``, ``v.hr``, ``hr AS beats``, ``*``) is masked
    when the attribute is; an expression is masked when it reads a hidden attribute and
    its value is NULL (a value computed despite the mask is a value). Expressions without
    a name of their own (no alias) are not listed.
    """
    known = {a.lower(): a for a in attributes}
    items: list[exp.Expr] = []

    def flag(name: str) -> exp.Column:
        return exp.column(hidden_column(known[name.lower()]), quoted=True)

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
            hidden = exp.Paren(this=chain(exp.Or, [flag(r) for r in reads]))
            value = is_null(exp.Paren(this=target.copy()))
            items.append(_named_if(exp.Paren(this=exp.And(this=value, expression=hidden)), name))
    if not items:
        return exp.alias_(empty_strings(), MASKED_COLUMN)
    return exp.alias_(not_null_elements(exp.Array(expressions=items)), MASKED_COLUMN)


def _named_if(condition: exp.Expr, name: str) -> exp.Expr:
    return exp.If(this=condition, true=exp.Literal.string(name), false=exp.Null())


def propagate_labels(
    sql: str,
    label_columns: Sequence[str],
    readers_prefix: str,
    attributes: Sequence[str] = (),
    sources: Mapping[str, Sequence[str]] | None = None,
    words: int = 0,
    level: QueryLevel | None = None,
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

    ``sources`` (input view name -> its stream's attributes) and ``words`` (the READ
    block's width) add the dependency slots of :mod:`~streamshield.lang.recipient_labels`,
    which delivery checks against each recipient's own roles; a SELECT over a view not
    in ``sources`` is refused (LabelsNotPropagated) rather than left without them.

    ``level``: the query's level, whose lattice says how an aggregate combines the level
    words (:func:`combined`).
    """
    tree = sqlglot.parse_one(sql, read="spark")
    return propagate_tree(
        tree, label_columns, readers_prefix, attributes, sources, words, level
    ).sql(dialect="spark")


def propagate_tree(
    tree: exp.Expr,
    label_columns: Sequence[str],
    readers_prefix: str,
    attributes: Sequence[str] = (),
    sources: Mapping[str, Sequence[str]] | None = None,
    words: int = 0,
    level: QueryLevel | None = None,
) -> exp.Expr:
    """:func:`propagate_labels` on a tree (a new one; ``tree`` is not changed)."""
    if uses_reserved_names(tree):
        raise LabelsNotPropagated(f"names starting with {RESERVED!r} are reserved")
    tree = tree.copy()
    slots = _Slots({k.lower(): tuple(v) for k, v in sources.items()}, words) if sources else None
    layout = slots.layout(tree) if slots else None
    return _propagate(tree, label_columns, readers_prefix, attributes, slots, layout, level)[0]


class _Slots:
    """Dependency slots for the SELECTs of one query (see recipient_labels)."""

    def __init__(self, sources: Mapping[str, tuple[str, ...]], words: int) -> None:
        self.sources, self.words = sources, words

    def attributes(self, select: exp.Select) -> tuple[str, ...]:
        """The attributes of the view a SELECT (not over a derived table) reads."""
        source = select.args.get("from_")
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table) or table.name.lower() not in self.sources:
            raise LabelsNotPropagated("a SELECT over an unknown input has no dependency labels")
        return self.sources[table.name.lower()]

    def dependencies(self, select: exp.Select) -> Dependencies:
        """A SELECT over a view: what its row and each column read (see recipient_labels)."""
        names = self.attributes(select)
        index = {n.lower(): obj for obj, n in enumerate(names, start=1)}

        def resolve(column: exp.Column) -> tuple[int, ...] | None:
            for name in (column.name, column.table):
                if name and name.lower() in index:
                    return (index[name.lower()],)
            return None

        return dependencies(select, resolve, tuple(range(1, len(names) + 1)))

    def branches(self, tree: exp.Expr) -> list[exp.Select]:
        if isinstance(tree, exp.Union):
            return self.branches(tree.this) + self.branches(tree.expression)
        if not isinstance(tree, exp.Select):
            raise LabelsNotPropagated("labels propagate through SELECTs and UNION ALL only")
        return [tree]

    def layout(self, tree: exp.Expr, fold: bool = False) -> tuple[int, tuple[int, ...]]:
        """The slot layout every branch pads to. Over a derived table the outer names are
        aliases of the inner's columns, so the inner's dependencies, columns folded into
        the row, are the whole query's: such a layout has row slots only."""
        exact: list[Dependencies] = []
        rows: list[int] = []
        for branch in self.branches(tree):
            derived = _derived(branch)
            if derived is not None:
                fold = True
                rows.append(self.layout(derived.this, fold=True)[0])
            else:
                deps = self.dependencies(branch)
                exact.append(deps)
                rows.append(len(deps.folded().row))
        if fold:
            return max(rows), ()
        try:
            return widest(exact)
        except ValueError as err:
            raise LabelsNotPropagated(str(err)) from None

    def columns(
        self, select: exp.Select, layout: tuple[int, tuple[int, ...]], aggregate: bool
    ) -> list[exp.Expr]:
        deps = self.dependencies(select)
        if not layout[1]:
            deps = deps.folded()
        try:
            return slot_columns(deps, layout, label_pair, self.words, aggregate)
        except ValueError as err:  # never a row without the slots it needs
            raise LabelsNotPropagated(str(err)) from None

    def names(self, layout: tuple[int, tuple[int, ...]]) -> list[str]:
        """The slot columns a SELECT over a labelled derived table passes on."""
        row, columns = layout
        out = [row_slot(j, k, w) for j in range(row) for w in range(self.words) for k in "rd"]
        for i, width in enumerate(columns):
            out += [
                column_slot(i, j, k, w)
                for j in range(width)
                for w in range(self.words)
                for k in "rd"
            ]
        return out


def label_pair(obj: int, word: int) -> tuple[str, str]:
    """The (readers, denied) columns of label object ``obj``'s word ``word`` (object 0:
    the tuple; ``i``: its i-th attribute), as a secured view or a join's pairs name them."""
    return f"_ss_r{obj}_{word}", f"_ss_d{obj}_{word}"


def _derived(select: exp.Select) -> exp.Subquery | None:
    source = select.args.get("from_")
    return source.this if source is not None and isinstance(source.this, exp.Subquery) else None


def _propagate(
    tree: exp.Expr,
    label_columns: Sequence[str],
    readers_prefix: str,
    attributes: Sequence[str] = (),
    slots: _Slots | None = None,
    layout: tuple[int, tuple[int, ...]] | None = None,
    level: QueryLevel | None = None,
) -> tuple[exp.Expr, bool]:
    """The labelled tree, and whether its rows still have one origin each."""
    if isinstance(tree, exp.Union):
        if tree.args.get("distinct") or tree.args.get("by_name"):
            raise LabelsNotPropagated("only UNION ALL keeps each tuple's labels")
        args = (label_columns, readers_prefix, attributes, slots, layout, level)
        left, left_origin = _propagate(tree.this, *args)
        right, right_origin = _propagate(tree.expression, *args)
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
    aggregate = _is_aggregate(tree)
    dependency: list[exp.Expr] = []
    if derived is not None:
        # A derived table: label its rows first, then combine them here as usual; its
        # dependency slots (the whole query's attributes, see _Slots) are computed inside.
        inner_layout = (layout[0], ()) if layout is not None else None
        inner, origin = _propagate(
            derived.this, label_columns, readers_prefix, (), slots, inner_layout, level
        )
        derived.set("this", inner)
        if slots is not None and inner_layout is not None:
            label_columns = [*label_columns, *slots.names(inner_layout)]
    elif slots is not None and layout is not None:
        dependency = slots.columns(tree, layout, aggregate)
    masked = (
        [masked_expression(tree, attributes)]
        if attributes and not aggregate and not derived
        else []
    )
    if not aggregate and any(isinstance(e, exp.Star) for e in tree.expressions):
        # The star already carries the labels (and the hidden flags, which delivery drops).
        return tree.select(*masked, *dependency, append=True), origin
    extra: list[exp.Expr] = []
    for column in label_columns:
        if aggregate:
            extra.append(exp.alias_(combined(column, readers_prefix, level), column))
        else:
            extra.append(exp.column(column))
    if not aggregate and origin:  # where each row came from, for re-punctuating the output
        extra += [exp.column(o) for o in ORIGIN]
    return tree.select(*extra, *masked, *dependency, append=True), origin and not aggregate


def combined(column: str, readers_prefix: str, level: QueryLevel | None = None) -> exp.Expr:
    """A label column over a group. Level words (``_ss_lvl_*``) are the LUB, one
    ``bit_or`` per word with a contributor's missing word counted as every bit set
    (``Lattice.lub_group``, the form of ``engine.views.level_columns.lub_aggregate``): ``bit_or``
    alone skips NULLs and would *lower* the group's level. Without the query's
    ``level``, or in a lattice with no spare bit to mark a missing word
    (``Lattice.unknown`` is None), the exact guard instead: NULL when any contributor's
    word is NULL (two more aggregate functions per word)."""
    if column.startswith(LEVEL_PREFIX):
        word = exp.column(column)
        if level is None or level.lattice.unknown is None:
            complete = exp.EQ(
                this=exp.Count(this=exp.Literal.number(1)), expression=exp.Count(this=word.copy())
            )
            return exp.Case().when(complete, exp.func("bit_or", word, dialect="spark"))
        top = exp.Literal.number(-1)
        if level.width == 1:
            return exp.func(
                "bit_or", exp.func("coalesce", word, top, dialect="spark"), dialect="spark"
            )
        missing = exp.or_(*(exp.column(n).is_(exp.null()) for n in level.columns))
        return exp.func("bit_or", exp.Case().when(missing, top).else_(word), dialect="spark")
    return exp.func(_combine(column, readers_prefix), exp.column(column), dialect="spark")


def _combine(column: str, readers_prefix: str) -> str:
    """How a label column combines over a group: readers AND, everything else OR."""
    slot = slot_of(column)
    if slot is not None:
        return "bit_and" if slot.kind == "r" else "bit_or"
    return "bit_and" if column.startswith(readers_prefix) else "bit_or"


def _outside(node: exp.Expr, top: exp.Select, derived: exp.Subquery | None) -> bool:
    """Whether ``node`` is a SELECT nested in ``top`` other than in its derived table."""
    if node is top:
        return False
    parent = node.parent
    while parent is not None and parent is not top:
        if parent is derived:
            return False
        parent = parent.parent
    return True
