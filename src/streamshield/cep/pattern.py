"""Event patterns: the parsed form of the pattern language and its checks (docs/cep.md).

Pure (no pyspark): the oracle, the Spark compiler and the registration checks
(cep/validation.py) all read the same :class:`Pattern`, so that what the user wrote is
interpreted once. Every error is a :class:`PatternError` with the line and column of
the clause at fault; messages name clauses, types and attributes, never data values
(the pattern text may hold literals, but an error only says where they are).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from functools import cache
from importlib import resources

from lark import Lark, Token, Transformer, Tree, UnexpectedInput, v_args
from lark.tree import Meta

from streamshield.lang.windows import MAX_WINDOW_SIZE

MIN_EVENTS, MAX_EVENTS = 2, 4
MAX_WITHIN = timedelta(seconds=MAX_WINDOW_SIZE)
"""Longest ``WITHIN`` the language accepts: the longest SQL window (about 68 years).
A role's operator limits (``max_range_seconds``) cap it further when a pattern is
registered, exactly as they cap SQL windows."""
MIN_LONG, MAX_LONG = -(2**63), 2**63 - 1
"""Whole-number literals are Spark ``long`` values: anything wider has no kind to be
compared with an attribute as."""
KINDS = frozenset({"long", "double", "string", "boolean", "timestamp"})
NUMERIC = frozenset({"long", "double"})
TIME = "ts"  # every event type has its event time under this attribute
RESERVED_OUTPUTS = frozenset({"window_start", "window_end"})


class PatternError(ValueError):
    """A pattern that cannot be registered; says where and why, never with data."""

    def __init__(self, problem: str, line: int | None = None, column: int | None = None):
        self.problem, self.line, self.column = problem, line, column
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(where + problem)


class Combinator(StrEnum):
    SEQ = "SEQ"  # every positive event, in this order of event time (strictly increasing)
    AND = "AND"  # every event, any order, all within the window
    OR = "OR"  # one event of any of the types


class Function(StrEnum):
    COUNT = "count"
    SUM = "sum"
    AVG = "avg"
    MIN = "min"
    MAX = "max"


@dataclass(frozen=True)
class Position:
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class Attr:
    """``var.attribute``."""

    var: str
    name: str
    at: Position = field(default=Position(), compare=False)

    @property
    def column(self) -> str:
        """The column this attribute has in a match row (Spark and oracle alike)."""
        return f"{self.var}__{self.name}"


@dataclass(frozen=True)
class Literal:
    value: int | float | str | bool
    at: Position = field(default=Position(), compare=False)


Operand = Attr | Literal


@dataclass(frozen=True)
class Comparison:
    op: str  # one of = != < <= > >=
    left: Operand
    right: Operand
    at: Position = field(default=Position(), compare=False)


@dataclass(frozen=True)
class AllOf:
    parts: tuple[Expr, ...]


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    part: Expr


Expr = Comparison | AllOf | AnyOf | Not


@dataclass(frozen=True)
class Item:
    """One event of the pattern: ``Temperature a`` or, in a SEQ, ``NOT Smoke s``."""

    type: str
    var: str
    negated: bool = False
    at: Position = field(default=Position(), compare=False)


@dataclass(frozen=True)
class Aggregate:
    function: Function
    attr: Attr | None  # None: count(*)
    at: Position = field(default=Position(), compare=False)


@dataclass(frozen=True)
class Output:
    value: Attr | Aggregate
    name: str


@dataclass(frozen=True)
class Pattern:
    combinator: Combinator
    items: tuple[Item, ...]
    where: Expr | None
    within: timedelta
    outputs: tuple[Output, ...]
    group_by: tuple[Attr, ...] = ()

    @property
    def positives(self) -> tuple[Item, ...]:
        return tuple(i for i in self.items if not i.negated)

    @property
    def negations(self) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.negated)

    @property
    def aggregated(self) -> bool:
        return any(isinstance(o.value, Aggregate) for o in self.outputs)

    def item(self, var: str) -> Item:
        return next(i for i in self.items if i.var == var)

    def gap(self, negation: Item) -> tuple[Item, Item | None]:
        """The positive events a negated one stands between (its absence is checked there);
        None after a trailing NOT: its gap runs to the end of the window (WITHIN after
        the first event)."""
        index = self.items.index(negation)
        before = next(i for i in reversed(self.items[:index]) if not i.negated)
        after = next((i for i in self.items[index + 1 :] if not i.negated), None)
        return before, after

    def conjuncts(self) -> tuple[Expr, ...]:
        """The WHERE clause as a conjunction (one part when it is not an AND)."""
        if self.where is None:
            return ()
        return self.where.parts if isinstance(self.where, AllOf) else (self.where,)


def variables(expr: Expr | Operand | None) -> frozenset[str]:
    """The pattern variables an expression reads."""
    match expr:
        case None | Literal():
            return frozenset()
        case Attr(var=var):
            return frozenset({var})
        case Comparison(left=left, right=right):
            return variables(left) | variables(right)
        case AllOf(parts=parts) | AnyOf(parts=parts):
            return frozenset().union(*(variables(p) for p in parts))
        case Not(part=part):
            return variables(part)
    raise TypeError(type(expr).__name__)


def attributes(expr: Expr | Operand | None) -> tuple[Attr, ...]:
    """Every attribute an expression reads, in text order."""
    match expr:
        case None | Literal():
            return ()
        case Attr():
            return (expr,)
        case Comparison(left=left, right=right):
            return attributes(left) + attributes(right)
        case AllOf(parts=parts) | AnyOf(parts=parts):
            return tuple(a for p in parts for a in attributes(p))
        case Not(part=part):
            return attributes(part)
    raise TypeError(type(expr).__name__)


# ---------------------------------------------------------------------------- parsing

UNITS = {"millisecond": 0.001, "second": 1, "minute": 60, "hour": 3600}
OPERATORS = {"<>": "!="}


def _whole(text: str) -> int | None:
    """``text`` (an optionally signed run of digits) as an int, or ``None`` when it has
    more than 20 significant digits: wider than any bound of the language, and refused
    before Python converts it (a 5,000-digit number takes it time and then an error)."""
    digits = text.lstrip("+-").lstrip("0")
    return int(text) if len(digits) <= 20 else None


def _place(token: Token) -> tuple[int | None, int | None]:
    return token.line, token.column


def _at(token: Token | Tree) -> Position:
    if isinstance(token, Token):
        return Position(token.line, token.column)
    meta = token.meta
    return Position(None, None) if meta.empty else Position(meta.line, meta.column)


@v_args(meta=True)
class _ToPattern(Transformer):
    def start(self, meta, children) -> Pattern:
        combinator, items = children[0]
        where = children[1] if len(children) == 4 else None
        within, (outputs, group_by) = children[-2], children[-1]
        return Pattern(combinator, items, where, within, outputs, group_by)

    def combinator(self, meta, children):
        return Combinator(children[0].upper()), tuple(children[1:])

    def item(self, meta, children):
        negated = len(children) == 3
        type_, var = children[-2:]
        return Item(str(type_), str(var), negated, _at(type_))

    def where(self, meta, children):
        return children[0]

    def within(self, meta, children):
        amount, unit = children
        longest = f"WITHIN may span at most {MAX_WINDOW_SIZE} seconds (about 68 years)"
        value = _whole(str(amount))
        if value is None:
            raise PatternError(longest, amount.line, amount.column)
        if value <= 0:
            raise PatternError("WITHIN must be a positive duration", amount.line, amount.column)
        seconds = value * UNITS[unit.lower().rstrip("s")]
        if seconds > MAX_WITHIN.total_seconds():
            raise PatternError(longest, amount.line, amount.column)
        return timedelta(seconds=seconds)

    def returns(self, meta, children):
        group_by = children[-1] if children and isinstance(children[-1], tuple) else ()
        outputs = [c for c in children if isinstance(c, Output)]
        return tuple(outputs), group_by

    def output(self, meta, children):
        value = children[0]
        if len(children) == 2:
            return Output(value, str(children[1]))
        if isinstance(value, Attr):
            return Output(value, f"{value.var}_{value.name}")
        suffix = f"_{value.attr.var}_{value.attr.name}" if value.attr else ""
        return Output(value, f"{value.function}{suffix}")

    def aggregate(self, meta, children):
        function, argument = children
        attr = None if isinstance(argument, Token) else argument
        return Aggregate(Function(function.lower()), attr, _at(function))

    def group_by(self, meta, children):
        return tuple(children)

    def any_of(self, meta, children):
        parts = [q for c in children for q in (c.parts if isinstance(c, AnyOf) else (c,))]
        return parts[0] if len(parts) == 1 else AnyOf(tuple(parts))

    def all_of(self, meta, children):
        parts = [q for c in children for q in (c.parts if isinstance(c, AllOf) else (c,))]
        return parts[0] if len(parts) == 1 else AllOf(tuple(parts))

    def negate(self, meta, children):
        return Not(children[0])

    def comparison(self, meta, children):
        left, op, right = children
        return Comparison(OPERATORS.get(str(op), str(op)), left, right, _at(op))

    def attr(self, meta, children):
        var, name = children
        return Attr(str(var), str(name), _at(var))

    def number(self, meta: Meta, children: list[Token]) -> Literal:
        (token,) = children
        text = str(token)
        value: int | float | None
        if "." in text:
            value = float(text)
            if not math.isfinite(value):
                raise PatternError(
                    "a decimal number in a pattern must be a finite double", *_place(token)
                )
        else:
            value = _whole(text)
            if value is None or not MIN_LONG <= value <= MAX_LONG:
                raise PatternError(
                    f"a whole number in a pattern must lie within {MIN_LONG} and {MAX_LONG} "
                    "(64 bits)",
                    *_place(token),
                )
        return Literal(value, _at(token))

    def string(self, meta, children):
        (token,) = children
        body = str(token)[1:-1]
        return Literal(body.replace("\\'", "'").replace("\\\\", "\\"), _at(token))

    def boolean(self, meta, children):
        (token,) = children
        return Literal(token.upper() == "TRUE", _at(token))


@cache
def _parser() -> Lark:
    grammar = resources.files("streamshield.cep").joinpath("pattern.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=False)


def parse(text: str) -> Pattern:
    """The pattern of ``text``, its syntax checked (names are checked by :func:`check`)."""
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        expected = sorted(getattr(err, "expected", None) or getattr(err, "allowed", None) or [])
        hint = f"; expected one of {', '.join(expected[:8])}" if expected else ""
        # The offending token is not echoed: it may be a literal (a data value).
        raise PatternError(f"syntax error{hint}", err.line, err.column) from None
    try:
        pattern = _ToPattern().transform(tree)
    except Exception as err:  # lark wraps transformer errors in VisitError
        cause = getattr(err, "orig_exc", err)
        if isinstance(cause, PatternError):
            raise cause from None
        raise
    _check_shape(pattern)
    return pattern


def _check_shape(pattern: Pattern) -> None:
    """Checks that need no schema: sizes, NOT placement, variables, outputs."""
    first = pattern.items[0].at
    positives = pattern.positives
    if not MIN_EVENTS <= len(positives) <= MAX_EVENTS:
        raise PatternError(
            f"{pattern.combinator} takes {MIN_EVENTS} to {MAX_EVENTS} events, got {len(positives)}",
            first.line,
            first.column,
        )
    seen: set[str] = set()
    for index, item in enumerate(pattern.items):
        if item.var in seen:
            raise PatternError(f"variable {item.var} is declared twice", *_pos(item.at))
        seen.add(item.var)
        if item.negated:
            if pattern.combinator is not Combinator.SEQ:
                raise PatternError("NOT is allowed inside SEQ only", *_pos(item.at))
            if not any(not i.negated for i in pattern.items[:index]):
                raise PatternError(
                    f"NOT {item.type} {item.var} must follow an event", *_pos(item.at)
                )
    for attr in read_attributes(pattern):
        if attr.var not in seen:
            raise PatternError(f"unknown variable {attr.var}", *_pos(attr.at))
    _check_negations(pattern)
    _check_outputs(pattern)


def _check_negations(pattern: Pattern) -> None:
    """A negated variable is read only in top-level conjuncts, one negated variable each:
    then "no such event" is a well-defined anti-join of those conjuncts."""
    negated = {i.var for i in pattern.negations}
    if not negated:
        return
    for conjunct in pattern.conjuncts():
        used = variables(conjunct) & negated
        if isinstance(conjunct, Comparison) and len(used) <= 1:
            continue
        if used:
            attr = next(a for a in attributes(conjunct) if a.var in used)
            raise PatternError(
                f"a negated event ({attr.var}) may be read only in comparisons joined by "
                "AND at the top of WHERE, one negated event per comparison",
                *_pos(attr.at),
            )
    for attr in (*_output_attrs(pattern), *pattern.group_by):
        if attr.var in negated:
            raise PatternError(
                f"{attr.var} is a negated event: it has no values to return",
                *_pos(attr.at),
            )


def read_attributes(pattern: Pattern) -> tuple[Attr, ...]:
    """Every attribute the pattern reads: in WHERE, in its outputs and in GROUP BY."""
    return (*attributes(pattern.where), *_output_attrs(pattern), *pattern.group_by)


def _output_attrs(pattern: Pattern) -> tuple[Attr, ...]:
    found: list[Attr] = []
    for output in pattern.outputs:
        value = output.value
        if isinstance(value, Attr):
            found.append(value)
        elif value.attr is not None:
            found.append(value.attr)
    return tuple(found)


def _check_outputs(pattern: Pattern) -> None:
    names: set[str] = set()
    for output in pattern.outputs:
        where = output.value.at
        if output.name in names or output.name.lower() in RESERVED_OUTPUTS:
            raise PatternError(f"output name {output.name} is used twice or reserved", *_pos(where))
        names.add(output.name)
    if pattern.group_by and not pattern.aggregated:
        raise PatternError("GROUP BY needs an aggregate in RETURN", *_pos(pattern.group_by[0].at))
    if pattern.aggregated:
        for output in pattern.outputs:
            if isinstance(output.value, Attr) and output.value not in pattern.group_by:
                raise PatternError(
                    f"{output.value.var}.{output.value.name} must be in GROUP BY "
                    "or inside an aggregate",
                    *_pos(output.value.at),
                )


def _pos(at: Position) -> tuple[int | None, int | None]:
    return at.line, at.column


# ------------------------------------------------------------------- schema checks

Schemas = Mapping[str, Mapping[str, str]]  # event type -> attribute -> kind


def check_schemas(schemas: Schemas) -> None:
    """Event type declarations: known kinds, an event time ``ts`` of kind timestamp."""
    for type_, attrs in schemas.items():
        if attrs.get(TIME) != "timestamp":
            raise PatternError(f"event type {type_} needs an attribute {TIME} of kind timestamp")
        for name, kind in attrs.items():
            if kind not in KINDS:
                raise PatternError(
                    f"attribute {type_}.{name} has unknown kind {kind!r}; "
                    f"one of {', '.join(sorted(KINDS))}"
                )


def check(pattern: Pattern, schemas: Schemas) -> None:
    """Types, attributes and operand kinds against the event types' declarations."""
    check_schemas(schemas)
    for item in pattern.items:
        if item.type not in schemas:
            raise PatternError(f"unknown event type {item.type}", *_pos(item.at))
    for attr in read_attributes(pattern):
        kind_of(pattern, schemas, attr)
    for conjunct in _comparisons(pattern.where):
        left, right = (_operand_kind(pattern, schemas, o) for o in (conjunct.left, conjunct.right))
        if not _comparable(left, right):
            raise PatternError(f"cannot compare a {left} with a {right}", *_pos(conjunct.at))
    for output in pattern.outputs:
        value = output.value
        if isinstance(value, Aggregate) and value.attr is not None:
            kind = kind_of(pattern, schemas, value.attr)
            numeric_only = value.function in (Function.SUM, Function.AVG)
            if (numeric_only and kind not in NUMERIC) or kind == "boolean":
                raise PatternError(
                    f"{value.function} needs a numeric attribute, "
                    f"{value.attr.var}.{value.attr.name} is {kind}",
                    *_pos(value.at),
                )


def kind_of(pattern: Pattern, schemas: Schemas, attr: Attr) -> str:
    type_ = pattern.item(attr.var).type
    kind = schemas[type_].get(attr.name)
    if kind is None:
        raise PatternError(f"event type {type_} has no attribute {attr.name}", *_pos(attr.at))
    return kind


def _operand_kind(pattern: Pattern, schemas: Schemas, operand: Operand) -> str:
    if isinstance(operand, Attr):
        return kind_of(pattern, schemas, operand)
    value = operand.value
    if isinstance(value, bool):
        return "boolean"
    return "string" if isinstance(value, str) else ("long" if isinstance(value, int) else "double")


def _comparable(left: str, right: str) -> bool:
    return left == right or {left, right} <= NUMERIC


def _comparisons(expr: Expr | None) -> tuple[Comparison, ...]:
    match expr:
        case None:
            return ()
        case Comparison():
            return (expr,)
        case AllOf(parts=parts) | AnyOf(parts=parts):
            return tuple(c for p in parts for c in _comparisons(p))
        case Not(part=part):
            return _comparisons(part)
    raise TypeError(type(expr).__name__)


def compile_pattern(text: str, schemas: Schemas) -> Pattern:
    """Parse and check: the one entry point for registering a pattern."""
    pattern = parse(text)
    check(pattern, schemas)
    return pattern
