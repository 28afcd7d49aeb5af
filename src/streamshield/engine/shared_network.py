"""Queries over one stream run as one shared network: one scan, shared selections, a
branch per query with its own security (issue 12, item 2; first step).

N users watching one stream used to cost N streaming queries: N scans of the labelled
store and N micro-batches of fixed cost. Here one streaming query reads the stream and,
per micro-batch, computes the merged operator network of its branches
(:mod:`streamshield.network.merge`): the scan once, each selection shared by several
queries once (cached while its consumers run), then every branch whose privacy switch is
on runs its own query over its own secured view.

Security is per branch, never per network. A shared selection runs on labelled rows and
only drops rows; it is *implied* by each consumer's WHERE, built only where the
comparison means the same on raw values (a numeric attribute against a number, a string
attribute against a string; other atoms are left to the branch). Each branch then applies
its query's secured view (its roles: tuple filter, attribute masks) and the query's full,
secured SQL (lang/rewrite_rules.py) to what reaches it. So a branch returns exactly what
the query alone returns on the same micro-batch: a row the shared filter let through is
judged by the query itself; a row it dropped fails the query's own WHERE where the
attribute is visible, and where it is hidden the query's WHERE reads NULL and drops it too.

Switches. A branch whose switch is off (``active(name)`` false: no subscriber with access)
runs no Spark job, and a shared selection none of whose consumers is on is not computed:
the whole Python loop decides per micro-batch before any job starts. Each branch's jobs
run in a Spark job group named after it, which is how tests prove an off branch did
nothing.

Adding or removing a branch changes nothing in the streaming query's plan (the scan), so
the network's checkpoint stays valid whatever joins or leaves. Each branch keeps its own
position (:mod:`~streamshield.engine.branch_ledger`): the newest ingest batch of the
labelled store it has covered. A branch that joins reads what it has not covered up to
the network's position at once (catch-up, one batch job over those ingest batches), then
takes each micro-batch's rows after its position: a new query sees the stream's history as
a query of its own would, a restarted or re-joining one exactly the batches it missed, a
replayed micro-batch nothing twice. Its output of a micro-batch is stored under the
newest ingest id it covers, so a replay replaces a stored batch rather than doubling it.
Which ingest batches a micro-batch holds is read from the file source's log in the
checkpoint (:mod:`~streamshield.engine.source_log`), not computed by a job.

A branch that fails (a Spark error in its own SQL) stops alone: its error is kept for its
handle, and the network and the other branches go on.

Push. A landing's rows used to reach a branch only when the network's file source next
listed the stream's directory, after ingest had finished its micro-batch (its offsets
committed), and then through a micro-batch of the network's own (listing, its offset log
written). While its streaming query runs, a network also *listens* to the labelled store
(:meth:`LabelledStore.listen`): once ingest has committed batch N (its marker written:
the batch is final), a thread of the network reads each branch's stored rows after its
position up to N, exactly the folders of those ingest batches (as a catch-up does), and
hands them over under id N, moving the branch's position to N. The network's own
micro-batch that later reads batch N finds every branch covering it and runs nothing;
whichever comes first does the work, under the network's batch lock, so a batch is
handed once either way. Exactly-once, replay and restart rest on the positions as before:
a push is only a way of getting there sooner, and the streaming query (its checkpoint)
stays what a restart resumes from. A switched-off branch is left to the streaming query.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import StructType

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.branch_ledger import NOTHING, BranchLedger
from streamshield.engine.fused_branches import FusedBranch, NotFused, one_pass, rows_of
from streamshield.engine.labelled_store import LabelledStore, labelled_schema
from streamshield.engine.level_processor import POOL
from streamshield.engine.levels import assert_within
from streamshield.engine.provenance import label_literals
from streamshield.engine.result_store import DEFAULT_KEEP, ResultStore
from streamshield.engine.secured_view import SecuredProjection
from streamshield.engine.source_log import SourceLog
from streamshield.lang.admission import AdmittedQuery
from streamshield.network.from_query import operator_tree
from streamshield.network.merge import merge
from streamshield.network.operators import Operator, Project, Select
from streamshield.network.predicates import Comparison
from streamshield.network.switches import Switch, place_switches
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.provenance import ProvenanceCodec

audit = logging.getLogger("streamshield.audit")
BranchSink = Callable[[DataFrame, int], None]
BRANCH_THREADS = 4
"""Branches of one micro-batch run at once (their jobs share the cores, not a queue)."""
_NUMERIC = {"tinyint", "smallint", "int", "bigint", "float", "double"}
NETWORK_KEEP = 2 * DEFAULT_KEEP
"""Batches of the fused pass kept: a branch's links reach back its own ``keep`` batches,
which are among the network's newest unless the branch sat out many of them."""
TRIGGER_SECONDS = 0.1
"""How often a network looks for newly labelled files: a landing waits half of it on
average before its rows are read (1 s cost 0.5 s of every landing's latency); an idle
trigger lists the stream's directory (docs/results.md, "Issue 13: the query side")."""
PUSH_STOP_SECONDS = 60.0
"""How long stopping a network waits for a push under way (it hands over one batch)."""
_INGEST = "_ss_ingest"
"""A row's ingest batch, added to a micro-batch only when some branch needs part of it."""


@dataclass
class Branch:
    """One query of the network: its plan, its roles, its secured SQL and its output."""

    name: str
    admitted: AdmittedQuery
    tree: Operator | str
    view: str
    """The temp view its rows are offered under in every micro-batch (its own name)."""
    text: str
    """The query's secured SQL over that view: rewritten once, when the branch joins."""
    sink: BranchSink
    projection: SecuredProjection
    """Its secured view (roles, masks, provenance), built once when it joins."""
    columns: tuple[str, ...] = ()
    """Its output columns (labels included), from planning it at join."""
    fused: FusedBranch | None = field(default=None, repr=False)
    """Its part of the network's one pass over a micro-batch; None: it runs its own plan."""
    failure: BaseException | None = field(default=None, repr=False)
    """Why it stopped (its own Spark error); a failed branch runs no more."""


@dataclass(frozen=True)
class Linked:
    """A branch's batch as a link into the network's one write of its pass."""

    files: list[str]
    rows: Callable[[], DataFrame]
    """Its rows of the pass, planned when called (only when someone listens)."""


class NotShared(ValueError):
    """The query's plan is not a selection over this network's stream."""


class SharedNetwork:
    """The streaming query of one stream's shared network and its branches."""

    def __init__(
        self,
        spark: SparkSession,
        labelled: LabelledStore,
        stream: StreamDefinition,
        codec: RoleCodec,
        provenance: ProvenanceCodec,
        root: Path,
        active: Callable[[str], bool] = lambda _name: True,
        name: str | None = None,
        levels: int = 0,
        feed: Callable[[DataFrame], DataFrame] | None = None,
        fuse: bool = False,
    ) -> None:
        """``levels``: the level words its scan reads (0 while levels are off); each
        branch filters them at its own query's level in its own secured view.
        ``feed``: what the scanned rows pass first (its level processor's shepherd).
        ``fuse``: the branches that can are computed in one pass (engine/fused_branches.py).
        Off by default: while each branch's sink runs its own jobs, the pass (and the job
        that keeps a failing branch's error its own) costs more than the planning it saves
        (docs/query-sharing.md); it is the first half of serving a network in one job."""
        self.levels, self.feed, self.fuse = levels, feed, fuse
        self.spark, self.labelled, self.stream = spark, labelled, stream
        self.codec, self.provenance, self.root = codec, provenance, Path(root)
        self.active = active
        self.name = name or f"network-{stream.name}"
        self.ledger = BranchLedger(self.root / "branches")
        self.log = SourceLog(self.root / "checkpoint")
        self.store = ResultStore(self.root / "results", keep=NETWORK_KEEP)
        """The fused pass of each micro-batch, written once; branches' stores link to it."""
        self.handle: StreamingQuery | None = None
        self._branches: dict[str, Branch] = {}
        self._lock = threading.Lock()
        self._batch = threading.RLock()
        """Held through a micro-batch and through a branch's catch-up: a branch's position
        only moves under it, so a join never races a micro-batch."""
        self._position: int | None = None
        self._salt = uuid.uuid4().hex
        self._pusher: ThreadPoolExecutor | None = None
        """Runs pushes (one at a time, in order) while the streaming query runs."""
        self.pushed: collections.deque[tuple[int, float, float]] = collections.deque(maxlen=100)
        """The newest pushes that handed rows over: (ingest batch, start, end), epoch
        seconds (the latency bench reads them)."""
        self._pool: str | None = None
        """The scheduler pool the network was started in (its level processor's)."""

    @property
    def branches(self) -> dict[str, Branch]:
        with self._lock:
            return dict(self._branches)

    def add(
        self, name: str, admitted: AdmittedQuery, sql: Callable[[str], str], sink: BranchSink
    ) -> Branch:
        """A query joins the network (NotShared if it cannot): planned first (Spark's
        refusals are raised here), then it catches up with the stream's history up to
        the network's position and takes every micro-batch after it."""
        tree = operator_tree(admitted)
        if tree is None or admitted.streams != (self.stream.name,) or admitted.shape.windows:
            raise NotShared("only selections and projections over this stream are shared")
        if any(not isinstance(node, Select | Project) for node in _nodes(tree)):
            raise NotShared("only selections and projections are shared for now")
        if (admitted.level.width if admitted.level is not None else 0) != self.levels:
            raise NotShared("the network reads level words of another width")
        if name in self.branches:
            raise ValueError(f"a branch named {name!r} exists")
        view = f"ss_{uuid.uuid4().hex}_{self.stream.name}"
        projection = SecuredProjection.of(
            self._schema().fieldNames(),
            self.stream,
            self.codec,
            admitted.roles,
            keep_labels=True,
            salt=self._salt,
            level=admitted.level,  # the branch's own level, next to its roles' test
        ).with_columns(label_literals(self.provenance.label(self.stream.name)))
        branch = Branch(name, admitted, tree, view, sql(view), sink, projection)
        branch.columns, branch.fused = self._analyse(branch)
        with self._batch:
            position = self._known_position()
            covered = self.ledger.covered(name)
            if covered < position and not self._is_on(name):
                self.ledger.advance(name, position)  # switched off: it computes nothing
            elif covered < position:
                self._catch_up(branch, covered, position)
            with self._lock:
                self._branches[name] = branch
        return branch

    def remove(self, name: str) -> None:
        """The branch leaves (its position is kept: joining again resumes from it)."""
        with self._lock:
            self._branches.pop(name, None)

    def forget(self, name: str) -> None:
        """The query is gone for good: its position too."""
        self.remove(name)
        self.ledger.drop(name)

    def start(self, available_now: bool = False) -> StreamingQuery:
        """Starts the streaming query; unless ``available_now``, the network also listens
        to the labelled store for committed batches (push, see the module's docstring)."""
        self._pool = self.spark.sparkContext.getLocalProperty(POOL)
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
        )
        if not available_now:
            self._pusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
            self.labelled.listen(self._offer)
        return self.handle

    def stop(self) -> None:
        """Stops listening and the streaming query, then waits (bounded) for a push under
        way to hand its whole batch over, as a micro-batch under way does."""
        self.labelled.unlisten(self._offer)
        pusher, self._pusher = self._pusher, None
        if pusher is not None:
            pusher.shutdown(wait=False, cancel_futures=True)
        if self.handle is not None:
            self.handle.stop()
        if pusher is not None and self._batch.acquire(timeout=PUSH_STOP_SECONDS):
            self._batch.release()

    def _offer(self, batch_id: int, streams: Sequence[str]) -> None:
        """Ingest committed ``batch_id``: queue its push (this runs in ingest's micro-batch,
        so it only hands the id on)."""
        pusher = self._pusher
        if pusher is None or self.stream.name not in streams:
            return
        with contextlib.suppress(RuntimeError):  # stopped meanwhile
            pusher.submit(self._push, batch_id)

    def _push(self, upto: int) -> None:
        """Hands every switched-on branch its stored rows after its position up to ingest
        batch ``upto`` (committed), under id ``upto``, unless the network's own
        micro-batch did first. Never raises: what it does not do, that micro-batch does."""
        try:
            with self._batch:
                handle = self.handle
                if self._pusher is None or handle is None or not handle.isActive:
                    return
                on: dict[str, Branch] = {}
                inputs: dict[str, DataFrame] = {}
                for name, branch in self.branches.items():
                    covered = self.ledger.covered(name)
                    if branch.failure is not None or covered >= upto or not self._is_on(name):
                        continue
                    rows = self._history(covered, upto)
                    if rows is not None:
                        on[name], inputs[name] = branch, rows
                if on:
                    began = time.time()
                    self._run_each(on, inputs, upto)
                    self.pushed.append((upto, began, time.time()))
        except Exception as err:  # the network's micro-batch will hand the batch over
            audit.warning("push of batch %d to %s failed: %s", upto, self.name, err)

    def branch_handle(self, name: str) -> BranchHandle:
        return BranchHandle(self, name)

    def switches(self) -> tuple[Switch, ...]:
        """Where the privacy switches of the merged network of every branch sit (PrS
        Algorithm 2): what the API shows; the micro-batch decides from the same state."""
        trees = {name: _as_tree(b.tree, self.stream) for name, b in self.branches.items()}
        return place_switches(merge(trees)) if trees else ()

    # -- one micro-batch ---------------------------------------------------------------------

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        with self._batch:
            ids = self.log.ingest_ids(batch_id)
            if ids is None:  # the log is not what we read: ask Spark (one job)
                ids = _ingest_ids_of(batch)
            if ids:
                self._process_ids(batch, ids)
                self._position = max(self._position or NOTHING, max(ids))

    def _process_ids(self, batch: DataFrame, ids: frozenset[int]) -> None:
        newest, oldest = max(ids), min(ids)
        expected = self._known_position()  # where a branch that has had every batch stands
        on: dict[str, Branch] = {}
        behind: dict[str, int] = {}
        for name, branch in self.branches.items():
            if branch.failure is not None:
                continue
            covered = self.ledger.covered(name)
            if covered >= newest:
                continue  # a replayed micro-batch it has had
            if not self._is_on(name):
                self.ledger.advance(name, newest)  # switched off: nothing is computed for it
                continue
            on[name] = branch
            if covered != expected:
                behind[name] = covered  # needs part of this batch, or batches before it
        if not on:
            return  # every switch off: not even the scan's rows are read
        if behind:  # which rows come from which ingest batch, before anything is cached
            batch = batch.withColumn(_INGEST, _ingest_column())
        together = {n: b for n, b in on.items() if n not in behind}
        fused = {n: b for n, b in together.items() if b.fused is not None and self.fuse}
        alone = {n: b for n, b in on.items() if n not in fused}
        cached: list[DataFrame] = []
        try:
            if alone and (len(alone) > 1 or fused):  # a shared scan: read its files once
                batch = batch.persist()
                cached.append(batch)
            outputs, linked = self._fused_outputs(batch, fused, cached, newest)
            alone.update({n: b for n, b in fused.items() if n not in outputs and n not in linked})
            shared = {n: b for n, b in alone.items() if n in together}
            inputs = self._shared_inputs(batch, shared, cached)
            for name, covered in behind.items():
                inputs[name] = self._own_input(batch, covered, oldest)
            outputs.update({n: self._output(b, inputs[n]) for n, b in alone.items()})
            self._hand_over(on, outputs, newest, linked)
        finally:
            for df in cached:
                df.unpersist()

    def _fused_outputs(
        self, batch: DataFrame, fused: dict[str, Branch], cached: list[DataFrame], output_id: int
    ) -> tuple[dict[str, DataFrame], dict[str, Linked]]:
        """The outputs of the branches that run together, from one pass over the batch,
        and those stored as links into the network's one write of that pass instead
        (branch -> the written files and its rows, planned only if someone listens: the
        branch's sink then runs no job and plans nothing of its own).

        With several branches, or any sink that takes a link, the pass is executed here
        (written to the network's store, or cached), so that one branch's failing
        expression is not every branch's: if the pass fails, each runs its own plan."""
        if not fused:
            return {}, {}
        wide = one_pass(batch, [b.fused for b in fused.values() if b.fused is not None])
        linking = {n for n, b in fused.items() if callable(getattr(b.sink, "link", None))}
        files: list[str] = []
        try:
            if linking:
                wide = self.store.write(wide, output_id)
                files = self.store.files(output_id)
            elif len(fused) > 1:
                wide = wide.persist()
                cached.append(wide)
                wide.count()
        except Exception:  # each runs its own plan: the failing one fails alone
            return {}, {}

        def rows(branch: Branch) -> DataFrame:
            assert branch.fused is not None
            out = rows_of(wide, branch.fused)
            level = branch.admitted.level
            return out if level is None else assert_within(out, level)

        outputs = {n: rows(b) for n, b in fused.items() if n not in linking}
        linked = {n: Linked(files, functools.partial(rows, fused[n])) for n in linking}
        return outputs, linked

    def _shared_inputs(
        self, batch: DataFrame, on: dict[str, Branch], cached: list[DataFrame]
    ) -> dict[str, DataFrame]:
        """Each branch's rows after the shared operators of the merged network (plans only:
        no job runs here)."""
        if not on:
            return {}
        network = merge({name: _as_tree(b.tree, self.stream) for name, b in on.items()})
        shared = {node for node, users in network.usage.items() if len(users) > 1}
        frames: dict[Operator | str, DataFrame] = {}

        def frame(node: Operator | str) -> DataFrame:
            if node in frames:
                return frames[node]
            if isinstance(node, str):
                out = batch.drop(_INGEST) if _INGEST in batch.columns else batch
            elif isinstance(node, Select):
                condition = self._condition(node)
                parent = frame(node.inputs[0])
                out = parent if condition is None else parent.filter(condition)
            else:  # a projection: the branch projects; labels must stay for its view
                out = frame(node.inputs[0])
            if node in shared and not isinstance(node, str):
                out = out.persist()
                cached.append(out)
            frames[node] = out
            return out

        return {name: frame(network.roots[name]) for name in on}

    def _own_input(self, batch: DataFrame, covered: int, oldest: int) -> DataFrame:
        """A branch behind the network: the batch's rows after its position, and the ingest
        batches between its position and this batch (read from the store)."""
        rows = batch.filter(F.col(_INGEST) > covered).drop(_INGEST)
        history = self._history(covered, oldest - 1)
        return rows if history is None else history.unionByName(rows)

    def _run_each(
        self, on: dict[str, Branch], inputs: dict[str, DataFrame], output_id: int
    ) -> None:
        """Each branch computes and hands over its own output (its own jobs)."""
        outputs = {name: self._output(branch, inputs[name]) for name, branch in on.items()}
        self._hand_over(on, outputs, output_id)

    def _hand_over(
        self,
        on: dict[str, Branch],
        outputs: dict[str, DataFrame],
        output_id: int,
        linked: dict[str, Linked] | None = None,
    ) -> None:
        linked = linked or {}

        def hand(branch: Branch) -> None:
            if branch.name in linked:
                assert branch.fused is not None
                fused, to = branch.fused, linked[branch.name]
                link = branch.sink.link  # type: ignore[attr-defined]
                link(output_id, to.files, fused.slot, to.rows, fused.layout)
            else:
                branch.sink(outputs[branch.name], output_id)

        self._each(on, hand, output_id)

    def _each(self, on: dict[str, Branch], work: Callable[[Branch], None], output_id: int) -> None:
        # Branches run side by side (Spark schedules jobs of several threads at once), so N
        # small jobs keep every core busy instead of queueing behind each other.
        if not on:
            return
        with ThreadPoolExecutor(max_workers=min(BRANCH_THREADS, len(on))) as pool:
            futures = [pool.submit(self._run_branch, b, work, output_id) for b in on.values()]
            for future in futures:
                future.result()

    def _run_branch(self, branch: Branch, work: Callable[[Branch], None], output_id: int) -> None:
        """Runs one branch's work in its job group (how tests see which branch did work);
        its failure stops it alone."""
        sc = self.spark.sparkContext
        sc.setJobGroup(f"{self.name}:{branch.name}", f"branch {branch.name} of {self.name}", False)
        if self._pool is not None:  # a fresh thread does not inherit the starting thread's
            sc.setLocalProperty(POOL, self._pool)
        try:
            work(branch)
            self.ledger.advance(branch.name, output_id)
        except Exception as err:  # its own error, kept for its handle; the others go on
            branch.failure = err
            audit.error("branch %s of %s failed: %s", branch.name, self.name, err)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)

    # -- joining ------------------------------------------------------------------------------

    def _known_position(self) -> int:
        """The newest ingest batch the network has read: from memory once it has run a
        micro-batch, else from its checkpoint (a fresh network has read nothing)."""
        if self._position is not None:
            return self._position
        position = self.log.position()
        return NOTHING if position is None else position

    def _catch_up(self, branch: Branch, covered: int, position: int) -> None:
        history = self._history(covered, position)
        if history is None:
            self.ledger.advance(branch.name, position)  # nothing stored in between
        else:
            self._run_each({branch.name: branch}, {branch.name: history}, position)

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
        stored = self.spark.read.schema(self._schema()).parquet(*(str(f) for f in folders))
        return stored if self.feed is None else self.feed(stored)  # the shepherd, as live

    def _schema(self) -> StructType:
        """The stream's labelled rows' schema (with its level words while levels are on)."""
        return labelled_schema(
            self.spark, self.stream.ddl, len(self.stream.names), self.codec.width, self.levels
        )

    def _analyse(self, branch: Branch) -> tuple[tuple[str, ...], FusedBranch | None]:
        """Plans the branch's SQL over an empty labelled batch in a private session, so
        that Spark's refusals (unknown column, type error) come at registration; and its
        part of the network's one pass, kept only where it plans the same columns."""
        session = self.spark.newSession()
        empty = session.createDataFrame([], self._schema())
        columns = tuple(self._output(branch, empty).columns)
        view = branch.projection.apply(empty).columns
        try:
            slot = f"_ss_b{uuid.uuid4().hex[:12]}"
            fused = FusedBranch.of(slot, branch.projection, view, branch.text)
            same = tuple(rows_of(one_pass(empty, [fused]), fused).columns) == columns
        except (NotFused, AnalysisException):  # not plain, or planned otherwise: its own plan
            return columns, None
        return columns, fused if same else None

    def _is_on(self, name: str) -> bool:
        try:
            return bool(self.active(name))
        except Exception:  # an unknown switch state is off (deny by default)
            return False

    def _output(self, branch: Branch, rows: DataFrame) -> DataFrame:
        """The branch's query over its secured view of ``rows`` (a plan: no job runs);
        at a level, its rows' LUB is asserted dominated by it."""
        session = rows.sparkSession
        branch.projection.apply(rows).createOrReplaceTempView(branch.view)
        try:
            out = session.sql(branch.text)
            level = branch.admitted.level
            return out if level is None else assert_within(out, level)
        finally:  # the plan holds the view's rows; the name is not needed any more
            session.catalog.dropTempView(branch.view)

    def _condition(self, node: Select) -> Column | None:
        """The shared filter: the atoms that mean the same on raw values, or None."""
        parts = [c for c in (self._atom(a) for a in node.predicate.conjuncts) if c is not None]
        if not parts:
            return None
        out = parts[0]
        for part in parts[1:]:
            out = out & part
        return out

    def _atom(self, atom: Comparison) -> Column | None:
        names = {n.lower(): n for n in self.stream.names}
        attribute = names.get(atom.attribute.lower())
        if attribute is None:
            return None
        kind = self.stream.types[attribute].lower()
        numeric = isinstance(atom.value, int | float)
        if (numeric and kind not in _NUMERIC) or (not numeric and kind != "string"):
            return None  # Spark would cast: leave it to the branch's own WHERE
        return atom.op.apply(F.col(attribute), F.lit(atom.value))  # type: ignore[return-value]


def _nodes(tree: Operator | str) -> list[Operator]:
    return [] if isinstance(tree, str) else list(tree.nodes())


def _as_tree(tree: Operator | str, stream: StreamDefinition) -> Operator:
    """``SELECT * FROM s`` is the bare stream: as a node, the projection to everything."""
    return Project(frozenset(stream.names), (stream.name,)) if isinstance(tree, str) else tree


def _ingest_column() -> Column:
    """A row's ingest batch, from the path of the file it was read from."""
    return F.regexp_extract(F.input_file_name(), r"/batch=(\d+)/[^/]*$", 1).cast("long")


def _ingest_ids_of(batch: DataFrame) -> frozenset[int]:
    """The ingest batches of a micro-batch, asked of Spark (a job: only when the source
    log cannot tell)."""
    rows = batch.select(_ingest_column().alias(_INGEST)).distinct().collect()
    return frozenset(r[0] for r in rows if r[0] is not None)


class BranchHandle:
    """What a registered query's handle offers, for one branch of a shared network.

    The network's streaming query is shared, so stopping a branch only takes it out of
    the network, and a branch's failure is its own; progress is the network's.
    """

    def __init__(self, network: SharedNetwork, name: str) -> None:
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
