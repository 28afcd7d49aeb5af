"""Pattern expressions of security punctuations (paper 1, Fig. 5 and Definition 4.1).

A pattern names a set of streams, tuple ids, attributes or roles without listing
them: sps describe many objects at once, and most objects share a few policies.
Matching is total and side-effect free so that the same rules can be compiled into
Spark expressions (equality, ``IN``, ``BETWEEN``, ``LIKE``) later.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from fnmatch import fnmatchcase
from typing import TypeAlias

Value: TypeAlias = str | int | float

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*\Z")
_GLOB = re.compile(r"[A-Za-z0-9_.\-*?]+\Z")
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")  # ASCII digits, as Spark reads them


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

    def matches(self, value: object) -> bool:
        return any(literal.matches(value) for literal in self.values)

    def text(self) -> str:
        return "{" + ", ".join(sorted(lit.text() for lit in self.values)) + "}"


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
        if not _GLOB.match(self.pattern) or not ("*" in self.pattern or "?" in self.pattern):
            raise ValueError(f"not a glob pattern: {self.pattern!r}")

    def matches(self, value: object) -> bool:
        return not isinstance(value, bool) and fnmatchcase(str(value), self.pattern)

    def text(self) -> str:
        return self.pattern


Pattern: TypeAlias = Any | Literal | OneOf | Range | Glob
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
