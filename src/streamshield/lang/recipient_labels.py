"""Which attributes a query's output rows and columns depend on, as labels for recipients.

The recipient decides (DESIGN.md): a query's output reaches a subscriber only as far as
*her* active roles could read it at the sources. The tuple label (``_ss_r0_*``) answers
that for the tuples; these *dependency slots* answer it for the attributes:

- a row depends on every attribute that chose it (WHERE, GROUP BY, HAVING, QUALIFY,
  ORDER BY...): a row selected by ``hr > 100`` tells its reader something about ``hr``;
  a recipient who may not read one of them in that row does not get the row;
- an output column depends on every attribute it is computed from: a recipient who may
  not read one of them gets the column masked (NULL, and named in ``_masked``).

A slot is one attribute's label words, copied from the row (selections) or combined
over the contributors of a group as the tuple label is (readers ``bit_and``, denied
``bit_or``). Slots are named so that delivery needs nothing but the output's columns:

- ``_ss_row{j}_r{w}`` / ``_ss_row{j}_d{w}``: the row's j-th dependency, word ``w``;
- ``_ss_col{i}x{j}_r{w}`` / ``..._d{w}``: output column ``i``'s j-th dependency, where
  ``i`` counts the output's user columns (not ``_ss_``) from 0, ``*`` expanded.

One slot per attribute, not their readers AND-ed into one: a recipient whose one role
reads ``hr`` and another ``temp`` is exactly as entitled to ``hr + temp`` as her own
query would be. A name that cannot be traced to an attribute (a lateral alias, a name
inside a derived table) depends on every attribute: unknown is never "none".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot import exp

from streamshield.lang.sql_trees import bigint

ROW = "_ss_row"
COLUMN = "_ss_col"
_SLOT = re.compile(r"^_ss_(row|col)(\d+)(?:x(\d+))?_([rd])(\d+)$")

Resolve = Callable[[exp.Column], "tuple[int, ...] | None"]
"""The label objects (1-based attribute numbers) a column reference reads; None: unknown."""
Labels = Callable[[int, int], "tuple[str, str]"]
"""(reader, denied) column names of object ``obj``'s word ``w`` in the query's input."""


@dataclass(frozen=True)
class Dependencies:
    """What one SELECT's rows and each of its user columns read, as object numbers."""

    row: tuple[int, ...]
    columns: tuple[tuple[int, ...], ...]

    def folded(self) -> Dependencies:
        """Every dependency as the row's: no column slots (a coarser, safe layout)."""
        objects = set(self.row).union(*self.columns)
        return Dependencies(tuple(sorted(objects)), ())


@dataclass(frozen=True)
class Slot:
    """A dependency slot found among an output's columns (see the module docstring)."""

    column: int | None  # None: the row's
    index: int
    kind: str  # "r" readers, "d" denied
    word: int


def slot_of(name: str) -> Slot | None:
    match = _SLOT.match(name)
    if match is None:
        return None
    scope, first, second, kind, word = match.groups()
    if scope == "row":
        return None if second is not None else Slot(None, int(first), kind, int(word))
    if second is None:
        return None
    return Slot(int(first), int(second), kind, int(word))


def row_slot(j: int, kind: str, w: int) -> str:
    return f"{ROW}{j}_{kind}{w}"


def column_slot(i: int, j: int, kind: str, w: int) -> str:
    return f"{COLUMN}{i}x{j}_{kind}{w}"


def _is_star(node: exp.Expr) -> bool:
    return isinstance(node, exp.Star) or (
        isinstance(node, exp.Column) and isinstance(node.this, exp.Star)
    )


def _reads(node: exp.Expr, resolve: Resolve, every: tuple[int, ...]) -> set[int]:
    objects: set[int] = set()
    for column in node.find_all(exp.Column):
        if _is_star(column):
            objects.update(every)
            continue
        found = resolve(column)
        objects.update(every if found is None else found)
    if any(isinstance(n, exp.Star) and not isinstance(n.parent, exp.Count) for n in node.walk()):
        objects.update(every)
    return objects


def dependencies(select: exp.Select, resolve: Resolve, every: tuple[int, ...]) -> Dependencies:
    """The row's and each user column's dependencies in one SELECT (no subqueries)."""
    columns: list[tuple[int, ...]] = []
    for projection in select.expressions:
        target = projection.this if isinstance(projection, exp.Alias) else projection
        if _is_star(target):
            if isinstance(target, exp.Column) and target.table:
                # ``t.*``: the attributes the resolver gives the qualified star
                found = resolve(target)
                columns += [(o,) for o in (every if found is None else found)]
            else:
                columns += [(o,) for o in every]
            continue
        columns.append(tuple(sorted(_reads(target, resolve, every))))
    row: set[int] = set()
    for key, value in select.args.items():
        if key in ("expressions", "from_", "joins") or value is None:
            continue
        for part in value if isinstance(value, list) else [value]:
            if isinstance(part, exp.Expression):
                row |= _reads(part, resolve, every)
    return Dependencies(tuple(sorted(row)), tuple(columns))


def slot_columns(
    deps: Dependencies,
    widths: tuple[int, tuple[int, ...]],
    labels: Labels,
    words: int,
    aggregate: bool,
) -> list[exp.Expr]:
    """The slot projections for ``deps``, padded to ``widths`` (the widest branch of a
    union): a missing dependency is a neutral slot that every recipient passes."""
    out: list[exp.Expr] = []

    def slot(obj: int | None, name: str, kind: str, w: int) -> exp.Expr:
        if obj is None:  # padding: readers all, denied none
            value: exp.Expr = bigint(-1 if kind == "r" else 0)
        else:
            source = exp.column(labels(obj, w)[0 if kind == "r" else 1], quoted=True)
            fn = "bit_and" if kind == "r" else "bit_or"
            value = exp.func(fn, source, dialect="spark") if aggregate else source
        return exp.alias_(value, name, quoted=True)

    row_width, column_widths = widths
    if len(deps.row) > row_width or len(deps.columns) != len(column_widths):
        raise ValueError("the slot layout does not fit the dependencies")
    if any(len(c) > w for c, w in zip(deps.columns, column_widths, strict=True)):
        raise ValueError("the slot layout does not fit the dependencies")
    row = list(deps.row) + [None] * (row_width - len(deps.row))
    for j, obj in enumerate(row):
        for w in range(words):
            out += [slot(obj, row_slot(j, k, w), k, w) for k in "rd"]
    for i, width in enumerate(column_widths):
        objects = list(deps.columns[i]) + [None] * (width - len(deps.columns[i]))
        for j, obj in enumerate(objects):
            for w in range(words):
                out += [slot(obj, column_slot(i, j, k, w), k, w) for k in "rd"]
    return out


def widest(all_deps: Sequence[Dependencies]) -> tuple[int, tuple[int, ...]]:
    """The slot layout every branch of a union pads to (positions line up by index)."""
    counts = {len(d.columns) for d in all_deps}
    if len(counts) != 1:
        raise ValueError("union branches with different numbers of columns")
    row = max(len(d.row) for d in all_deps)
    columns = tuple(max(len(d.columns[i]) for d in all_deps) for i in range(counts.pop()))
    return row, columns
