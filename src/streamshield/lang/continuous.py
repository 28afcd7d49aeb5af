"""The query interface's front end: sp scripts, CQL windows and ``ON RESULT`` (paper 1, §4).

A user sends one text. It is either an ``INSERT SP ... INTO STREAM s LET ...`` script
(policies injected into a stream) or a continuous query: Spark SQL plus two CQL
extensions, stream-to-relation windows after a stream name in FROM/JOIN
(``FROM vitals [RANGE 60 SECONDS] v``) and a trailing ``ON RESULT`` clause carrying sps
for the query's output (Fig. 8b). :func:`parse_request` separates the extensions from the
SQL so that the SQL can go through :func:`~streamshield.lang.query_check.check_query`
unchanged, and :func:`plan_shape` says which engine path a query takes.

Both extensions are found on sqlglot's tokens, never on raw text, so a ``[`` or an
``ON RESULT`` inside a string, a comment or a quoted name is never taken for syntax, and
``arr[0]`` or ``m['k']`` stay array and map indexing. Windows are accepted only in the
FROM/JOIN list of the outer query: a window inside a subquery or CTE would need a
different plan for every nesting, so it is refused rather than half-supported.

What a window means for each shape (:class:`ShapeKind`):

- no window: the native streaming path (each tuple once, as it arrives);
- one stream, aggregate, ``[RANGE t SLIDE s]``: Spark's hopping ``window(ts, 't', 's')``
  added to GROUP BY (:func:`sliding_window_sql`); ``[RANGE t]`` hops every second, CQL's
  "every instant" at one-second granularity;
- one stream, ``[ROWS n]``, ``[NOW]`` or ``[RANGE t]`` without aggregate: a relation
  recomputed at the end of every micro-batch (``windows.py``);
- two streams, each windowed, inner equi-join: SCJoin over the two windows.

Everything else that joins is refused: a join without windows keeps unbounded state.
Errors are :class:`~streamshield.lang.query_check.QueryRejected`; their messages name
rules, keywords and positions, never text the user typed inside a window or sp.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from streamshield.lang.cql import CqlError, SpStatement, parse_statements
from streamshield.lang.query_check import MAX_QUERY_CHARS, QueryRejected, parse_tree
from streamshield.lang.windows import (
    MAX_WINDOW_SIZE,
    NOW,
    UNIT_SECONDS,
    WindowKind,
    WindowSpec,
    duration_seconds,
    spark_duration,
)
from streamshield.policy.sp_patterns import Tagged

__all__ = [
    "ContinuousQuery",
    "JoinKey",
    "Shape",
    "ShapeKind",
    "SpInsert",
    "parse_request",
    "plan_shape",
    "sliding_window_sql",
]

_T = TokenType
_FROM_STARTS = frozenset({_T.FROM, _T.JOIN})
_FROM_ENDS = frozenset(
    getattr(_T, name)
    for name in (
        "ON",
        "USING",
        "WHERE",
        "GROUP_BY",
        "HAVING",
        "ORDER_BY",
        "SORT_BY",
        "CLUSTER_BY",
        "DISTRIBUTE_BY",
        "LIMIT",
        "OFFSET",
        "FETCH",
        "SELECT",
        "UNION",
        "INTERSECT",
        "EXCEPT",
        "QUALIFY",
        "WINDOW",
        "LATERAL",
        "PIVOT",
        "UNPIVOT",
        "TABLE_SAMPLE",
        "SEMICOLON",
        "VALUES",
    )
    if hasattr(_T, name)
)
"""Tokens after which a ``[`` can no longer follow a FROM item."""
_NAME_TYPES = frozenset({_T.VAR, _T.IDENTIFIER})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS = re.compile(r"[0-9]+")
_SIZE_WORDS = "a whole number, optionally followed by SECONDS, MINUTES or HOURS"
_FORMS = "[NOW], [ROWS n], [RANGE t] or [RANGE t SLIDE s]"
_TIME_WINDOW_CALLS = frozenset({"window", "session_window"})
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class SpInsert:
    """An sp script: statements to inject into ``stream`` (the caller checks the right to)."""

    stream: str
    statements: tuple[SpStatement, ...]


@dataclass(frozen=True)
class ContinuousQuery:
    """A query with its CQL extensions taken out.

    ``sql`` is the user's text with every window blanked and the ON RESULT clause cut
    off; blanks keep every other character at its place, so line and column numbers in
    later errors still point into what the user wrote. ``windows`` maps each windowed
    FROM item (its alias, or the stream name when unaliased) to ``(stream, window)``.
    ``on_result`` holds the sps for the query's output, empty when there are none.
    """

    sql: str
    windows: Mapping[str, tuple[str, WindowSpec]] = field(default_factory=dict)
    on_result: tuple[SpStatement, ...] = ()


class ShapeKind(Enum):
    STREAM = "stream"
    """No window: each tuple once, on Spark's native streaming path."""
    SLIDING_AGGREGATE = "sliding_aggregate"
    """One stream aggregated over ``[RANGE t (SLIDE s)]``: Spark's ``window()``."""
    WINDOW_RELATION = "window_relation"
    """One stream as a relation recomputed per micro-batch: ROWS, NOW, plain RANGE."""
    JOIN = "join"
    """Two windowed streams, inner equi-join: SCJoin."""


@dataclass(frozen=True)
class JoinKey:
    """One equality of a join condition, ``left_alias.left_attr = right_alias.right_attr``."""

    left_alias: str
    left_attr: str
    right_alias: str
    right_attr: str


@dataclass(frozen=True)
class Shape:
    """What the engine routes on, and what operator limits are checked against.

    ``windows`` lists ``(item, stream, window)`` in FROM order. ``time_windows`` holds
    the lengths in seconds of ``window()`` / ``session_window()`` calls the user wrote
    (``None`` when unreadable or, for session windows, unbounded). ``operators`` names
    the restricted operators the query uses (``join``, ``sort``).
    """

    kind: ShapeKind
    windows: tuple[tuple[str, str, WindowSpec], ...] = ()
    aggregate: bool = False
    join_keys: tuple[JoinKey, ...] = ()
    time_windows: tuple[float | None, ...] = ()
    operators: frozenset[str] = frozenset()

    @property
    def window_rows(self) -> int:
        """Rows the query's ROWS windows declare they keep (in all); RANGE and NOW
        windows are bounded by time and the micro-batch, not by a declared row count."""
        return sum(w.size for _, _, w in self.windows if w.kind is WindowKind.ROWS)


# ---------------------------------------------------------------------------- requests


def parse_request(text: str) -> ContinuousQuery | SpInsert:
    """An sp script or a continuous query, or :class:`QueryRejected` saying what and where.

    Rule codes: ``parse_error``, ``too_long``, ``sp_syntax``, ``sp_stream`` (script),
    ``window_syntax``, ``window_place``, ``on_result``.
    """
    if not isinstance(text, str):
        raise TypeError("a request is text")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryRejected("too_long", f"the request is longer than {MAX_QUERY_CHARS} characters")
    try:
        tokens: list[Token] | None = Spark().tokenize(text)
    except TokenError:
        tokens = None
    if _is_sp_script(text, tokens):
        return _sp_insert(text)
    if tokens is None:
        raise QueryRejected(
            "parse_error", "could not read the query: unterminated string, quoted name or comment?"
        )
    sql_tokens, on_result = _split_on_result(text, tokens)
    if not sql_tokens:
        raise QueryRejected("parse_error", "the query is empty")
    windows, spans = _find_windows(text, sql_tokens)
    end = tokens[len(sql_tokens)].start if on_result else len(text)
    sql = _blanked(text[:end], spans).rstrip()
    return ContinuousQuery(sql, windows, on_result)


def _is_sp_script(text: str, tokens: list[Token] | None) -> bool:
    """Whether the text starts ``INSERT SP`` / ``INSERT SECURITY``.

    If sqlglot cannot tokenise the text, the leading words decide (skipping CQL's ``--``
    comments) so that a broken sp script gets the CQL parser's error, with its position.
    """
    if tokens is not None:
        words = [t.text.upper() for t in tokens[:2]]
        return len(words) == 2 and words[0] == "INSERT" and words[1] in {"SP", "SECURITY"}
    lines = [line for line in text.splitlines() if not line.strip().startswith("--")]
    words = " ".join(lines).split()[:2]
    return (
        [w.upper() for w in words[:1]] == ["INSERT"]
        and len(words) == 2
        and (words[1].upper() in {"SP", "SECURITY"})
    )


def _sp_insert(text: str) -> SpInsert:
    statements = _statements(text, "sp_syntax")
    streams = [st.stream for st in statements]
    for index, stream in enumerate(streams, 1):
        if stream is None:
            raise QueryRejected("sp_stream", f"statement {index} names no stream after INTO STREAM")
    first = streams[0]
    for index, stream in enumerate(streams, 1):
        if stream != first:
            raise QueryRejected(
                "sp_stream",
                f"statement {index} inserts into stream {_shown(stream)} but statement 1 "
                f"into {_shown(first)}: one request injects sps into one stream",
            )
    assert first is not None
    return SpInsert(first, tuple(statements))


def _statements(text: str, rule: str) -> list[SpStatement]:
    """The sps of a user's request; a tag pattern is refused: tags are resolved against a
    stream definition for server policies only, and a provider's sp travels the wire,
    which names attributes."""
    try:
        statements = parse_statements(text)
    except CqlError as err:
        at = f" at line {err.line}, column {err.column}" if err.line is not None else ""
        raise QueryRejected(
            rule, f"invalid sp{at}: {_safe_problem(err.problem)}", line=err.line, column=err.column
        ) from None
    for index, statement in enumerate(statements, 1):
        if isinstance(statement.ddp.attributes, Tagged):
            raise QueryRejected(
                rule,
                f"invalid sp: statement {index} names attributes by tag (TAGGED), which only "
                "a server policy may",
            )
    return statements


def _safe_problem(problem: str) -> str:
    """The CQL parser's problem without the text it quotes at the error position."""
    if problem.startswith("unexpected input"):
        hint = problem.find("; expected one of ")
        return "unexpected input" + (problem[hint:] if hint >= 0 else "")
    return problem


def _shown(name: str | None) -> str:
    clean = "".join(c if c.isprintable() else "?" for c in str(name))
    return repr(clean[:64] + ("..." if len(clean) > 64 else ""))


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _rejected(rule: str, problem: str, text: str, offset: int) -> QueryRejected:
    line, column = _position(text, offset)
    return QueryRejected(rule, f"line {line}, column {column}: {problem}", line=line, column=column)


def _blanked(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with each inclusive span replaced by spaces (newlines kept)."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, min(end + 1, len(chars))):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


# --------------------------------------------------------------------------- ON RESULT


def _is_on_result(tokens: Sequence[Token], i: int) -> bool:
    return (
        tokens[i].token_type == _T.ON
        and i + 1 < len(tokens)
        and tokens[i + 1].token_type in _NAME_TYPES
        and tokens[i + 1].token_type != _T.IDENTIFIER
        and tokens[i + 1].text.upper() == "RESULT"
    )


def _starts_sps(tokens: Sequence[Token], i: int) -> bool:
    """Whether ``INSERT`` or ``( INSERT`` starts at ``i``: only sps follow ON RESULT so."""
    if i < len(tokens) and tokens[i].token_type == _T.L_PAREN:
        i += 1
    return i < len(tokens) and tokens[i].token_type == _T.INSERT


def _split_on_result(text: str, tokens: list[Token]) -> tuple[list[Token], tuple[SpStatement, ...]]:
    """The SQL tokens before a top-level ``ON RESULT`` and the sps after it.

    ``ON result`` is also how a join condition on a column called ``result`` starts, so
    the clause is recognised when sps follow it, or when no join is waiting for its ON.
    """
    depth, join_pending = 0, [False]
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind == _T.L_PAREN:
            depth += 1
            join_pending.append(False)
        elif kind == _T.R_PAREN:
            depth = max(depth - 1, 0)
            join_pending[depth + 1 :] = []
        elif kind == _T.JOIN:
            join_pending[depth] = True
        elif _is_on_result(tokens, i) and (_starts_sps(tokens, i + 2) or not join_pending[depth]):
            if depth:
                raise _rejected(
                    "on_result",
                    "ON RESULT belongs at the end of the outer query",
                    text,
                    token.start,
                )
            return tokens[:i], _on_result_sps(text, tokens, i)
        elif kind in (_T.ON, _T.USING):
            join_pending[depth] = False
    return tokens, ()


def _on_result_sps(text: str, tokens: list[Token], at: int) -> tuple[SpStatement, ...]:
    rest = tokens[at + 2 :]
    where = tokens[at].start
    if not _starts_sps(rest, 0):
        raise _rejected(
            "on_result", "ON RESULT must be followed by INSERT SP statements", text, where
        )
    for i in range(len(rest)):
        if _is_on_result(rest, i):
            raise _rejected("on_result", "ON RESULT is given twice", text, rest[i].start)
    blank: list[tuple[int, int]] = [(0, tokens[at + 1].end)]
    while rest and rest[-1].token_type == _T.SEMICOLON:
        blank.append((rest[-1].start, rest[-1].end))
        rest = rest[:-1]
    if rest[0].token_type == _T.L_PAREN:
        close = _matching(rest, 0, _T.L_PAREN, _T.R_PAREN)
        if close is None or close != len(rest) - 1:
            raise _rejected(
                "on_result",
                "the sps after ON RESULT ( must end with ) at the end of the query",
                text,
                rest[0].start,
            )
        blank += [(rest[0].start, rest[0].end), (rest[-1].start, rest[-1].end)]
        rest = rest[1:-1]
    if not rest:
        raise _rejected("on_result", "ON RESULT ( ) holds no sp", text, where)
    cql = list(_blanked(text, blank))  # comments sqlglot skipped must still read as CQL
    for i in range(len(rest) - 1):
        # The paper separates sp expressions with commas (Fig. 8b); the script grammar
        # wants ";". A comma directly before INSERT cannot end an assignment.
        if rest[i].token_type == _T.COMMA and rest[i + 1].token_type == _T.INSERT:
            cql[rest[i].start] = ";"
    statements = _statements("".join(cql), "on_result")
    named = {st.stream for st in statements if st.stream is not None}
    if len(named) > 1:
        raise _rejected("on_result", "the sps after ON RESULT name different streams", text, where)
    return tuple(statements)


def _matching(tokens: Sequence[Token], i: int, open_: TokenType, close: TokenType) -> int | None:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].token_type == open_:
            depth += 1
        elif tokens[j].token_type == close:
            depth -= 1
            if depth == 0:
                return j
    return None


# ----------------------------------------------------------------------------- windows


def _find_windows(
    text: str, tokens: list[Token]
) -> tuple[dict[str, tuple[str, WindowSpec]], list[tuple[int, int]]]:
    """Windows in the outer FROM/JOIN list, and the character spans they occupy.

    A ``[`` in a FROM/JOIN list (at any depth) is a window; anywhere else it is indexing
    and left alone. A window must directly follow a stream name that directly follows
    FROM, JOIN or a comma of the list.
    """
    windows: dict[str, tuple[str, WindowSpec]] = {}
    seen: dict[str, str] = {}
    spans: list[tuple[int, int]] = []
    in_from: list[bool] = [False]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        kind = token.token_type
        if kind == _T.L_PAREN:
            in_from.append(False)
        elif kind == _T.R_PAREN:
            if len(in_from) > 1:
                in_from.pop()
        elif kind in _FROM_STARTS:
            in_from[-1] = True
        elif kind in _FROM_ENDS:
            in_from[-1] = False
        elif kind == _T.L_BRACKET and in_from[-1]:
            if len(in_from) > 1:
                raise _rejected(
                    "window_place",
                    "windows are allowed only in the FROM and JOIN of the outer query",
                    text,
                    token.start,
                )
            stream = _windowed_stream(text, tokens, i)
            close = _window_end(text, tokens, i)
            spec = _window_spec(text, tokens[i + 1 : close], token)
            item, after = _alias_after(tokens, close + 1)
            key = item if item is not None else stream
            if key.lower() in seen:
                raise _rejected(
                    "window_place",
                    f"two FROM items are called {_shown(key)}; give each its own alias",
                    text,
                    token.start,
                )
            seen[key.lower()] = key
            windows[key] = (stream, spec)
            spans.append((token.start, tokens[close].end))
            i = after
            continue
        i += 1
    return windows, spans


def _name(token: Token) -> str | None:
    """A relation or alias name: a plain word or a backquoted name, never a string."""
    if token.token_type == _T.IDENTIFIER:
        return token.text
    if token.token_type in (_T.STRING, _T.NUMBER) or not _WORD.fullmatch(token.text):
        return None
    return token.text


def _windowed_stream(text: str, tokens: list[Token], i: int) -> str:
    before = tokens[i - 1] if i >= 1 else None
    ahead = tokens[i - 2] if i >= 2 else None
    if before is not None and before.token_type == _T.R_PAREN:
        raise _rejected(
            "window_place",
            "a window applies to a stream name, not to a subquery",
            text,
            tokens[i].start,
        )
    name = _name(before) if before is not None else None
    if (
        name is None
        or before is None
        or before.token_type in _FROM_STARTS | _FROM_ENDS
        or ahead is None
        or ahead.token_type not in (_T.FROM, _T.JOIN, _T.COMMA)
    ):
        raise _rejected(
            "window_place",
            "a window must directly follow a stream name in FROM or JOIN, e.g. "
            "FROM s [ROWS 10] AS x",
            text,
            tokens[i].start,
        )
    return name


def _window_end(text: str, tokens: list[Token], i: int) -> int:
    for j in range(i + 1, len(tokens)):
        kind = tokens[j].token_type
        if kind == _T.R_BRACKET:
            return j
        if kind == _T.L_BRACKET:
            break
    raise _rejected("window_syntax", f"window not closed by ]; use {_FORMS}", text, tokens[i].start)


def _word(text: str, token: Token) -> str | None:
    """The keyword a token spells as written (quoted or string tokens spell none)."""
    raw = text[token.start : token.end + 1]
    return raw.upper() if _WORD.fullmatch(raw) else None


def _window_spec(text: str, inner: list[Token], bracket: Token) -> WindowSpec:
    """``NOW`` | ``ROWS n`` | ``RANGE t [unit] [SLIDE s [unit]]``; n, t, s whole numbers."""

    def fail(problem: str, at: int | None = None) -> QueryRejected:
        offset = inner[at].start if at is not None and at < len(inner) else bracket.start
        return _rejected("window_syntax", problem, text, offset)

    if not inner:
        raise fail(f"empty window; use {_FORMS}")
    head = _word(text, inner[0])
    if head == "NOW":
        if len(inner) > 1:
            raise fail("[NOW] takes nothing after NOW", 1)
        return NOW
    if head not in ("ROWS", "RANGE"):
        raise fail(f"unknown window; use {_FORMS}", 0)

    def number(at: int, what: str) -> int:
        token = inner[at] if at < len(inner) else None
        raw = text[token.start : token.end + 1] if token is not None else ""
        if token is None or token.token_type != _T.NUMBER or not _DIGITS.fullmatch(raw):
            raise fail(f"expected {what} after {_word(text, inner[at - 1])}", at)
        if len(raw.lstrip("0")) > len(str(MAX_WINDOW_SIZE)):
            raise fail(f"window too large (at most {MAX_WINDOW_SIZE})", at)
        return int(raw)

    def seconds(at: int) -> tuple[int, int]:
        value = number(at, _SIZE_WORDS)
        unit = _word(text, inner[at + 1]) if at + 1 < len(inner) else None
        if unit in UNIT_SECONDS:
            return value * UNIT_SECONDS[unit], at + 2
        return value, at + 1

    if head == "ROWS":
        size, at = number(1, "a whole number of rows"), 2
        slide = None
    else:
        size, at = seconds(1)
        slide = None
        if at < len(inner) and _word(text, inner[at]) == "SLIDE":
            slide, at = seconds(at + 1)
    if at < len(inner):
        raise fail(f"unexpected word in window; use {_FORMS}", at)
    if size > MAX_WINDOW_SIZE or (slide or 0) > MAX_WINDOW_SIZE:
        raise fail(f"window too large (at most {MAX_WINDOW_SIZE})")
    try:
        return WindowSpec(WindowKind[head], size, slide)
    except ValueError as err:
        raise fail(str(err)) from None


def _alias_after(tokens: list[Token], i: int) -> tuple[str | None, int]:
    """The FROM item's alias after its window (``AS x`` or ``x``) and the next index."""
    if i < len(tokens) and tokens[i].token_type == _T.ALIAS:
        if i + 1 < len(tokens) and _name(tokens[i + 1]) is not None:
            return _name(tokens[i + 1]), i + 2
        return None, i + 1
    if i < len(tokens) and tokens[i].token_type in _NAME_TYPES:
        return tokens[i].text, i + 1
    return None, i


# ------------------------------------------------------------------------------ shapes


def _shape_error(problem: str) -> QueryRejected:
    return QueryRejected("query_shape", problem)


def plan_shape(query: ContinuousQuery, tree: exp.Expr | None = None) -> Shape:
    """Which path the engine takes for ``query``; :class:`QueryRejected` (``query_shape``)
    for shapes no path supports. Run it next to ``check_query``, which it does not replace;
    ``tree``: the checked tree of ``query.sql`` (read only), to parse it once.
    """
    tree = parse_tree(query.sql) if tree is None else tree
    time_windows = tuple(_time_window_lengths(tree))
    operators = set()
    if any(True for _ in tree.find_all(exp.Join)):
        operators.add("join")
    if any(True for _ in tree.find_all(exp.Order)):
        operators.add("sort")
    outer = tree
    if not query.windows:
        if "join" in operators:
            raise _shape_error(
                "a join of streams needs a window on each side, e.g. "
                "FROM a [ROWS 100] x JOIN b [ROWS 100] y ON x.k = y.k"
            )
        return Shape(
            ShapeKind.STREAM,
            aggregate=_is_aggregate(outer),
            time_windows=time_windows,
            operators=frozenset(operators),
        )
    if not isinstance(outer, exp.Select):
        raise _shape_error("windows are supported in a single SELECT, not in UNION and the like")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    if any(select is not outer for select in tree.find_all(exp.Select)):
        raise _shape_error("a query with windows cannot also have subqueries or CTEs")
    items = _from_items(outer)
    by_key = {key.lower(): (key, table) for key, table in items}
    for key, (stream, _spec) in query.windows.items():
        if key.lower() not in by_key or by_key[key.lower()][1].name.lower() != stream.lower():
            raise _shape_error("a window does not match a FROM item of the query")
        if stream.lower() in ctes:
            raise _shape_error("a window applies to a stream, not to a CTE")
    lowered = {k.lower(): w for k, w in query.windows.items()}
    ordered = [(key, *lowered[key.lower()]) for key, _ in items if key.lower() in lowered]
    aggregate = _is_aggregate(outer)
    if time_windows:
        raise _shape_error("a CQL window and a window() call cannot be combined in one query")
    joins = outer.args.get("joins") or []
    nested_joins = sum(1 for _ in tree.find_all(exp.Join)) - len(joins)
    if len(items) == 1 and not joins and not nested_joins:
        (_, _, spec) = ordered[0]
        if spec.kind is WindowKind.RANGE and aggregate:
            kind = ShapeKind.SLIDING_AGGREGATE
        elif spec.slide is not None:
            raise _shape_error("SLIDE applies to aggregates (GROUP BY); use [RANGE t] here")
        else:
            kind = ShapeKind.WINDOW_RELATION
        return Shape(kind, tuple(ordered), aggregate, operators=frozenset(operators))
    keys = _join_keys(outer, items, joins, nested_joins)
    if len(ordered) != 2:
        raise _shape_error("both sides of a join need a window")
    if any(spec.slide is not None for _, _, spec in ordered):
        raise _shape_error("SLIDE applies to aggregates over one stream, not to a join's windows")
    return Shape(ShapeKind.JOIN, tuple(ordered), aggregate, keys, operators=frozenset(operators))


def _from_items(select: exp.Select) -> list[tuple[str, exp.Expr]]:
    """(alias or name, relation) of the outer FROM and each JOIN, in order."""
    from_ = select.args.get("from_") or select.args.get("from")
    relations = ([from_.this] if from_ is not None else []) + [
        join.this for join in select.args.get("joins") or []
    ]
    return [(relation.alias_or_name, relation) for relation in relations]


def _is_aggregate(node: exp.Expr) -> bool:
    if not isinstance(node, exp.Select):
        return False
    return bool(node.args.get("group")) or any(
        isinstance(inner, exp.AggFunc) for e in node.expressions for inner in e.walk()
    )


def _join_keys(
    select: exp.Select,
    items: list[tuple[str, exp.Expr]],
    joins: list[exp.Join],
    nested_joins: int,
) -> tuple[JoinKey, ...]:
    """The equalities of a two-stream inner equi-join, left side first."""
    if nested_joins or len(items) > 2 or len(joins) != 1:
        raise _shape_error("a query joins at most two streams, in its outer FROM")
    (join,) = joins
    left, right = items[0][0], items[1][0]
    if not all(isinstance(rel, exp.Table) for _, rel in items):
        raise _shape_error("both sides of a join must be windowed streams, not subqueries")
    if left.lower() == right.lower():
        raise _shape_error("the two sides of a join need different aliases")
    if (
        join.args.get("side")
        or join.args.get("method")
        or (join.args.get("kind") or "INNER").upper() != "INNER"
    ):
        raise _shape_error("only inner joins (JOIN ... ON) are supported")
    using = join.args.get("using")
    if using:
        return tuple(JoinKey(left, col.name, right, col.name) for col in using)
    condition = join.args.get("on")
    if condition is None:
        raise _shape_error("a join needs an equality condition: JOIN ... ON x.k = y.k")
    keys = []
    for part in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        keys.append(_equality(part, left, right))
    return tuple(keys)


def _equality(node: exp.Expr, left: str, right: str) -> JoinKey:
    message = (
        "a join condition must be equalities between the two sides, joined by AND, "
        "with columns qualified by alias (ON x.k = y.k)"
    )
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.EQ):
        raise _shape_error(message)
    a, b = node.this, node.expression
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.table and b.table):
        raise _shape_error(message)
    sides = {a.table.lower(): a, b.table.lower(): b}
    if set(sides) != {left.lower(), right.lower()}:
        raise _shape_error(message)
    return JoinKey(left, sides[left.lower()].name, right, sides[right.lower()].name)


def _time_window_lengths(tree: exp.Expr) -> list[float | None]:
    """Lengths of user-written ``window()`` / ``session_window()`` calls, for limits."""
    lengths: list[float | None] = []
    for func in tree.find_all(exp.Anonymous):
        name = func.name.lower()
        if name not in _TIME_WINDOW_CALLS:
            continue
        args = func.expressions
        length = None
        literal = args[1] if len(args) >= 2 else None
        if name == "window" and isinstance(literal, exp.Literal) and literal.is_string:
            length = duration_seconds(literal.this)
        lengths.append(length)  # session windows grow without bound: None
    return lengths


def sliding_window_sql(
    sql: str,
    event_time: str,
    window: WindowSpec,
    column: str = "window",
    *,
    seconds: bool = False,
) -> str:
    """``sql`` (one aggregate SELECT over one stream) grouped by Spark's hopping window.

    Adds ``window(event_time, 't seconds', 's seconds')`` to GROUP BY and, as ``column``,
    in front of the select list so that each result says which window it belongs to.
    ``[RANGE t]`` hops every second. The result must still pass ``check_query``.
    ``seconds``: the event time is a ``bigint`` of seconds (as window state reads it),
    made a timestamp with ``timestamp_seconds`` for Spark's window.
    """
    tree = sliding_window_tree(parse_tree(sql), event_time, window, column, seconds=seconds)
    return tree.sql(dialect="spark", comments=False)


def sliding_window_tree(
    tree: exp.Expr,
    event_time: str,
    window: WindowSpec,
    column: str = "window",
    *,
    seconds: bool = False,
) -> exp.Expr:
    """:func:`sliding_window_sql` on a tree (a new one; ``tree`` is not changed)."""
    if window.kind is not WindowKind.RANGE:
        raise ValueError("only a RANGE window becomes Spark's window()")
    for name in (event_time, column):
        if not _PLAIN_NAME.fullmatch(name):
            raise ValueError("column names in the rewrite must be plain identifiers")
    if not isinstance(tree, exp.Select):
        raise _shape_error("a sliding window applies to one SELECT")
    if any(
        isinstance(e, exp.Alias | exp.Column) and e.alias_or_name.lower() == column.lower()
        for e in tree.expressions
    ):
        raise _shape_error(f"the query already has a column called {column}")
    hop = window.hop
    assert hop is not None
    time: exp.Expr = exp.column(event_time, quoted=True)
    if seconds:
        time = exp.Anonymous(this="timestamp_seconds", expressions=[time])
    call = exp.Anonymous(
        this=exp.to_identifier("window", quoted=True),
        expressions=[
            time,
            exp.Literal.string(spark_duration(window.size)),
            exp.Literal.string(spark_duration(hop)),
        ],
    )
    tree = tree.group_by(call.copy(), append=True)  # a copy: ``tree`` stays as it was
    tree.set("expressions", [exp.alias_(call, column, quoted=True), *tree.expressions])
    return tree
