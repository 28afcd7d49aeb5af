"""Every branch of a shared network computed in one pass over a micro-batch, each row
stored once whatever the number of branches (docs/query-sharing.md).

Why: a branch planned on its own is its own Spark job and its own planning per
micro-batch. On one cached batch, 16 prebuilt branch plans cost ~7x one branch in jobs
alone, and building them as much again (``bench/branch_passes.py``); one projection
computing every branch's output as a column of the same row costs ~2x one. And when
that row carried each branch's own struct of (masked) output columns, the row written
grew with the branches: 64 branches cost 7x one (docs/query-sharing.md). So the pass
writes each row once, with what it takes to rebuild every branch's rows from it:

* the labelled (raw) columns some branch shows, once;
* the columns every branch shares (label words, origin, provenance; ``_ss_common_*``),
  once;
* per branch a *taken* bit (its tuple test AND its WHERE) and per attribute a *mask*
  bit (its attribute test), packed in long words (``_ss_taken<w>``, ``_ss_mask<w>``)
  as the label words are. Bits are per distinct test, not per branch: branches of equal
  visibility (:attr:`SecuredProjection.visibility`) share their mask bits and, with the
  same WHERE, their taken bit, so 64 users in 5 roles with 4 thresholds need 20 taken
  bits and 15 mask bits: one word each.

A branch's rows are *rebuilt* from that row only when someone listens
(:func:`rebuild`): the rows whose taken bit is set, each view column as its secured view
has it (a masked value is NULL where its mask bit is clear, a hidden flag is the clear
bit, a shared column as stored), then the branch's SELECT items over those columns. The
network's store is the engine's own, like the labelled store it is read from (which
holds the same raw values and labels): no user reads it but through a branch's rebuild.

Computed items (an expression in the SELECT list, such as label propagation's
``_ss_masked``, or a user's ``rate * 2``) are computed at rebuild, not in the pass: over
the rebuilt view columns of taken rows only, so an expression never sees a row its
branch's tuple test or WHERE rejected, nor a value its masks hide, exactly as over its
own secured view. An expression whose value is not a function of its row (``rand()``,
``uuid()``, ``current_timestamp()``) would differ between two rebuilds, so a branch with
one runs its own plan. A computed item that fails fails only its branch's reading.

Security stays per branch: the same tuple test, masks and WHERE as its own plan. The
tuple test comes first in the taken conjunction, and Spark evaluates ``AND`` left to
right and stops at the first false operand (generated and interpreted code alike), so
the query's condition never runs on a row the test rejects, as with the Filter beneath
the masks of a plan of its own. Anything but a plain ``SELECT items FROM view [WHERE
condition]`` (a join, grouping, ordering, DISTINCT, a subquery) is not fused and the
branch runs its own plan.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from streamshield.engine.frames.held_columns import HeldColumns
from streamshield.engine.views.secured_view import SecuredProjection

COMMON, MASKED, FLAG = "common", "masked", "flag"
FIELD = "field"
"""A field of a branch's own struct: the layout of links written before rows were stored
once (read by :func:`select_layout`)."""
COMMON_PREFIX = "_ss_common_"
"""A column every branch of the pass shares (a label word, the origin, provenance), kept
once per row instead of once per branch."""
TAKEN, MASK = "_ss_taken", "_ss_mask"
"""The bit words: ``_ss_taken<w>`` (which branches take the row), ``_ss_mask<w>`` (which
attribute tests hold for it)."""
_ONLY = {"expressions", "from_", "where", "kind", "hint"}
"""The parts a fused query may have (a SELECT list, its one view, a WHERE)."""
_VOLATILE = {
    "RAND",
    "RANDN",
    "RANDOM",
    "RANDSTR",
    "UNIFORM",
    "UUID",
    "SHUFFLE",
    "MONOTONICALLY_INCREASING_ID",
    "SPARK_PARTITION_ID",
    "INPUT_FILE_NAME",
    "INPUT_FILE_BLOCK_START",
    "INPUT_FILE_BLOCK_LENGTH",
    "CURRENT_TIMESTAMP",
    "CURRENT_DATE",
    "CURRENT_TIMEZONE",
    "NOW",
    "LOCALTIMESTAMP",
    "UNIX_TIMESTAMP",
    "CURDATE",
}
"""Functions whose value is not one of the row: computed at each rebuild, they would
differ between a delivery and a subscriber's replay."""


class NotFused(ValueError):
    """The branch's SQL is not a plain selection over its view: it runs its own plan."""


@dataclass(frozen=True, eq=False)
class FusedBranch:
    """One branch's part of the network's single pass, built once when it joins."""

    slot: str
    """Its name in the pass (and in its links)."""
    taken_key: tuple[str, str]
    """Its visibility's tag and its WHERE: branches with equal keys share a taken bit."""
    taken: Column
    """Its tuple test AND its WHERE, over ``staged``'s columns."""
    staged: tuple[tuple[str, Column], ...]
    """Columns computed over the batch first: its tuple test, the view columns its WHERE
    reads and the attribute tests its view needs (named after its visibility's tag, so
    equal visibilities stage each once)."""
    masks: tuple[tuple[str, str], ...]
    """``(mask key, staged column)`` per attribute test its rebuild reads."""
    raw: tuple[str, ...]
    """The labelled columns its rebuild shows."""
    common: tuple[tuple[str, Column], ...]
    """The shared columns it reads: the pass's column name and its expression (aliased)."""
    view: tuple[tuple[str, str, str, str], ...]
    """``(view column, kind, source, mask key)`` per view column its items read: a
    shared column (COMMON, ``source`` the pass's), a masked value (MASKED, ``source``
    the raw column) or a hidden flag (FLAG)."""
    items: tuple[tuple[str, str], ...]
    """Its output columns in order: ``(name, SQL over the view columns)``."""

    @classmethod
    def of(
        cls,
        slot: str,
        projection: SecuredProjection,
        view_columns: Sequence[str],
        secured: exp.Expr,
    ) -> FusedBranch:
        """``view_columns``: the names of ``projection``'s columns, in order;
        ``secured``: the branch's secured query over its view (NotFused when it is not
        plain)."""
        if len(view_columns) != len(projection.columns):
            raise NotFused("the view's columns are not known")
        tag = _tag(projection, slot)
        view = {c.lower(): c for c in view_columns}
        items, condition, read, where_reads = _plain_select(secured, view, tag)
        expressions = dict(zip(view_columns, projection.columns, strict=True))
        masked = {name: (raw, obj) for name, raw, obj in projection.masked}
        flags = dict(projection.flags)
        test = f"_ss_test__{tag}"
        staged: dict[str, Column] = {test: projection.condition.alias(test)}
        for name in where_reads:
            staged[_own(name, tag)] = expressions[name].alias(_own(name, tag))
        parts, masks, raw, common = [], {}, [], {}
        for name in read:
            if name in projection.common:
                source = f"{COMMON_PREFIX}{name}"
                common[source] = expressions[name].alias(source)
                parts.append((name, COMMON, source, ""))
                continue
            if name in masked:
                source, obj = masked[name]
                raw.append(source)
            elif name in flags:
                source, obj = "", flags[name]
            else:
                raise NotFused(f"view column {name!r} cannot be rebuilt from a stored row")
            key, column = f"{tag}:{obj}", f"_ss_m__{tag}_{obj}"
            staged[column] = projection.tests[obj].alias(column)
            masks[key] = column
            parts.append((name, MASKED if source else FLAG, source, key))
        taken = F.col(test) if condition is None else F.col(test) & F.expr(condition)
        return cls(
            slot,
            (tag, condition or ""),
            taken,
            tuple(staged.items()),
            tuple(masks.items()),
            tuple(dict.fromkeys(raw)),
            tuple(common.items()),
            tuple(parts),
            tuple(items),
        )


@dataclass(eq=False)
class FusedPass:
    """The pass of one set of branches, built once for that set (the same branches
    micro-batch after micro-batch reuse its columns, its Java column lists and each
    branch's rebuild)."""

    staged: tuple[Column, ...]
    wide: tuple[Column, ...]
    taken: Column
    """Some branch takes the row."""
    specs: Mapping[str, Mapping[str, Any]]
    """Per branch (its slot), how its rows are rebuilt (JSON: it is stored in links)."""
    _java: dict[str, Any] = field(default_factory=dict, repr=False)
    _rebuilt: dict[str, tuple[Column, HeldColumns, HeldColumns]] = field(
        default_factory=dict, repr=False
    )
    _outputs: dict[tuple[str, int], _Output] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, branches: Sequence[FusedBranch]) -> FusedPass:
        staged: dict[str, Column] = {}
        common: dict[str, Column] = {}
        raw: dict[str, None] = {}
        taken_bits: dict[tuple[str, str], Column] = {}
        mask_bits: dict[str, str] = {}
        for branch in branches:  # equal names are equal columns: the first one serves all
            for name, column in branch.staged:
                staged.setdefault(name, column)
            for name, column in branch.common:
                common.setdefault(name, column)
            raw.update(dict.fromkeys(branch.raw))
            taken_bits.setdefault(branch.taken_key, branch.taken)
            for key, bit in branch.masks:
                mask_bits.setdefault(key, bit)
        taken_index = {key: i for i, key in enumerate(taken_bits)}
        mask_index = {key: i for i, key in enumerate(mask_bits)}
        taken_words = _words(TAKEN, list(taken_bits.values()))
        mask_words = _words(MASK, [F.col(column) for column in mask_bits.values()])
        specs = {
            b.slot: {
                "taken": _bit(TAKEN, taken_index[b.taken_key]),
                "view": [
                    [name, kind, source, *(_bit(MASK, mask_index[key]) if key else ("", 0))]
                    for name, kind, source, key in b.view
                ],
                "items": [list(item) for item in b.items],
            }
            for b in branches
        }
        first = (*(F.col(c) for c in raw), *common.values(), *staged.values())
        kept = (*(F.col(c) for c in (*raw, *common)), *taken_words, *mask_words)
        some = functools.reduce(
            lambda a, b: a | b, (F.col(w) != 0 for w in _names(TAKEN, len(taken_bits)))
        )
        return cls(first, kept, some, specs)

    def over(self, batch: DataFrame) -> DataFrame:
        """Every row some branch takes, stored once with the bits that say whose it is
        and what each may see (a plan from parts built once: no job runs here)."""
        java = self._jvm(batch)
        staged = _with_jdf(batch, batch._jdf.select(java["staged"]))
        wide = _with_jdf(staged, staged._jdf.select(java["wide"]))
        return wide.filter(self.taken)

    def rows(self, wide: DataFrame, slot: str) -> DataFrame:
        """One branch's rows of :meth:`over` (or of its stored copy), as its own plan
        would output them (its columns built on first use, then reused)."""
        if slot not in self._rebuilt:
            taken, view, items = _rebuild_columns(self.specs[slot])
            # held in the JVM: each batch's two selects are a Py4J call each
            self._rebuilt[slot] = (taken, HeldColumns(view), HeldColumns(items))
        taken, held_view, held_items = self._rebuilt[slot]
        return held_items.select(held_view.select(wide.filter(taken)))

    def alike(self, slots: Sequence[str]) -> dict[str, str]:
        """Each of ``slots`` to the first of them whose rows are the same as its own (an
        equal rebuild: the same taken bit, view columns and items; users asking the same
        question with the same visibility), so that their rows are built once."""
        first: dict[str, str] = {}
        out = {}
        for slot in slots:
            spec = json.dumps(self.specs[slot], sort_keys=True)
            out[slot] = first.setdefault(spec, slot)
        return out

    def outputs(self, wide: DataFrame, slots: Sequence[str]) -> Outputs:
        """Several branches' rows of :meth:`over` (or of its stored copy) side by side, one
        row per row of ``wide``: per branch the view columns its computed items read and,
        where each of its output columns is, the shared column, the view column's own
        expression, or its item over those view columns (what one
        delivery job for every listening branch reads; NotFused if an item cannot be
        placed so). An item is computed only where the job picks it, inside a ``CASE
        WHEN`` whose condition starts with its branch's taken bit, so, as in
        :meth:`rows`, it runs only on rows its branch takes, over its own masked view
        columns. No struct per branch is built: the 16 branches' structs of
        ``bench.sharing_users`` made every row of the job 16 structs wider, for nothing
        the pick does not rebuild anyway."""
        parts = []
        for index, slot in enumerate(slots):
            if (slot, index) not in self._outputs:
                self._outputs[slot, index] = _Output.of(self.specs[slot], f"__o{index}")
            parts.append(self._outputs[slot, index])
        views = [c for part in parts for c in part.view]
        return Outputs(
            wide.select("*", *views) if views else wide,
            {slot: part.taken for slot, part in zip(slots, parts, strict=True)},
            {slot: part.col for slot, part in zip(slots, parts, strict=True)},
            {slot: part.columns for slot, part in zip(slots, parts, strict=True)},
            {slot: part.memo for slot, part in zip(slots, parts, strict=True)},
        )

    def _jvm(self, batch: DataFrame) -> dict[str, Any]:
        """The Java column lists, built on first use (a Python list of N columns crosses
        Py4J one element at a time: once per set of branches, not per batch)."""
        if not self._java:
            sc = batch.sparkSession.sparkContext
            self._java.update(staged=_java_seq(sc, self.staged), wide=_java_seq(sc, self.wide))
        return self._java


@dataclass(frozen=True)
class Outputs:
    """Branches' output rows side by side over one frame (:meth:`FusedPass.outputs`),
    per branch slot: which rows are its own, where each of its output columns is, and
    their names in order."""

    frame: DataFrame
    """The pass's rows (``wide``) with every branch's view columns added."""
    taken: Mapping[str, Column]
    col: Mapping[str, Callable[[str], Column]]
    columns: Mapping[str, list[str]]
    memo: Mapping[str, dict]
    """Per branch, a memo for what is built over its place in this layout (delivery's
    class plans: ``Delivery.plan``), kept as long as the layout is."""


@dataclass(frozen=True)
class _Output:
    """One branch's part of :meth:`FusedPass.outputs`, built once per slot and place."""

    taken: Column
    view: tuple[Column, ...]
    """Its view columns, named ``<view column><suffix>``."""
    items: Mapping[str, Column]
    """Each output column: a shared column as stored, or its item over :attr:`view`."""
    columns: list[str]
    memo: dict = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, spec: Mapping[str, Any], suffix: str) -> _Output:
        """A bare view column is placed as its expression over the pass's row (a shared
        column as stored, a masked value under its mask bit), with no column of its own:
        only what a computed item reads is added to the frame (as ``<name><suffix>``).
        64 branches' view columns side by side made the delivery's frame ~1,500 columns
        wide, planned again every batch, for items that are mostly bare columns."""
        word, bit = spec["taken"]
        kinds = {name: (kind, source) for name, kind, source, _w, _b in spec["view"]}
        columns = dict(_view_columns(spec))
        items: dict[str, Column] = {}
        read: dict[str, None] = {}
        for name, sql in spec["items"]:
            bare = bare_column(sql, kinds)
            if bare is not None:
                items[name] = columns[bare]
                continue
            text, reads = suffixed(sql, kinds, suffix)
            items[name] = F.expr(text)
            read.update(dict.fromkeys(reads))
        view = tuple(columns[name].alias(f"{name}{suffix}") for name in read)
        return cls(_is_set(word, bit), view, items, [n for n, _ in spec["items"]])

    def col(self, name: str) -> Column:
        """Output column ``name`` over :attr:`Outputs.frame`."""
        return self.items[name]


def bare_column(sql: str, kinds: Mapping[str, tuple[str, str]]) -> str | None:
    """The view column an item is, when it is one as it stands (``kinds``: view column
    -> (kind, source)); None when the item computes something."""
    tree = sqlglot.parse_one(sql, dialect="spark")
    if isinstance(tree, exp.Column) and not tree.table and tree.name in kinds:
        return tree.name
    return None


def suffixed(sql: str, kinds: Mapping[str, tuple[str, str]], suffix: str) -> tuple[str, list[str]]:
    """An item over the view columns renamed ``<column><suffix>``, and the view columns
    it reads (NotFused when it reads anything but a view column)."""
    read: dict[str, None] = {}

    def own(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column):
            return node
        if node.name not in kinds or node.table:
            raise NotFused(f"item column {node.name!r} is not a view column")
        read[node.name] = None
        return exp.column(f"{node.name}{suffix}", quoted=True)

    text = sqlglot.parse_one(sql, dialect="spark").transform(own).sql(dialect="spark")
    return text, list(read)


@functools.lru_cache(maxsize=8)
def fused_pass(branches: tuple[FusedBranch, ...]) -> FusedPass:
    """The pass of this set of branches (in this order), built once."""
    return FusedPass.of(branches)


def rebuild(wide: DataFrame, spec: Mapping[str, Any]) -> DataFrame:
    """A branch's rows out of a pass (or its stored copy): taken rows only, its view
    columns as its secured view has them, then its SELECT items over those (so an item
    never runs on a row its branch does not take, nor sees a value its masks hide)."""
    taken, view, items = _rebuild_columns(spec)
    return wide.filter(taken).select(*view).select(*items)


def _rebuild_columns(spec: Mapping[str, Any]) -> tuple[Column, list[Column], list[Column]]:
    word, bit = spec["taken"]
    view = [column.alias(name) for name, column in _view_columns(spec)]
    items = [F.expr(sql).alias(name) for name, sql in spec["items"]]
    return _is_set(word, bit), view, items


def _view_columns(spec: Mapping[str, Any]) -> list[tuple[str, Column]]:
    """A branch's view columns as its secured view has them, from the stored row: a
    shared column as stored, a masked value where its mask bit is set (else NULL), a
    hidden flag where it is clear."""
    view = []
    for name, kind, source, mask_word, mask_bit in spec["view"]:
        if kind == COMMON:
            view.append((name, F.col(source)))
        elif kind == MASKED:
            view.append((name, F.when(_is_set(mask_word, mask_bit), F.col(source))))
        else:
            view.append((name, ~_is_set(mask_word, mask_bit)))
    return view


def select_layout(wide: DataFrame, slot: str, layout: Iterable[Sequence[str]]) -> DataFrame:
    """A link written before rows were stored once: the rows of ``wide`` that are
    ``slot``'s (a struct column), as the columns ``layout`` names (``(name, kind,
    source)``: a field of the struct or a shared column; empty: every field)."""
    rows = wide.filter(F.col(slot).isNotNull())
    columns = [
        (F.col(slot).getField(source) if kind == FIELD else F.col(source)).alias(name)
        for name, kind, source in layout
    ]
    return rows.select(*columns) if columns else rows.select(f"{slot}.*")


def _tag(projection: SecuredProjection, slot: str) -> str:
    """Equal for projections of equal visibility (their tests are equal), else the slot."""
    if projection.visibility is None:
        return slot
    return "v" + hashlib.sha256(repr(projection.visibility).encode()).hexdigest()[:16]


def _bit(prefix: str, index: int) -> tuple[str, int]:
    return f"{prefix}{index // 64}", index % 64


def _names(prefix: str, bits: int) -> list[str]:
    return [f"{prefix}{w}" for w in range((bits + 63) // 64)]


def _words(prefix: str, tests: Sequence[Column]) -> list[Column]:
    """``tests`` as bits of long words (bit ``i`` of word ``i // 64`` set where test
    ``i`` is TRUE)."""
    words = []
    for w, name in enumerate(_names(prefix, len(tests))):
        chunk = tests[64 * w : 64 * (w + 1)]
        parts = [
            F.when(test, F.lit(-(1 << 63) if b == 63 else 1 << b).cast("long")).otherwise(
                F.lit(0).cast("long")
            )
            for b, test in enumerate(chunk)
        ]
        words.append(functools.reduce(lambda a, b: a.bitwiseOR(b), parts).alias(name))
    return words


def _is_set(word: str, bit: int) -> Column:
    return F.shiftright(F.col(word), bit).bitwiseAND(F.lit(1)) == 1


def _java_seq(sc: Any, columns: Sequence[Column]) -> Any:
    from pyspark.sql.classic.column import _to_java_column, _to_seq

    return _to_seq(sc, list(columns), _to_java_column)


def _with_jdf(like: DataFrame, jdf: Any) -> DataFrame:
    from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame

    return ClassicFrame(jdf, like.sparkSession)


def _own(column: str, tag: str) -> str:
    return f"{column}__{tag}"


def _plain_select(
    tree: exp.Expr, view: dict[str, str], tag: str
) -> tuple[list[tuple[str, str]], str | None, list[str], list[str]]:
    """The SELECT items of a secured ``tree`` over the view's column names, its WHERE
    over the columns staged for ``tag`` (``<column>__<tag>``), the view columns the
    items read and those the WHERE reads."""
    if not isinstance(tree, exp.Select) or any(
        value not in (None, False, [], ()) for key, value in tree.args.items() if key not in _ONLY
    ):
        raise NotFused("not a plain SELECT ... FROM view [WHERE ...]")
    source = tree.args.get("from_")
    if source is None or not isinstance(source.this, exp.Table):
        raise NotFused("not over one view")
    if any(isinstance(n, exp.Subquery | exp.Select) for n in _below(tree)):
        raise NotFused("a subquery")
    if any(n.is_star and n.parent is not tree for n in _below(tree)):
        raise NotFused("a star inside an expression")

    def renamed(node: exp.Expr, read: dict[str, None], suffix: str) -> exp.Expr:
        def own(column: exp.Column) -> exp.Column:
            real = view.get(column.name.lower())
            if real is None:
                raise NotFused(f"column {column.name!r} is not in the view")
            read[real] = None
            return exp.column(_own(real, suffix) if suffix else real, quoted=True)

        return node.copy().transform(lambda n: own(n) if isinstance(n, exp.Column) else n)

    named: list[tuple[str, exp.Expr]] = []
    for item in tree.expressions:
        if item.is_star:  # every column of the view, in its order
            named += [(c, exp.column(c, quoted=True)) for c in view.values()]
        else:
            value = item.unalias() if isinstance(item, exp.Alias) else item
            named.append((item.alias_or_name, value))
    names = [name.lower() for name, _ in named]
    if not all(names) or len(set(names)) != len(names):
        raise NotFused("an output column without a name of its own")
    if any(_volatile(value) for _, value in named):
        raise NotFused("a SELECT item whose value is not the row's")
    read: dict[str, None] = {}
    items = [(n, renamed(v, read, "").sql(dialect="spark")) for n, v in named]
    where = tree.args.get("where")
    where_reads: dict[str, None] = {}
    condition = None if where is None else renamed(where.this, where_reads, tag)
    return (
        items,
        None if condition is None else condition.sql(dialect="spark"),
        list(read),
        list(where_reads),
    )


def _volatile(node: exp.Expr) -> bool:
    for n in node.walk():
        if isinstance(n, exp.Func):
            name = n.name if isinstance(n, exp.Anonymous) else n.sql_name()
            if name.upper() in _VOLATILE:
                return True
    return False


def _below(tree: exp.Select) -> Iterable[exp.Expr]:
    for node in tree.walk():
        if node is not tree:
            yield node
