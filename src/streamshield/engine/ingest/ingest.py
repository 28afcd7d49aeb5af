"""Secure ingest: stream elements in, labelled tuples out (trusted; DESIGN.md section 2).

For every micro-batch:

1. Each element gets its *gap*: how many sps of its channel precede it in this batch
   (order never comes from arrival, only from ``seq``).
2. One job collects the batch's sps (few) and the tuples summarised per (channel,
   declared ts, declared csn) with their smallest and largest seq, aggregated where the
   rows are (no shuffle or sort of the rows). The driver finds each summary's gap from
   the sps' seqs; a channel with a declaration on both sides of one of its sps has its
   gaps counted by a window over its elements instead (a second, rare job).
3. The driver replays the reference :class:`PolicyTracker` over sps and summaries in
   seq order. That yields, per summary, the reason and policy, and per gap the seq
   from which a reset (Fig. 10, line 16) denies the rest of the segment. The reference
   code itself decides, so the engine cannot drift from the specification.
4. Tuples join these small decision and policy tables (broadcast; a decision names its
   gap by the seqs of the sps around it) and their labels are
   computed natively from the policy's compiled rules (or taken from the table when
   the policy ignores the tuple id and was evaluated on the driver).
5. Every tuple gets its Chinese-Wall level words ``_ss_lvl_*`` from the catalog's level
   assignment, read once per batch (a literal per channel, ``engine.views.level_columns``): a level
   change applies to the batches labelled after it. Providers never choose it.

Unknown streams' elements are ignored here: the landing zone rejects them first.

A small batch of tuples under policies already in force is labelled in *one* pass
(:meth:`Ingest.guess_batch`): the driver guesses that it holds no sp, no late tuple and
only declarations that passed in the previous batch, decides those with the reference
tracker on the batch's starting state (each must pass and leave the tracker as it was),
and the write job itself checks the guess (``DataFrame.observe``: misses, and each
channel's newest seq for its state). A wrong guess is thrown away before the batch is
installed and the batch is labelled by the passes above; a right one writes exactly the
rows they would have written (the same decisions, from the same tracker).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.frames.held_columns import HeldColumns
from streamshield.engine.frames.local_frames import arrow_type, as_python, local_frame
from streamshield.engine.gc_pause import gc_paused
from streamshield.engine.ingest.policy_registry import PolicyRegistry
from streamshield.engine.ingest.tracker_state import ChannelState
from streamshield.engine.views import labels
from streamshield.engine.views.level_columns import assigned_level
from streamshield.engine.views.scan_summary import HI, LO, summary_columns, with_scan_summary
from streamshield.lang.wire import sp_of_columns
from streamshield.policy import sp_patterns
from streamshield.policy.elements import Channel
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.level_assignment import LevelAssignment
from streamshield.policy.policy import Combine, Policy, PolicyError, ServerPolicy
from streamshield.policy.punctuation import SecurityPunctuation
from streamshield.policy.reader_range import NO_READER, label_summary
from streamshield.policy.roles import RoleHierarchy
from streamshield.policy.rules import Layout, RuleSet, compile_rules, label_words
from streamshield.policy.shield import Reason
from streamshield.policy.stored_words import unstored
from streamshield.policy.tag_policies import server_policy_for

ELEMENT_SCHEMA = StructType(
    [
        StructField("type", StringType()),
        StructField("stream", StringType()),
        StructField("provider", StringType()),
        StructField("seq", LongType()),
        StructField("tid", StringType()),
        StructField(
            "policy", StructType([StructField("ts", LongType()), StructField("csn", LongType())])
        ),
        StructField("values", StringType()),
        StructField("ts", LongType()),
        StructField("sn", LongType()),
        StructField(
            "ddp",
            StructType([StructField(n, StringType()) for n in ("streams", "tuples", "attributes")]),
        ),
        StructField(
            "srp",
            StructType(
                [
                    StructField("roles", StringType()),
                    StructField("grant_option", BooleanType()),
                    StructField("privilege", StringType()),  # absent: READ (lang/wire.py)
                ]
            ),
        ),
        StructField("sign", StringType()),
        StructField("immutable", BooleanType()),
    ]
)
log = logging.getLogger("streamshield.engine")
CHANNEL = ["stream", "provider"]
PASS = Reason.PASS.value
# A compiled policy: its rule rows, and when they ignore the tid its finished label words
# and their scan summary (lo, hi)
Body = tuple[list[tuple], list[int] | None, tuple[int, int] | None]
Compiled = dict[tuple[str, str], Body]  # per (stream, policy id)
SP_FIELDS = ("type", "stream", "provider", "seq", "ts", "sn", "ddp", "srp", "sign", "immutable")
SP_COLUMNS = (
    "ts",
    "sn",
    "ddp.streams",
    "ddp.tuples",
    "ddp.attributes",
    "srp.roles",
    "srp.grant_option",
    "srp.privilege",
    "sign",
    "immutable",
)
"""An sp's own fields as :func:`wire.sp_of_columns` reads them, after its channel and seq."""
_SP_BODY = ("ts", "sn", "ddp", "srp", "sign", "immutable")
Sps = dict[Channel, list[tuple[int, SecurityPunctuation | None]]]
"""A batch's sps per channel in seq order; None: an sp that does not read (dropped)."""
_RESETS = (Reason.OUT_OF_ORDER, Reason.INCOMPLETE_POLICY, Reason.INVALID_POLICY)
GUESSED_CHANNELS = 64
"""At most this many channels in a one-pass guess (one observed aggregate each)."""
LITERAL_CHANNELS = 256
"""Up to this many channels, a batch's processed seqs are a map literal, not a table."""
GUESSED_DECLARATIONS = 256
"""No guess after a batch whose tuples passed under more declarations than this (each is
tried on a copy of its channel's tracker on the driver)."""
KEPT_DECISIONS = 4_096
"""A decision table of up to this many rows keeps its frame for the next batch, which
reuses it when its table is equal (a guess's decisions stay the same while the providers'
policies do)."""
_FIRST, _LAST = -(2**63), 2**63 - 1  # the open ends of a channel's first and last gap
_COMPILED_LIMIT = 100_000  # compiled policies kept across batches per stream (a few MB)
_COMPILED_STREAMS = 1_024  # (stream, definition, server policy) entries kept
DRIVER_WRITE_CELLS = 1 << 22
"""Up to this many cells (tuples x labelled columns: 10k tuples at 500 roles' 192 label
words) a batch collected flat is written from the driver (:attr:`Ingest.write_on_driver`),
a few tens of MB of Arrow."""
FLAT_SHARE = 2
"""A batch is collected flat (:meth:`Ingest._collect`) after one whose tuples had at
least one declaration per this many of them: there the grouped aggregate reduces the rows
by at most this factor and costs a shuffle and more jobs. At 1 sp / 10 or fewer sps it
would move ten times the rows or more to the driver: grouped."""


@dataclass
class Ingest:
    """The trusted labelling step, configured with the catalog's streams and roles."""

    spark: SparkSession
    hierarchy: RoleHierarchy
    streams: dict[str, StreamDefinition]
    server: Mapping[str, ServerPolicy] = field(default_factory=dict)
    """Server policies by scope (a stream, or a stream-name glob), tags unresolved; the
    policy in force for a stream is :meth:`server_policy` (replace it with
    :meth:`use_server_policies`)."""
    registry: PolicyRegistry | None = None
    levels: Callable[[], LevelAssignment | None] | None = None
    """The catalog's stream and channel levels now (None: levels are off, no level
    columns). Read once per batch; a failing read fails the batch, never labels it
    without its levels."""

    def __post_init__(self) -> None:
        # read-only: a policy changed in place would go unseen by server_policy's memo
        self.server = MappingProxyType(dict(self.server))
        self.codec = RoleCodec(self.hierarchy)
        self._layout_lock = threading.Lock()  # a batch is labelled with one hierarchy
        self._cached: list[DataFrame] = []
        self._in_force: dict[str, Policy] = {}  # policies of the current batch
        self._projections: dict[
            tuple, tuple[list[Column], list[Column], list[tuple[str, Column]]]
        ] = {}
        self._compiled: dict[tuple, dict[str, Body | None]] = {}
        """Compiled policies per (stream, definition, server policy), by content id, kept
        across batches (see :meth:`_compile`)."""
        self._effective: dict[str, tuple[object, object, ServerPolicy | PolicyError | None]] = {}
        """Per stream, the definition and server policies last seen and the server policy
        in force they gave (:meth:`server_policy`)."""
        self._bodies: dict[str, tuple[object, object, dict[str, Body | None]]] = {}
        """Per stream, the definition and server policy last seen and their entry of
        ``_compiled`` (:meth:`_stream_bodies`)."""
        self._summary: list[Column] | None = None
        self._held_label: dict[tuple, tuple[list[Column], HeldColumns, HeldColumns]] = {}
        """:meth:`_label`'s two projections per stream, fold, summary and unstored words,
        held in the JVM (engine/frames/held_columns.py), with the cached list they came from."""
        self._element_cols: list[Column] | None = None
        self._decision_cols: tuple[Column, dict[str, Column]] | None = None
        """Columns that name columns only, built once rather than per batch (each is a
        few py4j calls; a small batch's planning is on its landing's way to the
        subscriber)."""
        self._mark_cols: tuple[Column, Column, Column, Column] | None = None
        self._known: tuple[tuple[str, ...], Column] | None = None
        self._keys: dict[tuple[str, str], Column] = {}
        self._streams: dict[tuple[str, bool], Column] = {}
        self._observed: tuple[tuple, list[Column]] | None = None
        self._decided_table: tuple[pa.Table, DataFrame] | None = None
        """Columns and the decision table's frame a batch needs, built once and kept while
        they stay the same (the known streams, channels, guessed decisions), not per
        batch: each is Py4J calls, and a frame is also an analysis by the JVM (the
        decision table's ``createDataFrame`` and broadcast hint were two frames and ~40
        Py4J calls), all on a small landing's way to its subscriber
        (``bench.landing_latency``)."""
        self.passes: dict[str, float] = {}
        """Seconds of each pass of the last batch (driver wall time; the bench prints them)."""
        self.write_on_driver = False
        """The last batch labelled by the passes (for a caller that can write from the
        driver, :meth:`label_batch`) is to be written from the driver (its frames
        collected as Arrow and written by pyarrow, engine/store/small_writes.py) whatever its
        landed bytes: it was collected flat with at most :data:`DRIVER_WRITE_CELLS` cells,
        so one row per tuple already came to the driver once, and Spark's write job of
        the same rows cost more. Its frames are left unsorted for that write to sort.
        Only speed depends on it."""
        self.flat = False
        """Collect the next batch's tuples flat (:meth:`_collect`): the last one labelled by
        the passes had about one declaration per tuple. Only speed depends on it."""
        self._passed: dict[Channel, set[tuple[int, int]]] = {}
        """The declarations (ts, csn) that passed per channel in the last batch labelled
        by the passes: what :meth:`guess_batch` expects next (only a guess, checked
        against the tracker; empty past :data:`GUESSED_DECLARATIONS`)."""

    def release(self) -> None:
        """Drop what the last batch cached, once its output is written.

        Never raises: it runs in a ``finally`` and must not replace the batch's own error
        (a stopping query interrupts ``unpersist``); a cache left behind only costs memory.
        """
        for frame in self._cached:
            try:
                frame.unpersist()
            except Exception as err:
                log.warning("could not drop a cached batch (%s)", type(err).__name__)
        self._cached.clear()

    def layout(self, stream: str) -> Layout:
        return Layout(self.streams[stream].names, self.codec.width)

    # -- per micro-batch -------------------------------------------------------------------

    def use_hierarchy(self, hierarchy: RoleHierarchy) -> None:
        """Labels the next batch with ``hierarchy`` (a role created, an edge changed).

        Only a hierarchy that keeps the stored bit layout is accepted (ValueError
        otherwise): labels already written must keep meaning the same roles. Waits for
        a batch being labelled to finish, so no batch mixes two hierarchies.
        """
        if not hierarchy.keeps_layout_of(self.hierarchy):
            raise ValueError("the new role hierarchy changes the label layout")
        with self._layout_lock:
            self.hierarchy, self.codec = hierarchy, RoleCodec(hierarchy)
            self._compiled.clear()  # role members may differ under the new hierarchy
            self._bodies.clear()

    def use_server_policies(self, server: Mapping[str, ServerPolicy]) -> None:
        """Labels the next batch under these server policies (by scope). Waits for a
        batch being labelled, so no batch mixes two sets; tuples already labelled keep
        their labels."""
        with self._layout_lock:
            self.server = MappingProxyType(dict(server))

    def server_policy(self, stream: str) -> ServerPolicy | None:
        """The server policy in force for ``stream`` as its definition stands now: every
        policy whose scope takes in the stream, ``TAGGED`` resolved against the
        definition's tags (:func:`~streamshield.policy.tag_policies.server_policy_for`).

        Resolved again only when the definition (a tag changed) or the policies changed,
        and then the same object while they stay: compiled policies are kept per that
        object (:meth:`_stream_bodies`). PolicyError when policies of both modes apply
        (the stream's tuples are then denied)."""
        definition, server = self.streams[stream], self.server
        seen = self._effective.get(stream)
        if seen is None or seen[0] is not definition or seen[1] is not server:
            found: ServerPolicy | PolicyError | None
            try:
                found = server_policy_for(server, stream, definition.names, definition.tags_of)
            except PolicyError as err:
                found = err
            seen = self._effective[stream] = (definition, server, found)
        if isinstance(seen[2], PolicyError):
            raise seen[2]
        return seen[2]

    def _mode(self, stream: str) -> Combine:
        """The combine mode of the stream's server policy in force (INTERSECT without one
        or when it cannot be used: its tuples are denied then anyway)."""
        try:
            server = self.server_policy(stream)
        except PolicyError:
            return Combine.INTERSECT
        return server.mode if server is not None else Combine.INTERSECT

    def label_batch(
        self,
        batch: DataFrame,
        states: dict[Channel, ChannelState],
        driver_write: bool = False,
    ) -> dict[str, DataFrame]:
        """Labelled tuples per stream for one batch; ``states`` is advanced in place.

        ``driver_write``: the caller writes the frames from the driver when
        :attr:`write_on_driver` says so after this call (they are then unsorted: that
        write sorts them); otherwise they are never set to be, and are sorted."""
        with self._layout_lock, gc_paused():
            return self._label_batch(batch, states, driver_write)

    def _label_batch(
        self, batch: DataFrame, states: dict[Channel, ChannelState], driver_write: bool
    ) -> dict[str, DataFrame]:
        # A snapshot: the server adds streams to the shared mapping while a batch runs.
        streams = tuple(self.streams)
        self.passes = {}
        began = time.perf_counter()
        known = batch.filter(self._known_column(streams))
        elements = self._marked(known, states).cache()
        self._cached.append(elements)
        sps, summaries, flat_rows = self._collect(elements)
        self.write_on_driver = (
            driver_write
            and flat_rows is not None
            and flat_rows * self._row_cells(streams) <= DRIVER_WRITE_CELLS
        )
        began = self.lap("read+gaps+summaries", began)
        decisions, policies = self._decide(sps, summaries, states)
        self._passed = defaultdict(set)
        for stream, provider, _gap, ts, csn, reason, *_ in decisions:
            if reason == PASS:  # after sps too: the guess tries each on the tracker first
                self._passed[Channel(stream, provider)].add((ts, csn))
        if sum(map(len, self._passed.values())) > GUESSED_DECLARATIONS:
            self._passed = {}  # a policy per few tuples: each batch brings new ones
        began = self.lap("decide (driver)", began)
        if self.registry is not None:
            self.registry.save(self._in_force.values())
        self._in_force.clear()
        began = self.lap("policy registry", began)
        tuples = elements.filter(~F.col("is_sp"))
        decided = self._join_decisions(tuples, decisions, policies, sps)
        began = self.lap("decision table", began)
        out = self._per_stream(decided, streams, policies, sort=not self.write_on_driver)
        self.lap("label plan", began)
        return out

    def _row_cells(self, streams: Sequence[str]) -> int:
        """The most columns a labelled row of ``streams`` has (its label words, values,
        channel, seq, tid, reason, policy id and scan summary): what one tuple costs a
        driver write."""
        most = 0
        for stream in streams:
            layout = self.layout(stream)
            words = len(labels.label_names(len(layout.objects), layout.width))
            most = max(most, words + len(self.streams[stream].names) + 8)
        return most

    def _per_stream(
        self,
        decided: DataFrame,
        streams: tuple[str, ...],
        policies: Compiled,
        tuples_only: bool = False,
        sort: bool = True,
    ) -> dict[str, DataFrame]:
        """Each stream's labelled rows (``tuples_only``: of its tuples only, not its sps),
        with its level words and scan summaries.

        As few DataFrame operations as the plan needs: each one is analysed by the JVM
        over the whole plan so far (~10 ms apiece for a small batch, on a landing's way
        to its subscriber), so the scan summary, the unstored words and the level words
        ride in the two label projections rather than in selects and a drop of their own.
        """
        assignment = self.levels() if self.levels is not None else None
        out = {}
        for stream in streams:
            level = assigned_level(assignment, stream) if assignment is not None else []
            per_tuple = any(s == stream and f is None for (s, _), (_, f, _) in policies.items())
            rows = decided.filter(self._stream_column(stream, tuples_only))
            if per_tuple:
                labelled = self._label(rows, stream, per_tuple, level=level)
                out[stream] = self._summarised(labelled, stream, sort)
            else:
                # the rows then carry the stored words only, not every word of their
                # policy (192 at 500 roles), into the sort
                labelled = self._label(
                    rows,
                    stream,
                    per_tuple,
                    summary=True,
                    unstored=frozenset(self._unstored(stream, policies)),
                    level=level,
                )
                out[stream] = labelled.sortWithinPartitions(LO) if sort else labelled
        return out

    def _stream_column(self, stream: str, tuples_only: bool) -> Column:
        """:meth:`_per_stream`'s filter of one stream's rows, built once per stream."""
        key = (stream, tuples_only)
        column = self._streams.get(key)
        if column is None:
            if len(self._streams) >= 1_024:  # streams come and go
                self._streams.clear()
            mine = F.col("stream") == stream
            column = self._streams[key] = (~F.col("is_sp") & mine) if tuples_only else mine
        return column

    def _unstored(self, stream: str, policies: Compiled) -> list[str]:
        """The label columns no row of ``stream`` needs stored in this batch: its rows'
        words are their policies' finished words or zeros (policy.stored_words)."""
        layout = self.layout(stream)
        fixed = [f for (s, _), (_, f, _) in policies.items() if s == stream]
        bodies = [f for f in fixed if f is not None]
        if len(bodies) != len(fixed):  # folded per tuple: words unknown here
            return []
        objects = len(layout.objects)
        names = labels.label_names(objects, layout.width)
        return [names[i] for i in sorted(unstored(bodies, objects, layout.width))]

    def guess_batch(
        self, batch: DataFrame, states: dict[Channel, ChannelState], sort: bool = True
    ) -> Guess | None:
        """The batch labelled in one pass on a guess (see the module's docstring), or
        None when there is nothing to guess from. ``states`` is not touched: once the
        write has confirmed the guess (:meth:`Guess.holds`), :meth:`Guess.advance` moves
        them on as the passes would have. ``sort`` off: each stream's rows are left
        unsorted, for a write from the driver (small_writes), which sorts them."""
        with self._layout_lock, gc_paused():
            return self._guess_batch(batch, states, sort)

    def _guess_batch(
        self, batch: DataFrame, states: dict[Channel, ChannelState], sort: bool = True
    ) -> Guess | None:
        self.passes = {}
        began = time.perf_counter()
        guessed = self._guessed_decisions(states)
        if guessed is None:
            return None
        decisions, policies, channels = guessed
        streams = tuple(self.streams)
        # No filter of the known streams' elements (a frame less to analyse): an element
        # of another stream is in no stream's rows (``_per_stream``) and is not a miss.
        elements = self._marked(batch, states)
        decided = self._join_decisions(elements, decisions, policies, {})
        observation = Observation()
        decided = decided.observe(observation, *self._observed_columns(channels, streams))
        # unsorted when the driver writes them (small): that write sorts the rows
        frames = self._per_stream(decided, streams, policies, tuples_only=True, sort=sort)
        self.lap("guess (driver)", began)
        return Guess(frames, observation, channels)

    def _known_column(self, streams: tuple[str, ...]) -> Column:
        """An element of one of ``streams``: built when the streams change, not per batch."""
        if self._known is None or self._known[0] != streams:
            self._known = (streams, F.col("stream").isin(list(streams)))
        return self._known[1]

    def _observed_columns(self, channels: list[Channel], streams: tuple[str, ...]) -> list[Column]:
        """The guess's observed aggregates over every element of the batch: its misses
        (elements of ``streams`` only, as if the others had been filtered out: an
        unknown or NULL stream is not a miss) and each channel's newest seq; built when
        the guessed channels or the streams change, not per batch."""
        key = (tuple(channels), streams)
        if self._observed is None or self._observed[0] != key:
            newest = [
                F.max(F.when(_of(c), F.col("seq"))).alias(f"_ss_newest{i}")
                for i, c in enumerate(channels)
            ]
            missed = self._known_column(streams) & _missed()
            self._observed = (key, [F.count_if(missed).alias("_ss_missed"), *newest])
        return self._observed[1]

    def _guessed_decisions(
        self, states: dict[Channel, ChannelState]
    ) -> tuple[list[tuple], Compiled, list[Channel]] | None:
        """The guess's decisions (each declaration that passed last time and passes again
        without changing its tracker), their compiled policies and channels; None when
        nothing is guessed. The guessed policies are saved to the registry."""
        expected = sorted(c for c in self._passed if c in states)[:GUESSED_CHANNELS]
        decisions: list[tuple] = []
        policies: Compiled = {}
        self._in_force.clear()
        for channel in expected:
            tracker = states[channel].tracker
            for ts, csn in sorted(self._passed[channel]):
                trial = copy.deepcopy(tracker)
                reason, policy = trial.on_tuple(ts, csn)
                if reason is not Reason.PASS or policy is None or trial != tracker:
                    continue  # would not pass, or would change the tracker: not guessed
                policy_id = self._compile(channel.stream, policy, policies)
                if policy_id is not None:
                    declared = {"p_ts": ts, "p_csn": csn}
                    decisions.append((*_key(channel, 0, declared), PASS, policy_id, None))
        channels = sorted({Channel(d[0], d[1]) for d in decisions})
        if not channels:
            self._in_force.clear()
            return None
        if self.registry is not None:
            self.registry.save(self._in_force.values())
        self._in_force.clear()
        return decisions, policies, channels

    def _summarised(self, labelled: DataFrame, stream: str, sort: bool = True) -> DataFrame:
        """The scan summaries computed from each row's label words, each file sorted by
        them (scan_summary): only for a stream with a policy naming tuple ids, whose words
        differ per tuple; every other stream's rows take their policy's summary.
        ``sort`` off: left to the driver's write (a sort does not fold, driver_rows)."""
        if not sort:
            return labelled.select("*", *summary_columns(self.codec.block_width))
        return with_scan_summary(labelled, self.codec.block_width)

    def lap(self, name: str, began: float) -> float:
        now = time.perf_counter()
        self.passes[name] = self.passes.get(name, 0.0) + now - began
        return now

    def _marked(self, elements: DataFrame, states: dict[Channel, ChannelState]) -> DataFrame:
        """The columns labelling needs, row by row (no shuffle: order comes from seq
        later), each element marked ``late`` when it is at or below its channel's
        processed seq: out of order.

        Up to :data:`LITERAL_CHANNELS` channels, their processed seqs are a map literal
        in the plan: no table to build and broadcast (a Spark job of its own on every
        batch, on a small landing's way to its subscriber), and the mark is a column of
        the one projection (a DataFrame operation less to analyse). More: a broadcast
        join."""
        processed = [(c.stream, c.provider, s.last_seq) for c, s in states.items()]
        if len(processed) > LITERAL_CHANNELS:
            table = local_frame(
                self.spark, processed, _schema("stream string, provider string, last_seq long")
            )
            joined = elements.join(F.broadcast(table), CHANNEL, "left")
            late = F.col("seq") <= F.coalesce(F.col("last_seq"), F.lit(-1))
            return joined.select(*self._element_columns(late))
        if self._mark_cols is None:  # they name columns only: built once
            self._mark_cols = (
                _channel_key(F.col("stream"), F.col("provider")),
                F.col("seq"),
                F.lit(None).cast("long"),
                F.lit(-1),
            )
        key, seq, none, first = self._mark_cols
        last_seq = none
        if processed:
            seqs = F.create_map(
                *(x for s, p, n in processed for x in (self._channel_literal(s, p), F.lit(n)))
            )
            last_seq = F.try_element_at(seqs, key)
        late = seq <= F.coalesce(last_seq, first)
        return elements.select(*self._element_columns(late))

    def _channel_literal(self, stream: str, provider: str) -> Column:
        """A channel's key in :meth:`_marked`'s map literal, built once per channel (only
        its processed seq changes from batch to batch)."""
        key = (stream, provider)
        column = self._keys.get(key)
        if column is None:
            if len(self._keys) >= 4 * LITERAL_CHANNELS:  # channels come and go
                self._keys.clear()
            column = self._keys[key] = _channel_key(F.lit(stream), F.lit(provider))
        return column

    def _element_columns(self, late: Column) -> list[Column]:
        """:meth:`_marked`'s columns, all but ``late`` built once (they name columns only)."""
        if self._element_cols is None:
            is_sp = F.col("type") == "sp"
            self._element_cols = [
                *map(F.col, CHANNEL),
                F.col("seq"),
                F.col("tid"),
                F.col("policy.ts").alias("p_ts"),
                F.col("policy.csn").alias("p_csn"),
                F.col("values"),
                is_sp.alias("is_sp"),
                # its fields as they are, read on the driver from typed columns
                F.when(is_sp, F.struct(*_SP_BODY)).alias("sp"),
            ]
        first = self._element_cols[:7]  # the order they always had: ``late`` after values
        return [*first, late.alias("late"), *self._element_cols[7:]]

    @staticmethod
    def _with_gaps(elements: DataFrame) -> DataFrame:
        """Every element with its gap: the number of sps of its channel up to it (one sort)."""
        window = (
            Window.partitionBy(*CHANNEL)
            .orderBy("seq")
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        return elements.withColumn("gap", F.sum(F.col("is_sp").cast("int")).over(window))

    def _collect(self, elements: DataFrame) -> tuple[Sps, list[dict], int | None]:
        """The batch's sps, its tuple summaries per (channel, gap, declared ts, csn), and
        when it was collected flat the number of its tuples collected (else None).

        One job collects the sps and a summary per *declaration* (channel, ts, csn: its
        smallest and largest seq). A declaration whose seqs no sp of its channel falls
        between lies in one gap, which the driver counts from the sps' seqs. Only a
        channel with a declaration on both sides of one of its sps (an sp re-sent or late
        in the middle of a segment, a provider going back to an older declaration) has
        its gaps counted by the window over its elements, in a second job.

        The summaries are aggregated either where the rows are (``groupBy``: a shuffle,
        one row per declaration to the driver) or, after a batch with about one
        declaration per tuple (:data:`FLAT_SHARE`), on the driver from one row per tuple
        (``flat``: one scan, no shuffle; at 1 sp a tuple the aggregate reduces nothing
        and its stages were most of the pass). Both give the same summaries
        (:func:`declaration_summaries` aggregates as ``groupBy`` does); only the time
        differs.

        An sp's fields come as typed Arrow columns, read by :func:`wire.sp_of_columns`
        (what :func:`wire.parse_sp` reads from their ``to_json``, without the JSON).
        """
        sp_fields = [F.col(f"sp.{name}").alias(f"_ss_sp{i}") for i, name in enumerate(SP_COLUMNS)]
        if self.flat:
            # Arrow batches from the JVM: no pickled Row object per sp or tuple
            table = (
                elements.filter(F.col("is_sp") | (~F.col("is_sp") & ~F.col("late")))
                .select("is_sp", *CHANNEL, "seq", *sp_fields, "p_ts", "p_csn")
                .toArrow()
            )
            is_sp = table.column("is_sp")
            tuples = table.filter(pc.invert(is_sp))
            declared = declaration_summaries(tuples)
            counted = tuples.num_rows
            flat_rows: int | None = counted
        else:
            table = self._grouped(elements, sp_fields)
            is_sp = table.column("is_sp")
            rows = table.filter(pc.invert(is_sp))
            counted = pc.sum(rows.column("n")).as_py() or 0
            declared = rows.select([*CHANNEL, "p_ts", "p_csn", "first", "last"]).to_pylist()
            flat_rows = None
        self.flat = len(declared) * FLAT_SHARE >= counted > 0
        sps = _read_sps(table.filter(is_sp))
        seqs = {c: [seq for seq, _ in items] for c, items in sps.items()}
        summaries, split = gap_summaries(seqs, declared)
        if split:
            summaries += self._split_summaries(elements, split)
        return sps, summaries, flat_rows

    @staticmethod
    def _grouped(elements: DataFrame, sp_fields: list[Column]) -> pa.Table:
        """The sps and one row per declaration with its seqs' span and tuple count ``n``
        (aggregated where the rows are, no shuffle or sort of the rows)."""
        sp_rows = elements.filter("is_sp").select(
            F.lit(True).alias("is_sp"),
            *CHANNEL,
            "seq",
            *sp_fields,
            *(F.lit(None).cast("long").alias(c) for c in ("p_ts", "p_csn", "first", "last", "n")),
        )
        nulls = sp_rows.schema
        declarations = (
            elements.filter(~F.col("is_sp") & ~F.col("late"))
            .groupBy(*CHANNEL, "p_ts", "p_csn")
            .agg(
                F.min("seq").alias("first"),
                F.max("seq").alias("last"),
                F.count(F.lit(1)).alias("n"),
            )
            .select(
                F.lit(False).alias("is_sp"),
                *CHANNEL,
                F.lit(None).cast("long").alias("seq"),
                *(
                    F.lit(None).cast(nulls[f"_ss_sp{i}"].dataType).alias(f"_ss_sp{i}")
                    for i in range(len(SP_COLUMNS))
                ),
                "p_ts",
                "p_csn",
                "first",
                "last",
                "n",
            )
        )
        return sp_rows.unionByName(declarations).toArrow()

    def _split_summaries(self, elements: DataFrame, channels: set[Channel]) -> list[dict]:
        """Per-gap summaries of ``channels`` from the window over their elements."""
        chosen = local_frame(
            self.spark,
            [(c.stream, c.provider) for c in channels],
            _schema("_ss_stream string, _ss_provider string"),
        )
        on = F.col("stream").eqNullSafe(F.col("_ss_stream")) & F.col("provider").eqNullSafe(
            F.col("_ss_provider")
        )
        mine = elements.join(F.broadcast(chosen), on, "left_semi")
        rows = (
            self._with_gaps(mine)
            .filter(~F.col("is_sp") & ~F.col("late"))
            .groupBy(*CHANNEL, "gap", "p_ts", "p_csn")
            .agg(F.min("seq").alias("first"), F.max("seq").alias("last"))
            .collect()
        )
        return [row.asDict() for row in rows]

    def _decide(
        self,
        sps: Sps,
        summaries: list[Any],
        states: dict[Channel, ChannelState],
    ) -> tuple[list[tuple], Compiled]:
        """Replays the reference tracker per channel: decision rows and compiled policies."""
        gaps: dict[Channel, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
        channels: dict[tuple, Channel] = {}
        for row in summaries:
            key = (row["stream"], row["provider"])
            channel = channels.get(key)
            if channel is None:
                channel = channels[key] = Channel(*key)
            gaps[channel][row["gap"]].append(row)
        decisions: list[tuple] = []
        policies: Compiled = {}
        for channel in sorted(set(gaps) | set(sps)):
            state = states.setdefault(channel, ChannelState())
            channel_sps = sps.get(channel, [])
            for gap in range(len(channel_sps) + 1):
                rows = sorted(gaps[channel].get(gap, []), key=lambda r: r["first"])
                decisions += self._decide_gap(channel, gap, rows, state, policies)
                if gap < len(channel_sps):
                    seq, sp = channel_sps[gap]
                    if seq > state.last_seq and sp is not None:
                        state.tracker.on_sp(sp)
                    state.last_seq = max(state.last_seq, seq)
            seen = [row["last"] for rows in gaps[channel].values() for row in rows]
            state.last_seq = max([state.last_seq, *seen])
        return decisions, policies

    def _decide_gap(
        self,
        channel: Channel,
        gap: int,
        rows: list[Any],
        state: ChannelState,
        policies: Compiled,
    ) -> list[tuple]:
        out: list[tuple] = []
        reset_at = None
        for row in rows:
            if reset_at is not None:
                break  # after a reset everything in this gap has no policy (seq rule)
            reason, policy = state.tracker.on_tuple(row["p_ts"], row["p_csn"])
            policy_id = None
            if policy is not None:
                policy_id = self._compile(channel.stream, policy, policies)
                if policy_id is None:
                    reason, policy_id = Reason.INVALID_POLICY, policy.policy_id
            if policy is None and reason in _RESETS:  # the tracker reset (Fig. 10 line 16)
                reset_at = row["first"]
            out.append((*_key(channel, gap, row), reason.value, policy_id, None))
        return [(*d[:-1], reset_at) for d in out]

    def _compile(self, stream: str, policy: Policy, policies: Compiled) -> str | None:
        """The policy's id once its rules (or finished words) are in ``policies``; None
        when it cannot be used (PolicyError: an unknown role).

        Compiled once per distinct body: the id is a content hash of the sps' bodies
        (not their ts), so a policy re-sent with a new ts, or the same policy on many
        channels, reuses what an earlier batch compiled. The cache is keyed by everything
        else the rules depend on (the stream's definition and server policy; the role
        hierarchy clears it) and bounded."""
        policy_id = policy.policy_id
        key = (stream, policy_id)
        if key not in policies:
            bodies = self._stream_bodies(stream)
            if policy_id in bodies:
                compiled = bodies[policy_id]
            else:
                if len(bodies) >= _COMPILED_LIMIT:  # bounded: a few MB per stream
                    bodies.clear()
                compiled = bodies[policy_id] = self._compile_body(stream, policy)
            if compiled is None:
                return None
            policies[key] = compiled
            self._in_force[policy_id] = policy
        return policy_id

    def _stream_bodies(self, stream: str) -> dict[str, Body | None]:
        """The compiled policies of ``stream`` under its current definition and server
        policy (a stream redefined or a server policy changed compiles again). Their
        entry is found by hashing them only when either object changed: at one policy per
        tuple, hashing the definition for every policy cost more than the lookup."""
        definition = self.streams[stream]
        try:
            server: ServerPolicy | PolicyError | None = self.server_policy(stream)
        except PolicyError as err:
            server = err
        seen = self._bodies.get(stream)
        if seen is not None and seen[0] is definition and seen[1] is server:
            return seen[2]
        key = (stream, definition, server if not isinstance(server, PolicyError) else "unusable")
        bodies = self._compiled.get(key)
        if bodies is None:
            if len(self._compiled) >= _COMPILED_STREAMS:
                self._compiled.clear()
                self._bodies.clear()
            bodies = self._compiled[key] = {}
        self._bodies[stream] = (definition, server, bodies)
        return bodies

    def _compile_body(self, stream: str, policy: Policy) -> Body | None:
        try:
            server = self.server_policy(stream)
            rules = compile_rules(policy, stream, self.streams[stream].names, self.codec, server)
        except PolicyError:
            return None
        fixed = _fixed_words(rules)  # then the rules need not travel with rows
        if fixed is None:
            return (labels.rule_rows(rules), None, None)
        objects = len(rules.layout.objects)
        summary = label_summary(fixed, objects, self.codec.width, self.codec.block_width)
        return ([], fixed, summary)

    def _join_decisions(
        self,
        tuples: DataFrame,
        decisions: list[tuple],
        policies: Compiled,
        sps: Mapping[Channel, list[tuple[int, SecurityPunctuation | None]]],
    ) -> DataFrame:
        """Tuples with their decision and their policy's rules or finished label words,
        in one broadcast join: the driver attaches each decision's compiled policy (a
        handful of rows), so no tuple probes a second table for it.

        A decision names its gap by the seqs of the sps around it (exclusive bounds), so
        a tuple finds it by its declaration and its own seq, without a gap column: the
        join keys are the channel and the declaration, the seq test picks the gap (one
        candidate row unless the declaration spans sps of its channel)."""
        table = decision_table(decisions, policies, sps)
        kept = self._decided_table
        if kept is None or not kept[0].equals(table):
            # The same table from batch to batch while the guessed decisions stay: its
            # frame (a local relation, immutable: the same plan each time) is kept; only
            # a small one (a large table's rows would stay in the JVM's memory).
            frame = F.broadcast(self.spark.createDataFrame(table))
            kept = (table, frame)
            self._decided_table = kept if table.num_rows <= KEPT_DECISIONS else None
        if self._decision_cols is None:
            self._decision_cols = _decision_columns()
        on, columns = self._decision_cols
        return tuples.join(kept[1], on, "left").withColumns(columns)

    def _label(
        self,
        decided: DataFrame,
        stream: str,
        per_tuple: bool,
        summary: bool = False,
        unstored: frozenset[str] = frozenset(),
        level: Sequence[Column] = (),
    ) -> DataFrame:
        """The labelled rows of one stream, from two projections.

        The first parses the tuple's values once (``_ss_values``): selecting each
        attribute from ``from_json`` directly lets Spark parse the text once per
        attribute, which cost as much as the rest of the labelling. ``per_tuple``: some
        policy of this batch names tuple ids, so its rules are folded per tuple there too
        (a higher-order function); otherwise every label word is a finished word of the
        decision's policy. A passing tuple without words (never expected) reads 0: deny.
        Helper columns are ``_ss_``-named: no attribute may be (catalog.streams).
        ``summary``: each row's scan summary from its decision's (``_decided_summary``);
        ``unstored``: label columns left out; ``level``: the level words, last.
        """
        first, second, label = self._label_columns(stream, per_tuple)
        key = (stream, per_tuple, summary, unstored)
        held = self._held_label.get(key) if not level else None
        if held is not None and held[0] is first:
            # the same projections as the last batch's: held in the JVM, a call each
            return held[2].select(held[1].select(decided))
        words = [column for name, column in label if name not in unstored]
        if not summary:
            one, two = list(first), [*second, *words]
        else:
            if self._summary is None:  # built once: they name columns only
                self._summary = _decided_summary()
            one = [*first, *self._summary]
            two = [*second, *words, *(F.col(name) for name in SUMMARY_NAMES)]
        if level:  # a batch's own level words: not held
            return decided.select(*one).select(*two, *level)
        if len(self._held_label) >= 256:  # streams and policies come and go
            self._held_label.clear()
        self._held_label[key] = (first, HeldColumns(one), HeldColumns(two))
        return self._held_label[key][2].select(self._held_label[key][1].select(decided))

    def _label_columns(
        self, stream: str, per_tuple: bool
    ) -> tuple[list[Column], list[Column], list[tuple[str, Column]]]:
        """The two projections of :meth:`_label`, built once per stream definition, label
        width, combine mode and ``per_tuple``: the expressions name columns only, never a
        batch's values, and building them through py4j (hundreds of label columns at 500
        roles) was most of the planning of a small ingest batch. The label words come
        apart, named, so that a batch can leave its unstored words out."""
        schema = self.streams[stream]
        mode = self._mode(stream)
        key = (schema, self.codec.width, mode, per_tuple)
        if key not in self._projections:
            self._projections[key] = self._build_label_columns(stream, per_tuple, mode)
        return self._projections[key]

    def _build_label_columns(
        self, stream: str, per_tuple: bool, mode: Combine
    ) -> tuple[list[Column], list[Column], list[tuple[str, Column]]]:
        schema = self.streams[stream]
        layout = self.layout(stream)
        passed = F.col("reason") == PASS
        zero = F.lit(0).cast("long")
        names = labels.label_names(len(layout.objects), layout.width)  # label_columns' order
        meta = (*CHANNEL, "seq", "tid", "reason", "policy_id")
        fixed = F.col("_ss_fixed")
        parsed = [F.from_json(F.col("values"), schema.ddl).alias("_ss_values"), fixed]
        if per_tuple:
            # rules are folded per tuple only for a policy that names tuple ids; the label
            # words of every other policy were finished once, on the driver (``fixed``)
            acc = F.when(
                passed & fixed.isNull(),
                labels.accumulate(F.col("_ss_rules"), F.col("tid"), layout.size),
            )
            computed = labels.label_columns(F.col("_ss_acc"), layout, mode)
            parsed.append(acc.alias("_ss_acc"))
        else:
            computed = [zero] * len(names)
        label = [
            (n, F.when(passed, F.coalesce(fixed[i], column, zero)).otherwise(zero).alias(n))
            for i, (column, n) in enumerate(zip(computed, names, strict=True))
        ]
        values = [F.col("_ss_values")[name].alias(name) for name in schema.names]
        return [*map(F.col, meta), *parsed], [*map(F.col, meta), *values], label


@dataclass
class Guess:
    """A batch labelled in one pass on a guess, checked by the job that writes it."""

    frames: dict[str, DataFrame]
    """Each stream's labelled rows, as the passes would label them if the guess holds."""
    observation: Observation
    """Over every element of the batch, by the first write: ``_ss_missed`` (sps, late
    tuples and tuples of no guessed declaration) and each channel's newest seq."""
    channels: list[Channel]

    _metrics: dict[str, Any] | None = field(default=None, init=False, repr=False)

    def _observed(self) -> dict[str, Any]:
        """The observed metrics, fetched from the JVM once (a few Py4J calls each time)."""
        if self._metrics is None:
            self._metrics = self.observation.get
        return self._metrics

    def holds(self) -> bool:
        """After a write job ran: True when no element fell outside the guess."""
        if not self.frames:  # no write ran: the observation would never arrive
            return False
        return int(self._observed()["_ss_missed"]) == 0

    def advance(self, states: dict[Channel, ChannelState]) -> None:
        """Moves ``states`` on as the passes would have: trackers as they were (every
        decision passed without changing them), each channel's processed seq to its
        newest tuple."""
        metrics = self._observed()
        for i, channel in enumerate(self.channels):
            newest = metrics[f"_ss_newest{i}"]
            if newest is not None:
                state = states[channel]
                state.last_seq = max(state.last_seq, int(newest))


def _missed() -> Column:
    """An element outside the guess: an sp, a late tuple, a tuple of no guessed
    declaration; unknown (a NULL) is a miss."""
    guessed = ~F.col("is_sp") & ~F.col("late") & F.col("d_reason").isNotNull()
    return ~F.coalesce(guessed, F.lit(False))


def _of(channel: Channel) -> Column:
    return (F.col("stream") == channel.stream) & (F.col("provider") == channel.provider)


def _decision_columns() -> tuple[Column, dict[str, Column]]:
    """:meth:`Ingest._join_decisions`' join condition, and its reason and policy id."""
    on = (
        (F.col("stream") == F.col("_ss_d_stream"))
        & (F.col("provider") == F.col("_ss_d_provider"))
        & (F.col("p_ts") == F.col("_ss_d_ts"))
        & (F.col("p_csn") == F.col("_ss_d_csn"))
        & (F.col("seq") > F.col("_ss_d_after"))
        & (F.col("seq") < F.col("_ss_d_before"))
    )
    # late tuples are out of order; a tuple after the gap's reset, or one the driver
    # never saw, has no policy
    reason = (
        F.when(F.col("late"), F.lit(Reason.OUT_OF_ORDER.value))
        .when(
            F.col("reset_at").isNotNull() & (F.col("seq") > F.col("reset_at")),
            F.lit(Reason.NO_POLICY.value),
        )
        .otherwise(F.coalesce(F.col("d_reason"), F.lit(Reason.NO_POLICY.value)))
    )
    policy_id = F.when(reason == F.col("d_reason"), F.col("policy_id"))
    return on, {"reason": reason, "policy_id": policy_id}


def _fixed_words(rules: RuleSet) -> list[int] | None:
    """The finished label words (readers, denied per object and word, in label column
    order) when every rule matches every tuple id, else None (evaluated per tuple)."""
    if any(not isinstance(rule.tuples, sp_patterns.Any) for rule in rules.rules):
        return None
    return label_words(rules, None)


def _channel_key(stream: Column, provider: Column) -> Column:
    return F.struct(stream.cast("string").alias("s"), provider.cast("string").alias("p"))


def _schema(ddl: str) -> StructType:
    """A StructType from a DDL string, without asking the JVM."""
    return StructType(
        [
            StructField(name, {"string": StringType(), "long": LongType()}[kind])
            for name, kind in (part.split() for part in ddl.split(", "))
        ]
    )


_DECISIONS = StructType(
    [
        *_schema(
            "_ss_d_stream string, _ss_d_provider string, _ss_d_after long, _ss_d_before long, "
            "_ss_d_ts long, _ss_d_csn long, d_reason string, policy_id string, reset_at long"
        ).fields,
        StructField("_ss_rules", labels.RULES_TYPE),  # a policy naming tuple ids: per tuple
        StructField("_ss_fixed", ArrayType(LongType())),  # any other: finished label words
        StructField("_ss_d_lo", IntegerType()),  # and their scan summary
        StructField("_ss_d_hi", IntegerType()),
    ]
)
SUMMARY_NAMES = (LO, HI)


def _decided_summary() -> list[Column]:
    """The scan summary of each decided tuple, from its policy's (``_ss_d_*``) rather
    than from its label words: the words of a tuple are its policy's finished words when
    it passes and all zeros otherwise (see :meth:`Ingest._build_label_columns`), and
    zeros summarise as no reader. Only for streams whose policies
    all ignore the tuple id (a passing tuple then always has its policy's words)."""
    passed = F.col("reason") == PASS
    return [
        F.when(passed, F.coalesce(F.col("_ss_d_lo"), F.lit(NO_READER[0])))
        .otherwise(F.lit(NO_READER[0]))
        .alias(LO),
        F.when(passed, F.coalesce(F.col("_ss_d_hi"), F.lit(NO_READER[1])))
        .otherwise(F.lit(NO_READER[1]))
        .alias(HI),
    ]


def declaration_summaries(tuples: pa.Table) -> list[dict]:
    """One summary per declaration (stream, provider, p_ts, p_csn) of ``tuples`` (Arrow
    rows with those columns and ``seq``): its ``first`` and ``last`` seq, as the grouped
    collect's ``groupBy`` gives them (null keys form groups of their own, null seqs are
    skipped, a group of null seqs has none). Natively, in pyarrow: no Python per tuple."""
    keys = [*CHANNEL, "p_ts", "p_csn"]
    grouped = tuples.select([*keys, "seq"]).group_by(keys, use_threads=False)
    spans = grouped.aggregate([("seq", "min"), ("seq", "max")])
    return spans.rename_columns([*keys, "first", "last"]).to_pylist()


def _read_sps(sp_table: pa.Table) -> Sps:
    """The collected sps per channel in seq order, each read from its typed columns."""
    names = [*CHANNEL, "seq", *(f"_ss_sp{i}" for i in range(len(SP_COLUMNS)))]
    by_channel: dict[tuple, list[tuple[int, SecurityPunctuation | None]]] = defaultdict(list)
    for stream, provider, seq, *fields in zip(
        *(sp_table.column(n).to_pylist() for n in names), strict=True
    ):
        sp = sp_of_columns(stream, provider, seq, *fields)
        by_channel[(stream, provider)].append((seq, sp))
    return {Channel(*c): sorted(items, key=_first) for c, items in by_channel.items()}


def gap_summaries(
    sp_seqs: Mapping[Channel, list[int]], declarations: list[dict]
) -> tuple[list[dict], set[Channel]]:
    """Per-gap summaries from per-declaration ones, where the sps' seqs tell the gap.

    ``declarations``: one dict per (stream, provider, p_ts, p_csn) with the ``first`` and
    ``last`` seq of its tuples; ``sp_seqs``: each channel's sp seqs in order. A
    declaration lies in one gap when no sp seq falls between its first and last tuple;
    its gap is the number of sp seqs before its first. The channels where some
    declaration does not are returned instead of summarised: their gaps need every
    tuple's seq (the window). Equal to the window's summaries for every other channel
    (a property test holds it).
    """
    summaries: list[dict] = []
    split: set[Channel] = set()
    channels: dict[tuple, Channel] = {}  # one Channel per channel, not per declaration
    for row in declarations:
        key = (row["stream"], row["provider"])
        channel = channels.get(key)
        if channel is None:
            channel = channels[key] = Channel(*key)
        seqs = sp_seqs.get(channel, [])
        gap = bisect_left(seqs, row["first"])
        if gap != bisect_left(seqs, row["last"]):
            split.add(channel)
        summaries.append({**row, "gap": gap})
    if not split:
        return summaries, split
    kept = [s for s in summaries if Channel(s["stream"], s["provider"]) not in split]
    return kept, split


def _decision_rows(
    decisions: list[tuple],
    policies: Compiled,
    sps: Mapping[Channel, list[tuple[int, SecurityPunctuation | None]]],
) -> list[tuple]:
    """Rows of ``_DECISIONS``: a decision's gap becomes the seqs of the sps around it, and
    its compiled policy (rules or finished words) rides along."""
    none = (None, None, None)
    seqs = {c: [seq for seq, _ in items] for c, items in sps.items()}
    rows = []
    for d in decisions:
        stream, provider, gap, *rest = d
        bounds = seqs.get(Channel(stream, provider), [])
        after = bounds[gap - 1] if gap > 0 else _FIRST
        before = bounds[gap] if gap < len(bounds) else _LAST
        rules, fixed, summary = policies.get((stream, d[6]), none)
        rows.append(
            (stream, provider, after, before, *rest, rules, fixed, *(summary or (None, None)))
        )
    return rows


def decision_table(
    decisions: list[tuple],
    policies: Compiled,
    sps: Mapping[Channel, list[tuple[int, SecurityPunctuation | None]]],
) -> pa.Table:
    """:func:`_decision_rows` as an Arrow table of ``_DECISIONS``, built column by column.

    The same rows (``tests/unit/test_decision_table.py`` holds them equal): at one sp per
    tuple a batch has as many decisions as tuples, and building the table row by row
    (a Python value per cell, the rules and words converted per decision) was most of
    this pass. Here each scalar column is one list read off the decisions, and a
    decision's compiled policy (rules, finished words and their summary, the wide
    columns) is converted once per distinct policy and picked per decision by
    ``take``."""
    types = {f.name: arrow_type(f.dataType) for f in _DECISIONS.fields}
    if not decisions:
        return pa.table(
            {n: pa.array([], type=t) for n, t in types.items()}, schema=pa.schema(types.items())
        )
    streams, providers, gaps, ts, csn, reasons, ids, resets = zip(*decisions, strict=True)
    seqs = {c: [seq for seq, _ in items] for c, items in sps.items()}
    bounds: dict[tuple, list[int]] = {}
    after, before = [], []
    for stream, provider, gap in zip(streams, providers, gaps, strict=True):
        key = (stream, provider)
        mine = bounds.get(key)
        if mine is None:
            mine = bounds[key] = seqs.get(Channel(stream, provider), [])
        after.append(mine[gap - 1] if gap > 0 else _FIRST)
        before.append(mine[gap] if gap < len(mine) else _LAST)
    index: dict[tuple, int] = {}  # each distinct (stream, policy id) compiled: its row
    compiled: list[Body] = []
    picks = []
    for stream, policy_id in zip(streams, ids, strict=True):
        key = (stream, policy_id)
        at = index.get(key)
        if at is None:
            body = policies.get(key)
            at = index[key] = len(compiled) if body is not None else -1
            if body is not None:
                compiled.append(body)
        picks.append(None if at < 0 else at)
    rules_type = _DECISIONS["_ss_rules"].dataType
    wide = {
        "_ss_rules": [as_python(r, rules_type) if r else r for r, _, _ in compiled],
        "_ss_fixed": [None if f is None else list(f) for _, f, _ in compiled],
        "_ss_d_lo": [None if m is None else m[0] for _, _, m in compiled],
        "_ss_d_hi": [None if m is None else m[1] for _, _, m in compiled],
    }
    taken = pa.array(picks, type=pa.int64())
    columns = {
        "_ss_d_stream": streams,
        "_ss_d_provider": providers,
        "_ss_d_after": after,
        "_ss_d_before": before,
        "_ss_d_ts": ts,
        "_ss_d_csn": csn,
        "d_reason": reasons,
        "policy_id": ids,
        "reset_at": resets,
    }
    arrays = {n: pa.array(list(v), type=types[n]) for n, v in columns.items()}
    for name, values in wide.items():
        arrays[name] = pa.array(values, type=types[name]).take(taken)
    return pa.table(arrays, schema=pa.schema(types.items()))


def _key(channel: Channel, gap: int, row: Any) -> tuple:
    return (channel.stream, channel.provider, gap, row["p_ts"], row["p_csn"])


def _first(item: tuple) -> Any:
    return item[0]
