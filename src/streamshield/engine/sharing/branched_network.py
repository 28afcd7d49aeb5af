"""What every network of branches over one stream keeps the same way: which branches it
has, how far each has read, whether its switch lets it run, its job group, its failure
(docs/query-sharing.md).

Why one base: the selection network (engine/sharing/shared_network.py) and the window network
(engine/sharing/window_network.py) differ in what a micro-batch computes for the branches that
run, not in the bookkeeping around it. Both are one streaming query over the stream's
labelled store whose plan is the scan, so a branch joining or leaving never changes the
checkpoint; both keep each branch's position in a :class:`BranchLedger` (the newest
ingest batch it has covered), so that a branch joining reads what it has not covered up
to the network's position at once (its *catch-up*), a replayed micro-batch is skipped by
a branch that had it, and a branch whose switch is off moves on without computing
anything (what arrives while nobody may receive it is never computed). A branch never
received yet (no position) is the exception: its history waits, and it catches up when
its switch first opens, at once (:meth:`BranchedNetwork.open`), so that a query
registered after the data reads every labelled batch still kept. A branch's jobs
run in a Spark job group named ``<network>:<branch>``, which is how tests prove an off
branch did nothing; a branch's own Spark error stops it alone.

A subclass says what a micro-batch does (``_process_ids``), how a joining branch catches
up (``_catch_up``) and where its privacy switches sit (``switches``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.engine.levels.level_processor import POOL
from streamshield.engine.sharing.branch_ledger import NOTHING, BranchLedger, owes
from streamshield.engine.sharing.branch_switch import job_group, switched_on
from streamshield.engine.sharing.stream_scan import StreamScan
from streamshield.engine.store.labelled_store import (
    INGEST,
    LabelledStore,
    ingest_column,
    labelled_schema,
    read_batches,
)
from streamshield.lang.admission import AdmittedQuery
from streamshield.lang.rewrite_rules import Secured
from streamshield.network.switches import Switch
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.provenance import ProvenanceCodec

audit = logging.getLogger("streamshield.audit")
BranchSink = Callable[[DataFrame, int], None]


class BranchSql(Protocol):
    """A branch's query secured over a view name (``statistics``: the view is a
    statistics one)."""

    def __call__(self, view: str, statistics: bool = False) -> Secured: ...


BRANCH_THREADS = 4
"""Branches of one micro-batch run at once (their jobs share the cores, not a queue)."""
TRIGGER_SECONDS = 0.1
"""How often a network looks for newly labelled files: a landing waits half of it on
average before its rows are read (1 s cost 0.5 s of every landing's latency); an idle
trigger lists the stream's directory (``bench.landing_latency``)."""


class NotShared(ValueError):
    """The query cannot be a branch of this network (it then runs on its own)."""


class Branch(Protocol):
    """What the bookkeeping reads of a branch."""

    name: str
    admitted: AdmittedQuery
    failure: BaseException | None
    columns: tuple[str, ...]
    """Its output columns, labels included (empty: not known before it runs)."""


B = TypeVar("B", bound=Branch)


@dataclass(frozen=True)
class NetworkParts:
    """What a network over one stream is built from: the same for every kind of network
    (a selection network, a window network), so each takes this one value instead of
    repeating the list.

    ``active(branch)``: its privacy switch (an error reads as off). ``name``: the
    network's streaming query and job-group prefix (default ``<kind>-<stream>``).
    ``levels``: the level words the scan reads (0 while levels are off); every branch has
    a level of that width. ``feed``: what the scanned rows pass first (a level
    processor's shepherd). ``scan``: the stream's one streaming query, shared with its
    other networks (engine/sharing/stream_scan.py); None: the network runs its own."""

    spark: SparkSession
    labelled: LabelledStore
    stream: StreamDefinition
    codec: RoleCodec
    provenance: ProvenanceCodec
    root: Path
    active: Callable[[str], bool] = lambda _name: True
    name: str | None = None
    levels: int = 0
    feed: Callable[[DataFrame], DataFrame] | None = None
    scan: StreamScan | None = None


class BranchedNetwork(Generic[B]):
    """One stream's streaming query and the positions, switches and failures of its
    branches."""

    SUMMARIES = False
    """Whether the scan reads the labelled rows' scan summaries (engine/views/scan_summary.py)."""
    KIND = "network"
    """The default name's prefix (``<KIND>-<stream>``)."""
    FOLDER = "networks"
    """Where a query processor keeps this kind's networks (``<FOLDER>/<stream>``)."""

    def __init__(self, parts: NetworkParts) -> None:
        self.spark, self.labelled, self.stream = parts.spark, parts.labelled, parts.stream
        self.codec, self.provenance, self.root = parts.codec, parts.provenance, Path(parts.root)
        self.active, self.levels, self.feed = parts.active, parts.levels, parts.feed
        self.name = parts.name or f"{self.KIND}-{parts.stream.name}"
        self.ledger = BranchLedger(self.root / "branches")
        self.scan = parts.scan
        self.log = SourceLog(self.root / "checkpoint") if self.scan is None else self.scan.log
        self.handle: StreamingQuery | None = None
        self._branches: dict[str, B] = {}
        self._lock = threading.Lock()
        self._batch = threading.RLock()
        """Held through a micro-batch and through a branch's catch-up: a branch's position
        only moves under it, so a join never races a micro-batch."""
        self._position: int | None = None
        self._last: int | None = None
        """The newest micro-batch run by this process (None: none yet)."""
        self._pool: str | None = None
        """The scheduler pool the network was started in (its level processor's): a
        branch's thread takes it explicitly, a fresh thread does not inherit it."""

    # -- what a subclass says -----------------------------------------------------------------

    def add(self, name: str, admitted: AdmittedQuery, sql: BranchSql, sink: BranchSink) -> B:
        """A query joins as a branch (NotShared if it cannot): ``sql(view)`` is its
        secured SQL over its rows offered as ``view``, ``sink`` takes each output."""
        raise NotImplementedError

    def _process_ids(self, batch: DataFrame, batch_id: int, ids: frozenset[int]) -> None:
        """One micro-batch holding the rows of ingest batches ``ids`` (not empty)."""
        raise NotImplementedError

    def _catch_up(self, branch: B, covered: int, position: int) -> None:
        """A joining branch's rows of the ingest batches ``covered < id <= position``."""
        raise NotImplementedError

    def switches(self) -> tuple[Switch, ...]:
        """Where the privacy switches of the current branches sit (PrS Algorithm 2)."""
        raise NotImplementedError

    # -- branches -----------------------------------------------------------------------------

    @property
    def branches(self) -> dict[str, B]:
        with self._lock:
            return dict(self._branches)

    def _check_joinable(self, name: str, admitted: AdmittedQuery) -> None:
        if (admitted.level.width if admitted.level is not None else 0) != self.levels:
            raise NotShared("the network reads level words of another width")
        if name in self.branches:
            raise ValueError(f"a branch named {name!r} exists")

    def _join(self, branch: B) -> None:
        """The branch catches up with the stream's history up to the network's position
        (nothing computed if its switch is off) and takes every micro-batch after it. A
        branch never received (no ledger entry) keeps its history for its first opening
        (:meth:`open`)."""
        with self._batch:
            position = self._known_position()
            covered = self.ledger.covered(branch.name)
            if (
                covered < position
                and not self._is_on(branch.name)
                and not owes(branch, covered, position)
            ):
                if self.ledger.has(branch.name):  # switched off: it computes nothing
                    self.ledger.advance(branch.name, position)
            elif covered < position:
                self._catch_up(branch, covered, position)
            with self._lock:
                self._branches[branch.name] = branch

    def open(self, name: str) -> None:
        """Branch ``name``'s switch may have opened: if it was never received, it reads
        the kept history now, without waiting for the next micro-batch (its first
        instant, see :meth:`_open_fresh`). Between micro-batches: no batch is handed out
        meanwhile (the scan's :meth:`~StreamScan.joining`, then the batch lock)."""
        joining = self.scan.joining() if self.scan is not None else contextlib.nullcontext()
        with joining, self._batch:
            self._open_fresh({name})

    def _open_fresh(self, names: set[str] | None = None) -> None:
        """Each branch (of ``names``, default all) never received whose switch is on now
        catches up with the stream's history up to the network's position, as a branch
        joining does, and has a position from then on. Why: a new query's first
        micro-batch reads every labelled batch still kept (docs/administration.md), and
        for a switched branch its first micro-batch is its first opening; what arrives
        while a branch once received is switched off is never computed (PrS)."""
        position = self._known_position()
        for name, branch in self.branches.items():
            if names is not None and name not in names:
                continue
            if branch.failure is not None or self.ledger.has(name) or not self._is_on(name):
                continue
            if position > NOTHING:
                self._catch_up(branch, NOTHING, position)
            if branch.failure is None and not self.ledger.has(name):
                self.ledger.advance(name, position)

    def remove(self, name: str) -> None:
        """The branch leaves (its position is kept: joining again resumes from it)."""
        with self._lock:
            self._branches.pop(name, None)

    def forget(self, name: str) -> None:
        """The query is gone for good: its position too."""
        self.remove(name)
        self.ledger.drop(name)

    def branch_handle(self, name: str) -> BranchHandle:
        """A registered query's handle on its branch (stop: the branch leaves)."""
        return BranchHandle(self, name)

    # -- the streaming query ------------------------------------------------------------------

    def start(self, available_now: bool = False) -> StreamingQuery:
        self._pool = self.spark.sparkContext.getLocalProperty(POOL)
        if self.scan is not None:  # the stream's one scan: started with its first network
            self.handle = self.scan.attach(self, available_now)
            return self.handle
        self.handle = self.labelled.per_batch(
            self.spark,
            self.stream,
            self.codec.width,
            self._process,
            self.root / "checkpoint",
            self.name,
            available_now,
            self.levels,
            self.feed,
            TRIGGER_SECONDS,
            summaries=self.SUMMARIES,
        )
        return self.handle

    def stop(self) -> None:
        if self.scan is not None:
            self.scan.detach(self)  # the scan stops with its last network
        elif self.handle is not None:
            self.handle.stop()

    def reads(self) -> list[str]:
        """The columns of the stream's labelled rows a micro-batch hands this network."""
        return self._schema().fieldNames()

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        with self._batch:
            self._open_fresh()  # their history first: this batch's rows come after it
            self._last = batch_id
            ids = self.log.ingest_ids(batch_id)
            if ids is None:  # the log is not what we read: ask Spark (one job)
                ids = ingest_ids_of(batch)
            if ids:
                self._process_ids(batch, batch_id, ids)
                self._position = max(self._position or NOTHING, max(ids))

    def _due(self, newest: int) -> dict[str, tuple[B, int]]:
        """The branches this micro-batch (up to ingest batch ``newest``) is for, each with
        the ingest batch it has covered: not failed, not had it already (a replay), its
        switch on (or it owes the batch: delivered, then a crash before it was stored).
        A branch whose switch is off moves on without computing anything."""
        due: dict[str, tuple[B, int]] = {}
        for name, branch in self.branches.items():
            if branch.failure is not None:
                continue
            covered = self.ledger.covered(name)
            if covered >= newest:
                continue  # a replayed micro-batch it has had
            if not self._is_on(name) and not owes(branch, covered, newest):
                if self.ledger.has(name):  # switched off: nothing is computed for it
                    self.ledger.advance(name, newest)
                continue  # never received: its history waits for its first opening
            due[name] = (branch, covered)
        return due

    def _each(self, on: dict[str, B], work: Callable[[B], None], covered: int) -> None:
        """``work`` for each branch, side by side (Spark schedules jobs of several threads
        at once, so N small jobs keep every core busy instead of queueing). One branch runs
        in the calling thread: a fresh thread per micro-batch costs a thread, a Py4J
        connection of its own and the lookups of a session it does not have (its work,
        job group and failure handling are the same either way)."""
        if not on:
            return
        if len(on) == 1:
            (branch,) = on.values()
            self._run_branch(branch, work, covered)
            return
        with ThreadPoolExecutor(max_workers=min(BRANCH_THREADS, len(on))) as pool:
            futures = [pool.submit(self._run_branch, b, work, covered) for b in on.values()]
            for future in futures:
                future.result()

    def _run_branch(self, branch: B, work: Callable[[B], None], covered: int) -> None:
        """One branch's work in its job group; then its position is ``covered``. Its
        failure stops it alone (kept for its handle; the others go on)."""
        try:
            with self._job_group(branch.name):
                work(branch)
            self.ledger.advance(branch.name, covered)
        except Exception as err:
            branch.failure = err
            audit.error("branch %s of %s failed: %s", branch.name, self.name, err)

    def _job_group(self, part: str) -> AbstractContextManager[None]:
        """The enclosed Spark jobs run in the job group ``<network>:<part>``, in the network's
        scheduler pool."""
        return job_group(self.spark, self.name, part, self._pool)

    # -- positions and history ----------------------------------------------------------------

    def _known_position(self) -> int:
        """The newest ingest batch the network has read: from memory once it has run a
        micro-batch, else from its checkpoint (a fresh network has read nothing)."""
        if self._position is not None:
            return self._position
        position = self.log.position() if self.scan is None else self.scan.position()
        return NOTHING if position is None else position

    def _history(self, after: int, upto: int) -> DataFrame | None:
        """The stored rows of ingest batches ``after < id <= upto`` (None when none)."""
        if upto <= after:
            return None
        folders = [
            folder
            for folder in sorted(self.labelled.path(self.stream.name).glob("batch=*"))
            if folder.name[6:].isdigit()
            and after < int(folder.name[6:]) <= upto
            and any(folder.glob("*.parquet"))
        ]
        if not folders:
            return None
        stored = read_batches(self.spark, self._schema(), folders)
        return stored if self.feed is None else self.feed(stored)  # as the live rows

    def _schema(self) -> StructType:
        """The stream's labelled rows' schema (with its level words while levels are on)."""
        return labelled_schema(
            self.spark,
            self.stream.ddl,
            len(self.stream.names),
            self.codec.width,
            self.levels,
            summaries=self.SUMMARIES,
        )

    def _is_on(self, name: str) -> bool:
        return switched_on(self.active, name)


def ingest_ids_of(batch: DataFrame) -> frozenset[int]:
    """The ingest batches of a micro-batch, asked of Spark (a job: only when the source
    log cannot tell)."""
    rows = batch.select(ingest_column().alias(INGEST)).distinct().collect()
    return frozenset(r[0] for r in rows if r[0] is not None)


class BranchHandle:
    """What a registered query's handle offers, for one branch of a network.

    The network's streaming query is shared, so stopping a branch only takes it out of
    the network, and a branch's failure is its own; progress is the network's.
    """

    def __init__(self, network: BranchedNetwork[Any], name: str) -> None:
        self.network, self.branch_name = network, name

    def _branch(self) -> Branch | None:
        return self.network.branches.get(self.branch_name)

    @property
    def isActive(self) -> bool:
        branch, handle = self._branch(), self.network.handle
        return (
            branch is not None and branch.failure is None and handle is not None and handle.isActive
        )

    def exception(self) -> BaseException | None:
        branch = self._branch()
        if branch is not None and branch.failure is not None:
            return branch.failure
        handle = self.network.handle
        return None if handle is None else handle.exception()

    def processAllAvailable(self) -> None:
        handle = self.network.handle
        if handle is not None and handle.isActive:
            handle.processAllAvailable()
        branch = self._branch()
        if branch is not None and branch.failure is not None:
            raise branch.failure

    def stop(self) -> None:
        self.network.remove(self.branch_name)

    def __getattr__(self, attribute: str) -> Any:
        """Progress, status, id and name are the network's."""
        handle = self.network.handle
        if handle is None:
            raise AttributeError(attribute)
        return getattr(handle, attribute)
