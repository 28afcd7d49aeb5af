"""Pattern expressions of security punctuations (paper 1, Fig. 5 and Definition 4.1).

A pattern names a set of streams, tuple ids, attributes or roles without listing
them: sps describe many objects at once, and most objects share a few policies.
Matching is total and side-effect free so that the same rules can be compiled into
Spark expressions (equality, ``IN``, ``BETWEEN``, an atomic glob regex) later.

Patterns come from providers and users, so none of them may cost more than time linear
in the value matched (threat "no input can stall the system", docs/security.md):

* globs are matched by :func:`glob_match`, a left-to-right scan with no backtracking
  across ``*`` (never :mod:`fnmatch` or a backtracking regex), and are at most
  :data:`MAX_GLOB_CHARS` long;
* sets have at most :data:`MAX_SET_VALUES` members and text values at most
  :data:`MAX_VALUE_CHARS` characters; ranges cost one comparison.

A pattern past a limit is refused when it is built (``ValueError``), which the CQL and
wire parsers report as a clear error naming the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeAlias

from streamshield.policy.policy_errors import UnresolvedTags

Value: TypeAlias = str | int | float

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")
_GLOB = re.compile(r"[A-Za-z0-9_.\-*?]+\Z")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")  # ASCII digits, as Spark reads them

MAX_GLOB_CHARS = 128
"""Longest glob: matching costs at most (value length x glob length) character steps."""
MAX_SET_VALUES = 1024
"""Most members of a set pattern: each tuple is compared with every member."""
MAX_VALUE_CHARS = 1024
"""Longest text literal in a pattern."""


def as_number(value: object) -> float | None:
    """A value's numeric reading, or None: ranges and numeric literals compare numbers.

    Numeric strings count as numbers so that a tuple id sent as ``"125"`` cannot slip
    past a deny on ``[120, 133]``; booleans and NaN never do.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.match(value)):
        number = float(value)
    else:
        return None
    return None if math.isnan(number) else number


def value_text(value: Value) -> str:
    """Text of a literal value, quoted unless it reads back as the same token."""
    if isinstance(value, bool):
        raise TypeError("booleans are not pattern values")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _num_text(value)
    if _PLAIN.match(value) and value.upper() != "ALL":
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Any:
    """``*`` (or ``ALL``): every object of the kind."""

    def matches(self, value: object) -> bool:
        return True

    def text(self) -> str:
        return "*"


@dataclass(frozen=True)
class Literal:
    """One value; numbers compare numerically, everything else by its text."""

    value: Value

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or (
            isinstance(self.value, float) and not math.isfinite(self.value)
        ):
            raise ValueError(f"not a literal value: {self.value!r}")
        if isinstance(self.value, str) and len(self.value) > MAX_VALUE_CHARS:
            raise ValueError(f"a pattern value is longer than {MAX_VALUE_CHARS} characters")

    def matches(self, value: object) -> bool:
        if isinstance(self.value, int | float):
            number = as_number(value)
            return number is not None and number == float(self.value)
        return not isinstance(value, bool) and str(value) == self.value

    def text(self) -> str:
        return value_text(self.value)


@dataclass(frozen=True)
class OneOf:
    """``{a, b, c}``: any of the listed literals."""

    values: frozenset[Literal]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("a set pattern needs at least one value")
        if len(self.values) > MAX_SET_VALUES:
            raise ValueError(f"a set pattern has more than {MAX_SET_VALUES} values")

    def matches(self, value: object) -> bool:
        return any(literal.matches(value) for literal in self.values)

    def text(self) -> str:
        """Sorted, so equal sets read the same; kept once built: policy ids and the policy
        registry ask for it per sp (a set of roles at one sp per tuple)."""
        text = self.__dict__.get("_text")
        if text is None:
            text = "{" + ", ".join(sorted(lit.text() for lit in self.values)) + "}"
            object.__setattr__(self, "_text", text)  # not a field: eq, hash, repr ignore it
        return text


@dataclass(frozen=True)
class Range:
    """``[low, high]``: numbers in the closed interval (numeric strings included)."""

    low: float
    high: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError(f"range bounds must be finite numbers: [{self.low}, {self.high}]")
        if self.low > self.high:
            raise ValueError(f"empty range [{self.low}, {self.high}]")

    def matches(self, value: object) -> bool:
        number = as_number(value)
        return number is not None and self.low <= number <= self.high

    def text(self) -> str:
        return f"[{_bound_text(self.low)}, {_bound_text(self.high)}]"


@dataclass(frozen=True)
class Glob:
    """Shell-style wildcard: ``*`` any run of characters, ``?`` one character."""

    pattern: str

    def __post_init__(self) -> None:
        if len(self.pattern) > MAX_GLOB_CHARS:
            raise ValueError(f"a glob pattern is longer than {MAX_GLOB_CHARS} characters")
        if not _GLOB.match(self.pattern) or not ("*" in self.pattern or "?" in self.pattern):
            raise ValueError(f"not a glob pattern: {self.pattern!r}")

    def matches(self, value: object) -> bool:
        return not isinstance(value, bool) and glob_match(self.pattern, str(value))

    def text(self) -> str:
        return self.pattern


MAX_TAG_CHARS = 64
_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def tag_name(name: object) -> str:
    """A classification tag (``PHI``, ``pii``) in its stored form, upper case; ValueError
    for anything but a short identifier. Case-insensitive because a tag is a word people
    type in a schema, a policy and the CLI alike."""
    if not isinstance(name, str) or not _TAG.match(name) or len(name) > MAX_TAG_CHARS:
        raise ValueError(
            f"a tag is an identifier [A-Za-z_][A-Za-z0-9_]* of at most {MAX_TAG_CHARS} characters"
        )
    return name.upper()


@dataclass(frozen=True)
class Tagged:
    """``TAGGED PHI`` or ``TAGGED {PHI, PII}``: the attributes carrying any of the tags;
    ``NOT TAGGED PHI``: those carrying none of them (``negated``), so that one policy can
    speak for the rest of every stream's attributes too, whatever they are named.

    Only a server policy's attribute part may say it. Which attributes carry a tag is
    the stream definition's to say, at the time of labelling, so the pattern is resolved
    into names there (:mod:`streamshield.policy.tag_policies`) and never matched as it
    is: :meth:`matches` raises, and a policy still holding one is unusable (denied)."""

    tags: frozenset[str]
    negated: bool = False

    def __post_init__(self) -> None:
        if not self.tags:
            raise ValueError("TAGGED needs at least one tag")
        if len(self.tags) > MAX_SET_VALUES:
            raise ValueError(f"TAGGED names more than {MAX_SET_VALUES} tags")
        object.__setattr__(self, "tags", frozenset(tag_name(t) for t in self.tags))

    def matches(self, value: object) -> bool:
        raise UnresolvedTags("a TAGGED attribute pattern was not resolved against its stream")

    def text(self) -> str:
        tags = sorted(self.tags)
        listed = tags[0] if len(tags) == 1 else "{" + ", ".join(tags) + "}"
        return ("NOT TAGGED " if self.negated else "TAGGED ") + listed

    def takes_in(self, tags: frozenset[str]) -> bool:
        """Whether an attribute carrying ``tags`` (stored form) is one this names."""
        return bool(self.tags & tags) != self.negated


def glob_segments(pattern: str) -> list[str]:
    """The pattern split at its ``*`` runs: ``a*b?*c`` -> ``["a", "b?", "c"]``."""
    return pattern.split("*") if "*" in pattern else [pattern]


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``text`` matches the glob (``*`` any run, ``?`` one character), in
    O(len(text) x len(pattern)) steps whatever the pattern.

    The first segment must start the text and the last one end it; each middle segment
    is matched at its leftmost place after the previous one. Leftmost is always right
    for globs (a later place leaves less room for the rest and gains nothing), so the
    scan never goes back: no exponential or polynomial blow-up from ``a*a*a*a*b``.
    """
    segments = glob_segments(pattern)
    if len(segments) == 1:
        return len(text) == len(pattern) and _segment_at(pattern, text, 0)
    first, *middle, last = segments
    if len(text) < len(first) + len(last) or not _segment_at(first, text, 0):
        return False
    end = len(text) - len(last)
    if not _segment_at(last, text, end):
        return False
    position = len(first)
    for segment in middle:
        found = _find_segment(segment, text, position, end)
        if found < 0:
            return False
        position = found + len(segment)
    return True


def _segment_at(segment: str, text: str, start: int) -> bool:
    """``segment`` (``?`` any one character) equals ``text[start:start+len(segment)]``."""
    if "?" not in segment:
        return text.startswith(segment, start)
    return all(c == "?" or text[start + i] == c for i, c in enumerate(segment))


def _find_segment(segment: str, text: str, start: int, end: int) -> int:
    """Leftmost place ``>= start`` where ``segment`` fits entirely before ``end``, or -1."""
    if "?" not in segment:
        return text.find(segment, start, end)
    for place in range(start, end - len(segment) + 1):
        if _segment_at(segment, text, place):
            return place
    return -1


Pattern: TypeAlias = Any | Literal | OneOf | Range | Glob | Tagged
ANY = Any()


def one_of(values: Iterable[Value]) -> Pattern:
    """A set pattern, collapsed to a literal when it has one member."""
    literals = frozenset(Literal(v) for v in values)
    if len(literals) == 1:
        return next(iter(literals))
    return OneOf(literals)


def evaluate(pattern: Pattern, values: Iterable[object]) -> list[object]:
    """``eval(N, V, E)`` of Definition 4.1: the members of ``values`` that ``pattern`` matches."""
    return [value for value in values if pattern.matches(value)]


def _num_text(number: float) -> str:
    """Plain decimal text (no exponent), which is all the grammar reads."""
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {number}")
    text = format(Decimal(repr(number)), "f")
    return text if "." in text else text + ".0"


def _bound_text(number: float) -> str:
    return str(int(number)) if number.is_integer() else _num_text(number)
