"""Windowed queries over one stream run as one network: one scan, each window node kept
once, a branch per query with its own security: windows and
aggregates are node kinds of a shared network.

A window query alone (engine/queries/window_query.py) is a streaming query of its own that keeps
its own window state: N users with ``[RANGE 60]`` over one stream cost N scans and N
window states. Here one streaming query reads the stream and, per micro-batch, updates
each *window node* once (network/window_sharing.py says which branches one node serves,
and why): a node is a :class:`~streamshield.engine.queries.window_state.WindowState` over
labelled rows, persisted per batch id, so a replayed micro-batch sees the same relation.
Then every branch whose switch is on runs its own query over its own cut of the node:

- the selections it shares with other branches of the node (CW Figs. 3-5: the common
  conjuncts of their WHEREs, decomposed as in Defs. 7-8), each computed once per
  micro-batch over the node's raw rows and cached while its consumers run; a pre-filter
  that only drops rows the branch's own WHERE drops (engine/sharing/shared_selections.py);
- its tuple test (roles, level), so its window holds only tuples it may read;
- ``[RANGE t]``: only the node's rows within t of *its own* newest readable event time
  (the node keeps what its slowest branch needs: see window_sharing.py);
- then, unchanged, what the query does alone (WindowQuery.emit): ISTREAM or the
  aggregate over the window, its secured view (masks, provenance), its secured SQL (with
  the statistics-only and label-propagation rewrites), its level's assertion.

So every branch returns what its query alone returns, and an aggregate over a shared
window is one more branch (RSTREAM over its cut of the node).

Switches. A branch whose switch is off runs no Spark job; a node none of whose branches
is on is not updated (its state is rebuilt from the stream's stored history when one
comes back on, so the window it then serves is the true one; what arrived meanwhile is
never emitted, as for selections). A RANGE node is rebuilt too when it gains a branch:
the new branch's clock may need rows the others no longer do.

Positions. As in engine/sharing/shared_network.py (the bookkeeping both share is
engine/sharing/branched_network.py), each branch records the newest ingest batch it has covered
(engine/sharing/branch_ledger.py). A branch joining a network that has run reads
its window over the stream's stored history at once (catch-up: the rows of ingest
batches it has covered form its window before, the others arrive now), exactly what a
window query of its own would emit at its first micro-batch; a replayed micro-batch is
skipped by a branch that had it. The streaming plan is the scan, so the network's
checkpoint survives every branch joining or leaving.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamshield.durable import write_atomic
from streamshield.engine.queries.window_query import WindowQuery
from streamshield.engine.queries.window_state import ARRIVAL, RANK, WindowState, ranked, with_ingest
from streamshield.engine.sharing import node_members
from streamshield.engine.sharing.branch_ledger import NOTHING
from streamshield.engine.sharing.branched_network import (
    BranchedNetwork,
    BranchSink,
    BranchSql,
    NetworkParts,
    NotShared,
)
from streamshield.engine.sharing.shared_selections import selected_frames
from streamshield.engine.store.labelled_store import INGEST
from streamshield.lang.admission import AdmittedQuery
from streamshield.lang.continuous import ShapeKind
from streamshield.lang.rewrite_rules import Secured
from streamshield.lang.windows import WindowKind
from streamshield.network.from_query import where_conjuncts
from streamshield.network.predicates import Conjunction
from streamshield.network.switches import Switch
from streamshield.network.window_sharing import (
    WindowNode,
    node_vertex,
    window_network,
    window_node,
    window_nodes,
    window_switches,
)

_BEFORE = -1
"""The arrival of rows a rebuilt node held before this micro-batch (no batch has it)."""
KEPT = "kept.json"
"""Beside a ROWS node's versions: the newest one and how many rows it keeps."""


@dataclass
class WindowBranch:
    """One windowed query of the network: its query (secured view, SQL) and its node."""

    name: str
    admitted: AdmittedQuery
    query: WindowQuery
    node: WindowNode
    where: Conjunction | None = None
    """Its WHERE's ``attribute op constant`` conjuncts: what it may share above its node."""
    failure: BaseException | None = field(default=None, repr=False)
    """Why it stopped (its own Spark error); a failed branch runs no more."""
    columns: tuple[str, ...] = ()
    """Not known before it runs (a window query plans over its window's rows)."""

    @property
    def sink(self) -> Callable[[DataFrame, int], None]:
        return self.query.deliver

    @property
    def secured(self) -> Secured:
        """The query secured over its window's view."""
        return self.query.secured


@dataclass
class _Served:
    """What a node's stored state was last computed for."""

    batch: int
    members: frozenset[str]


class WindowNetwork(BranchedNetwork[WindowBranch]):
    """The streaming query of one stream's window network, its nodes and branches."""

    KIND = "windows"
    FOLDER = "window-networks"

    def __init__(self, parts: NetworkParts) -> None:
        """Queries at different levels never share one: every branch has a level of
        ``parts.levels``' width."""
        super().__init__(parts)
        self._states: dict[WindowNode, WindowState] = {}
        self._served: dict[WindowNode, _Served] = {}

    def nodes(self) -> dict[WindowNode, frozenset[str]]:
        """The window nodes of the current branches and the branches each serves."""
        return window_nodes(
            {n: (b.query.window, b.node.visibility) for n, b in self.branches.items()}
        )

    def switches(self) -> tuple[Switch, ...]:
        """Where the privacy switches of the current branches sit (PrS Algorithm 2 over
        stream -> window node -> shared selections -> branch: network/window_sharing.py)."""
        return window_switches(self.stream.name, self.nodes(), self._wheres(self.branches))

    def add(
        self, name: str, admitted: AdmittedQuery, sql: BranchSql, sink: BranchSink
    ) -> WindowBranch:
        """A windowed query joins (NotShared if it cannot): planned first (Spark's
        refusals are raised here), then it reads its window over the stream's history up
        to the network's position and takes every micro-batch after it."""
        shape = admitted.shape
        if (
            shape.kind is not ShapeKind.WINDOW_RELATION
            or admitted.delegating
            or admitted.streams != (self.stream.name,)
            or len(shape.windows) != 1
        ):
            raise NotShared("only one window over this network's stream is shared")
        self._check_joinable(name, admitted)
        window = shape.windows[0][2]
        node = window_node(window, self._visibility(admitted))
        query = WindowQuery(
            self.spark,
            self.labelled,
            self.stream,
            self.codec,
            admitted.roles,
            window,
            sql,
            shape.aggregate,
            sink,
            self.root,  # no state of its own: nothing is written there
            name,
            self.provenance,
            admitted.level,
            own_state=False,
            output=admitted.output_level,
        )
        query.analyse()
        branch = WindowBranch(name, admitted, query, node, where_conjuncts(admitted))
        with self._batch:
            if window.kind is not WindowKind.NOW:  # a NOW node keeps no state
                # a RANGE window over a stream without event time fails here
                node_members.join(self._state(node).directory, name)
            self._join(branch)
        return branch

    # -- one micro-batch ---------------------------------------------------------------------

    def _process_ids(self, batch: DataFrame, batch_id: int, ids: frozenset[int]) -> None:
        on = {name: branch for name, (branch, _covered) in self._due(max(ids)).items()}
        if on:  # every switch off: not even the scan's rows are read
            self._run(on, batch, batch_id, ids)

    def _run(
        self, on: dict[str, WindowBranch], batch: DataFrame, batch_id: int, ids: frozenset[int]
    ) -> None:
        """Each node of the branches that are on once, the selections several of its
        branches share once (CW Figs. 3-5), then each branch over its cut."""
        groups = window_nodes({n: (b.query.window, b.node.visibility) for n, b in on.items()})
        network = window_network(self.stream.name, groups, self._wheres(on))
        cached: list[DataFrame] = []
        # each row's ingest batch, which a ROWS window counts in, before anything is cached
        batch = with_ingest(batch, ids)
        try:
            if len(groups) > 1:  # several nodes read the scan: read its files once
                batch = batch.persist()
                cached.append(batch)
            inputs: dict[str, DataFrame] = {}
            for node, members in groups.items():
                branches = [on[m] for m in sorted(members)]
                rebuild = not self._current(node, members, batch_id)
                relation = self._node_relation(
                    node, branches, batch, batch_id, min(ids) if rebuild else None
                )
                cached.append(relation)
                self._served[node] = _Served(batch_id, members)
                selected = selected_frames(
                    network,
                    members,
                    {node_vertex(self.stream.name, node): relation},
                    self.stream,
                    cached,
                )
                with self._job_group(f"node:{_digest(node)}"):  # RANGE: the clocks' job
                    inputs.update(self._cuts(node, branches, relation, selected))
            self._each(on, lambda b: b.query.emit(inputs[b.name], batch_id), max(ids))
        finally:
            for frame in cached:
                frame.unpersist()

    def _current(self, node: WindowNode, members: frozenset[str], batch_id: int) -> bool:
        """Whether the node's stored state serves ``members`` at this batch: it was updated
        at the previous micro-batch (a ROWS node's state is its visibility's window,
        whoever it served: its stored version says so, even after a restart) and, for
        RANGE, in this process for a superset of these branches (the clocks it kept
        rows for are not stored: after a restart it is rebuilt)."""
        kind = node.window.kind
        if kind is WindowKind.NOW:
            return True  # no state
        if kind is WindowKind.ROWS:
            kept = self._kept(node)
            return kept is not None and kept[0] == batch_id - 1 and kept[1] >= self._size(node)
        served = self._served.get(node)
        return served is not None and served.batch == batch_id - 1 and members <= served.members

    def _node_relation(
        self,
        node: WindowNode,
        branches: list[WindowBranch],
        batch: DataFrame,
        batch_id: int,
        rebuild_before: int | None,
    ) -> DataFrame:
        """The node's window at this batch (computed once, in the node's job group, and
        cached while its branches read it); ``rebuild_before``: rebuilt from the stored
        history of the ingest batches before that one instead of its previous state."""
        admitted = _any([b.query.visible(batch.columns) for b in branches])
        with self._job_group(f"node:{_digest(node)}"):
            if node.window.kind is WindowKind.NOW:
                relation = batch.filter(admitted).withColumn(ARRIVAL, F.lit(batch_id).cast("long"))
            else:
                previous = None
                if rebuild_before is not None:
                    # a version of this batch a crash left was kept for other branches
                    # (a smaller size, other clocks): the rebuild computes it again
                    self._state(node).discard(batch_id)
                    history = self._history(NOTHING, rebuild_before - 1)
                    old = with_ingest(history if history is not None else self._empty())
                    previous = old.filter(admitted).withColumn(ARRIVAL, F.lit(_BEFORE).cast("long"))
                bound = self._slowest(node, branches) if node.per_branch_clock else None
                size = self._size(node) if node.per_branch_count else None
                state = self._state(node)
                relation = state.update(batch.filter(admitted), batch_id, previous, bound, size)
                if size is not None:  # each branch cuts its own latest rows out of these
                    self._keep(node, batch_id, size)
                    relation = ranked(relation)
            relation = relation.persist()
            relation.count()
        return relation

    def _cuts(
        self,
        node: WindowNode,
        branches: list[WindowBranch],
        relation: DataFrame,
        selected: dict[str, DataFrame],
    ) -> dict[str, DataFrame]:
        """Each branch's window out of the node's: its readable rows and, for RANGE, those
        within the window of its own newest readable event time (plans only), taken from
        ``selected``, the node's rows after the selections it shares with others. A
        branch's clock is read from the whole ``relation``: its window is cut by the time
        of every tuple it may read, whatever its WHERE keeps."""
        cuts = {
            b.name: selected[b.name].filter(b.query.visible(relation.columns)) for b in branches
        }
        if node.per_branch_count:  # its n latest (ranked before its WHERE: window first)
            sizes = {b.name: b.query.window.size for b in branches}
            return {n: cut.filter(F.col(RANK) <= sizes[n]).drop(RANK) for n, cut in cuts.items()}
        if not node.per_branch_clock:
            return cuts
        time, _ = self._state(node).event_units()
        bounds = self._bounds(node, relation, branches)
        return {
            name: cut.filter(F.lit(False))
            if bounds[name] is None
            else cut.filter(time > F.lit(bounds[name]))
            for name, cut in cuts.items()
        }

    def _bounds(
        self, node: WindowNode, rows: DataFrame, branches: list[WindowBranch]
    ) -> dict[str, int | None]:
        """Each branch's RANGE bound over ``rows``: its newest readable event time less its
        own width (its window is the readable rows after it), None if it reads none."""
        state = self._state(node)
        time, _ = state.event_units()
        clocks = _clocks(rows, branches, time)
        widths = {b.name: state.event_units(b.query.window)[1] for b in branches}
        return {n: None if c is None else c - widths[n] for n, c in clocks.items()}

    def _slowest(
        self, node: WindowNode, branches: list[WindowBranch]
    ) -> Callable[[DataFrame], int | None]:
        """A shared RANGE node's eviction bound: the oldest of its branches' bounds, so
        that it keeps every row any of them, whatever its width, still has in its
        window."""

        def bound(rows: DataFrame) -> int | None:
            known = [b for b in self._bounds(node, rows, branches).values() if b is not None]
            return min(known) if known else None

        return bound

    # -- joining ------------------------------------------------------------------------------

    def _catch_up(self, branch: WindowBranch, covered: int, position: int) -> None:
        """The branch's first instant: its window over the stored history up to the
        network's position, the rows of batches after ``covered`` arriving now (what a
        query of its own emits at its first micro-batch), delivered as the network's
        newest micro-batch."""
        history = self._history(NOTHING, position)
        if history is None:
            self.ledger.advance(branch.name, position)
            return
        scratch = self.root / "catch-up" / uuid.uuid4().hex
        instant = self._last_batch()
        try:
            state = WindowState(self.spark, branch.query.window, scratch, self._event_time())
            mine = with_ingest(history).filter(branch.query.visible(history.columns))
            before = mine.filter(F.col(INGEST) <= covered)
            new = mine.filter(F.col(INGEST) > covered)
            previous = before.withColumn(ARRIVAL, F.lit(_BEFORE).cast("long"))
            relation = state.update(new, instant, previous)
            self._run_branch(branch, lambda b: b.query.emit(relation, instant), position)
        finally:  # a failure is the branch's own, on its handle, as in a micro-batch
            shutil.rmtree(scratch, ignore_errors=True)

    def _last_batch(self) -> int:
        """The network's newest micro-batch (a joining branch's first instant)."""
        if self._last is not None:
            return self._last
        return max(self.log.last_batch(), 0)  # its own checkpoint, or its stream's scan's

    # -- parts --------------------------------------------------------------------------------

    @staticmethod
    def forget_nodes(root: Path, name: str) -> None:
        """Query ``name`` is removed for good: the nodes under the network folder
        ``root`` it was the last registered query of go (engine/sharing/node_members.py)."""
        node_members.leave(root / "nodes", name)

    def _state(self, node: WindowNode) -> WindowState:
        state = self._states.get(node)
        if state is None or not state.directory.is_dir():  # new, or forgotten since
            self._states[node] = WindowState(
                self.spark, node.window, self.root / "nodes" / _digest(node), self._event_time()
            )
        return self._states[node]

    def _size(self, node: WindowNode) -> int:
        """How many latest rows a ROWS node keeps: what its largest branch needs,
        switched on or not (a branch coming back on finds its rows kept)."""
        sizes = [b.query.window.size for b in self.branches.values() if b.node == node]
        return max(sizes, default=1)

    def _keep(self, node: WindowNode, batch_id: int, size: int) -> None:
        """Records how many rows the node's version ``batch_id`` keeps: a branch larger
        than that (one that joined since) needs the node rebuilt."""
        path = self._state(node).directory / KEPT
        write_atomic(path, json.dumps({"batch": batch_id, "size": size}))

    def _kept(self, node: WindowNode) -> tuple[int, int] | None:
        """The node's newest recorded version and its size (None: none recorded, or a
        record a crash left unreadable: the node is then rebuilt, never trusted)."""
        try:
            kept = json.loads((self._state(node).directory / KEPT).read_text())
            return int(kept["batch"]), int(kept["size"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _event_time(self) -> tuple[str, str] | None:
        event_time = self.stream.event_time
        return None if event_time is None else (event_time, self.stream.types[event_time])

    @staticmethod
    def _wheres(branches: dict[str, WindowBranch]) -> dict[str, Conjunction | None]:
        return {name: branch.where for name, branch in branches.items()}

    def _empty(self) -> DataFrame:
        return self.spark.createDataFrame([], self._schema())

    def _visibility(self, admitted: AdmittedQuery) -> tuple:
        """What decides which tuples a branch reads: its reader mask and its level."""
        level = admitted.level
        mask = tuple(self.codec.query(admitted.roles))
        return mask, None if level is None else (level.text, tuple(level.words))


def _clocks(rows: DataFrame, branches: list[WindowBranch], time: Column) -> dict[str, int | None]:
    """Each branch's newest readable event time among ``rows`` (one aggregate job)."""
    columns = [
        F.max(F.when(b.query.visible(rows.columns), time)).alias(f"c{i}")
        for i, b in enumerate(branches)
    ]
    values = rows.agg(*columns).first()
    return {b.name: None if values is None else values[i] for i, b in enumerate(branches)}


def _any(conditions: list[Column]) -> Column:
    return reduce(lambda a, b: a | b, conditions)


def _digest(node: WindowNode) -> str:
    return hashlib.sha256(repr(node).encode()).hexdigest()[:16]
