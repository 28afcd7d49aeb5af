"""The Security-Compliant Join (paper 1, section 5.4) as one Spark streaming query.

Semantics. Both labelled streams are read by ONE streaming query (a union of the two
sources, each row tagged with its side); its ``foreachBatch`` keeps each side's window
(:class:`~streamshield.engine.queries.window_state.WindowState`, versioned Parquet). The end of
a micro-batch is an instant, and the output at an instant is the CQL ISTREAM of
``L[W_L] JOIN R[W_R] ON L.key = R.key``: the pairs in the join now that were not in it
at the previous instant. Windows only evict, so these are the pairs of the current
windows with at least one tuple that arrived in this batch. Tuples that ingest did not
pass (``reason`` other than PASS) are in no window and never join; NULL keys never
join.

Security, per consumer with effective roles ``q`` (words of
:meth:`~streamshield.policy.encoding.RoleCodec.query`): a pair is visible iff one
effective role reads both tuples and the join attribute on both sides,
``(q & rL_0 & rR_0 & rL_key & rR_key) != 0`` in some word, and no effective role is
denied on either tuple or key (:func:`~streamshield.policy.join_policy.pair_visible`).
Output labels: tuple readers ``rL_0 & rR_0``, denied ``dL_0 | dR_0``; an attribute keeps
its side's label narrowed by the other side's tuple label (readers AND, denied OR);
provenance words ``_ss_src_*`` are OR-ed. A consumer receives NULL for an attribute
its roles cannot read under the output label.

Plans. PF joins the windows on the key and then keeps the pairs some consumer may see;
FP first collects the distinct label classes of each window (policy id, tuple label,
key label: few), decides on the driver which class pairs some consumer may see (the
paper's coarse filtering), broadcasts them, drops tuples whose class has no partner
and joins on key and class. ADAPTIVE counts each policy's sub-window per side (one
small aggregate) and applies the paper's cardinality heuristic per policy pair
(:func:`~streamshield.policy.join_policy.plan`), running PF for some pairs and FP for
the others in the same batch; the last choices are kept per batch id so that a replay
chooses the same. Whatever the plan, every consumer's rows pass the same native label
test: a plan decides the work done, never what is visible.

The join runs once per batch for all subscribers: its result is cached for the
duration of the batch and each subscriber's callback gets its own filtered and masked
view, valid only during the callback. No Python runs per row.

Privacy switches (network/join_switches.py). The join is one node kind
of the shared networks: each subscription is a branch named after its query, with a
privacy switch (``active(name)``; an error reads as off). A subscription whose switch is
off runs no Spark job at that batch, and with every switch off the pairs are not
computed at all: the pairs of an instant nobody may receive are never computed (PrS
section 5), not computed later. The windows still take every batch's tuples (the
input's bookkeeping, not output), so a subscription switched on again gets, at its first
batch, exactly the pairs new at that instant, joined against the windows it would have
had. One exception, as in the other networks: a subscription that *owes* the batch (its
sink delivered it, then a crash came before it was stored: ``owed()``) computes it
whatever its switch says. The windows, class counts and pairs run in the job groups
``<join>:node:windows`` and ``<join>:node:pairs``, each subscription's delivery in
``<join>:<subscription>``.

Levels (paper 2, Algorithm 1). A join built for a query level ``C`` admits into its
windows only tuples whose level ``C`` dominates (before the window, so ``[ROWS n]`` is
the n latest such tuples of the stream, not n per channel: engine/queries/window_state.py), and
a pair's level is the LUB of its two tuples' levels, ``bitwiseOR`` per word
(``engine.views.level_columns.lub_join``). Joins of different levels never share windows: the level
is part of what identifies a shared join. Likewise a join built for ``readers`` (the
query interface builds a join with a ``[ROWS n]`` side so) admits only tuples those
roles may read, and only subscriptions of those roles share it: a tuple hidden from a
subscriber never pushes one she may read out of her window.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streamshield.catalog.streams import StreamDefinition, check_name
from streamshield.engine.frames.local_frames import local_frame
from streamshield.engine.ingest.ingest import PASS
from streamshield.engine.queries.window_state import ARRIVAL, WindowState
from streamshield.engine.session import planning_session
from streamshield.engine.sharing.branch_ledger import BranchLedger, owes
from streamshield.engine.sharing.branch_switch import job_group, switched_on
from streamshield.engine.spark_errors.batch_errors import bounded
from streamshield.engine.store.checkpoint_leftovers import at_checkpoint
from streamshield.engine.store.labelled_store import LabelledStore, labelled_schema, read_stream
from streamshield.engine.store.snapshots import Snapshots
from streamshield.engine.views.labels import allows, denied_column, label_names, reader_column
from streamshield.engine.views.level_columns import level_names, lub_join
from streamshield.engine.views.provenance_columns import provenance_column
from streamshield.engine.views.secured_view import tuple_test
from streamshield.lang.windows import WindowSpec
from streamshield.network.join_switches import join_switches
from streamshield.network.switches import Switch
from streamshield.policy.bitset import Words
from streamshield.policy.encoding import EncodedAccess, RoleCodec
from streamshield.policy.join_policy import JoinClass, Strategy, compatible_pairs, plan
from streamshield.policy.query_level import QueryLevel

SRC_PREFIX = "_ss_src_"
META = ("stream", "provider", "seq", "tid")
SIDES = ("_ss_left_", "_ss_right_")  # column prefixes of the two sides inside the join
PARTNER = "_ss_partner"


class JoinMode(Enum):
    PF = "PF"
    FP = "FP"
    ADAPTIVE = "ADAPTIVE"


@dataclass(frozen=True)
class JoinSide:
    """One input: a labelled stream under an alias, its join attribute and its window."""

    alias: str
    stream: StreamDefinition
    key: str
    window: WindowSpec

    def __post_init__(self) -> None:
        check_name(self.alias, "join alias")
        if self.alias.lower().startswith("_ss_"):
            raise ValueError("aliases starting with _ss_ are reserved")
        if self.key not in self.stream.names:
            raise ValueError(f"join key {self.key!r} is not an attribute of {self.stream.name}")

    @property
    def key_object(self) -> int:
        """The label object of the key (obj i = attribute i, from 1)."""
        return self.stream.names.index(self.key) + 1

    @property
    def event_time(self) -> tuple[str, str] | None:
        name = self.stream.event_time
        return None if name is None else (name, self.stream.types[name])


@dataclass(frozen=True)
class Subscription:
    """One consumer of the join: a branch named ``name`` (its privacy switch's and job
    group's name); ``sink``, when given, is what hands its rows on, asked ``owed()``
    (batches a crash caught between their delivery and their storing)."""

    roles: tuple[str, ...]
    query: Words
    callback: Callable[[DataFrame, int], None] = field(repr=False)
    salt: str = field(repr=False, default_factory=lambda: uuid.uuid4().hex)
    name: str = field(default_factory=lambda: f"sub-{uuid.uuid4().hex[:8]}")
    sink: object = field(repr=False, default=None)


@dataclass(frozen=True)
class JoinStats:
    """What one batch did: window sizes, per-policy sub-windows, plans, result size."""

    batch_id: int
    window_sizes: tuple[int, int]
    new_rows: tuple[int, int]
    policy_counts: tuple[dict[str, int], dict[str, int]]
    strategies: dict[tuple[str, str], Strategy]
    classes: tuple[int, int] = (0, 0)  # FP: label classes with a compatible partner
    compatible: int = 0  # FP: compatible class pairs
    joined_rows: int = 0  # pairs some consumer may see, before per-consumer filtering
    computed: tuple[str, ...] = ()  # the subscriptions computed (switch on, or owed)

    @property
    def pairs(self) -> dict[Strategy, int]:
        """How many policy pairs ran under each strategy."""
        counts = dict.fromkeys(Strategy, 0)
        for strategy in self.strategies.values():
            counts[strategy] += 1
        return counts


class SCJoin:
    """A shared, security-compliant windowed equi-join of two labelled streams."""

    def __init__(
        self,
        spark: SparkSession,
        store: LabelledStore,
        codec: RoleCodec,
        left: JoinSide,
        right: JoinSide,
        root: str | Path,
        mode: JoinMode = JoinMode.ADAPTIVE,
        name: str | None = None,
        level: QueryLevel | None = None,
        feed: Callable[[DataFrame], DataFrame] | None = None,
        active: Callable[[str], bool] = lambda _subscription: True,
        readers: Words | None = None,
    ) -> None:
        """``feed``: what each input's rows pass before anything else (its level
        processor's shepherd); ``active(name)``: subscription ``name``'s privacy switch;
        ``readers``: effective-role words whose tuples alone enter the windows (a join
        with a ``[ROWS n]`` side: its n latest are those its roles may read, so only
        subscriptions of these roles share it); None: every passed tuple."""
        if left.alias.lower() == right.alias.lower():
            raise ValueError("the two sides of a join need different aliases")
        if left.stream.types[left.key] != right.stream.types[right.key]:
            raise ValueError("join keys must have the same type")
        # Its own session: the streaming query and every batch plan in it are planned
        # without constraint propagation (engine/session.py), however ``spark`` is set.
        self.spark, self.store, self.codec = planning_session(spark), store, codec
        self.level, self.feed, self.active, self.readers = level, feed, active, readers
        self.levels = level.width if level is not None else 0
        self.sides = (left, right)
        self.mode = mode
        self.root = Path(root)
        self.name = name or f"scjoin-{uuid.uuid4().hex[:8]}"
        self.windows = tuple(
            WindowState(spark, s.window, self.root / "state" / f"side{i}", s.event_time)
            for i, s in enumerate(self.sides)
        )
        self.choices = Snapshots(self.root / "state" / "choices")
        self.received = BranchLedger(self.root / "state" / "received")
        """The subscriptions computed at least once (the batch of their first). One
        without an entry was never received: its first computed batch holds every pair of its
        windows, not only the new ones (:meth:`open`)."""
        self.subscriptions: list[Subscription] = []
        self.stats: list[JoinStats] = []
        self._batch = threading.RLock()
        """Held through a micro-batch and through a first opening's pairs."""

    # -- consumers --------------------------------------------------------------------

    def subscribe(
        self,
        roles: Iterable[str],
        callback: Callable[[DataFrame, int], None],
        name: str | None = None,
        sink: object = None,
    ) -> Subscription:
        """Deliver, per batch, what these roles may see of the new joined pairs.

        ``name``: the subscription's branch (its switch and job group; the query's name).
        Unknown roles raise here (registration), never widen or narrow silently.
        """
        roles = tuple(sorted(set(roles)))
        if not roles:
            raise ValueError("a subscription needs at least one role")
        subscription = Subscription(roles, self.codec.query(roles), callback, sink=sink)
        if name is not None:
            subscription = replace(subscription, name=name)
        if subscription.name in self.branches:
            raise ValueError(f"a subscription named {subscription.name!r} exists")
        stored = getattr(getattr(sink, "store", None), "batches", None)
        if not self.received.has(subscription.name) and stored is not None and stored():
            self.received.advance(subscription.name, -1)  # received before this ledger was
        self.subscriptions = [*self.subscriptions, subscription]
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self.subscriptions = [s for s in self.subscriptions if s is not subscription]

    @property
    def branches(self) -> dict[str, Subscription]:
        """The subscriptions by name (the join's branches, as a network's)."""
        return {s.name: s for s in self.subscriptions}

    @property
    def streams(self) -> tuple[str, str]:
        return (self.sides[0].stream.name, self.sides[1].stream.name)

    def switches(self) -> tuple[Switch, ...]:
        """Where the privacy switches of the join and its subscriptions sit (PrS
        Algorithm 2, network/join_switches.py): what the API shows."""
        left, right = self.sides
        node = (
            f"{left.stream.name} {left.alias} {left.window.text()} JOIN "
            f"{right.stream.name} {right.alias} {right.window.text()} "
            f"ON {left.alias}.{left.key} = {right.alias}.{right.key}; {self.mode.value}"
        )
        if self.level is not None:
            node += f"; {self.level.text}"
        return join_switches(self.streams, node, self.branches)

    @property
    def last_stats(self) -> JoinStats | None:
        return self.stats[-1] if self.stats else None

    @property
    def output_objects(self) -> list[tuple[str, str]]:
        """``(alias, attribute)`` of output label object i+1 (object 0 is the pair)."""
        return [(s.alias, name) for s in self.sides for name in s.stream.names]

    # -- the streaming query ----------------------------------------------------------

    def start(self, available_now: bool = False) -> StreamingQuery:
        writer = at_checkpoint(
            self._source().writeStream.foreachBatch(bounded(self._process)),
            self.root / "checkpoint",
        ).queryName(self.name)
        trigger = {"availableNow": True} if available_now else {"processingTime": "1 second"}
        return writer.trigger(**trigger).start()

    def _source(self) -> DataFrame:
        structs = [self._input_schema(side) for side in self.sides]
        tagged = []
        for i, side in enumerate(self.sides):
            path = self.store.path(side.stream.name)
            path.mkdir(parents=True, exist_ok=True)
            source = read_stream(self.spark, structs[i], path)
            if self.feed is not None:
                source = self.feed(source)
            parts = [
                F.struct(*source.columns) if j == i else F.lit(None).cast(structs[j])
                for j in range(2)
            ]
            tagged.append(
                source.select(
                    F.lit(i).alias("_ss_side"),
                    *(p.alias(f"_ss_in{j}") for j, p in enumerate(parts)),
                )
            )
        return tagged[0].unionByName(tagged[1])

    def _input_schema(self, side: JoinSide) -> StructType:
        stream = side.stream
        return labelled_schema(
            self.spark, stream.ddl, len(stream.names), self.codec.width, self.levels
        )

    # -- one micro-batch --------------------------------------------------------------

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        with self._batch:
            self._process_batch(batch, batch_id)

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        due = due_subscriptions(self.subscriptions, self.active, batch_id)
        windows = []
        with job_group(self.spark, self.name, "node:windows"):
            for i in range(2):
                fresh = batch.filter(F.col("_ss_side") == i).select(f"_ss_in{i}.*")
                passed = F.col("reason") == PASS
                if self.readers is not None:
                    passed = passed & allows(0, self.readers)
                test = tuple_test(passed, self.level, fresh.columns)
                windows.append(
                    self._prepared(i, self.windows[i].update(fresh.filter(test), batch_id))
                )
            counts, new_counts = self._policy_counts(windows, batch_id)
        strategies = self._plan(counts, batch_id)
        stats = JoinStats(
            batch_id,
            (sum(counts[0].values()), sum(counts[1].values())),
            (new_counts[0], new_counts[1]),
            (counts[0], counts[1]),
            strategies,
        )
        first = [s for s in due if not self.received.has(s.name)]
        known = [s for s in due if s not in first]
        if known and any(new_counts) and strategies:
            stats = self._hand_over(known, windows, strategies, batch_id, stats)
        if first and strategies:  # their first instant: every pair of the windows is new
            stats = self._hand_over(first, windows, strategies, batch_id, stats, every=True)
        for subscription in first:  # received from now on (one write, once)
            self.received.advance(subscription.name, batch_id)
        self.choices.save(batch_id, [[pl, pr, s.value] for (pl, pr), s in strategies.items()])
        self.stats.append(stats)

    def open(self, name: str) -> None:
        """Subscription ``name``'s switch may have opened: if it was never received and
        its switch is on, it gets every pair of the windows as they stand after the
        newest micro-batch, under that batch's id, without waiting for the next one.
        Why: a query registered after the data reads every labelled batch still kept
        (docs/administration.md); the windows took those batches while nobody received
        the query, so its first instant's ISTREAM is every pair they hold. Before the
        join's first micro-batch nothing is done: that batch is its first instant."""
        with self._batch:
            subscription = self.branches.get(name)
            if subscription is None or self.received.has(name):
                return
            if not switched_on(self.active, name):
                return
            current = [
                state.current(self._input_schema(side))
                for state, side in zip(self.windows, self.sides, strict=True)
            ]
            if any(c is None for c in current):
                return  # no micro-batch yet: its first one is this subscription's first
            batch_id = max(c[0] for c in current if c is not None)
            with job_group(self.spark, self.name, "node:windows"):
                windows = [self._prepared(i, c[1]) for i, c in enumerate(current) if c]
                counts, _new_counts = self._policy_counts(windows, batch_id)
            strategies = self._plan(counts, batch_id + 1)  # the newest choices
            stats = JoinStats(
                batch_id,
                (sum(counts[0].values()), sum(counts[1].values())),
                (0, 0),
                (counts[0], counts[1]),
                strategies,
            )
            if strategies:
                stats = self._hand_over([subscription], windows, strategies, batch_id, stats, True)
            self.received.advance(name, batch_id)
            self.stats.append(stats)

    def _hand_over(
        self,
        due: list[Subscription],
        windows: Sequence[DataFrame],
        strategies: dict[tuple[str, str], Strategy],
        batch_id: int,
        stats: JoinStats,
        every: bool = False,
    ) -> JoinStats:
        """The pairs some due subscription may see, computed once and cached while each
        due subscription's callback takes its own view (in its own job group). ``every``:
        all pairs of the windows, not only those new at this batch (a first instant)."""
        queries = list({s.query: None for s in due})
        pairs: DataFrame | None = None
        try:
            with job_group(self.spark, self.name, "node:pairs"):
                new = F.lit(True) if every else _new(batch_id)
                joined, stats = self._join(windows, strategies, queries, new, stats)
                pairs = joined.persist()
                stats = replace(stats, joined_rows=pairs.count())
            for subscription in due:
                with job_group(self.spark, self.name, subscription.name):
                    subscription.callback(self._deliver(pairs, subscription), batch_id)
        finally:
            if pairs is not None:
                pairs.unpersist()
        return replace(stats, computed=(*stats.computed, *(s.name for s in due)))

    def _prepared(self, i: int, window: DataFrame) -> DataFrame:
        """A window with every column under its side's prefix, attributes in one struct."""
        p, side = SIDES[i], self.sides[i]
        n = len(side.stream.names)
        labels = [F.col(c).alias(p + c[4:]) for c in label_names(n + 1, self.codec.width)]
        sources = [
            F.col(c).alias(p + c[4:])
            for c in window.columns
            if c.startswith(SRC_PREFIX) or c in level_names(self.levels)
        ]
        return window.select(
            F.col(side.key).alias(p + "key"),
            F.col(ARRIVAL).alias(p + "arr"),
            F.col("policy_id").alias(p + "pol"),
            *(F.col(m).alias(p + m) for m in META),
            F.struct(*side.stream.names).alias(p + "attrs"),
            *labels,
            *sources,
        )

    def _policy_counts(
        self, windows: Sequence[DataFrame], batch_id: int
    ) -> tuple[list[dict[str, int]], list[int]]:
        """Per side: tuples per policy in the window, and how many arrived in this batch."""
        parts = [
            w.groupBy(F.lit(i).alias("side"), F.col(p + "pol").alias("pol")).agg(
                F.count("*").alias("n"),
                F.sum((F.col(p + "arr") == batch_id).cast("long")).alias("new"),
            )
            for i, (w, p) in enumerate(zip(windows, SIDES, strict=True))
        ]
        counts: list[dict[str, int]] = [{}, {}]
        new = [0, 0]
        for row in parts[0].unionByName(parts[1]).collect():
            new[row["side"]] += row["new"] or 0
            if row["pol"] is not None:
                counts[row["side"]][row["pol"]] = row["n"]
        return counts, new

    def _plan(
        self, counts: Sequence[dict[str, int]], batch_id: int
    ) -> dict[tuple[str, str], Strategy]:
        if self.mode is not JoinMode.ADAPTIVE:
            fixed = Strategy(self.mode.value)
            return {(a, b): fixed for a in counts[0] for b in counts[1]}
        saved = self.choices.before(batch_id) or []
        last = {(pl, pr): Strategy(s) for pl, pr, s in saved}
        return plan(counts[0], counts[1], last)

    # -- plans ------------------------------------------------------------------------

    def _join(
        self,
        windows: Sequence[DataFrame],
        strategies: dict[tuple[str, str], Strategy],
        queries: Sequence[Words],
        new: Column,
        stats: JoinStats,
    ) -> tuple[DataFrame, JoinStats]:
        """``new``: which pairs are emitted (ISTREAM: those new at this batch)."""
        left, right = windows
        pf = {pair for pair, s in strategies.items() if s is Strategy.PF}
        fp = {pair for pair, s in strategies.items() if s is Strategy.FP}
        parts = []
        if pf:
            parts.append(self._probe_and_filter(left, right, pf, len(fp) > 0, queries, new))
        if fp:
            part, classes, compatible = self._filter_and_probe(left, right, fp, queries, new)
            stats = replace(stats, classes=classes, compatible=compatible)
            if part is not None:
                parts.append(part)
        columns = left.columns + right.columns
        if not parts:
            return left.join(right, F.lit(False)).select(columns), stats
        return reduce(DataFrame.unionByName, (p.select(columns) for p in parts)), stats

    def _probe_and_filter(
        self,
        left: DataFrame,
        right: DataFrame,
        pairs: set[tuple[str, str]],
        restrict: bool,
        queries: Sequence[Words],
        new: Column,
    ) -> DataFrame:
        L, R = SIDES
        joined = left.join(right, (F.col(L + "key") == F.col(R + "key")) & new)
        if restrict:  # the other policy pairs run as FP
            table = local_frame(self.spark, sorted(pairs), _POLICY_PAIR)
            joined = joined.join(F.broadcast(table), [L + "pol", R + "pol"], "left_semi")
        return joined.filter(_any(self._visible(q) for q in queries))

    def _filter_and_probe(
        self,
        left: DataFrame,
        right: DataFrame,
        pairs: set[tuple[str, str]],
        queries: Sequence[Words],
        new: Column,
    ) -> tuple[DataFrame | None, tuple[int, int], int]:
        L, R = SIDES
        keys = [self._class_columns(0), self._class_columns(1)]
        policies = [sorted({p[0] for p in pairs}), sorted({p[1] for p in pairs})]
        # the distinct classes of both windows in one small job
        parts = [
            w.filter(F.col(p + "pol").isin(pol))
            .select(F.lit(i).alias("_ss_side"), *(F.col(c).alias(f"c{n}") for n, c in enumerate(k)))
            .distinct()
            for i, (w, p, k, pol) in enumerate(
                zip((left, right), SIDES, keys, policies, strict=True)
            )
        ]
        found: list[list[tuple]] = [[], []]
        for row in sorted(parts[0].unionByName(parts[1]).collect(), key=repr):
            found[row[0]].append(tuple(row[1:]))
        compatible = {
            (i, j)
            for i, j in compatible_pairs(
                [self._join_class(0, c) for c in found[0]],
                [self._join_class(1, c) for c in found[1]],
                queries,
            )
            if (found[0][i][0], found[1][j][0]) in pairs
        }
        used = [sorted({ij[0] for ij in compatible}), sorted({ij[1] for ij in compatible})]
        if not compatible:
            return None, (0, 0), 0
        tables = [
            local_frame(
                self.spark,
                [(*found[s][i], i) for i in used[s]],
                StructType(
                    [StructField(keys[s][0], StringType())]
                    + [StructField(c, LongType()) for c in keys[s][1:]]
                    + [StructField(SIDES[s] + "cls", LongType())]
                ),
            )
            for s in range(2)
        ]
        partners = local_frame(self.spark, sorted(compatible), _CLASS_PAIR)
        tagged_left = left.join(F.broadcast(tables[0]), keys[0]).join(
            F.broadcast(partners), L + "cls"
        )
        tagged_right = right.join(F.broadcast(tables[1]), keys[1])
        joined = tagged_left.join(
            tagged_right,
            (F.col(L + "key") == F.col(R + "key")) & (F.col(PARTNER) == F.col(R + "cls")) & new,
        )
        return joined, (len(used[0]), len(used[1])), len(compatible)

    def _class_columns(self, i: int) -> list[str]:
        p, k = SIDES[i], self.sides[i].key_object
        words = range(self.codec.width)
        return [
            p + "pol",
            *(p + f"r0_{w}" for w in words),
            *(p + f"d0_{w}" for w in words),
            *(p + f"r{k}_{w}" for w in words),
            *(p + f"d{k}_{w}" for w in words),
        ]

    def _join_class(self, i: int, row: tuple) -> JoinClass:
        width = self.codec.width
        words = [tuple(row[1 + n * width : 1 + (n + 1) * width]) for n in range(4)]
        return JoinClass(EncodedAccess(words[0], words[1]), EncodedAccess(words[2], words[3]))

    # -- labels and delivery ----------------------------------------------------------

    def _word(self, i: int, kind: str, obj: int, w: int) -> Column:
        return F.col(f"{SIDES[i]}{kind}{obj}_{w}")

    def _visible(self, query: Words) -> Column:
        """The pair test of :func:`~streamshield.policy.join_policy.pair_visible`, native."""
        keys = (self.sides[0].key_object, self.sides[1].key_object)
        reads, clear = [], []
        for w, q in enumerate(query):
            if not q:
                continue
            readers = [self._word(i, "r", obj, w) for i in range(2) for obj in (0, keys[i])]
            denied = [self._word(i, "d", obj, w) for i in range(2) for obj in (0, keys[i])]
            reads.append(reduce(Column.bitwiseAND, readers, F.lit(q)) != 0)
            clear.append(reduce(Column.bitwiseOR, denied).bitwiseAND(F.lit(q)) == 0)
        if not reads:
            return F.lit(False)
        return F.coalesce(_any(reads) & _all(clear), F.lit(False))

    def _output_labels(self) -> list[tuple[int, int, Column, Column]]:
        """``(obj, word, readers, denied)`` of the joined tuple and of every attribute."""
        out = []
        for w in range(self.codec.width):
            out.append(
                (
                    0,
                    w,
                    self._word(0, "r", 0, w).bitwiseAND(self._word(1, "r", 0, w)),
                    self._word(0, "d", 0, w).bitwiseOR(self._word(1, "d", 0, w)),
                )
            )
        obj = 0
        for i, side in enumerate(self.sides):
            for a in range(1, len(side.stream.names) + 1):
                obj += 1
                for w in range(self.codec.width):
                    readers = self._word(i, "r", a, w).bitwiseAND(self._word(1 - i, "r", 0, w))
                    denied = self._word(i, "d", a, w).bitwiseOR(self._word(1 - i, "d", 0, w))
                    out.append((obj, w, readers, denied))
        return sorted(out, key=lambda t: (t[0], t[1]))

    def _deliver(self, pairs: DataFrame, subscription: Subscription) -> DataFrame:
        """One consumer's rows: visible pairs, unreadable attributes NULL, labels, origin.

        Every mask repeats the pair test, so a user predicate that Spark evaluates
        before the filter only ever sees NULL for a hidden pair.
        """
        query = subscription.query
        visible = self._visible(query)
        labels = self._output_labels()
        by_obj: dict[int, list[tuple[Column, Column]]] = {}
        for obj, _w, readers, denied in labels:
            by_obj.setdefault(obj, []).append((readers, denied))
        structs, origin = [], []
        obj = 0
        for i, side in enumerate(self.sides):
            p, fields = SIDES[i], []
            tid_obj = 0
            for name in side.stream.names:
                obj += 1
                shown = visible & _allows(by_obj[obj], query)
                fields.append(F.when(shown, F.col(p + "attrs")[name]).alias(name))
                if name == side.stream.tid:
                    tid_obj = obj
            structs.append(F.struct(*fields).alias(side.alias))
            channel = F.concat_ws("\x1f", F.lit(subscription.salt), p + "stream", p + "provider")
            tid_shown = visible & _allows(by_obj[tid_obj], query)
            origin += [
                F.sha2(channel, 256).alias(f"_ss_{side.alias}_channel"),
                F.col(p + "seq").alias(f"_ss_{side.alias}_seq"),
                F.when(tid_shown, F.col(p + "tid")).alias(f"_ss_{side.alias}_tid"),
                F.col(p + "pol").alias(f"_ss_{side.alias}_policy"),
            ]
        label_columns = []
        for obj, w, readers, denied in labels:
            label_columns += [
                readers.alias(reader_column(obj, w)),
                denied.alias(denied_column(obj, w)),
            ]
        sources = sorted(
            {c[len(p) :] for c in pairs.columns for p in SIDES if c.startswith(p + "src_")}
        )
        provenance = [
            reduce(
                Column.bitwiseOR,
                [F.col(p + s) for p in SIDES if p + s in pairs.columns],
            ).alias("_ss_" + s)
            for s in sources
        ]
        names = level_names(self.levels)  # the pair's level: LUB (OR) of its tuples'
        level = lub_join(*([F.col(p + n[4:]) for n in names] for p in SIDES))
        return pairs.filter(visible).select(*structs, *label_columns, *provenance, *level, *origin)


_POLICY_PAIR = StructType(
    [StructField(SIDES[0] + "pol", StringType()), StructField(SIDES[1] + "pol", StringType())]
)
_CLASS_PAIR = StructType(
    [StructField(SIDES[0] + "cls", LongType()), StructField(PARTNER, LongType())]
)


def pair_columns(
    sides: Sequence[JoinSide], width: int, levels: int, provenance_words: int
) -> tuple[str, ...]:
    """The label, provenance, level and origin columns of the pairs an SCJoin of
    ``sides`` hands a subscriber (``SCJoin._deliver``, one struct per alias besides):
    labels of ``width`` words, ``levels`` level words, provenance made
    ``provenance_words`` constant words. What a join query is secured over
    (lang/pair_labels.py)."""
    objects = 1 + sum(len(side.stream.names) for side in sides)
    labels = [
        name
        for obj in range(objects)
        for w in range(width)
        for name in (reader_column(obj, w), denied_column(obj, w))
    ]
    provenance = [provenance_column(w) for w in range(provenance_words)]
    origins = [
        f"_ss_{side.alias}_{what}" for side in sides for what in ("channel", "seq", "tid", "policy")
    ]
    return (*labels, *provenance, *level_names(levels), *origins)


def due_subscriptions(
    subscriptions: Iterable[Subscription], active: Callable[[str], bool], batch_id: int
) -> list[Subscription]:
    """The subscriptions batch ``batch_id`` is computed for: switch on (an error asking
    it reads as off), or owing the batch (delivered before a crash, never stored: computed
    whatever its switch says; a replay reuses the batch id)."""
    return [
        s for s in subscriptions if switched_on(active, s.name) or owes(s, batch_id - 1, batch_id)
    ]


def _new(batch_id: int) -> Column:
    """ISTREAM: a pair is new iff one of its tuples arrived in this batch."""
    return (F.col(SIDES[0] + "arr") == batch_id) | (F.col(SIDES[1] + "arr") == batch_id)


def _allows(words: Sequence[tuple[Column, Column]], query: Words) -> Column:
    meets = [(r.bitwiseAND(F.lit(q)) != 0) for (r, _), q in zip(words, query, strict=True) if q]
    misses = [(d.bitwiseAND(F.lit(q)) == 0) for (_, d), q in zip(words, query, strict=True) if q]
    if not meets:
        return F.lit(False)
    return F.coalesce(_any(meets) & _all(misses), F.lit(False))


def _any(conditions: Iterable[Column]) -> Column:
    items = list(conditions)
    return reduce(Column.__or__, items) if items else F.lit(False)


def _all(conditions: Iterable[Column]) -> Column:
    items = list(conditions)
    return reduce(Column.__and__, items) if items else F.lit(True)
