"""The CQL ``INSERT SP INTO STREAM ... LET ...`` syntax (paper 1, Figs. 7-8a), both ways.

Parsing is all-or-nothing: a script either yields every statement or raises
:class:`CqlError` naming the line, column and problem, so a malformed policy can
never be half-applied. Sequence numbers and the policy timestamp are not written in
CQL; the system assigns them when the statements become a policy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

from lark import Lark, Token, Transformer, Tree, UnexpectedInput, v_args
from lark.tree import Meta

from streamshield.policy.policy import Policy
from streamshield.policy.privileges import Privilege
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
    Sign,
)
from streamshield.policy.sp_patterns import (
    ANY,
    Glob,
    Literal,
    OneOf,
    Pattern,
    Range,
    Tagged,
    value_text,
)

ACCESS_MODELS = frozenset({"rbac", "frbac"})  # flat RBAC, the model of the paper


class CqlError(ValueError):
    """A statement that cannot be turned into sps; says where and why."""

    def __init__(self, problem: str, line: int | None = None, column: int | None = None):
        self.problem, self.line, self.column = problem, line, column
        where = f"line {line}, column {column}: " if line is not None else ""
        super().__init__(where + problem)


@dataclass(frozen=True)
class SpStatement:
    """One parsed ``INSERT SP``: an sp still waiting for its timestamp and sequence number."""

    ddp: DataDescription
    srp: SecurityRestriction
    sign: Sign = Sign.GRANT
    immutable: bool = False
    stream: str | None = None  # None: the statement's context decides (ON RESULT)
    name: str | None = None

    def punctuation(self, ts: int, sn: int) -> SecurityPunctuation:
        return SecurityPunctuation(self.ddp, self.srp, self.sign, self.immutable, ts, sn)


@cache
def _parser(start: str) -> Lark:
    grammar = files("streamshield.lang").joinpath("cql.lark").read_text()
    return Lark(grammar, start=start, parser="lalr", propagate_positions=True)


def _unquote(token: Token) -> str:
    text = str(token)
    if text.startswith('"'):
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def _value(token: Token) -> str | int | float:
    if token.type == "NUMBER":
        return float(token) if "." in token else int(token)
    return _unquote(token)


# One ``part = value`` of a statement: the part, its ``name.`` prefix, where it is, its value.
_Assignment = tuple[str, Token | None, Meta, object]


class _ToModel(Transformer[Token, object]):
    """Builds patterns and statements; semantic checks raise CqlError with positions."""

    def glob(self, items: list[Token]) -> Pattern:
        return ANY if str(items[0]) == "*" else Glob(str(items[0]))

    def any(self, _items: list[Token]) -> Pattern:
        return ANY

    def range(self, items: list[Token]) -> Pattern:
        low, high = float(items[0]), float(items[1])
        if low > high:
            raise CqlError(f"empty range [{items[0]}, {items[1]}]", items[0].line, items[0].column)
        return Range(low, high)

    def one_of(self, items: list[Token]) -> Pattern:
        return OneOf(frozenset(Literal(_value(tok)) for tok in items))

    def literal(self, items: list[Token]) -> Pattern:
        return Literal(_value(items[0]))

    def value(self, items: list[Token]) -> Token:
        return items[0]

    def name(self, items: list[Token]) -> str:
        return _unquote(items[0])

    def sp_keyword(self, _items: list[Token]) -> None:
        return None

    def grant(self, _items: list[Token]) -> bool:
        return True

    def privilege(self, items: list[Token]) -> Privilege:
        return Privilege(str(items[0]).lower())

    def tagged(self, items: list[Token | None]) -> Pattern:
        negated, *tags = items
        return Tagged(frozenset(str(token) for token in tags), negated is not None)

    def ddp_term(self, items: list[Any]) -> tuple[str, Pattern, Token]:
        part = str(items[0]).upper()
        if isinstance(items[1], Tagged) and part != "ATTRIBUTES":
            raise CqlError(
                f"TAGGED names attributes; it cannot be the {part} part",
                items[0].line,
                items[0].column,
            )
        return ("STREAMS" if part == "STREAM" else part), items[1], items[0]

    @v_args(meta=True)
    def ddp(self, meta: Meta, items: list[Any]) -> _Assignment:
        prefix, *terms = items
        parts: dict[str, Pattern] = {}
        for part, pattern, token in terms:
            if part in parts:
                raise CqlError(f"{part} given twice in one DDP", token.line, token.column)
            parts[part] = pattern
        return "DDP", prefix, meta, parts

    @v_args(meta=True)
    def srp(self, meta: Meta, items: list[Any]) -> _Assignment:
        prefix, model, roles, privilege, grant = items
        if str(model).lower() not in ACCESS_MODELS:
            raise CqlError(
                f"unsupported access control model {str(model)!r} (use rbac)",
                model.line,
                model.column,
            )
        restriction = SecurityRestriction(roles, bool(grant), privilege or Privilege.READ)
        return "SRP", prefix, meta, restriction

    @v_args(meta=True)
    def sign(self, meta: Meta, items: list[Any]) -> _Assignment:
        prefix, value = items
        negative = str(value).upper() in {"NEGATIVE", "-"}
        return "SIGN", prefix, meta, Sign.DENY if negative else Sign.GRANT

    @v_args(meta=True)
    def immutable(self, meta: Meta, items: list[Any]) -> _Assignment:
        prefix, value = items
        return "IMMUTABLE", prefix, meta, str(value).upper() == "TRUE"

    @v_args(meta=True)
    def statement(self, meta: Meta, items: list[Any]) -> SpStatement:
        _keyword, name, stream, *assignments = items
        given: dict[str, Any] = {}  # each part its own type: patterns, a restriction, a sign
        for part, prefix, where, value in assignments:
            if prefix is not None and str(prefix) != name:
                raise CqlError(
                    f"{prefix}.{part} does not name this sp ({name or 'unnamed'})",
                    where.line,
                    where.column,
                )
            if part in given:
                raise CqlError(f"{part} assigned twice", where.line, where.column)
            given[part] = value
        for required in ("DDP", "SRP"):
            if required not in given:
                raise CqlError(f"missing {required} assignment", meta.line, meta.column)
        parts = given["DDP"]
        default_streams = Literal(stream) if stream is not None else ANY
        ddp = DataDescription(
            streams=parts.get("STREAMS", default_streams),
            tuples=parts.get("TUPLES", ANY),
            attributes=parts.get("ATTRIBUTES", ANY),
        )
        try:
            srp_sign = SecurityPunctuation(ddp, given["SRP"], given.get("SIGN", Sign.GRANT), ts=1)
        except ValueError as err:
            raise CqlError(str(err), meta.line, meta.column) from err
        return SpStatement(
            ddp=ddp,
            srp=srp_sign.srp,
            sign=srp_sign.sign,
            immutable=bool(given.get("IMMUTABLE", False)),
            stream=stream,
            name=name,
        )

    def script(self, items: list[SpStatement]) -> list[SpStatement]:
        return items


def _parse(text: str, start: str) -> object:
    try:
        tree = _parser(start).parse(text)
    except UnexpectedInput as err:
        expected = sorted(getattr(err, "expected", None) or getattr(err, "allowed", None) or [])
        hint = f"; expected one of {', '.join(expected[:8])}" if expected else ""
        pos = err.pos_in_stream
        found = text[pos : pos + 12] if pos is not None else ""
        raise CqlError(f"unexpected input {found!r}{hint}", err.line, err.column) from None
    try:
        return _ToModel().transform(tree)
    except Exception as err:  # lark wraps transformer errors in VisitError
        cause = getattr(err, "orig_exc", err)
        if isinstance(cause, CqlError):
            raise cause from None
        if isinstance(cause, ValueError):  # a pattern past a limit, a number too long to read
            line, column = _position(getattr(err, "obj", None))
            raise CqlError(_value_free(cause), line, column) from None
        raise


def _position(tree: object) -> tuple[int | None, int | None]:
    meta = getattr(tree, "meta", None)
    if meta is None or getattr(meta, "empty", True):
        return None, None
    return meta.line, meta.column


def _value_free(error: ValueError) -> str:
    """The model's own messages name limits, never values; anything else (int() of a
    100,000-digit number quotes it) gets a generic text."""
    text = str(error)
    return text if len(text) <= 120 and "'" not in text else "a value cannot be read"


def parse_pattern(text: str) -> Pattern:
    """A pattern expression alone, as used in the wire format."""
    simple = _simple_pattern(text)
    if simple is not None:
        return simple
    result = _parse(text, "pattern")
    assert not isinstance(result, Tree)
    return result  # type: ignore[return-value]


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")


def _plain_name(text: str) -> bool:
    return _PLAIN_NAME.fullmatch(text) is not None and text.upper() != "ALL"


def _simple_pattern(text: str) -> Pattern | None:
    """The commonest wire patterns without the parser: ``*``, one plain name, a set of
    plain names (``{a, b}``, single spaces). Secure ingest re-reads every sp of a batch and
    a lark parse costs about a millisecond, most of the driver's time at one sp per tuple.
    None for anything else (and for a value past a limit), which the grammar then reads;
    equal to the grammar's reading wherever it answers (a property test checks it)."""
    if text == "*":
        return ANY
    try:
        if _plain_name(text):
            return Literal(text)
        if text.startswith("{") and text.endswith("}") and len(text) > 2:
            names = text[1:-1].split(", ")
            if all(_plain_name(name) for name in names):
                return OneOf(frozenset(Literal(name) for name in names))
    except ValueError:  # a limit: the grammar's path gives the positioned error
        return None
    return None


def parse_statements(text: str) -> list[SpStatement]:
    """Every ``INSERT SP`` statement of a script, or CqlError and nothing."""
    return _parse(text, "script")  # type: ignore[return-value]


def parse_policy(text: str, ts: int) -> Policy:
    """A script of sp statements as one policy (one sp batch) with timestamp ``ts``."""
    return Policy.of(st.punctuation(ts, sn) for sn, st in enumerate(parse_statements(text), 1))


KEYWORDS = frozenset(
    [
        "INSERT",
        "SP",
        "SECURITY",
        "PUNCTUATION",
        "AS",
        "INTO",
        "STREAM",
        "STREAMS",
        "LET",
        "DDP",
        "SRP",
        "SIGN",
        "IMMUTABLE",
        "TUPLES",
        "ATTRIBUTES",
        "WITH",
        "GRANT",
        "OPTION",
        "FOR",
        "READ",
        "STATISTICS",
        "AND",
        "TAGGED",
        "NOT",
        "ALL",
        "POSITIVE",
        "NEGATIVE",
        "TRUE",
        "FALSE",
    ]
)


def _quoted(name: str) -> str:
    """A name as CQL text: quoted when it would read as a keyword or not as one token."""
    text = value_text(name)
    return f'"{name}"' if text == name and name.upper() in KEYWORDS else text


def to_cql(sp: SecurityPunctuation, stream: str | None = None, name: str | None = None) -> str:
    """An sp as one ``INSERT SP`` statement (ts and sn are not part of the syntax).

    Assignments carry no ``name.`` prefix (it is optional) so that any name, quoted
    when it clashes with a keyword, reads back.
    """
    ddp = sp.ddp
    terms = [
        f"STREAMS: {ddp.streams.text()}",
        f"TUPLES: {ddp.tuples.text()}",
        f"ATTRIBUTES: {ddp.attributes.text()}",
    ]
    grant = " WITH GRANT OPTION" if sp.srp.grant_option else ""
    if sp.srp.privilege is not Privilege.READ:
        grant = f" FOR {sp.srp.privilege.name}{grant}"
    lines = [
        "INSERT SP" + (f" AS {_quoted(name)}" if name else ""),
        "INTO STREAM" + (f" {_quoted(stream)}" if stream else ""),
        "LET",
        "  DDP = " + " AND ".join(terms) + ",",
        f"  SRP = rbac:{sp.srp.roles.text()}{grant},",
        f"  SIGN = {'POSITIVE' if sp.sign is Sign.GRANT else 'NEGATIVE'},",
        f"  IMMUTABLE = {'TRUE' if sp.immutable else 'FALSE'}",
    ]
    return "\n".join(lines)
