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
its checkpoint stays valid: a branch added while the network runs starts with the next
micro-batch and the others lose or repeat nothing.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.labelled_store import LabelledStore
from streamshield.engine.provenance import with_provenance
from streamshield.engine.secured_view import secured_view
from streamshield.lang.admission import AdmittedQuery
from streamshield.network.from_query import operator_tree
from streamshield.network.merge import merge
from streamshield.network.operators import Operator, Project, Select
from streamshield.network.predicates import Comparison, Op
from streamshield.policy.encoding import RoleCodec
from streamshield.policy.provenance import ProvenanceCodec

BranchSink = Callable[[DataFrame, int], None]
BRANCH_THREADS = 4
"""Branches of one micro-batch run at once (their jobs share the cores, not a queue)."""
_NUMERIC = {"tinyint", "smallint", "int", "bigint", "float", "double"}


@dataclass(frozen=True)
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
    ) -> None:
        self.spark, self.labelled, self.stream = spark, labelled, stream
        self.codec, self.provenance, self.root = codec, provenance, Path(root)
        self.active = active
        self.name = name or f"network-{stream.name}"
        self._branches: dict[str, Branch] = {}
        self._lock = threading.Lock()
        self._salt = uuid.uuid4().hex

    @property
    def branches(self) -> dict[str, Branch]:
        with self._lock:
            return dict(self._branches)

    def add(self, name: str, admitted: AdmittedQuery, sql: Callable[[str], str], sink: BranchSink):
        """A query joins the network from the next micro-batch (NotShared if it cannot)."""
        tree = operator_tree(admitted)
        if tree is None or admitted.streams != (self.stream.name,) or admitted.shape.windows:
            raise NotShared("only selections and projections over this stream are shared")
        if any(not isinstance(node, Select | Project) for node in _nodes(tree)):
            raise NotShared("only selections and projections are shared for now")
        with self._lock:
            if name in self._branches:
                raise ValueError(f"a branch named {name!r} exists")
            view = f"ss_{uuid.uuid4().hex}_{self.stream.name}"
            self._branches[name] = Branch(name, admitted, tree, view, sql(view), sink)

    def remove(self, name: str) -> None:
        with self._lock:
            self._branches.pop(name, None)

    def start(self, available_now: bool = False) -> StreamingQuery:
        return self.labelled.per_batch(
            self.spark,
            self.stream,
            self.codec.width,
            self._process,
            self.root / "checkpoint",
            self.name,
            available_now,
        )

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        on = {n: b for n, b in self.branches.items() if self._is_on(n)}
        if not on:
            return  # every switch off: not even the scan's rows are read
        network = merge({name: _as_tree(b.tree, self.stream) for name, b in on.items()})
        shared = {node for node, users in network.usage.items() if len(users) > 1}
        frames: dict[Operator | str, DataFrame] = {}
        cached: list[DataFrame] = []
        if len(on) > 1:  # the scan is shared too: read the batch's files once
            batch = batch.persist()
            cached.append(batch)

        def frame(node: Operator | str) -> DataFrame:
            if node in frames:
                return frames[node]
            if isinstance(node, str):
                out = batch
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

        sc = batch.sparkSession.sparkContext
        inputs = {name: frame(network.roots[name]) for name in on}  # plans only, no job

        def run(name: str) -> None:
            # Job groups are per thread: each branch's jobs carry its name.
            sc.setJobGroup(f"{self.name}:{name}", f"branch {name} of {self.name}", False)
            try:
                self._run(on[name], inputs[name], batch_id)
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)

        try:
            # Branches run side by side (Spark schedules jobs of several threads at once),
            # so N small jobs keep every core busy instead of queueing behind each other.
            with ThreadPoolExecutor(max_workers=min(BRANCH_THREADS, len(on))) as pool:
                for future in [pool.submit(run, name) for name in on]:
                    future.result()
        finally:
            for df in cached:
                df.unpersist()

    def _is_on(self, name: str) -> bool:
        try:
            return bool(self.active(name))
        except Exception:  # an unknown switch state is off (deny by default)
            return False

    def _run(self, branch: Branch, rows: DataFrame, batch_id: int) -> None:
        view = secured_view(
            rows,
            self.stream,
            self.codec,
            branch.admitted.roles,
            keep_labels=True,
            salt=self._salt,
        )
        view = with_provenance(view, self.stream.name, self.provenance)
        session = rows.sparkSession
        view.createOrReplaceTempView(branch.view)
        try:
            branch.sink(session.sql(branch.text), batch_id)
        finally:
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
        column, value = F.col(attribute), F.lit(atom.value)
        return {
            Op.EQ: column == value,
            Op.NE: column != value,
            Op.LT: column < value,
            Op.LE: column <= value,
            Op.GT: column > value,
            Op.GE: column >= value,
        }[atom.op]


def _nodes(tree: Operator | str) -> list[Operator]:
    return [] if isinstance(tree, str) else list(tree.nodes())


def _as_tree(tree: Operator | str, stream: StreamDefinition) -> Operator:
    """``SELECT * FROM s`` is the bare stream: as a node, the projection to everything."""
    return Project(frozenset(stream.names), (stream.name,)) if isinstance(tree, str) else tree
