"""Conjunctive selection predicates as normalised sets of atomic comparisons.

Why sets of atoms: the query-sharing definitions of the Chinese-Wall paper (section 5,
Defs. 7-8) compare select nodes by the *conjuncts* they hold: two selects overlap when their
conjunct sets intersect, and the shared part is the intersection. That is only decidable
if every predicate has one spelling, so a predicate here is a frozen set of comparisons
``attribute op constant`` whose canonical text is independent of how the query wrote it.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any

Constant = int | float | str


class Op(Enum):
    """Comparison operators; SQL's ``==`` and ``<>`` are read as ``=`` and ``!=``."""

    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="

    def apply(self, left: object, right: object) -> object:
        """``left op right`` through Python's rich comparisons.

        Why public: an engine compiles a select onto anything that overloads comparisons
        (a Spark ``Column`` gives a Column), and must agree with ``Comparison.holds`` on
        which comparison each spelling means; one table keeps the two in step.
        """
        return _APPLY[self](left, right)


# Any: the operands are whatever overloads comparisons (a Spark Column gives a Column).
_APPLY: dict[Op, Callable[[Any, Any], Any]] = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.LT: operator.lt,
    Op.LE: operator.le,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
}
_SPELLINGS = {"==": Op.EQ, "<>": Op.NE, **{op.value: op for op in Op}}


def _comparable(a: object, b: object) -> bool:
    """Numbers compare with numbers and strings with strings; anything else is unknown."""
    numbers = (int, float)
    return (
        isinstance(a, numbers)
        and not isinstance(a, bool)
        and isinstance(b, numbers)
        and not isinstance(b, bool)
    ) or (isinstance(a, str) and isinstance(b, str))


@dataclass(frozen=True)
class Comparison:
    """One atom ``attribute op value``; the attribute is always on the left."""

    attribute: str
    op: Op
    value: Constant

    def __post_init__(self) -> None:
        # bool is an int in Python (True == 1), and NaN is not equal to itself: either would
        # give two atoms that are equal as values but differ in meaning or canonical text.
        if isinstance(self.value, bool) or not isinstance(self.value, int | float | str):
            raise ValueError(f"constant for {self.attribute!r} must be an int, float or str")
        if isinstance(self.value, float):
            if math.isnan(self.value) or math.isinf(self.value):
                raise ValueError(f"comparison constant for {self.attribute!r} must be finite")
            if self.value.is_integer():
                object.__setattr__(self, "value", int(self.value))
        if not self.attribute:
            raise ValueError("comparison attribute must not be empty")

    @cached_property
    def canonical(self) -> str:
        return f"{self.attribute!r} {self.op.value} {self.value!r}"

    def holds(self, row: Mapping[str, object]) -> bool:
        """SQL three-valued logic folded to False: a missing or incomparable value fails."""
        actual = row.get(self.attribute)
        if actual is None or not _comparable(actual, self.value):
            return False
        return bool(_APPLY[self.op](actual, self.value))

    def implies(self, other: Comparison) -> bool:
        """Sound (not complete) test that every row satisfying self satisfies other."""
        if self == other:
            return True
        if self.attribute != other.attribute or not _comparable(self.value, other.value):
            return False
        # Any: _comparable has checked both are numbers or both strings, which mypy cannot
        # carry over from one value to the other.
        v: Any = self.value
        w: Any = other.value
        if self.op is Op.EQ:
            return bool(_APPLY[other.op](v, w))
        if self.op in (Op.LT, Op.LE):  # x < v  or  x <= v
            strict = self.op is Op.LT
            if other.op is Op.LT:
                return bool(v < w or (strict and v == w))
            if other.op is Op.LE:
                return bool(v <= w)
            if other.op is Op.NE:
                return bool(w > v or (strict and w == v))
            return False
        if self.op in (Op.GT, Op.GE):  # x > v  or  x >= v
            strict = self.op is Op.GT
            if other.op is Op.GT:
                return bool(v > w or (strict and v == w))
            if other.op is Op.GE:
                return bool(v >= w)
            if other.op is Op.NE:
                return bool(w < v or (strict and w == v))
            return False
        return False  # NE implies only itself


@dataclass(frozen=True)
class Conjunction:
    """A conjunction of comparisons; the empty conjunction is TRUE."""

    conjuncts: frozenset[Comparison]

    @classmethod
    def of(cls, comparisons: Iterable[Comparison]) -> Conjunction:
        return cls(frozenset(comparisons))

    @cached_property
    def canonical(self) -> str:
        if not self.conjuncts:
            return "TRUE"
        return " AND ".join(sorted(c.canonical for c in self.conjuncts))

    def holds(self, row: Mapping[str, object]) -> bool:
        return all(c.holds(row) for c in self.conjuncts)

    def __and__(self, other: Conjunction) -> Conjunction:
        """The conjuncts both predicates hold (Def. 8's common select)."""
        return Conjunction(self.conjuncts & other.conjuncts)

    def __or__(self, other: Conjunction) -> Conjunction:
        """The conjunction of both (the fusion of two stacked selects)."""
        return Conjunction(self.conjuncts | other.conjuncts)

    def __sub__(self, other: Conjunction) -> Conjunction:
        """What is left of self once other has been applied (Def. 8's residual select)."""
        return Conjunction(self.conjuncts - other.conjuncts)

    def overlaps(self, other: Conjunction) -> bool:
        """Def. 7's test on parameters: the conjunct sets intersect."""
        return not self.conjuncts.isdisjoint(other.conjuncts)

    def implies(self, other: Conjunction) -> bool:
        """Containment: every conjunct of other follows from some conjunct of self.

        Sound, not complete (it reasons per atom, e.g. ``a > 5`` implies ``a >= 3``); it is
        what decides that one query's selection is contained in another's.
        """
        return all(any(mine.implies(c) for mine in self.conjuncts) for c in other.conjuncts)


_ATOM = re.compile(
    r"""^\s*(?P<attr>[A-Za-z_][\w.]*)\s*(?P<op>==|<>|!=|<=|>=|=|<|>)\s*
        (?:'(?P<s>[^']*)'|"(?P<d>[^"]*)"|(?P<n>-?\d+(?:\.\d+)?))\s*$""",
    re.VERBOSE,
)


def parse_conjunction(text: str) -> Conjunction:
    """Read ``a = 'x' AND b > 3`` (the spelling the papers print their selects in).

    Only for tests, examples and docs: admitted queries are turned into operator trees from
    their checked AST, never from text.
    """
    atoms = []
    for part in re.split(r"\s+AND\s+", text.strip(), flags=re.IGNORECASE):
        match = _ATOM.match(part)
        if match is None:
            raise ValueError(f"not a comparison 'attribute op constant': {part!r}")
        if match["n"] is not None:
            value: Constant = float(match["n"]) if "." in match["n"] else int(match["n"])
        else:
            value = match["s"] if match["s"] is not None else match["d"]
        atoms.append(Comparison(match["attr"], _SPELLINGS[match["op"]], value))
    return Conjunction.of(atoms)
