"""Queries over one stream run as one shared network: one scan, shared selections, a
branch per query with its own security (docs/query-sharing.md).

Why: N users watching one stream as N streaming queries would cost N scans of the
labelled store and N micro-batches of fixed cost. Here one streaming query reads the stream and,
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
position (:mod:`~streamshield.engine.sharing.branch_ledger`): the newest ingest batch of the
labelled store it has covered. A branch that joins reads what it has not covered up to
the network's position at once (catch-up, one batch job over those ingest batches), then
takes each micro-batch's rows after its position: a new query sees the stream's history as
a query of its own would, a restarted or re-joining one exactly the batches it missed, a
replayed micro-batch nothing twice. Its output of a micro-batch is stored under the
newest ingest id it covers, so a replay replaces a stored batch rather than doubling it.
Which ingest batches a micro-batch holds is read from the file source's log in the
checkpoint (:mod:`~streamshield.engine.ingest.source_log`), not computed by a job.

A branch that fails (a Spark error in its own SQL) stops alone: its error is kept for its
handle, and the network and the other branches go on. (This bookkeeping, shared with the
window network, is engine/sharing/branched_network.py.)

An owed batch is stored again under its own id. A branch's output is handed over under
an ingest batch's id (a micro-batch's newest, or the position a catch-up reached), and
after a crash between its delivery and its store's write the network's next micro-batch
or catch-up may read that batch together with later ones (a fresh checkpoint, a
position that moved on meanwhile). Folded into one later output, the subscriber who had
the owed id would be handed its rows again under the later id; so a branch owing ids
before a batch's newest first computes each owed id's rows alone
(:meth:`SharedNetwork._settle_owed`).
"""

from __future__ import annotations

import functools
import logging
import shutil
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.classic.column import _to_java_column, _to_seq
from pyspark.sql.classic.dataframe import DataFrame as ClassicFrame
from pyspark.sql.types import StructType

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.delivery.collected_rows import (
    CollectedRows,
    arrow_as_classic,
    arrow_table,
    picked_rows,
)
from streamshield.engine.delivery.delivery import Delivery, Planned, Together, deliver_together
from streamshield.engine.frames.driver_rows import local_frame
from streamshield.engine.sharing.aggregate_fold import Closing, FoldedAggregate
from streamshield.engine.sharing.aggregate_partials import collect_together
from streamshield.engine.sharing.aggregate_pass import PlannedPartials
from streamshield.engine.sharing.branch_ledger import owed_between, owes
from streamshield.engine.sharing.branched_network import (
    INGEST,
    BranchedNetwork,
    BranchSink,
    BranchSql,
    NetworkParts,
    NotShared,
    ingest_column,
)
from streamshield.engine.sharing.fused_branches import (
    FusedBranch,
    FusedPass,
    NotFused,
    Outputs,
    fused_pass,
)
from streamshield.engine.sharing.shared_selections import selected_frames
from streamshield.engine.store.result_store import (
    DEFAULT_KEEP,
    ResultStore,
    StoringSink,
    link_together,
)
from streamshield.engine.store.small_writes import (
    SMALL_BYTES,
    read_written,
    spark_arrow_schema,
    total_bytes,
)
from streamshield.engine.views.level_columns import at_output_level
from streamshield.engine.views.provenance_columns import label_literals
from streamshield.engine.views.secured_view import (
    WATERMARK_MICROS,
    SecuredProjection,
    StatisticsProjection,
)
from streamshield.lang.admission import AdmittedQuery
from streamshield.lang.continuous import ShapeKind
from streamshield.lang.output_level import OutputLevel
from streamshield.lang.partial_aggregates import Fold, fold_of, partial_parts
from streamshield.lang.rewrite_rules import Secured, runs_on_statistics
from streamshield.lang.sliding_fold import sliding_fold
from streamshield.network.from_query import operator_tree, where_conjuncts
from streamshield.network.merge import merge
from streamshield.network.operators import Operator, Project, Select, select
from streamshield.network.switches import Switch, place_switches
from streamshield.network.window_sharing import BranchVertex

audit = logging.getLogger("streamshield.audit")
AGGREGATES = "(aggregates)"
"""The job group part of the one job collecting every aggregate branch's partials."""
DELIVERY = "(delivery)"
"""The job group part of the one job delivering every listening branch (no query's name:
names are identifiers)."""
NETWORK_KEEP = 2 * DEFAULT_KEEP
"""Batches of the fused pass kept: a branch's links reach back its own ``keep`` batches,
which are among the network's newest unless the branch sat out many of them."""
SMALL_BATCHES = 64
"""At most this many ingest batches in a pass written from the driver (each is listed)."""
DRIVER_WORK = 4_000
"""At most this many rows times branches squared in a pass delivered from the driver
(its rows a local relation: engine/frames/driver_rows.py). Catalyst computes a local
relation's projections interpreted while it plans, and a projection's cost a row grows
with the square of its columns (``InterpretedMutableProjection`` indexes a Scala
``List``): 16 branches' view columns (390) cost ~3 ms a row, so a 1,000-row batch took
3 s and, as batches grew with the delay, delivery fell ever further behind. A job's
generated code costs its fixed ~0.1-0.2 s and little a row: one branch stays on the
driver up to 4,000 rows, sixteen hardly ever."""


@dataclass
class Branch:
    """One query of the network: its plan, its roles, its secured SQL and its output."""

    name: str
    admitted: AdmittedQuery
    tree: Operator | str
    view: str
    """The temp view its rows are offered under in every micro-batch (its own name)."""
    secured: Secured
    """The query secured over that view, once, when the branch joins."""
    text: str
    """The SQL each micro-batch plans over that view: the secured query's, or for an
    aggregate its fold's partials."""
    sink: BranchSink
    projection: SecuredProjection | StatisticsProjection
    """Its secured view (roles, masks, provenance), built once when it joins: a
    statistics view for an aggregate that statistics-only access may feed."""
    stamped: bool
    """Whether its rows are labelled at its query's level (write-equal): at a level,
    unless it is a stateless selection, whose rows keep their tuples' own levels
    (``AdmittedQuery.output_level``: decided once when it joins, not per micro-batch)."""
    columns: tuple[str, ...] = ()
    """Its output columns (labels included), from planning it at join."""
    fused: FusedBranch | None = field(default=None, repr=False)
    """Its part of the network's one pass over a micro-batch; None: it runs its own plan."""
    folded: FoldedAggregate | None = field(default=None, repr=False)
    """An aggregate's state across micro-batches (engine/sharing/aggregate_fold.py); its plan
    over a batch (``text``) is then the fold's partials, emitted through the state."""
    partials: PlannedPartials | None = field(default=None, repr=False)
    """Its partial query as column expressions built when it joins, applied to each
    batch (engine/sharing/aggregate_pass.py); None: its partial SQL is planned per batch."""
    java_view: Any = field(default=None, repr=False)
    """Its secured projection's columns as a Java list (``_view``), built on first use."""
    failure: BaseException | None = field(default=None, repr=False)
    """Why it stopped (its own Spark error); a failed branch runs no more."""


@dataclass(frozen=True)
class Linked:
    """A branch's batch as a link into the network's one write of its pass."""

    files: list[str]
    rows: Callable[[], DataFrame]
    """Its rows of the pass, planned when called (only when someone listens)."""
    spec: Mapping[str, Any]
    """How its rows are rebuilt from the stored pass (kept in its link)."""
    passed: FusedPass | None = field(default=None, repr=False)
    wide: DataFrame | None = field(default=None, repr=False)
    """The pass and its stored copy, read: where every listening branch's delivery
    reads in one job."""
    delivered: PassDelivered | None = field(default=None, repr=False)
    """Its delivery, collected by the job that computed the pass (a small pass)."""


@dataclass(frozen=True, eq=False)
class PassDelivered:
    """A small pass, stored, and its listening branches' deliveries, collected by the
    same job (:meth:`SharedNetwork._pass_delivered`): handed over once every one of
    them has its link stored."""

    files: list[str]
    table: pa.Table
    """The pass's rows as stored."""
    together: Together
    rows: CollectedRows
    counts: dict[str, Any] | None
    arrived: float
    names: frozenset[str]


class SharedNetwork(BranchedNetwork[Branch]):
    """The streaming query of one stream's shared network and its branches."""

    SUMMARIES = True  # its secured views pre-filter by the scan summaries
    deliver_together = True
    """Every listening linked branch delivered by one Spark job instead of each by its
    own (a job per branch when it is off, when fewer than two listen, or when the one job
    fails), each distinct class plan once (equal questions with equal rights are one
    column and one list of rows); over a small pass, by the job that computes the pass
    (:meth:`_pass_delivered`). Measured at 64 listening users: ``bench.sharing_users``,
    docs/performance.md."""

    def __init__(
        self, parts: NetworkParts, fuse: bool = False, prebuilt_partials: bool = True
    ) -> None:
        """Each branch filters the level words the scan reads (``parts.levels``) at its
        own query's level, in its own secured view. ``fuse``: the branches that can are
        computed in one pass (engine/sharing/fused_branches.py) and stored once in the network's
        store, each branch's batch a link into it; the server turns it on (its
        ``fuse_branches`` setting). Off here: a network whose sinks take no link pays
        for the pass and its cache, and each sink's own jobs (docs/query-sharing.md)."""
        super().__init__(parts)
        self.fuse = fuse
        self.prebuilt_partials = prebuilt_partials
        """Aggregate branches' partials built once as column expressions
        (``EngineTuning.prebuilt_partials``)."""
        self.store = ResultStore(self.root / "results", keep=NETWORK_KEEP)
        """The fused pass of each micro-batch, written once; branches' stores link to it."""
        self._salt = uuid.uuid4().hex
        self._unswitched: set[str] = set()
        """Aggregate branches: no privacy switch (see :meth:`_fold`)."""

    def add(self, name: str, admitted: AdmittedQuery, sql: BranchSql, sink: BranchSink) -> Branch:
        """A query joins the network (NotShared if it cannot): planned first (Spark's
        refusals are raised here), then it catches up with the stream's history up to
        the network's position and takes every micro-batch after it."""
        sliding = admitted.shape.kind is ShapeKind.SLIDING_AGGREGATE
        if admitted.streams != (self.stream.name,) or (admitted.shape.windows and not sliding):
            raise NotShared("only queries over this stream without a window are shared")
        aggregate = admitted.shape.aggregate
        tree = self._tree(name, admitted)
        self._check_joinable(name, admitted)
        view = f"ss_{uuid.uuid4().hex}_{self.stream.name}"
        statistics = aggregate and runs_on_statistics(
            admitted.checked.tree, admitted.streams, aggregate
        )
        literals = label_literals(self.provenance.label(self.stream.name))
        projection: SecuredProjection | StatisticsProjection
        if statistics:
            projection = StatisticsProjection(
                self.stream, self.codec, admitted.roles, admitted.level, literals
            )
        else:
            projection = SecuredProjection.of(
                self._schema().fieldNames(),
                self.stream,
                self.codec,
                admitted.roles,
                keep_labels=True,
                salt=self._salt,
                level=admitted.level,  # the branch's own level, next to its roles' test
            ).with_columns(literals)
        secured = sql(view, statistics=True) if statistics else sql(view)
        stamped = admitted.level is not None and admitted.output_level is OutputLevel.QUERY
        branch = Branch(name, admitted, tree, view, secured, secured.sql, sink, projection, stamped)
        if aggregate:
            branch.columns = self._fold(branch)
            self._unswitched.add(name)
        else:
            branch.columns, branch.fused = self._analyse(branch)
        self._join(branch)
        return branch

    def _tree(self, name: str, admitted: AdmittedQuery) -> Operator | str:
        """The branch's operator tree: a selection's own; an aggregate keeps a state of
        its own, so it is one vertex over the selections it shares (CW Figs. 3-5)."""
        if admitted.shape.aggregate:
            where = where_conjuncts(admitted)
            stream = self.stream.name
            return BranchVertex(name, (select(where, stream) if where else stream,))
        tree = operator_tree(admitted)
        if tree is None or any(not isinstance(node, Select | Project) for node in _nodes(tree)):
            raise NotShared("only selections, projections and aggregates are shared for now")
        return tree

    def _fold(self, branch: Branch) -> tuple[str, ...]:
        """An aggregate branch's fold (NotShared where its aggregates do not merge, or
        where folding would not give the columns and types its query gives alone);
        versions of its state a crash left after its position are dropped.

        An aggregate has no privacy switch: it folds every batch whoever listens, as its
        query alone did. Every later value of an aggregate depends on every row, so its
        result store holds each update when it happens and a subscriber who comes back
        replays what changed while she was away (``?after=``), which a switched-off
        branch could not give her; it still shares the scan and the selections."""
        fold, closing = self._fold_of(branch)
        session = self.spark.newSession()
        empty = session.createDataFrame([], self._schema())
        alone = self._output(branch, empty)
        names = tuple(alone.columns)
        branch.text = fold.partial
        path = self.aggregate_path(self.root, branch.name)
        branch.folded = FoldedAggregate(fold, path, names, closing=closing)
        try:
            own = self._output(branch, empty)
            planned = branch.folded.plan(own)
        except AnalysisException as err:
            raise NotShared(f"the query does not fold: {err}") from None
        if [f.dataType for f in planned.schema] != [f.dataType for f in alone.schema]:
            raise NotShared("folded, the query's columns would change type")
        parts = partial_parts(fold) if self.prebuilt_partials else None
        if parts is not None:
            try:
                view = branch.projection.apply(empty)
                branch.partials = PlannedPartials.of(parts, view, own)
            except AnalysisException:  # planned otherwise: its SQL per batch
                branch.partials = None
        branch.folded.purge_after(self.ledger.covered(branch.name))
        return names

    def _fold_of(self, branch: Branch) -> tuple[Fold, Closing | None]:
        """The branch's fold, and for a sliding-window aggregate how its windows close
        (lang/sliding_fold.py: the window's start and end are keys; with a timestamp
        event time, Spark's watermark on its view, kept by the fold). NotShared where
        it does not fold."""
        if branch.admitted.shape.kind is not ShapeKind.SLIDING_AGGREGATE:
            fold = fold_of(branch.secured.tree)
            if fold is None:
                raise NotShared("the query's aggregates do not fold batch by batch")
            return fold, None
        event_time = self.stream.event_time
        if event_time is None:
            raise NotShared("the stream has no event time")
        watermark = self.stream.types[event_time] == "timestamp"  # as its view has one
        sliding = sliding_fold(branch.secured.tree, event_time, watermark)
        if sliding is None:
            raise NotShared("the sliding-window aggregate does not fold batch by batch")
        closing = None
        if sliding.latest is not None:
            closing = Closing(sliding.end, sliding.latest, WATERMARK_MICROS)
        return sliding.fold, closing

    @staticmethod
    def aggregate_path(root: Path, name: str) -> Path:
        """Where an aggregate branch of the network under ``root`` keeps its state."""
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"{name!r} is not a branch name")
        return Path(root) / "aggregates" / name

    def remove(self, name: str) -> None:
        super().remove(name)
        self._unswitched.discard(name)

    def forget(self, name: str) -> None:
        super().forget(name)
        shutil.rmtree(self.aggregate_path(self.root, name), ignore_errors=True)

    def switches(self) -> tuple[Switch, ...]:
        """Where the privacy switches of the merged network of every branch sit (PrS
        Algorithm 2): what the API shows; the micro-batch decides from the same state."""
        trees = {
            name: _as_tree(b.tree, self.stream)
            for name, b in self.branches.items()
            if name not in self._unswitched
        }
        return place_switches(merge(trees)) if trees else ()

    def _is_on(self, name: str) -> bool:
        return name in self._unswitched or super()._is_on(name)

    # -- owed batches ------------------------------------------------------------------------

    def _settle_owed(
        self, due: dict[str, tuple[Branch, int]], newest: int
    ) -> dict[str, tuple[Branch, int]]:
        """The due branches (``_due(newest)``) with their positions, once each has
        computed, alone and under its own id, every output it owes before ``newest`` (see
        the module's docstring). A branch that failed doing so is left out, and so is a
        switched-off one that owes nothing more (it moves on, as in ``_due``)."""
        out: dict[str, tuple[Branch, int]] = {}
        for name, (branch, covered) in due.items():
            owed = owed_between(branch, covered, newest - 1)
            for owed_id in owed:
                self._hand_history(branch, covered, owed_id)
                if branch.failure is not None:
                    break
                covered = owed_id
            if branch.failure is not None:
                continue
            if owed and not self._is_on(name) and not owes(branch, covered, newest):
                self.ledger.advance(name, newest)  # switched off: nothing more is computed
                continue
            out[name] = (branch, covered)
        return out

    # -- one micro-batch ---------------------------------------------------------------------

    def _process_ids(self, batch: DataFrame, _batch_id: int, ids: frozenset[int]) -> None:
        newest = max(ids)
        due = self._settle_owed(self._due(newest), newest)
        # where a branch that has had every batch stands
        self._compute(batch, due, self._known_position(), min(ids), newest)

    def _compute(
        self,
        batch: DataFrame,
        due: dict[str, tuple[Branch, int]],
        expected: int,
        oldest: int,
        newest: int,
    ) -> None:
        """The due branches' outputs of ``batch`` (the stored rows of ingest batches
        ``oldest`` to ``newest``), handed over under id ``newest``. The branches that
        stand at ``expected`` share the batch (the fused pass, or the merged network's
        shared operators); any other computes its own rows from its position."""
        on: dict[str, Branch] = {}
        behind: dict[str, int] = {}
        for name, (branch, covered) in due.items():
            on[name] = branch
            if covered != expected:
                behind[name] = covered  # needs part of this batch, or batches before it
        if not on:
            return  # every switch off: not even the scan's rows are read
        if behind:  # which rows come from which ingest batch, before anything is cached
            batch = batch.withColumn(INGEST, ingest_column())
        together = {n: b for n, b in on.items() if n not in behind}
        fused = {n: b for n, b in together.items() if b.fused is not None and self.fuse}
        alone = {n: b for n, b in on.items() if n not in fused}
        # aggregate branches with prebuilt partials are one job's parts: each scans for
        # itself, as its query alone does (no cache to build before the others read it)
        scanning = {n for n, b in together.items() if b.partials is not None}
        cached: list[DataFrame] = []
        try:
            if len(alone.keys() - scanning) > 1 or (fused and alone.keys() - scanning):
                batch = batch.persist()  # a shared scan: read its files once
                cached.append(batch)
            small = self._small(oldest, newest)
            outputs, linked = self._fused_outputs(batch, fused, cached, newest, small)
            alone.update({n: b for n, b in fused.items() if n not in outputs and n not in linked})
            shared = {n: b for n, b in alone.items() if n in together and n not in scanning}
            inputs = self._shared_inputs(batch, shared, cached)
            prebuilt = {n: b for n, b in alone.items() if n in scanning}
            inputs.update(self._shared_inputs(batch, prebuilt, cached, persist=False))
            for name, covered in behind.items():
                inputs[name] = self._own_input(batch, covered, oldest)
            outputs.update(
                {n: self._output(b, inputs[n]) for n, b in alone.items() if b.folded is None}
            )
            rows = {n: inputs[n] for n, b in alone.items() if b.folded is not None}
            self._hand_over(on, outputs, newest, linked, rows)
        finally:
            for df in cached:
                df.unpersist()

    def _small(self, oldest: int, newest: int) -> bool:
        """Whether the stored ingest batches ``oldest..newest`` are small enough for
        their pass to be written from the driver (engine/store/small_writes.py)."""
        if newest - oldest >= SMALL_BATCHES:
            return False
        ids = range(oldest, newest + 1)
        folder = self.labelled.path(self.stream.name)
        # the store lists names: a bare name would be sized from the cwd and, missing,
        # count as large (so no pass was ever written from the driver)
        files = [
            folder / f"batch={i}" / name
            for i in ids
            for name in self.labelled.files(self.stream.name, i)
        ]
        return total_bytes(files) <= SMALL_BYTES

    def _fused_outputs(
        self,
        batch: DataFrame,
        fused: dict[str, Branch],
        cached: list[DataFrame],
        output_id: int,
        small: bool = False,
    ) -> tuple[dict[str, DataFrame], dict[str, Linked]]:
        """The outputs of the branches that run together, from one pass over the batch,
        and those stored as links into the network's one write of that pass instead
        (branch -> the written files and its rows, planned only if someone listens: the
        branch's sink then runs no job and plans nothing of its own). ``small``: the
        pass is written from the driver; its rows are then read, and delivered, as the
        local relation of the rows written (engine/frames/driver_rows.py), not from the files.

        With several branches, or any sink that takes a link, the pass is executed here
        (written to the network's store, or cached), so that one branch's failing
        expression is not every branch's: if the pass fails, each runs its own plan."""
        if not fused:
            return {}, {}
        passed = fused_pass(tuple(b.fused for b in fused.values() if b.fused is not None))
        wide = passed.over(batch)
        # A link is read back as the pass wrote it, its rows at their own levels
        # (``Branch.stamped``): a branch at its query's level hands over its rows itself.
        linking = {
            n for n, b in fused.items() if callable(getattr(b.sink, "link", None)) and not b.stamped
        }
        files: list[str] = []
        delivered: PassDelivered | None = None
        try:
            if linking:
                if small:
                    delivered = self._pass_delivered(fused, linking, passed, wide, output_id)
                if delivered is not None:
                    files, table = delivered.files, delivered.table
                else:
                    files, table = self.store.add_rows(wide, output_id, small)
                cheap = table is not None and table.num_rows * len(fused) ** 2 <= DRIVER_WORK
                local = local_frame(wide, table) if cheap and table is not None else None
                wide = read_written(wide, files) if local is None else local
            elif len(fused) > 1:
                wide = wide.persist()
                cached.append(wide)
                wide.count()
        except Exception:  # each runs its own plan: the failing one fails alone
            return {}, {}

        def rows(branch: Branch) -> DataFrame:
            assert branch.fused is not None
            return _within(branch, passed.rows(wide, branch.fused.slot))

        outputs = {n: rows(b) for n, b in fused.items() if n not in linking}
        linked = {
            n: Linked(
                files,
                functools.partial(rows, b),
                passed.specs[b.fused.slot],
                passed,
                wide,
                delivered if delivered is not None and n in delivered.names else None,
            )
            for n, b in fused.items()
            if n in linking and b.fused is not None
        }
        return outputs, linked

    def _pass_delivered(
        self,
        fused: dict[str, Branch],
        linking: set[str],
        passed: FusedPass,
        wide: DataFrame,
        output_id: int,
    ) -> PassDelivered | None:
        """A small pass stored and every listening branch's delivery collected by one
        Spark job (job group ``<network>:(delivery)``): the pass's rows with each class's
        pick and drop flags beside them, collected as Arrow; the pass's columns are
        stored (from the driver, as a small pass always is) and the rest is handed over
        once every listening branch's link is stored (:meth:`_deliver_together`).
        Without it the same batch costs two jobs, even for one listening branch: the
        pass's write, then the delivery's read of the files it wrote. None when nobody
        listens, or when that job fails: the pass is then written on its own, and each
        branch delivers as it would have, so that one branch's failing expression fails
        it alone."""
        listening = self._listening({n: fused[n] for n in linking})
        if not listening or not self.deliver_together:
            return None
        arrived = time.monotonic()
        slots = {n: b.fused.slot for n, b in fused.items() if b.fused and n in listening}
        try:
            with self._job_group(DELIVERY):
                outputs, parts = _planned_together(passed, wide, listening, slots)
                together = Together.of(parts)
                kept = wide.columns
                picked = outputs.frame.select(*map(_quoted, kept), *together.columns)
                if not arrow_as_classic(picked):
                    return None
                table = arrow_table(picked)
            stored = table.select(list(range(len(kept)))).cast(spark_arrow_schema(wide))
            files = self.store.add_table(stored, output_id)
        except Exception as err:  # the pass alone, then each branch as it would
            audit.warning(
                "network %s: the pass and its deliveries failed together (%s); "
                "the pass is written alone",
                self.name,
                type(err).__name__,
            )
            return None
        rows, counts = picked_rows(table, len(kept), len(together.picks), together.counted)
        return PassDelivered(files, stored, together, rows, counts, arrived, frozenset(listening))

    def _listening(self, linked: Mapping[str, Branch]) -> dict[str, tuple[StoringSink, Delivery]]:
        """The linked branches whose sink is the server's and someone listens to: those
        one job delivers together."""
        listening: dict[str, tuple[StoringSink, Delivery]] = {}
        for name, branch in linked.items():
            sink = branch.sink
            if not isinstance(sink, StoringSink) or not isinstance(sink.deliver, Delivery):
                continue  # not the server's sink: it delivers its own way
            if sink.wanted() and sink.deliver.subscriptions:
                listening[name] = (sink, sink.deliver)
        return listening

    def _shared_inputs(
        self,
        batch: DataFrame,
        on: dict[str, Branch],
        cached: list[DataFrame],
        persist: bool = True,
    ) -> dict[str, DataFrame]:
        """Each branch's rows after the shared operators of the merged network (plans only:
        no job runs here)."""
        if not on:
            return {}
        network = merge({name: _as_tree(b.tree, self.stream) for name, b in on.items()})
        rows = batch.drop(INGEST) if INGEST in batch.columns else batch
        leaves: dict[str | Operator, DataFrame] = {self.stream.name: rows}
        return selected_frames(network, on, leaves, self.stream, cached, persist)

    def _own_input(self, batch: DataFrame, covered: int, oldest: int) -> DataFrame:
        """A branch behind the network: the batch's rows after its position, and the ingest
        batches between its position and this batch (read from the store)."""
        rows = batch.filter(F.col(INGEST) > covered).drop(INGEST)
        history = self._history(covered, oldest - 1)
        return rows if history is None else history.unionByName(rows)

    def _run_each(
        self, on: dict[str, Branch], inputs: dict[str, DataFrame], output_id: int
    ) -> None:
        """Each branch computes and hands over its own output (its own jobs)."""
        outputs = {n: self._output(b, inputs[n]) for n, b in on.items() if b.folded is None}
        rows = {n: inputs[n] for n, b in on.items() if b.folded is not None}
        self._hand_over(on, outputs, output_id, rows=rows)

    def _hand_over(
        self,
        on: dict[str, Branch],
        outputs: dict[str, DataFrame],
        output_id: int,
        linked: dict[str, Linked] | None = None,
        rows: dict[str, DataFrame] | None = None,
    ) -> None:
        """Each branch's output handed to its sink: ``outputs`` (plans), ``linked``
        (links into the fused pass), and for aggregate branches ``rows`` (each one's
        input): its partials are planned only where it folds with Spark or without a
        prebuilt plan (``Branch.partials``)."""
        linked, rows = linked or {}, rows or {}
        planned: dict[str, DataFrame] = {}

        def partial(name: str) -> DataFrame:
            """The aggregate branch's partial query over its rows (a plan, made once)."""
            if name not in planned:
                planned[name] = self._output(on[name], rows[name])
            return planned[name]

        together = self._deliver_together(on, linked, output_id)
        driven = self._partials_on_driver(on, rows, output_id, partial)

        def hand(branch: Branch) -> None:
            if branch.name in together:
                return  # its link stored and its rows delivered, with the others
            if branch.name in linked:
                assert branch.fused is not None
                fused, to = branch.fused, linked[branch.name]
                link = branch.sink.link  # type: ignore[attr-defined]
                link(output_id, to.files, fused.slot, to.rows, to.spec)
            elif branch.folded is not None:
                folded = None
                if branch.name in driven:
                    since, table, schema = driven[branch.name]
                    session = rows[branch.name].sparkSession
                    folded = branch.folded.output_table(table, schema, since, output_id, session)
                if folded is None:  # not on the driver: folded by Spark
                    folded = self._folded(branch, partial(branch.name), output_id)
                branch.sink(_within(branch, folded), output_id)
            else:
                branch.sink(outputs[branch.name], output_id)

        self._each(on, hand, output_id)

    def _partials_on_driver(
        self,
        on: dict[str, Branch],
        rows: dict[str, DataFrame],
        output_id: int,
        partial: Callable[[str], DataFrame],
    ) -> dict[str, tuple[int, pa.Table, StructType]]:
        """The aggregate branches folded on the driver (engine/sharing/aggregate_fold.py): each
        one's state version, its partials and their Spark schema, every branch's
        collected by one Spark job (engine/sharing/aggregate_partials.py), each planned from
        its prebuilt columns (``Branch.partials``, engine/sharing/aggregate_pass.py) or else its
        SQL (``partial``). Only where the rows
        since the state's version are this batch's and small, and the state is small;
        if that job fails, none (each folds with Spark, so that one branch's failing
        expression fails it alone)."""
        due: dict[str, int] = {}
        for name, branch in on.items():
            if branch.folded is None or name not in rows or branch.failure is not None:
                continue
            since = branch.folded.since(self.ledger.covered(name))
            if since != self.ledger.covered(name):
                continue  # stored rows sat out in between: the Spark fold reads them
            if self._small(since + 1, output_id) and branch.folded.small_state(since):
                due[name] = since
        if not due:
            return {}
        group = next(iter(due)) if len(due) == 1 else AGGREGATES
        frames, schemas = {}, {}
        for name in due:
            prebuilt = on[name].partials
            if prebuilt is None:
                frames[name] = partial(name)
                schemas[name] = frames[name].schema
            else:
                frames[name] = prebuilt.over(_view(on[name], rows[name]))
                schemas[name] = prebuilt.schema
        try:
            with self._job_group(group):
                tables = collect_together(frames, schemas)
        except Exception as err:  # each folds alone: a failing branch fails alone
            audit.warning(
                "network %s: the aggregates' partials failed together (%s: %.300s); "
                "each folds alone",
                self.name,
                type(err).__name__,
                err,
            )
            return {}
        return {n: (since, tables[n], schemas[n]) for n, since in due.items()}

    def _folded(self, branch: Branch, partial: DataFrame, output_id: int) -> DataFrame:
        """An aggregate branch's output: its ``partial`` query over the rows after its
        position, folded into its state. Stored rows between its state's version
        and its position (none while it folds every batch, as it does: it has no switch)
        are folded in too, so that no path moving a position without a fold can leave
        rows out of an aggregate."""
        assert branch.folded is not None
        covered = self.ledger.covered(branch.name)
        since = branch.folded.since(covered)
        missed = self._history(since, covered)
        if missed is not None:
            partial = partial.unionByName(self._output(branch, missed))
        small = self._small(since + 1, output_id)
        return branch.folded.output(partial, since, output_id, small)

    def _deliver_together(
        self, on: dict[str, Branch], linked: dict[str, Linked], output_id: int
    ) -> set[str]:
        """Every listening linked branch's batch stored (its link) and delivered, all in
        one Spark job (job group ``<network>:(delivery)``) instead of one per branch: the
        pass read once, each branch's rows rebuilt beside the others', each subscriber
        checked by her own branch's delivery (SecFilter) on her own branch's rows only
        (those the pass's own job delivered, :meth:`_pass_delivered`, need no job here).
        The names done; none when fewer than two listen, or when that job fails: each
        then stores and delivers on its own, so that one branch's failing expression
        fails it alone."""
        done = self._delivered_with_pass(on, linked, output_id)
        listening = {
            name: parts
            for name, parts in self._listening({n: on[n] for n in linked}).items()
            if name not in done and linked[name].passed is not None
        }
        if len(listening) < 2 or not self.deliver_together:
            return done
        arrived = time.monotonic()
        first = linked[next(iter(listening))]
        assert first.passed is not None and first.wide is not None
        slots = {name: on[name].fused.slot for name in listening}  # type: ignore[union-attr]
        try:
            with self._job_group(DELIVERY):
                outputs, parts = _planned_together(first.passed, first.wide, listening, slots)
                link_together(  # stored first
                    [
                        (sink.store, output_id, linked[n].files, slots[n], linked[n].spec)
                        for n, (sink, _) in listening.items()
                    ]
                )
                deliver_together(outputs.frame, parts, output_id, arrived)
        except Exception as err:  # each on its own: a failing branch fails alone
            audit.warning(
                "network %s: one delivery job failed (%s); each branch delivers alone",
                self.name,
                type(err).__name__,
            )
            return done
        return done | set(listening)

    def _delivered_with_pass(
        self, on: dict[str, Branch], linked: dict[str, Linked], output_id: int
    ) -> set[str]:
        """The branches whose delivery the pass's job collected
        (:meth:`_pass_delivered`): each one's link stored, then every one's rows handed
        over. The names done."""
        delivered = next((to.delivered for to in linked.values() if to.delivered), None)
        if delivered is None:
            return set()
        links = []
        for name in delivered.names:
            sink, fused, to = on[name].sink, on[name].fused, linked[name]
            assert isinstance(sink, StoringSink) and fused is not None
            links.append((sink.store, output_id, to.files, fused.slot, to.spec))
        link_together(links)  # stored first
        delivered.together.finish(delivered.rows, delivered.counts, output_id, delivered.arrived)
        return set(delivered.names)

    # -- joining ------------------------------------------------------------------------------

    def _catch_up(self, branch: Branch, covered: int, position: int) -> None:
        settled = self._settle_owed({branch.name: (branch, covered)}, position)
        if branch.name in settled:
            self._hand_history(branch, settled[branch.name][1], position)

    def _hand_history(self, branch: Branch, covered: int, upto: int) -> None:
        """The branch's output of the stored ingest batches ``covered < id <= upto``,
        handed over under id ``upto``."""
        history = self._history(covered, upto)
        if history is None:
            self.ledger.advance(branch.name, upto)  # nothing stored in between
        else:
            self._run_each({branch.name: branch}, {branch.name: history}, upto)

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
            # cast: statistics branches are aggregates, folded and never analysed here
            projection = cast(SecuredProjection, branch.projection)
            fused = FusedBranch.of(slot, projection, view, branch.secured.tree)
            alone = fused_pass((fused,))
            same = tuple(alone.rows(alone.over(empty), slot).columns) == columns
        except (NotFused, AnalysisException):  # not plain, or planned otherwise: its own plan
            return columns, None
        return columns, fused if same else None

    def _output(self, branch: Branch, rows: DataFrame) -> DataFrame:
        """The branch's query over its secured view of ``rows`` (a plan: no job runs);
        at a level, its rows labelled at it unless the branch is a stateless selection
        (``Branch.stamped``)."""
        session = rows.sparkSession
        branch.projection.apply(rows).createOrReplaceTempView(branch.view)
        try:
            out = session.sql(branch.text)
            return out if branch.folded is not None else _within(branch, out)
        finally:  # the plan holds the view's rows; the name is not needed any more
            session.catalog.dropTempView(branch.view)


def _within(branch: Branch, out: DataFrame) -> DataFrame:
    """The branch's output, labelled at its query's level where it must be
    (``Branch.stamped``)."""
    if not branch.stamped:
        return out
    assert branch.admitted.level is not None
    return at_output_level(out, branch.admitted.level, OutputLevel.QUERY)


def _view(branch: Branch, rows: DataFrame) -> DataFrame:
    """The branch's secured view of ``rows``: a secured projection's column list crosses
    Py4J once (kept on the branch), not once per batch (one call per column)."""
    projection = branch.projection
    if not isinstance(projection, SecuredProjection):
        return projection.apply(rows)
    if branch.java_view is None:
        sc = rows.sparkSession.sparkContext
        branch.java_view = _to_seq(sc, list(projection.columns), _to_java_column)
    filtered = rows.filter(projection.condition)
    return ClassicFrame(filtered._jdf.select(branch.java_view), rows.sparkSession)


def _planned_together(
    passed: FusedPass,
    wide: DataFrame,
    listening: Mapping[str, tuple[StoringSink, Delivery]],
    slots: Mapping[str, str],
) -> tuple[Outputs, list[tuple[Delivery, Planned]]]:
    """The listening branches' rows side by side over ``wide`` (equal rows built once:
    :meth:`FusedPass.alike`) and each one's delivery planned over its place there, its
    subscribers' rights read now (plans only: no job runs)."""
    rows_of = passed.alike(list(slots.values()))
    built = list(dict.fromkeys(rows_of.values()))
    outputs = passed.outputs(wide, built)
    parts = []
    for name, (_, delivery) in listening.items():
        slot = rows_of[slots[name]]
        planned = delivery.plan(
            outputs.columns[slot],
            delivery.subscriptions,
            outputs.col[slot],
            outputs.taken[slot],
            f"b{built.index(slot)}",
            outputs.memo[slot],
        )
        parts.append((delivery, planned))
    return outputs, parts


def _quoted(name: str) -> Column:
    """The column named ``name``, whatever characters the name holds."""
    return F.col("`" + name.replace("`", "``") + "`")


def _nodes(tree: Operator | str) -> list[Operator]:
    return [] if isinstance(tree, str) else list(tree.nodes())


def _as_tree(tree: Operator | str, stream: StreamDefinition) -> Operator:
    """``SELECT * FROM s`` is the bare stream: as a node, the projection to everything."""
    return Project(frozenset(stream.names), (stream.name,)) if isinstance(tree, str) else tree
