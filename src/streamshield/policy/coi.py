"""Conflict-of-interest (COI) and complementing-interest (CI) classes (paper 2, section 3).

Competing companies form one COI class; a company belongs to exactly one COI class.
A CI class groups companies that offer complementing services and may hold at most
one company of each COI class (Definition 2): two competitors are never complements.

Bit layout. Every company has one bit in a level's bitset (DESIGN.md section 3), at its
index in :attr:`CoiClasses.companies`. Like role positions (:mod:`.roles`), that order
is part of data already stored, so ``order`` fixes it (new companies are appended,
never reordered) and ``capacity`` fixes the word width; without them the order is
class by class, each class's companies in the order given, and the width just enough.
The classes themselves are positional too: component ``k`` of a level is class ``k``.

Every error is a :class:`LatticeError` whose ``kind`` a caller (API, conformance
table) can match on and whose message names the offending class, company or
component. Company and class names are catalog definitions, not tuple data, so
naming them is safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from streamshield.policy.bitset import BitsetCodec, Words

BOTTOM = "⊥"
ASCII_BOTTOM = "_"
TOP = "T"
RESERVED = frozenset({BOTTOM, ASCII_BOTTOM, TOP})
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
"""Class and company names: no spaces, commas or brackets, so the text form stays simple."""


class ErrorKind(StrEnum):
    """What went wrong; stable strings, used by the conformance table."""

    NO_CLASSES = "no_classes"
    BAD_NAME = "bad_name"
    DUPLICATE_CLASS = "duplicate_class"
    DUPLICATE_COMPANY = "duplicate_company"
    TOO_FEW_COMPANIES = "too_few_companies"
    BAD_ORDER = "bad_order"
    CAPACITY = "capacity"
    SYNTAX = "syntax"
    ARITY = "arity"
    UNKNOWN_COMPANY = "unknown_company"
    UNKNOWN_CLASS = "unknown_class"
    WRONG_CLASS = "wrong_class"
    TWO_COMPANIES_ONE_CLASS = "two_companies_one_class"
    TOP_IN_CI = "top_in_ci"
    BAD_WORDS = "bad_words"


class LatticeError(ValueError):
    """A class definition, a level or a label that is not valid in the lattice."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def check_name(what: str, name: object) -> str:
    """A class or company name; reserved and odd names would make the text form ambiguous."""
    if not isinstance(name, str) or name in RESERVED or not NAME.fullmatch(name):
        raise LatticeError(
            ErrorKind.BAD_NAME,
            f"{what} name {name!r} is not allowed: use letters, digits, '_', '.', '-' "
            f"(first a letter or digit, at most 64), and not {TOP!r}",
        )
    return name


@dataclass(frozen=True)
class CoiClass:
    """One conflict-of-interest class: competing companies."""

    name: str
    companies: tuple[str, ...]


class CoiClasses:
    """The ordered COI classes of a system and the bit position of every company.

    A class needs at least two companies: with one, ``T`` ("two or more companies of
    the class") could not be told apart from that company in the bitset encoding, and
    a class without competitors has no conflict to guard.
    """

    def __init__(
        self,
        classes: Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]],
        order: Sequence[str] | None = None,
        capacity: int | None = None,
    ) -> None:
        items = list(classes.items() if isinstance(classes, Mapping) else classes)
        if not items:
            raise LatticeError(ErrorKind.NO_CLASSES, "at least one COI class is needed")
        built: list[CoiClass] = []
        owner: dict[str, str] = {}
        for name, companies in items:
            check_name("class", name)
            if any(c.name == name for c in built):
                raise LatticeError(ErrorKind.DUPLICATE_CLASS, f"class {name!r} is defined twice")
            if isinstance(companies, str):  # "AB" would silently mean ["A", "B"]
                raise LatticeError(
                    ErrorKind.BAD_NAME, f"class {name!r}: companies must be a list of names"
                )
            members = tuple(companies)
            for company in members:
                check_name("company", company)
                if company in owner:
                    raise LatticeError(
                        ErrorKind.DUPLICATE_COMPANY,
                        f"company {company!r} is in class {owner[company]!r} and in {name!r}; "
                        "a company belongs to exactly one COI class",
                    )
                owner[company] = name
            if len(members) < 2:
                raise LatticeError(
                    ErrorKind.TOO_FEW_COMPANIES,
                    f"class {name!r} has {len(members)} compan{'y' if len(members) == 1 else 'ies'}"
                    "; a COI class needs at least two",
                )
            built.append(CoiClass(name, members))
        self.classes: tuple[CoiClass, ...] = tuple(built)
        self._owner = owner
        self._index = {c.name: k for k, c in enumerate(built)}
        companies = tuple(owner) if order is None else tuple(order)
        if order is not None and (
            len(set(companies)) != len(companies) or set(companies) != set(owner)
        ):
            raise LatticeError(
                ErrorKind.BAD_ORDER, "the company order must list every company exactly once"
            )
        try:
            self.codec = BitsetCodec(companies, width=capacity)
        except ValueError as error:
            raise LatticeError(ErrorKind.CAPACITY, str(error)) from None

    def __repr__(self) -> str:
        return f"CoiClasses({ {c.name: list(c.companies) for c in self.classes}!r})"

    def __len__(self) -> int:
        return len(self.classes)

    @property
    def companies(self) -> tuple[str, ...]:
        """All companies in bit order."""
        return tuple(str(c) for c in self.codec.members)

    @property
    def width(self) -> int:
        """Words (``_ss_lvl_*`` columns) of every encoded level."""
        return self.codec.width

    def class_of(self, company: str) -> int:
        """Position of the class that ``company`` belongs to."""
        if company not in self._owner:
            raise LatticeError(ErrorKind.UNKNOWN_COMPANY, f"unknown company {company!r}")
        return self._index[self._owner[company]]

    @cached_property
    def masks(self) -> tuple[Words, ...]:
        """Per class, the words of all its companies (what ``T`` allows)."""
        return tuple(self.codec.encode(c.companies) for c in self.classes)

    def ci_class(self, name: str, companies: Iterable[str]) -> CiClass:
        """A CI class of ``companies`` (Definition 2), refused if two are competitors."""
        check_name("CI class", name)
        vector: list[str] = [BOTTOM] * len(self.classes)
        for company in companies:
            k = self.class_of(company)
            if vector[k] not in (BOTTOM, company):
                raise LatticeError(
                    ErrorKind.TWO_COMPANIES_ONE_CLASS,
                    f"CI class {name!r}: companies {vector[k]!r} and {company!r} are both in "
                    f"COI class {self.classes[k].name!r}; a CI class holds at most one of them",
                )
            vector[k] = company
        return CiClass(name, tuple(vector))


@dataclass(frozen=True)
class CiClass:
    """A complementing-interest class as its vector: per COI class one company or ``⊥``."""

    name: str
    vector: tuple[str, ...]
