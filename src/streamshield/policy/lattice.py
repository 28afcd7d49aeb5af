"""Chinese-Wall security levels: dominance, LUB, GLB, text form and bitset encoding.

A level (paper 2, Definition 3) has one component per COI class: ``⊥`` (no
information from the class), one company of it, or ``T`` (two or more of its
companies). ``L1`` is dominated by ``L2`` (Definition 4) when per class
``L1 = L2``, ``L1 = ⊥`` or ``L2 = T``. Per class this is the flat lattice
``⊥ < each company < T``; the levels are its product, so LUB and GLB are per class.

Encoding (DESIGN.md section 3). A level is the set of companies it contains, as a
:mod:`~streamshield.policy.bitset` label: ``⊥`` no bit, a company its bit, ``T`` every
company of the class. Then:

* LUB = OR. The OR of two companies of one class has two bits, not all of them; it
  still means ``T`` because :meth:`Lattice.decode` reads a class's bits as 0 -> ``⊥``,
  1 -> that company, 2 or more -> ``T``. So any OR of encoded levels decodes to their
  LUB without a per-row normalisation step.
* ``w`` is dominated by ``C`` iff ``w & ~encode(C) == 0`` in every word: the bits of
  ``C`` are exactly what ``C`` allows per class (``⊥`` none, a company itself, ``T`` the
  whole class), and a class with two or more bits in ``w`` fits only under ``T``. This
  holds for every OR of encoded levels, so Spark tests rows with one AND per word
  against a constant.
* GLB = AND, but only of *canonical* encodings (``T`` as the whole class): AND of two
  non-canonical ``T`` s could lose the bit of a company the other side names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce

from streamshield.policy.bitset import Words, intersect, is_subset, union
from streamshield.policy.coi import (
    ASCII_BOTTOM,
    BOTTOM,
    NAME,
    TOP,
    CiClass,
    CoiClasses,
    ErrorKind,
    LatticeError,
)

_MAX_COMPONENT_CHARS = 80  # a name is at most 64 characters, plus spaces around it


@dataclass(frozen=True)
class Level:
    """A security level: per COI class ``⊥``, a company name or ``T``.

    Only :class:`Lattice` builds checked levels; compare and combine them through it.
    """

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return "[" + ", ".join(self.parts) + "]"


def _join(a: str, b: str) -> str:
    if a == b or b == BOTTOM:
        return a
    if a == BOTTOM:
        return b
    return TOP  # two different companies, or T on one side


def _meet(a: str, b: str) -> str:
    if a == b or b == TOP:
        return a
    if a == TOP:
        return b
    return BOTTOM  # two different companies, or ⊥ on one side


class Lattice:
    """The security levels over some COI classes."""

    def __init__(self, classes: CoiClasses) -> None:
        self.classes = classes
        n = len(classes)
        self.public = Level((BOTTOM,) * n)
        self.trusted = Level((TOP,) * n)

    @classmethod
    def of(
        cls,
        classes: Mapping[str, Sequence[str]] | Iterable[tuple[str, Sequence[str]]],
        order: Sequence[str] | None = None,
        capacity: int | None = None,
    ) -> Lattice:
        """A lattice from ``{class: [companies]}`` or ``[(class, [companies])]``."""
        return cls(CoiClasses(classes, order, capacity))

    def __repr__(self) -> str:
        return f"Lattice({self.classes!r})"

    @property
    def width(self) -> int:
        """Words of every encoded level."""
        return self.classes.width

    # --- building and checking levels --------------------------------------------------

    def level(self, *parts: str) -> Level:
        """A checked level from its components, ``⊥`` also written ``_``."""
        n = len(self.classes)
        if len(parts) != n:
            raise LatticeError(
                ErrorKind.ARITY,
                f"a level has {n} component{'s' if n != 1 else ''} (one per COI class: "
                f"{', '.join(c.name for c in self.classes.classes)}), got {len(parts)}",
            )
        return Level(tuple(self._part(k, p) for k, p in enumerate(parts)))

    def check(self, level: Level) -> Level:
        """``level`` if it is a level of this lattice (a level from elsewhere is an error)."""
        return self.level(*level.parts)

    def _part(self, k: int, part: object) -> str:
        where = f"component {k + 1} (class {self.classes.classes[k].name!r})"
        if not isinstance(part, str):
            raise LatticeError(ErrorKind.SYNTAX, f"{where}: expected text, got {type(part)}")
        if part in (BOTTOM, ASCII_BOTTOM):
            return BOTTOM
        if part == TOP:
            return TOP
        if not part:
            raise LatticeError(ErrorKind.SYNTAX, f"{where} is empty; write {BOTTOM} or _")
        if not NAME.fullmatch(part):
            shown = part if len(part) <= 64 else part[:64] + "..."
            raise LatticeError(
                ErrorKind.SYNTAX,
                f"{where}: {shown!r} is not a company name, {BOTTOM}, {ASCII_BOTTOM} or {TOP}",
            )
        try:
            owner = self.classes.class_of(part)
        except LatticeError:
            raise LatticeError(
                ErrorKind.UNKNOWN_COMPANY, f"{where}: unknown company {part!r}"
            ) from None
        if owner != k:
            raise LatticeError(
                ErrorKind.WRONG_CLASS,
                f"{where}: company {part!r} is in class "
                f"{self.classes.classes[owner].name!r} (component {owner + 1})",
            )
        return part

    def level_of(self, companies: Iterable[str], trusted_in: Iterable[str] = ()) -> Level:
        """The level of information from exactly ``companies``, ``T`` for the classes
        named in ``trusted_in``. Two companies of one class are refused, not turned into
        ``T``: whoever names them should say ``T`` for that class on purpose."""
        parts = [BOTTOM] * len(self.classes)
        names = [c.name for c in self.classes.classes]
        for class_name in trusted_in:
            if class_name not in names:
                raise LatticeError(ErrorKind.UNKNOWN_CLASS, f"unknown class {class_name!r}")
            parts[names.index(class_name)] = TOP
        for company in companies:
            k = self.classes.class_of(company)
            if parts[k] == TOP:
                continue
            if parts[k] not in (BOTTOM, company):
                raise LatticeError(
                    ErrorKind.TWO_COMPANIES_ONE_CLASS,
                    f"companies {parts[k]!r} and {company!r} are both in class {names[k]!r}; "
                    f"a level names one company per class (or {TOP} for the class)",
                )
            parts[k] = company
        return Level(tuple(parts))

    def ci_level(self, ci: CiClass) -> Level:
        """The level of a CI class's information: its companies, ``⊥`` elsewhere."""
        return self.level(*ci.vector)

    def parse_ci(self, name: str, text: str) -> CiClass:
        """A CI class from its vector text, e.g. ``[1, B]``; ``T`` has no place there."""
        level = self.parse(text)
        if TOP in level.parts:
            k = level.parts.index(TOP)
            raise LatticeError(
                ErrorKind.TOP_IN_CI,
                f"CI class {name!r}, component {k + 1} (class "
                f"{self.classes.classes[k].name!r}): a CI class names one company or "
                f"{BOTTOM}, never {TOP}",
            )
        return self.classes.ci_class(name, (p for p in level.parts if p != BOTTOM))

    # --- text form ---------------------------------------------------------------------

    def parse(self, text: str) -> Level:
        """``[1, B]``, ``[⊥, T]`` or ``[_, T]`` (spaces optional) into a checked level."""
        if not isinstance(text, str):
            raise LatticeError(ErrorKind.SYNTAX, f"a level is text, got {type(text)}")
        if len(text) > _MAX_COMPONENT_CHARS * len(self.classes) + 16:
            raise LatticeError(ErrorKind.SYNTAX, f"level text too long ({len(text)} characters)")
        body = text.strip()
        if not (body.startswith("[") and body.endswith("]")) or len(body) < 2:
            raise LatticeError(
                ErrorKind.SYNTAX, "a level is written in brackets, e.g. [1, B] or [_, T]"
            )
        inner = body[1:-1]
        if "[" in inner or "]" in inner:
            raise LatticeError(ErrorKind.SYNTAX, "a level has one pair of brackets")
        parts = [p.strip() for p in inner.split(",")] if inner.strip() else []
        for k, part in enumerate(parts):
            if not part:
                raise LatticeError(
                    ErrorKind.SYNTAX, f"component {k + 1} is empty; write {BOTTOM} or _"
                )
        return self.level(*parts)

    def format(self, level: Level, ascii: bool = False) -> str:
        """The text form; ``ascii`` writes ``⊥`` as ``_``."""
        parts = self.check(level).parts
        if ascii:
            parts = tuple(ASCII_BOTTOM if p == BOTTOM else p for p in parts)
        return "[" + ", ".join(parts) + "]"

    # --- order -------------------------------------------------------------------------

    def dominated(self, low: Level, high: Level) -> bool:
        """``low ≼ high`` (Definition 4): per class equal, ``low`` is ``⊥`` or ``high`` is ``T``."""
        a, b = self.check(low).parts, self.check(high).parts
        return all(x in (y, BOTTOM) or y == TOP for x, y in zip(a, b, strict=True))

    def comparable(self, a: Level, b: Level) -> bool:
        return self.dominated(a, b) or self.dominated(b, a)

    def lub(self, first: Level, *more: Level) -> Level:
        """Least upper bound: the level of a tuple derived from all of them."""
        levels = [self.check(x).parts for x in (first, *more)]
        return Level(tuple(reduce(_join, column) for column in zip(*levels, strict=True)))

    def glb(self, first: Level, *more: Level) -> Level:
        """Greatest lower bound: what every one of them may read."""
        levels = [self.check(x).parts for x in (first, *more)]
        return Level(tuple(reduce(_meet, column) for column in zip(*levels, strict=True)))

    # --- encoding ----------------------------------------------------------------------

    def encode(self, level: Level) -> Words:
        """The canonical words: a company's bit, ``T`` as every company of its class.

        They are also what the level *allows* a dominated row to hold (see the module
        docstring), so the Spark dominance test uses them as its constant."""
        codec, masks = self.classes.codec, self.classes.masks
        words = codec.empty()
        for k, part in enumerate(self.check(level).parts):
            if part == TOP:
                words = union(words, masks[k])
            elif part != BOTTOM:
                words = union(words, codec.encode([part]))
        return words

    def decode(self, words: Words) -> Level:
        """The level of any OR of encoded levels: per class 0, 1 or 2+ bits."""
        try:
            companies = self.classes.codec.decode(tuple(words))
        except ValueError as error:
            raise LatticeError(ErrorKind.BAD_WORDS, f"not a level label: {error}") from None
        parts = [BOTTOM] * len(self.classes)
        for company in companies:
            k = self.classes.class_of(str(company))
            parts[k] = str(company) if parts[k] == BOTTOM else TOP
        return Level(tuple(parts))

    def words_dominated(self, words: Words, level: Level) -> bool:
        """The word form of :meth:`dominated`, exactly the test Spark runs per row."""
        return is_subset(tuple(words), self.encode(level))

    @staticmethod
    def lub_words(a: Words, b: Words) -> Words:
        """LUB on words: OR (joins, aggregates)."""
        return union(a, b)

    @property
    def unknown(self) -> Words | None:
        """The level words of a group with a contributor that has no level (a NULL word,
        e.g. a file written before levels existed): every bit of every word set, the
        top of every word and beyond, so it can only deny more, never lower a label.

        Dominated by no level (not even ``T`` everywhere) as long as some word has a bit
        that no company holds: no ``C`` allows that bit. When every bit of every word is
        a company's (the capacity is reached), every bit set *is* ``T`` everywhere; then
        there is no such mark and this is ``None`` (the engine keeps a NULL instead)."""
        top = self.encode(self.trusted)
        if all(word == -1 for word in top):
            return None
        return (-1,) * self.width

    def lub_group(self, contributors: Iterable[Words | None]) -> Words | None:
        """The level words of an aggregate over ``contributors``: their OR (their LUB);
        :attr:`unknown` as soon as one has no level (``None``) or a ``None`` word, so a
        missing level never lowers the group's. The pure reference of the engine's
        ``bit_or(coalesce(w, -1))`` per word (``engine.views.level_columns.lub_aggregate``). No
        contributor at all (a global aggregate over no rows): ``None``, as Spark's
        ``bit_or`` of nothing is NULL; a NULL level reaches no one."""
        out: Words | None = None
        for words in contributors:
            if words is None or any(w is None for w in words):
                return self.unknown
            out = tuple(words) if out is None else union(out, tuple(words))
        return out

    def glb_words(self, a: Words, b: Words) -> Words:
        """GLB on words: AND of the canonical forms (not of ``a`` and ``b`` as they are)."""
        return intersect(self.encode(self.decode(a)), self.encode(self.decode(b)))
