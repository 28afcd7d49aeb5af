"""The labels a pattern's match rows carry, as native Spark expressions (docs/cep.md,
"Labels of match rows").

A match is data derived from the events it was built from, so it carries their labels
by the project's rule for derived rows (DESIGN.md 1, as a join and an aggregate do):

- tuple readers (``_ss_r0_*``): AND over the match's events (a role reads the match
  only if it reads every event of it); denied (``_ss_d0_*``): OR;
- provenance (``_ss_src_*``) and Chinese-Wall level (``_ss_lvl_*``): OR, the LUB; a
  NULL word stays NULL (never a lower label);
- dependency slots in :mod:`streamshield.lang.recipient_labels`' layout: the row
  depends on every attribute that chose it (WHERE over the match's events, the
  partition key, GROUP BY), each output column on the attribute it shows or
  aggregates, one slot per (event, attribute);
- an aggregate row: readers ``bit_and``, the rest ``bit_or`` over its matches, NULL
  when any match's word is NULL (``bit_and`` alone would skip it and so widen access).

So :class:`~streamshield.engine.delivery.delivery.Delivery` checks a pattern's rows exactly as
a query's: the recipient's roles per row and per column, her READ rights on the
sources, her level. An OR match binds one event: the others' labels are neutral.

A NOT match says that the pattern's view held no event of the negated type in the gap
meeting the NOT's conditions: it depends on every such event of that view, those that
did not meet them and, through the rows that are *not* there, those that did. No event
is at hand to take labels from, so the row carries the label of the pattern's whole
view of the negated type (:class:`Absence`): only the pattern's exact roles, at a level
dominating the pattern's, with READ on the negated type's stream (docs/cep.md, "NOT
matches"). No Python per event: these are projections, constants and aggregate
expressions over columns each event brought along.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F

from streamshield.cep.pattern import (
    TIME,
    Aggregate,
    Attr,
    Combinator,
    Pattern,
    attributes,
    read_attributes,
)
from streamshield.engine.views.labels import denied_column, reader_column
from streamshield.engine.views.level_columns import level_column
from streamshield.engine.views.provenance_columns import provenance_column
from streamshield.lang.recipient_labels import column_slot, row_slot
from streamshield.policy.bitset import WORD_BITS, Words, to_signed

READERS, DENIED, UNION = "readers", "denied", "union"  # how a word combines


def attribute_readers(name: str, word: int) -> str:
    """An event attribute's reader word, as a labelled event source names it."""
    return f"_ss_ar_{name}_{word}"


def attribute_denied(name: str, word: int) -> str:
    return f"_ss_ad_{name}_{word}"


@dataclass(frozen=True)
class Absence:
    """Who may learn that events are absent: the pattern's view of a negated type.

    A recipient may have a NOT match's row only if she could read every event of the
    negated type that the pattern's view could hold: the tuples and attributes its
    roles read, at levels its level dominates, from that type's stream. Without looking
    at the events, only the pattern's exact roles can (any other role set ``M`` misses
    one: a role ``o`` of the pattern's not in ``M`` reads a tuple labelled ``{o}``; a
    role ``m`` of ``M`` not the pattern's is denied one labelled ``+o -m``), only a
    level dominating the pattern's dominates every event it may read, and the row is
    derived from the negated type's stream (strong semantic: READ on it).
    """

    roles: Words
    """The pattern's roles as a READ mask (``RoleCodec.query``)."""
    level: Words = ()
    """The pattern's level words (``QueryLevel.words``); () while levels are off."""
    provenance: tuple[tuple[str, Words], ...] = ()
    """(event type, its stream's provenance words) for every type the pattern negates."""


@dataclass(frozen=True)
class LabelLayout:
    """How wide the labels of the event sources are."""

    width: int
    """Role words per label (``RoleCodec.width``)."""
    provenance: int
    """Provenance words (``ProvenanceCodec``)."""
    levels: int = 0
    """Level words; 0 while Chinese-Wall levels are off."""
    absence: Absence | None = None
    """The label of NOT matches' rows; None: those rows reach no one."""

    def event_columns(self, attrs: Iterable[str]) -> list[str]:
        """The label columns an event brings along for a pattern reading ``attrs``."""
        out = [c for w in range(self.width) for c in (reader_column(0, w), denied_column(0, w))]
        for name in sorted(set(attrs)):
            out += [
                c
                for w in range(self.width)
                for c in (attribute_readers(name, w), attribute_denied(name, w))
            ]
        out += [provenance_column(w) for w in range(self.provenance)]
        out += [level_column(w) for w in range(self.levels)]
        return out


def read_by(pattern: Pattern, var: str, key: str | None) -> list[str]:
    """The attributes of ``var`` whose labels the match rows need."""
    names = {a.name for a in read_attributes(pattern) if a.var == var}
    return sorted(names | ({key} if key is not None else set()))


def _bound(pattern: Pattern, var: str) -> Column | None:
    """Whether an OR match bound ``var`` (None: every variable of a match is bound)."""
    if pattern.combinator is not Combinator.OR:
        return None
    return F.col(f"{var}__{TIME}").isNotNull()


def _word(pattern: Pattern, var: str, column: str, kind: str) -> Column:
    """One event's word; an unbound OR variable's is neutral (readers all, the rest none)."""
    value = F.col(f"{var}__{column}")
    bound = _bound(pattern, var)
    if bound is None:
        return value
    neutral = F.lit(-1 if kind == READERS else 0).cast("long")
    return F.when(bound, value).otherwise(neutral)


def _combine(parts: list[Column], kind: str) -> Column:
    result = parts[0]
    for part in parts[1:]:
        result = result.bitwiseAND(part) if kind == READERS else result.bitwiseOR(part)
    return result


def _slot(pattern: Pattern, attr: Attr, w: int, kind: str) -> Column:
    name = attribute_readers(attr.name, w) if kind == "r" else attribute_denied(attr.name, w)
    return _word(pattern, attr.var, name, READERS if kind == "r" else DENIED)


def row_dependencies(pattern: Pattern, key: str | None) -> list[Attr]:
    """The (event, attribute) pairs that chose a match: WHERE over the match's own
    events, each event's partition key, GROUP BY."""
    negated = {i.var for i in pattern.negations}
    found = [a for a in attributes(pattern.where) if a.var not in negated]
    if key is not None:
        found += [Attr(i.var, key) for i in pattern.positives]
    found += list(pattern.group_by)
    return list(dict.fromkeys(Attr(a.var, a.name) for a in found))


def column_dependencies(pattern: Pattern, key: str | None) -> list[list[Attr]]:
    """Per user column of the output, in order, the attributes it shows."""
    columns: list[list[Attr]] = []
    if key is not None:
        columns.append([Attr(i.var, key) for i in pattern.positives])
    if pattern.aggregated:
        columns += [[], []]  # window_start, window_end: the match time, not an attribute
    for output in pattern.outputs:
        value = output.value
        attr = value.attr if isinstance(value, Aggregate) else value
        columns.append([] if attr is None else [Attr(attr.var, attr.name)])
    return columns


def match_labels(
    pattern: Pattern, key: str | None, layout: LabelLayout
) -> dict[str, tuple[Column, str]]:
    """The label columns of each match row (before any aggregate), by name, each with
    how it combines further over a group (READERS by AND, the others by OR)."""
    events = [i.var for i in pattern.positives]
    out: dict[str, tuple[Column, str]] = {}
    for w in range(layout.width):
        for name, kind in ((reader_column(0, w), READERS), (denied_column(0, w), DENIED)):
            out[name] = _combine([_word(pattern, v, name, kind) for v in events], kind), kind
    slots = [
        (row_slot(j, k, w), attr, w, k)
        for j, attr in enumerate(row_dependencies(pattern, key))
        for w in range(layout.width)
        for k in "rd"
    ]
    for i, attrs in enumerate(column_dependencies(pattern, key)):
        slots += [
            (column_slot(i, j, k, w), attr, w, k)
            for j, attr in enumerate(attrs)
            for w in range(layout.width)
            for k in "rd"
        ]
    for name, attr, w, k in slots:
        out[name] = _slot(pattern, attr, w, k), READERS if k == "r" else DENIED
    absent: dict[str, Column] = {}
    if pattern.negations:
        first = len(row_dependencies(pattern, key))
        for j, pair in enumerate(exactly(layout), start=first):
            for w in range(layout.width):
                out[row_slot(j, "r", w)] = F.lit(pair[0][w]).cast("long"), READERS
                out[row_slot(j, "d", w)] = F.lit(pair[1][w]).cast("long"), DENIED
        absent = _absent_words(pattern, layout)
    for name in [provenance_column(w) for w in range(layout.provenance)] + [
        level_column(w) for w in range(layout.levels)
    ]:
        words = [_word(pattern, v, name, UNION) for v in events]
        words += [absent[name]] if name in absent else []
        out[name] = _combine(words, UNION), UNION
    return out


def exactly(layout: LabelLayout) -> list[tuple[Words, Words]]:
    """Row slots (readers, denied words) that a recipient's READ mask passes only when
    it is the pattern's (:class:`Absence`): one slot per role bit of it, whose readers
    are that bit and whose denied words are every other bit (so the mask holds each of
    the pattern's roles and no other). Without an :class:`Absence`, one slot nobody
    passes."""
    width = layout.width
    roles = tuple(layout.absence.roles) if layout.absence is not None else ()
    if len(roles) != width or not any(roles):
        return [((0,) * width, (-1,) * width)]
    others = tuple(~r for r in roles)  # signed words: ~ is the complement
    slots = []
    for w, word in enumerate(roles):
        for bit in range(WORD_BITS):
            if (word >> bit) & 1:
                readers = tuple(to_signed(1 << bit) if v == w else 0 for v in range(width))
                slots.append((readers, others))
    return slots


def _absent_words(pattern: Pattern, layout: LabelLayout) -> dict[str, Column]:
    """The provenance words of the negated types' streams and the pattern's level words,
    to be OR-ed into a NOT match's (NULL, which denies, where they are not known)."""
    absence = layout.absence
    unknown = F.lit(None).cast("long")
    out: dict[str, Column] = {}
    sources = dict(absence.provenance) if absence is not None else {}
    negated = {i.type for i in pattern.negations}
    known = all(len(sources.get(t, ())) == layout.provenance for t in negated)
    for w in range(layout.provenance):
        word = reduce(operator.or_, (sources[t][w] for t in negated), 0) if known else None
        out[provenance_column(w)] = unknown if word is None else F.lit(word).cast("long")
    level = tuple(absence.level) if absence is not None else ()
    for w in range(layout.levels):
        value = F.lit(level[w]).cast("long") if len(level) == layout.levels else unknown
        out[level_column(w)] = value
    return out


def group_labels(kinds: dict[str, str]) -> list[Column]:
    """Aggregate expressions combining match labels (name: kind) over a group: NULL
    when any match's word is NULL (a missing label never widens access or lowers a
    level)."""
    out = []
    for name, kind in kinds.items():
        word = F.col(name)
        combined = F.bit_and(word) if kind == READERS else F.bit_or(word)
        complete = F.count(F.lit(1)) == F.count(word)
        out.append(F.when(complete, combined).alias(name))
    return out
