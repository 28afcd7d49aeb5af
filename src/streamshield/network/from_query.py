"""The operator tree of an admitted query, built from its checked syntax tree.

Query sharing (docs/query-sharing.md) merges operator trees, so each query needs one; it is built
from the :class:`~streamshield.lang.admission.AdmittedQuery` (the tree that was checked,
never the text again). Only plans the papers' operators express exactly are built:
windows, a conjunction of ``attribute op constant`` selections, a projection to named
attributes, one aggregate with a GROUP BY of attributes, a windowed equi-join of two
streams, and UNION ALL of such plans. Anything else (an expression in the select list, a
renaming, an OR, a second aggregate, a subquery) gives ``None``: the query cannot be
shared and runs on its own, exactly as before.

Pure Python: no pyspark (tests/unit/test_purity.py).
"""

from __future__ import annotations

from sqlglot import exp

from streamshield.lang.admission import AdmittedQuery
from streamshield.lang.continuous import ShapeKind
from streamshield.lang.windows import WindowKind as CqlKind
from streamshield.lang.windows import WindowSpec as CqlWindow
from streamshield.network.operators import (
    Aggregation,
    Operator,
    WindowSpec,
    aggregate,
    join,
    project,
    select,
    union,
    window,
)
from streamshield.network.predicates import Comparison, Conjunction, Op

_COMPARISONS: dict[type[exp.Expr], Op] = {
    exp.EQ: Op.EQ,
    exp.NEQ: Op.NE,
    exp.LT: Op.LT,
    exp.LTE: Op.LE,
    exp.GT: Op.GT,
    exp.GTE: Op.GE,
}
_MIRRORED = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}
_AGGREGATIONS: dict[type[exp.Expr], Aggregation] = {
    exp.Count: Aggregation.COUNT,
    exp.Sum: Aggregation.SUM,
    exp.Min: Aggregation.MIN,
    exp.Max: Aggregation.MAX,
    exp.Avg: Aggregation.AVG,
}


class NotShareable(ValueError):
    """A part of the plan no operator of the sharing model expresses."""


def operator_tree(admitted: AdmittedQuery, event_time: str = "ts") -> Operator | str | None:
    """The query's operator tree (a bare stream name for ``SELECT * FROM s``), or None."""
    try:
        return _tree(admitted, event_time)
    except NotShareable:
        return None


def where_conjuncts(admitted: AdmittedQuery) -> Conjunction | None:
    """The ``attribute op constant`` conjuncts of the WHERE of a one-stream SELECT, or
    None: what a shared select above its window may filter by (CW Figs. 3-5).

    Unlike :func:`operator_tree` this is partial: a conjunct of another form (an OR, a
    subquery, an expression) is left out rather than spoiling the rest, since every
    conjunct of a WHERE is implied by it. Only a SELECT straight from one stream (its
    window stripped) qualifies: over a derived table or a join, a WHERE's names need not
    be the stream's attributes."""
    tree = admitted.checked.tree
    if admitted.delegating or not isinstance(tree, exp.Select) or tree.args.get("joins"):
        return None
    source = tree.args.get("from_")
    where = tree.args.get("where")
    if source is None or not isinstance(source.this, exp.Table) or where is None:
        return None
    atoms: list[Comparison] = []
    for part in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        try:
            atoms.append(_comparison(part))
        except NotShareable:
            continue
    return Conjunction.of(atoms) if atoms else None


def _tree(admitted: AdmittedQuery, event_time: str) -> Operator | str:
    tree = admitted.checked.tree
    windows = {item.lower(): (stream, spec) for item, stream, spec in admitted.shape.windows}
    if admitted.delegating or admitted.shape.time_windows:
        raise NotShareable("ON RESULT and window() calls are planned on their own")
    if isinstance(tree, exp.Union):
        return union(*(_select(b, windows, event_time) for b in _branches(tree)))
    if not isinstance(tree, exp.Select):
        raise NotShareable("not a SELECT")
    if admitted.shape.kind is ShapeKind.JOIN:
        return _join(tree, admitted, windows, event_time)
    return _select(tree, windows, event_time)


def _branches(tree: exp.Expr) -> list[exp.Select]:
    if isinstance(tree, exp.Union):
        if tree.args.get("distinct"):
            raise NotShareable("only UNION ALL is a bag union")
        return _branches(tree.this) + _branches(tree.expression)
    if not isinstance(tree, exp.Select):
        raise NotShareable("not a SELECT")
    return [tree]


def _plain(select_: exp.Select) -> None:
    allowed = {"expressions", "from_", "where", "group", "joins"}
    if any(v for k, v in select_.args.items() if k not in allowed):
        raise NotShareable("clauses beyond SELECT, FROM, WHERE and GROUP BY")


def _source(
    relation: exp.Expr, windows: dict[str, tuple[str, CqlWindow]], event_time: str
) -> Operator | str:
    if not isinstance(relation, exp.Table):
        raise NotShareable("a derived table")
    stream = relation.name
    spec = windows.get(relation.alias_or_name.lower())
    if spec is None:
        return stream
    return window(_window(spec[1], event_time), stream)


def _window(spec: CqlWindow, event_time: str) -> WindowSpec:
    if spec.kind is CqlKind.ROWS:
        return WindowSpec.rows(spec.size)
    if spec.kind is CqlKind.RANGE:
        return WindowSpec.range(spec.size, spec.slide, event_time)
    raise NotShareable("[NOW] has no synopsis in the sharing model")


def _select(
    tree: exp.Select, windows: dict[str, tuple[str, CqlWindow]], event_time: str
) -> Operator | str:
    _plain(tree)
    if tree.args.get("joins"):
        raise NotShareable("a join outside the windowed join shape")
    source = tree.args.get("from_")
    if source is None:
        raise NotShareable("a SELECT of constants reads no stream")
    node: Operator | str = _source(source.this, windows, event_time)
    where = tree.args.get("where")
    if where is not None:
        node = select(_conjunction(where.this), node)
    return _output(tree, node)


def _output(tree: exp.Select, node: Operator | str) -> Operator | str:
    """The projection or the aggregate of the select list on top of ``node``."""
    group = tree.args.get("group")
    keys = [_attribute(e) for e in group.expressions] if group is not None else []
    aggregates = [e for e in tree.expressions if _aggregate_of(e) is not None]
    if aggregates or keys:
        if len(aggregates) != 1:
            raise NotShareable("exactly one aggregate per shared node")
        function, attribute = _aggregate_of(aggregates[0]) or (None, "")
        assert function is not None
        plain = [e for e in tree.expressions if e is not aggregates[0]]
        if {_attribute(e) for e in plain} - set(keys):
            raise NotShareable("a selected attribute that is not a group key")
        return aggregate(function, attribute, keys, node)
    if any(isinstance(e, exp.Star) for e in tree.expressions):
        if len(tree.expressions) != 1:
            raise NotShareable("* beside other columns")
        return node
    return project([_attribute(e) for e in tree.expressions], node)


def _aggregate_of(node: exp.Expr) -> tuple[Aggregation, str] | None:
    if isinstance(node, exp.Alias):
        raise NotShareable("a renamed column")
    function = _AGGREGATIONS.get(type(node))
    if function is None:
        if any(isinstance(n, exp.AggFunc) for n in node.walk()):
            raise NotShareable("an aggregate inside an expression")
        return None
    argument = node.this
    if isinstance(argument, exp.Star) and function is Aggregation.COUNT:
        return function, "*"
    if isinstance(node, exp.Count) and isinstance(argument, exp.Distinct):
        raise NotShareable("COUNT(DISTINCT ...)")
    return function, _attribute(argument)


def _attribute(node: exp.Expr) -> str:
    if isinstance(node, exp.Column) and isinstance(node.this, exp.Identifier):
        return node.name
    raise NotShareable("an expression where an attribute is expected")


def _conjunction(node: exp.Expr) -> Conjunction:
    atoms: list[Comparison] = []
    for part in node.flatten() if isinstance(node, exp.And) else [node]:
        atoms.append(_comparison(part))
    return Conjunction.of(atoms)


def _comparison(node: exp.Expr) -> Comparison:
    op = _COMPARISONS.get(type(node))
    if op is None or not isinstance(node, exp.Binary):
        raise NotShareable("a predicate that is not attribute op constant")
    left, right = node.left, node.right
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
        left, right, op = right, left, _MIRRORED.get(op, op)
    return Comparison(_attribute(left), op, _constant(right))


def _constant(node: exp.Expr) -> int | float | str:
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative else node
    if not isinstance(literal, exp.Literal):
        raise NotShareable("a comparison with something other than a constant")
    if literal.is_string:
        if negative:
            raise NotShareable("a negated string")
        return str(literal.this)
    text = literal.this
    value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    return -value if negative else value


def _join(
    tree: exp.Select,
    admitted: AdmittedQuery,
    windows: dict[str, tuple[str, CqlWindow]],
    event_time: str,
) -> Operator:
    _plain(tree)
    (only,) = admitted.shape.join_keys
    joins = tree.args.get("joins") or []
    if len(joins) != 1:
        raise NotShareable("one join of two streams")
    left = _source(tree.args["from_"].this, windows, event_time)
    right = _source(joins[0].this, windows, event_time)
    condition = {(only.left_attr, only.right_attr)}
    node: Operator | str = join(condition, left, right)
    where = tree.args.get("where")
    if where is not None:
        node = select(_conjunction(where.this), node)
    out = _output(tree, node)
    if isinstance(out, str):  # pragma: no cover - a join is never a bare stream
        raise NotShareable("a join without output")
    return out
