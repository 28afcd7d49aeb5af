"""The query interface: every text a user sends (CQL queries, ``INSERT SP``) lands here.

A request is admitted once (:func:`~streamshield.lang.admission.admit`: parsed, checked
against the streams its author may read, given its shape, roles and level); ``submit``
takes that one value and routes it to the engine that can run its shape, which secures
it (lang/rewrite_rules.py) and hands the secured SQL to Spark:

- one stream, no window: Spark's native streaming SQL (:class:`QueryService`);
- one stream, ``[RANGE t SLIDE s]`` aggregate: a folding branch of the same network
  keyed by its window, Spark's watermark kept by the fold (``share_sliding``), or
  Spark's windowed streaming aggregation of its own (grouped by Spark's ``window``);
- one stream, ``[ROWS n]``/``[NOW]``/``[RANGE t]``: a branch of the stream's window
  network (one window node per shared window, engine/sharing/window_network.py), or with
  ``share_windows`` off a :class:`WindowQuery` of its own;
- two streams, windowed equi-join: one shared :class:`SCJoin` per join, one subscription
  per query (a branch with its privacy switch), the user's SQL run over what the
  subscription may see;
- ``ON RESULT``: a delegating query whose output becomes a derived stream (SPGen);
- ``INSERT SP ... INTO STREAM``: sps landed on the caller's channel of that stream.

Who may do what (OxRBAC) is the server's business; this layer enforces everything
that follows from the data's own policies and from the query's roles.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from streamshield.catalog.store import Catalog
from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.tracker_state import StateStore
from streamshield.engine.levels.level_processor import LevelProcessor, LevelProcessors
from streamshield.engine.queries.batch_boundary import at_batch_boundary
from streamshield.engine.queries.derived import derived_definition
from streamshield.engine.queries.scjoin import (
    JoinMode,
    JoinSide,
    SCJoin,
    Subscription,
    pair_columns,
)
from streamshield.engine.queries.spgen import SpGen
from streamshield.engine.queries.streaming_queries import (
    CallbackSink,
    ConsoleSink,
    FileSink,
    MemorySink,
    QueryService,
    RegisteredQuery,
    Sink,
)
from streamshield.engine.queries.window_query import WindowQuery
from streamshield.engine.sharing.branch_ledger import BranchLedger
from streamshield.engine.sharing.branched_network import (
    TRIGGER_SECONDS,
    BranchedNetwork,
    NetworkParts,
    NotShared,
)
from streamshield.engine.sharing.driven_scan import DrivenScan
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.engine.sharing.stream_scan import StreamScan, scan_checkpoint
from streamshield.engine.sharing.window_network import WindowNetwork
from streamshield.engine.spark_errors.analysis_errors import planned
from streamshield.engine.tuning import SERVER, EngineTuning
from streamshield.engine.views.level_columns import at_output_level
from streamshield.engine.views.provenance_columns import with_label
from streamshield.landing import LandingZone
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.lang.continuous import (
    Shape,
    ShapeKind,
    SpInsert,
)
from streamshield.lang.cql import SpStatement
from streamshield.lang.pair_labels import JoinInput, PairSide
from streamshield.lang.query_check import QueryRejected
from streamshield.lang.rewrite_rules import Rewrite, Secured, Sliding, secure
from streamshield.lang.windows import WindowKind
from streamshield.network.switches import Switch
from streamshield.policy.delegation import may_delegate
from streamshield.policy.elements import Channel, SpElement
from streamshield.policy.policy import PolicyError, role_members
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import UnknownRoleError

log = logging.getLogger("streamshield.engine")


class Switched(Protocol):
    """What the API reads of a node kind with privacy switches: its branches (by query
    name) and where its switches sit."""

    @property
    def branches(self) -> Mapping[str, object]: ...

    def switches(self) -> tuple[Switch, ...]: ...


@dataclass(frozen=True)
class SpsInserted:
    """Where ``INSERT SP`` put the policy: the provider's tuples declare ``(ts, csn)``."""

    channel: Channel
    ts: int
    csn: int
    last_seq: int


NETWORK_STOP_SECONDS = 10.0
"""How long stopping a network's last branch waits for the micro-batch in flight."""


class CqlService:
    """Parses, checks and routes users' requests; keeps what each registered query needs."""

    def __init__(
        self,
        queries: QueryService,
        landing: LandingZone,
        catalog: Catalog,
        ingest: Ingest,
        shield_state: StateStore,
        join_mode: JoinMode = JoinMode.ADAPTIVE,
        tuning: EngineTuning = SERVER,
    ) -> None:
        """``tuning``: which engine runs which shape (shared networks, window networks,
        folds, fused passes, driven scans: engine/tuning.py); the server's settings
        choose it."""
        self.queries, self.landing, self.catalog, self.ingest = queries, landing, catalog, ingest
        self.shield_state, self.join_mode = shield_state, join_mode
        self.tuning = tuning
        """Which paths it routes queries along (engine/tuning.py): read at each
        registration, so a replaced tuning applies to the queries registered after."""
        self.switch: Callable[[str], bool] = lambda _query: True
        """Whether anyone may receive a query's output now (its privacy switch): a network
        (of selections, of windows, or a shared join) computes nothing for a query whose
        switch is off."""
        self.processors = LevelProcessors(queries.spark, queries.root)
        """One query processor per level (engine/levels/level_processor.py): its session, pool,
        storage and shepherd; every query runs in its level's."""
        self.networks: dict[tuple[str, str], SharedNetwork] = {}
        """Shared networks keyed by (stream, level processor): levels never share one."""
        self.branches: dict[str, tuple[str, str]] = {}  # query -> the network running it
        self.shapes: dict[str, Shape] = {}
        self.joins: dict[tuple, SCJoin] = {}
        self.join_handles: dict[tuple, StreamingQuery] = {}
        self.subscriptions: dict[str, tuple[tuple, Subscription]] = {}  # query -> its join
        self.window_queries: dict[str, WindowQuery] = {}
        self.window_networks: dict[tuple[str, str], WindowNetwork] = {}
        """Window networks keyed by (stream, level processor), as ``networks``."""
        self.window_branches: dict[str, tuple[str, str]] = {}
        self.scans: dict[tuple[str, str], StreamScan] = {}
        """The one streaming query of each (stream, level processor), feeding both its
        networks (engine/sharing/stream_scan.py)."""
        self._kinds: dict[type, tuple[dict, dict[str, tuple[str, str]]]] = {
            SharedNetwork: (self.networks, self.branches),
            WindowNetwork: (self.window_networks, self.window_branches),
        }
        """Per kind of network, the running ones and which branch runs in which."""
        self._opener = ThreadPoolExecutor(max_workers=1, thread_name_prefix="first-opening")
        """Runs first openings (``opened``) one at a time, off the request's thread."""
        self.write_level: Callable[[str, QueryLevel], None] | None = None
        """Records that a derived stream is at its query's level (the security catalog's
        ``write_at``); without it, a delegating query at a level is refused."""

    @property
    def streams(self) -> dict[str, StreamDefinition]:
        return self.queries.streams

    def admit(
        self, text: str, roles: Iterable[str], level: QueryLevel | None = None
    ) -> AdmittedQuery | SpInsert:
        """``text`` admitted against every stream with ``roles``, to run at ``level``
        (lang/admission.py); QueryRejected for anything not allowed. A caller that
        knows which streams its user may read admits against those instead."""
        return admit(text, roles, self.queries.hierarchy, list(self.streams), level)

    def submit(
        self,
        request: AdmittedQuery | SpInsert,
        sink: Sink,
        name: str | None = None,
        provider: str | None = None,
    ) -> RegisteredQuery | SpsInserted:
        """Run one admitted request with the roles and at the level it was admitted
        with; ``provider``: the channel an sp script lands on. The caller checked its
        operator limits (``OperatorLimits.check``: they depend on the caller's other
        queries)."""
        if isinstance(request, SpInsert):
            if provider is None:
                raise QueryRejected("sp_provider", "INSERT SP needs the provider's channel")
            return self.insert_sps(request, provider)
        admitted = request
        name = name or f"q-{uuid.uuid4().hex[:8]}"
        if name in self.queries.queries:
            raise QueryRejected("duplicate_name", f"a query named {name!r} exists")
        processor = self.processors.acquire(admitted.level, name)
        try:
            if admitted.delegating:
                query = self._delegate(admitted, name, processor)
            else:
                query = self._route(admitted, sink, name, processor)
        except BaseException:
            self.processors.release(name)
            raise
        self.shapes[query.name] = admitted.shape
        return query

    def stop(self, name: str) -> None:
        """Stop a query; a shared join stops only with its last subscriber, a level's
        processor with its last query."""
        try:
            self._stop(name)
        finally:
            self.processors.release(name)

    def _stop(self, name: str) -> None:
        self.shapes.pop(name, None)
        self.window_queries.pop(name, None)
        for networks, branches in self._kinds.values():
            key = branches.pop(name, None)
            if key is None:
                continue
            self.queries.stop(name)  # the branch leaves its network
            network = networks[key]
            if not network.branches:  # the last one: the network stops too
                if network.handle is not None:
                    at_batch_boundary(network.handle, NETWORK_STOP_SECONDS)
                network.stop()
                del networks[key]
                scan = self.scans.get(key)
                if scan is not None and not scan.networks:
                    del self.scans[key]
            return
        if name not in self.subscriptions:
            self.queries.stop(name)
            return
        self.queries.queries.pop(name)
        ident, subscription = self.subscriptions.pop(name)
        join = self.joins[ident]
        join.unsubscribe(subscription)
        if not join.subscriptions:
            self.join_handles.pop(ident).stop()
            del self.joins[ident]

    def opened(self, name: str) -> None:
        """Someone may now receive query ``name`` (its switch may have opened): a branch
        or join subscription never received reads the kept history at once, in the
        background (its first instant needs no new data: ``BranchedNetwork.open``,
        ``SCJoin.open``). Anything else has nothing to do."""
        target: BranchedNetwork | SCJoin | None = None
        for networks, branches in self._kinds.values():
            key = branches.get(name)
            if key is not None:
                target = networks.get(key)
        if name in self.subscriptions:
            target = self.joins.get(self.subscriptions[name][0])
        if target is None:
            return
        opener = target.open
        with contextlib.suppress(RuntimeError):  # shutting down
            self._opener.submit(_quietly, opener, name)

    def forget(self, name: str) -> None:
        """A removed query's engine records: its branch positions in any network (of
        any level: the query's level may have changed since it ran), its aggregate's
        state, whether a join's subscription was ever received, and the window nodes
        nobody registered uses any more."""
        root = self.queries.root
        for received in (
            *root.glob("joins/*/state/received"),
            *root.glob("levels/*/joins/*/state/received"),
        ):
            BranchLedger(received).drop(name)
        for kind in (SharedNetwork.FOLDER, WindowNetwork.FOLDER):
            for networks in (root / kind, *root.glob(f"levels/*/{kind}")):
                for stream in self.streams:
                    BranchLedger(networks / stream / "branches").drop(name)
                    if kind == SharedNetwork.FOLDER:
                        aggregate = SharedNetwork.aggregate_path(networks / stream, name)
                        shutil.rmtree(aggregate, ignore_errors=True)
                    else:  # the window nodes it was the last registered query of
                        WindowNetwork.forget_nodes(networks / stream, name)

    # -- INSERT SP -----------------------------------------------------------------------

    def insert_sps(self, request: SpInsert, provider: str) -> SpsInserted:
        """Land the statements as one policy on ``(stream, provider)``, stamped now."""
        if request.stream not in self.streams:
            raise QueryRejected("unknown_stream", "INSERT SP names no stream you may use")
        self._check_roles(request.statements)
        channel = Channel(request.stream, provider)
        ts = time.time_ns() // 1000  # grows across calls, so a new policy is never stale
        seq = max(self.catalog.last_seq(channel), 0)  # seqs start at 1 on a new channel
        elements = [
            SpElement(channel, seq + sn, st.punctuation(ts, sn))
            for sn, st in enumerate(request.statements, start=1)
        ]
        result = self.landing.append(elements)
        if result.rejected:
            reasons = sorted({r.reason.value for r in result.rejected})
            raise QueryRejected("sp_rejected", f"the sps were not accepted: {reasons}")
        return SpsInserted(channel, ts, len(elements), seq + len(elements))

    def _check_roles(self, statements: Iterable[SpStatement]) -> None:
        for statement in statements:
            try:
                role_members(statement.srp.roles, self.queries.hierarchy)
            except (UnknownRoleError, PolicyError) as err:
                raise QueryRejected("unknown_role", str(err)) from None

    # -- routing ---------------------------------------------------------------------------

    def _route(
        self, admitted: AdmittedQuery, sink: Sink, name: str, processor: LevelProcessor
    ) -> RegisteredQuery:
        shape = admitted.shape
        if shape.kind is ShapeKind.STREAM:
            shared = None
            # an aggregate emits updates: a file sink takes final rows (its own query's).
            # One that ran as a query of its own keeps running so: its state (every group
            # since it began, retention's dropped batches included) is in its checkpoint,
            # which a branch, folding the stored batches only, could not take over.
            folds = (
                self.tuning.share_aggregates
                and isinstance(sink, CallbackSink)
                and not self.queries.has_run(name, processor)
            )
            if self.tuning.share and (not shape.aggregate or folds):
                shared = self._branch(SharedNetwork, admitted, sink, name, processor)
            return shared or self.queries.register(admitted, sink, name, processor=processor)
        if shape.kind is ShapeKind.SLIDING_AGGREGATE:
            _item, stream, window = shape.windows[0]
            event_time = self.streams[stream].event_time
            if event_time is None:
                raise QueryRejected("window_time", f"stream {stream} has no event time")
            seconds = self.streams[stream].types[event_time] == "bigint"
            sliding = Sliding(event_time, window, seconds)
            folds = (
                self.tuning.share
                and self.tuning.share_aggregates
                and self.tuning.share_sliding
                and isinstance(sink, CallbackSink)
                and not self.queries.has_run(name, processor)
            )
            if folds:
                shared = self._branch(SharedNetwork, admitted, sink, name, processor, sliding)
                if shared is not None:
                    return shared
            return self.queries.register(admitted, sink, name, sliding=sliding, processor=processor)
        if shape.kind is ShapeKind.WINDOW_RELATION:
            shared = None
            if self.tuning.share and self.tuning.share_windows:
                shared = self._branch(WindowNetwork, admitted, sink, name, processor)
            return shared or self._window_query(admitted, sink, name, processor)
        return self._join_query(admitted, sink, name, processor)

    def _branch(
        self,
        kind: type[SharedNetwork] | type[WindowNetwork],
        admitted: AdmittedQuery,
        sink: Sink,
        name: str,
        processor: LevelProcessor,
        sliding: Sliding | None = None,
    ) -> RegisteredQuery | None:
        """The query as a branch of its stream's network of ``kind`` (selections or
        windows), one per stream and level processor (levels never share one); None
        when its plan is not one that network shares (it then runs on its own).
        ``sliding``: a sliding-window aggregate's window (its SQL grouped by it)."""
        if isinstance(sink, MemorySink) or len(admitted.streams) != 1:
            return None
        stream = admitted.streams[0]
        key = (stream, processor.name)
        networks, branches = self._kinds[kind]
        network = networks.get(key)
        fresh = network is None
        if network is None:
            level = admitted.level
            suffix = "" if level is None else f"-{processor.name}"
            scan = self.scans.get(key)
            if scan is None:
                scan = (DrivenScan if self.tuning.driven_scan else StreamScan)(
                    processor.session,
                    self.queries.labelled,
                    self.streams[stream],
                    self.queries.codec.width,
                    scan_checkpoint(
                        [
                            processor.path(SharedNetwork.FOLDER, stream, "checkpoint"),
                            processor.path(WindowNetwork.FOLDER, stream, "checkpoint"),
                        ]
                    ),
                    f"scan-{stream}{suffix}",
                    level.width if level is not None else 0,
                    processor.shepherd,
                    TRIGGER_SECONDS,
                )
            parts = NetworkParts(
                processor.session,
                self.queries.labelled,
                self.streams[stream],
                self.queries.codec,
                self.queries.provenance,
                processor.path(kind.FOLDER, stream),
                active=lambda query: self.switch(query),
                name=f"{kind.KIND}-{stream}{suffix}",
                levels=level.width if level is not None else 0,
                feed=processor.shepherd,
                scan=scan,
            )
            network = (
                SharedNetwork(parts, self.tuning.fuse, self.tuning.prebuilt_partials)
                if kind is SharedNetwork
                else kind(parts)
            )
        sql = self._secured(admitted, stream, sliding)
        scan = network.scan
        assert scan is not None
        with scan.joining():  # no micro-batch between its catch-up and its first batch
            try:
                branch = planned(
                    lambda: network.add(name, admitted, sql, _deliverer(sink)),
                    admitted.request.sql,
                    self._columns(admitted),
                )
            except NotShared:
                return None
            if fresh:
                networks[key] = network
                self.scans[key] = scan
                with processor.pool():
                    network.start()
        branches[name] = key
        handle = network.branch_handle(name)
        return self._record(name, admitted, handle, sink, branch.secured, branch.columns)  # type: ignore[arg-type]

    def _columns(self, admitted: AdmittedQuery) -> dict[str, tuple[str, ...]]:
        """The columns of the query's streams, named when Spark finds one unknown."""
        return {s: self.streams[s].names for s in admitted.streams}

    def _secured(
        self, admitted: AdmittedQuery, stream: str, sliding: Sliding | None = None
    ) -> Callable[..., Secured]:
        """The query secured over a view of ``stream`` (lang/rewrite_rules.py);
        ``statistics``: the view is a statistics view (an aggregate's, which a network
        branch decides as a query of its own would: ``runs_on_statistics``);
        ``sliding``: grouped by that window, as the query alone is."""

        def sql(view: str, statistics: bool = False) -> Secured:
            rewrite = self.queries.rewrite(
                {stream: view}, statistics, sliding, level=admitted.level
            )
            return secure(admitted.checked.tree, rewrite)

        return sql

    def _window_query(
        self, admitted: AdmittedQuery, sink: Sink, name: str, processor: LevelProcessor
    ) -> RegisteredQuery:
        _item, stream, window = admitted.shape.windows[0]
        query = WindowQuery(
            processor.session,
            self.queries.labelled,
            self.streams[stream],
            self.queries.codec,
            admitted.roles,
            window,
            self._secured(admitted, stream),
            admitted.shape.aggregate,
            _deliverer(sink),
            processor.path("windows", name),
            name,
            self.queries.provenance,
            admitted.level,
            output=admitted.output_level,
        )
        planned(query.analyse, admitted.request.sql, self._columns(admitted))
        with processor.pool():
            handle = query.start()
        self.window_queries[name] = query
        return self._record(name, admitted, handle, sink, query.secured)

    def _join_query(
        self, admitted: AdmittedQuery, sink: Sink, name: str, processor: LevelProcessor
    ) -> RegisteredQuery:
        shape, roles = admitted.shape, admitted.roles
        if len(shape.join_keys) != 1:
            raise QueryRejected("query_shape", "a join needs exactly one equality of keys")
        key = shape.join_keys[0]
        windows = {item: (stream, window) for item, stream, window in shape.windows}
        sides = []
        for alias, attr in ((key.left_alias, key.left_attr), (key.right_alias, key.right_attr)):
            stream, window = windows[alias]
            definition = self.streams[stream]
            if attr not in definition.names:
                raise QueryRejected("query_shape", f"{attr} is not an attribute of {stream}")
            sides.append(JoinSide(alias, definition, attr, window))
        level, output = admitted.level, admitted.output_level  # a join writes at its level
        sources = self.queries.provenance.encode(s.stream.name for s in sides)
        pairs = JoinInput(
            f"ss_{uuid.uuid4().hex}_join",
            tuple(PairSide(s.alias, s.stream.names, s.key) for s in sides),
            pair_columns(
                sides, self.queries.codec.width, level.width if level else 0, len(sources)
            ),
            self.queries.codec.block_width,
        )
        attributes = {s.stream.name: s.stream.names for s in sides}
        rewrite = Rewrite(admitted.streams, {}, attributes, level=level, join=pairs)
        secured = secure(admitted.checked.tree, rewrite)
        planned(
            lambda: self._analyse_join(secured, sides, pairs),
            admitted.request.sql,
            self._columns(admitted),
        )
        # Joins at different levels never share windows (nor state: the root follows ident).
        ident: tuple = (tuple(sides), self.join_mode)
        if level is not None:
            ident = (*ident, level.text, level.words)
        # A [ROWS n] side holds the n latest tuples its roles may read: one join per roles.
        readers = None
        if any(side.window.kind is WindowKind.ROWS for side in sides):
            readers = tuple(self.queries.codec.query(roles))
            ident = (*ident, "readers", readers)
        join = self.joins.get(ident)
        fresh = join is None
        if join is None:
            # Named after what it joins, so a restarted join resumes from its own state.
            digest = hashlib.sha256(repr(ident).encode()).hexdigest()[:16]
            join = SCJoin(
                processor.session,
                self.queries.labelled,
                self.queries.codec,
                sides[0],
                sides[1],
                processor.path("joins", digest),
                self.join_mode,
                name=f"join-{digest}",  # its job groups: join-<digest>:<query>
                level=level,
                feed=processor.shepherd,
                active=lambda query: self.switch(query),
                readers=readers,
            )
            self.joins[ident] = join
        deliver = _deliverer(sink)
        expected = {*pairs.columns, *(s.alias for s in sides)}

        def consume(frame: DataFrame, batch_id: int) -> None:
            frame = with_label(frame, sources)  # every pair comes from both streams
            if set(frame.columns) != expected:  # never a query over labels it was not secured for
                raise RuntimeError("the join's pairs lack the columns its query was secured over")
            frame.createOrReplaceTempView(pairs.view)
            try:
                out = frame.sparkSession.sql(secured.sql)
                deliver(out if level is None else at_output_level(out, level, output), batch_id)
            finally:
                frame.sparkSession.catalog.dropTempView(pairs.view)

        subscription = join.subscribe(roles, consume, name=name, sink=deliver)
        self.subscriptions[name] = (ident, subscription)
        if fresh:
            with processor.pool():
                self.join_handles[ident] = join.start()
        handle = self.join_handles[ident]
        return self._record(name, admitted, handle, sink, secured)

    def switched(self) -> list[tuple[str, str, Switched]]:
        """Every running node kind with privacy switches, as ``(what it reads, kind,
        it)``: a stream's networks of selections and of windows (keyed by stream and
        level processor), and each shared join (reading ``<left> JOIN <right>``)."""
        found: list[tuple[str, str, Switched]] = [
            (stream, "selections", n) for (stream, _processor), n in list(self.networks.items())
        ]
        found += [
            (stream, "windows", n) for (stream, _processor), n in list(self.window_networks.items())
        ]
        found += [(" JOIN ".join(j.streams), "joins", j) for j in list(self.joins.values())]
        return found

    def _analyse_join(self, secured: Secured, sides: Sequence[JoinSide], pairs: JoinInput) -> None:
        """Plans the secured query over empty pairs (one struct per alias, then the
        pairs' labels and origins) in a private session: Spark's refusals come at
        registration, not at the first pair."""
        session = self.queries.spark.newSession()
        structs = [
            f"`{side.alias}` STRUCT<{', '.join(f'`{n}`: {t}' for n, t in side.stream.attributes)}>"
            for side in sides
        ]
        labels = [
            f"`{c}` {'STRING' if c.endswith(('_channel', '_policy')) else 'BIGINT'}"
            for c in pairs.columns
        ]
        session.createDataFrame([], ", ".join([*structs, *labels])).createOrReplaceTempView(
            pairs.view
        )
        session.sql(secured.sql)

    def _record(
        self,
        name: str,
        admitted: AdmittedQuery,
        handle: StreamingQuery,
        sink: Sink,
        secured: Secured,
        columns: tuple[str, ...] = (),
    ) -> RegisteredQuery:
        """``secured``: the query as its engine secured it; ``columns``: its output's,
        labels included, where the engine planned them (unknown columns count as
        labelled)."""
        query = RegisteredQuery(
            name,
            admitted.request.sql,
            admitted.roles,
            admitted.streams,
            not columns or any(c.startswith("_ss_r0_") for c in columns),
            handle,
            self.queries.spark,
            sink,
            columns,
            admitted.level,
            secured.sql,
        )
        self.queries.queries[name] = query
        return query

    # -- delegation ------------------------------------------------------------------------

    def _delegate(
        self, admitted: AdmittedQuery, name: str, processor: LevelProcessor
    ) -> RegisteredQuery:
        if admitted.shape.kind is not ShapeKind.STREAM:
            raise QueryRejected("on_result", "ON RESULT is supported on unwindowed queries")
        hierarchy, roles, streams = self.queries.hierarchy, admitted.roles, admitted.streams
        if not may_delegate(self.shield_state.policies_in_force(), streams, roles, hierarchy):
            raise QueryRejected(
                "no_grant_option", "ON RESULT needs the inputs WITH GRANT OPTION for your roles"
            )
        on_result = admitted.request.on_result
        self._check_roles(on_result)
        targets = {st.stream for st in on_result if st.stream}
        if len(targets) > 1:
            raise QueryRejected("on_result", "ON RESULT sps must all go to one stream")
        target = targets.pop() if targets else f"{name.replace('-', '_')}_result"
        if target in self.streams:
            raise QueryRejected(
                "on_result_stream", "ON RESULT creates a new stream; that name is taken"
            )
        if admitted.level is not None and self.write_level is None:
            raise QueryRejected("on_result", "ON RESULT at a level needs a catalog for levels")
        source = self.streams[streams[0]]
        spgen = _DerivedSink(
            self, target, source, on_result, name, admitted.level, processor.path("spgen", name)
        )
        return self.queries.register(
            admitted, CallbackSink(spgen), name, grant=True, processor=processor
        )

    def register_stream(self, definition: StreamDefinition) -> None:
        """Make a new stream known to the catalog, the ingest and the query service."""
        if definition.name not in self.streams:
            self.catalog.register_stream(definition)
            self.landing.stream_dir(definition.name).mkdir(parents=True, exist_ok=True)
        self.ingest.streams[definition.name] = definition
        self.queries.streams[definition.name] = definition
        # A delegated stream is a source of its own: its owner vouched for it (SPGen).
        self.queries.sources.add([definition.name])


class _DerivedSink:
    """SPGen whose derived stream is registered from the output's schema on first use."""

    def __init__(
        self,
        service: CqlService,
        target: str,
        source: StreamDefinition,
        statements: Sequence[SpStatement],
        name: str,
        level: QueryLevel | None,
        root: Path,
    ) -> None:
        self.service, self.target, self.source = service, target, source
        self.statements, self.name, self.level, self.root = statements, name, level, root
        self.spgen: SpGen | None = None

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        if self.spgen is None:
            columns = [c for c in frame.columns if not c.startswith("_ss_")]
            tid = self.source.tid if self.source.tid in columns else columns[0]
            event = self.source.event_time if self.source.event_time in columns else None
            definition = derived_definition(self.target, frame.schema, tid, event)
            self.service.register_stream(definition)
            if self.level is not None:  # before any tuple lands: it writes at its level
                assert self.service.write_level is not None
                self.service.write_level(self.target, self.level)
            self.spgen = SpGen(
                self.service.landing,
                self.target,
                f"q-{self.name}",
                self.statements,
                tid,
                self.root,
            )
        self.spgen(frame, batch_id)


def _quietly(opener: Callable[[str], None], name: str) -> None:
    """A first opening in the background: a failure is logged, and the branch's next
    micro-batch (which also opens branches never received) does it instead."""
    try:
        opener(name)
    except Exception as err:
        log.warning("first opening of %s failed: %s", name, type(err).__name__)


def _deliverer(sink: Sink):
    """A per-batch delivery function for engines that produce one frame per instant."""
    if isinstance(sink, CallbackSink):
        return sink.fn
    if isinstance(sink, FileSink):
        return lambda frame, _batch: frame.write.mode("append").format(sink.format).save(sink.path)
    if isinstance(sink, ConsoleSink):
        return lambda frame, _batch: frame.show(truncate=False)
    raise QueryRejected("sink", "window and join queries deliver to callback, file or console")
