"""A query's labelled results on storage: each micro-batch written once, whoever listens.

A stateful plan (an aggregate, a window, a join) commits its state only when its
micro-batch is executed to the end. When results went straight to subscribers, a batch
nobody subscribed to was never executed, and Spark refused to commit the batch
(``STATE_STORE_COMMIT_VALIDATION_FAILED``): the query died. So every batch is first
written here, labels and provenance included, and subscribers are served from what was
written. Delivery (SecFilter) then reads Parquet files, not the query's plan.

Layout: ``<root>/batch=<id>/`` per micro-batch, renamed into place from a private
staging directory, so a reader sees a whole batch or none of it. A replayed batch (the
query restarted before Spark recorded the batch as done) is executed again, as Spark
requires, and replaces its directory with the same rows: the store never holds a batch
twice. Only the newest ``keep`` batches are kept.

A stored batch is read by its exact files, never by its directory. Spark's cache matches
plans by equality, and two reads of one directory are equal plans whatever the files in
it: a frame persisted by one reader (a subscriber resuming from batch 3) would be taken
by another reading batch 3 after a replay replaced it (the query's own delivery), with
the old file list, and fail on files gone or serve rows no longer stored. The file
names carry the write's id, so each write of a batch is a plan of its own.

Delivery comes before the write (:class:`StoringSink`): a subscriber has a batch's rows
one Spark job after the batch starts, not after the Parquet write and a read back. A
batch is *in flight* from just before its delivery until it is stored
(:meth:`ResultStore.in_flight`), and a resuming subscriber's replay first waits for the
batches in flight (:meth:`ResultStore.settle`): one delivered before she subscribed is
then stored, so she gets it from the store; one delivered after reaches her live. Either
way she gets it once, as when batches were stored first. A crash between the two
replays the batch, and the replay must store it even if nobody listens by then (a shared
network computes nothing for a branch whose switch is off): so before a delivery the
store records on disk that it *owes* the batch (:meth:`ResultStore.owe`), until the
batch is installed; a network computes an owed batch whatever its switch says.

A branch of a shared network stores a *link* instead of rows (``link``): the branches of
a micro-batch are computed in one pass and written once to the network's own store, each
row once with the bits saying which branches take it and what each may see of it
(engine/sharing/fused_branches.py), and each branch's batch directory holds ``link.json`` naming
those files and how its rows are rebuilt from them. Reading it rebuilds them: what the
branch's own write would have stored, without a Spark job per branch. A link whose
files the network's store has pruned reads as a pruned batch. (Links written before
rows were stored once name a struct column per branch and still read.)
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streamshield.durable import fsync_dir, fsync_tree, write_atomic
from streamshield.engine.sharing.fused_branches import rebuild, select_layout
from streamshield.engine.store.small_writes import write_parquet, write_table
from streamshield.faults import crash_point

_BATCH = re.compile(r"^batch=(\d+)$")
LINK = "link.json"
OWED = "_owed"
"""Batches delivered before they were stored: one empty file per batch id."""
PRUNED = "_pruned"
"""The newest batch id the store has pruned (written before the batches go)."""
DEFAULT_KEEP = 200


class ResultStore:
    def __init__(self, root: str | Path, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError("a result store keeps at least one batch")
        self.root, self.keep = Path(root), keep
        self._staging = self.root / "_staging"
        self._flying: dict[int, int] = {}  # batch id -> deliveries of it not yet stored
        self._landed = threading.Condition()

    def write(self, frame: DataFrame, batch_id: int) -> DataFrame:
        """Execute ``frame`` to the end, store it as batch ``batch_id``, return the stored rows."""
        self.put(frame, batch_id)
        return self.read(batch_id, frame)

    def put(self, frame: DataFrame, batch_id: int) -> None:
        """Execute ``frame`` to the end and store it as batch ``batch_id`` (no read back)."""
        staging = self._staging / str(batch_id)
        shutil.rmtree(staging, ignore_errors=True)
        frame.write.mode("overwrite").parquet(str(staging))
        for marker in staging.glob("*.crc"):
            marker.unlink()
        self._install(staging, batch_id)

    def add(self, frame: DataFrame, batch_id: int, small: bool = False) -> list[str]:
        """Execute ``frame`` and store it as one more write of batch ``batch_id``, beside
        the writes stored under that id before; the files of this write (a shared
        network's pass). A replayed pass must not replace an earlier one: branches that
        had the batch before the crash link that one's files, while those that had not
        link this one's, whose bits mean other branches. ``small``: written from the
        driver (:mod:`~streamshield.engine.store.small_writes`)."""
        return self.add_rows(frame, batch_id, small)[0]

    def add_rows(
        self, frame: DataFrame, batch_id: int, small: bool = False
    ) -> tuple[list[str], pa.Table | None]:
        """:meth:`add`, and the rows written when written from the driver (else None)."""
        staging = self._staging / f"{batch_id}.{uuid.uuid4().hex}"
        table = write_parquet(frame, staging, small=small)
        return self._placed(staging, batch_id), table

    def add_table(self, table: pa.Table, batch_id: int) -> list[str]:
        """:meth:`add` of rows already on the driver (as Arrow, in the types Spark
        writes): the files written."""
        staging = self._staging / f"{batch_id}.{uuid.uuid4().hex}"
        write_table(table, staging)
        return self._placed(staging, batch_id)

    def _placed(self, staging: Path, batch_id: int) -> list[str]:
        """The files written in ``staging``, moved into batch ``batch_id`` durably."""
        for marker in staging.glob("*.crc"):
            marker.unlink()
        names = sorted(p.name for p in staging.glob("*.parquet"))
        target = self._path(batch_id)
        if not target.exists():
            self._install(staging, batch_id)
        else:  # each write's files carry its own id: they never clash
            fsync_tree(staging)
            for name in names:
                os.replace(staging / name, target / name)
            fsync_dir(target)
            shutil.rmtree(staging, ignore_errors=True)
        return [str(target / name) for name in names]

    def owe(self, batch_id: int) -> None:
        """Records, durably, that batch ``batch_id`` reaches subscribers before it is
        stored: a replay after a crash must then store it whoever listens."""
        (self.root / OWED).mkdir(parents=True, exist_ok=True)
        write_atomic(self.root / OWED / str(batch_id), b"")

    def owed(self) -> list[int]:
        """Batches delivered and not stored (a crash came in between), oldest first."""
        owed = self.root / OWED
        if not owed.is_dir():
            return []
        return sorted(int(m.name) for m in owed.iterdir() if m.name.isdigit())

    @contextmanager
    def in_flight(self, batch_id: int) -> Iterator[None]:
        """Batch ``batch_id`` is being delivered before it is stored (or failing)."""
        with self._landed:
            self._flying[batch_id] = self._flying.get(batch_id, 0) + 1
        try:
            yield
        finally:
            with self._landed:
                left = self._flying.pop(batch_id) - 1
                if left:
                    self._flying[batch_id] = left
                self._landed.notify_all()

    def settle(self, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Waits until every batch in flight now is stored or has failed, so that
        :meth:`batches` lists each batch delivered before the call; False when
        ``give_up()`` said to stop waiting (checked every second)."""
        with self._landed:
            waiting = set(self._flying)
            while waiting & set(self._flying):
                if give_up():
                    return False
                self._landed.wait(1.0)
        return True

    def link(
        self,
        batch_id: int,
        files: list[str],
        column: str,
        layout: Mapping[str, Any] | Sequence[Sequence[str]] = (),
    ) -> None:
        """Store batch ``batch_id`` as branch ``column``'s rows of ``files`` (a shared
        network's one write of all its branches): ``layout`` says how they are rebuilt
        (:func:`~streamshield.engine.sharing.fused_branches.rebuild`'s spec; a sequence: the
        columns of struct ``column`` and shared ones, as links were written before rows
        were stored once). No job runs."""
        self._install(self._staged_link(batch_id, files, column, layout), batch_id)

    def _staged_link(
        self,
        batch_id: int,
        files: list[str],
        column: str,
        layout: Mapping[str, Any] | Sequence[Sequence[str]],
    ) -> Path:
        """The link of :meth:`link`, written (not yet synced) in its staging folder."""
        staging = self._staging / str(batch_id)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        target: dict[str, Any] = {"files": files, "column": column}
        if isinstance(layout, Mapping):
            target["rebuild"] = layout
        else:
            target["layout"] = [list(c) for c in layout]
        (staging / LINK).write_text(json.dumps(target))
        return staging

    def files(self, batch_id: int) -> list[str]:
        """The Parquet files of a batch written here (not of a link)."""
        return sorted(str(p) for p in self._path(batch_id).glob("*.parquet"))

    def _install(self, staging: Path, batch_id: int) -> None:
        """Moves a written batch into place durably (durable.py's three steps)."""
        fsync_tree(staging)
        self._move_in(staging, batch_id)
        self._renamed()
        self._settle(batch_id)

    def _move_in(self, staging: Path, batch_id: int) -> None:
        """The rename of a synced ``staging`` into batch ``batch_id`` (not yet durable)."""
        target = self._path(batch_id)
        if not (self.root / PRUNED).exists() and not self.batches():
            write_atomic(self.root / PRUNED, b"-1")  # a new store: nothing pruned yet
        if target.exists():  # a replay: the same batch again, never a second copy
            old = self._staging / f"{batch_id}.replaced"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            shutil.rmtree(old, ignore_errors=True)
        crash_point("result.before_rename")
        os.replace(staging, target)

    def _renamed(self) -> None:
        """The renames into this store durable (both folders they touch)."""
        fsync_dir(self.root)
        fsync_dir(self._staging)
        crash_point("result.after_rename")

    def _settle(self, batch_id: int) -> None:
        """After batch ``batch_id`` is durably in place: what it pays off and prunes."""
        self._paid(batch_id)
        self._prune()

    def _paid(self, batch_id: int) -> None:
        """Batches up to ``batch_id`` are owed no more (they are installed, in order)."""
        for owed in self.owed():
            if owed <= batch_id:
                (self.root / OWED / str(owed)).unlink(missing_ok=True)

    def read(self, batch_id: int, like: DataFrame) -> DataFrame:
        """One stored batch, with the schema of ``like`` (an empty batch has no inference)."""
        frame = self._frame(batch_id, like.sparkSession, like)
        if frame is None:
            raise FileNotFoundError(f"batch {batch_id} is not stored in {self.root}")
        return frame

    def stored(self, batch_id: int, spark: SparkSession) -> DataFrame | None:
        """One stored batch as written (None: pruned, or a batch without rows)."""
        return self._frame(batch_id, spark)

    def everything(self, spark: SparkSession) -> DataFrame | None:
        """Every stored batch's rows with its id in column ``batch`` (None: nothing
        stored), in one read per kind of batch; links read as their rows (tests and
        audits, not the hot path). A link's files are the network's batch of the same id."""
        plain: list[str] = []
        linked: dict[str, list[str]] = {}
        for batch_id in self.batches():
            link = self._path(batch_id) / LINK
            if not link.is_file():
                plain += self.files(batch_id)
                continue
            target = json.loads(link.read_text())
            if target["files"] and all(Path(f).is_file() for f in target["files"]):
                how = json.dumps({k: v for k, v in target.items() if k != "files"})
                linked.setdefault(how, []).extend(target["files"])
        frames = [spark.read.parquet(*plain)] if plain else []
        for how, files in linked.items():
            frames.append(_linked_rows(spark.read.parquet(*files), json.loads(how)))
        if not frames:
            return None
        batch = F.regexp_extract(F.input_file_name(), r"batch=(\d+)/[^/]*$", 1).cast("int")
        frames = [frame.withColumn("batch", batch) for frame in frames]
        return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)

    def batches(self) -> list[int]:
        """Stored batch ids, oldest first."""
        if not self.root.is_dir():
            return []
        found = (_BATCH.match(p.name) for p in self.root.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def since(self, after: int) -> tuple[tuple[int, int] | None, list[int]]:
        """What a subscriber who had batch ``after`` is owed: the ids pruned since (first,
        last; None: none) and the stored batches after it, oldest first."""
        stored = self.batches()
        pruned = self.pruned_through()  # read second: covers batches pruned meanwhile
        gap = (after + 1, pruned) if pruned > after else None
        return gap, [b for b in stored if b > max(after, pruned)]

    def pruned_through(self) -> int:
        """The newest batch id pruned here (-1: none). Whether a batch was pruned is
        never read from missing ids: a network branch stores each micro-batch under the
        newest ingest id it covers, and stores nothing while its switch is off, so its
        ids skip. A store written before this record was kept reads as pruned below its
        oldest batch once it holds ``keep`` of them (a new store records -1 at once)."""
        marker = self.root / PRUNED
        if marker.is_file():
            return int(marker.read_text())
        stored = self.batches()
        return stored[0] - 1 if len(stored) >= self.keep else -1

    def lost(self, batch_id: int) -> bool:
        """Whether batch ``batch_id`` is a link whose files the network's store pruned
        (it reads as nothing, and a subscriber is told so)."""
        link = self._path(batch_id) / LINK
        if not link.is_file():
            return False
        return not all(Path(f).is_file() for f in json.loads(link.read_text())["files"])

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _path(self, batch_id: int) -> Path:
        return self.root / f"batch={batch_id}"

    def _frame(
        self, batch_id: int, spark: SparkSession, like: DataFrame | None = None
    ) -> DataFrame | None:
        link = self._path(batch_id) / LINK
        if link.is_file():
            target = json.loads(link.read_text())
            files = target["files"]
            if not files or not all(Path(f).is_file() for f in files):
                return None  # the network's store has pruned them
            rows = _linked_rows(spark.read.parquet(*files), target)
            return rows if like is None else rows.select(*like.columns)
        files = self.files(batch_id)
        if not files:
            return None
        reader = spark.read if like is None else spark.read.schema(like.schema)
        return reader.parquet(*files)

    def _prune(self) -> None:
        old = self.batches()[: -self.keep]
        if not old:
            return
        if old[-1] > self.pruned_through():  # recorded first: a crash never hides a gap
            write_atomic(self.root / PRUNED, str(old[-1]).encode())
        for batch_id in old:
            shutil.rmtree(self._path(batch_id), ignore_errors=True)


Link = tuple[ResultStore, int, list[str], str, Mapping[str, Any]]
"""A store, a batch id and the files, column and rebuild of :meth:`ResultStore.link`."""


def link_together(links: Sequence[Link]) -> None:
    """Several stores' links (a shared network's branches, one batch), each stored as
    :meth:`ResultStore.link` stores it, with one group commit: every link written, then
    every one synced, renamed, and every rename made durable, step by step across the
    stores. The first fsync of each step commits the file system's journal for all of
    them, so the others find little left to do; one store after the other, every link
    waited for its own four fsyncs (in a py-spy profile of ``bench.served_load`` at 16
    watchers, ~10% of the network's thread).
    Every link is durable before this returns, as each is after its own
    :meth:`ResultStore.link`; a crash in between leaves some installed and some not,
    which the batch's replay stores again as it would after a crash between two links."""
    staged = [
        (store, batch_id, store._staged_link(batch_id, files, column, layout))
        for store, batch_id, files, column, layout in links
    ]
    for _, _, staging in staged:
        fsync_tree(staging)
    for store, batch_id, staging in staged:
        store._move_in(staging, batch_id)
    for store, _, _ in staged:
        store._renamed()
    for store, batch_id, _ in staged:
        store._settle(batch_id)


def _linked_rows(wide: DataFrame, target: Mapping[str, Any]) -> DataFrame:
    """A link's rows out of the network's write it names."""
    if "rebuild" in target:
        return rebuild(wide, target["rebuild"])
    return select_layout(wide, target["column"], target.get("layout", ()))


class StoringSink:
    """``foreachBatch`` function: hand the batch on, then store it.

    ``deliver`` runs only when ``wanted()`` says someone listens; the batch is stored and
    so fully executed either way, before Spark records it as done. While someone
    listens the batch is cached, so that delivery and the stored copy are the same rows
    (a query may call ``uuid()``: computed twice, they would differ) and the query's
    plan runs once: delivery's job computes it, the write reads the cache.
    Delivering first saves the listener the write (a Parquet job, its commit and
    fsyncs) and the read back; a crash between the two replays the batch, which is
    then stored under the same id (docs/reliability.md: a resuming subscriber skips it).
    """

    def __init__(
        self,
        store: ResultStore,
        deliver: Callable[[DataFrame, int], None],
        wanted: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store, self.deliver, self.wanted = store, deliver, wanted

    def owed(self) -> list[int]:
        """Batches a crash caught between their delivery and their storing."""
        return self.store.owed()

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        with self.store.in_flight(batch_id):  # before wanted(): see ResultStore.settle
            if not self.wanted():
                self.store.put(frame, batch_id)
                return
            rows = frame.persist()
            try:
                self.store.owe(batch_id)
                self.deliver(rows, batch_id)
                crash_point("result.delivered")
                self.store.put(rows, batch_id)
            finally:
                rows.unpersist()

    def link(
        self,
        batch_id: int,
        files: list[str],
        column: str,
        rows: Callable[[], DataFrame],
        layout: Mapping[str, Any] | Sequence[Sequence[str]] = (),
    ) -> None:
        """The batch stored as a link into a shared network's one write of all its
        branches (:meth:`ResultStore.link`), then delivered like a batch of its own;
        ``rows``: plans the link's rows over those same files as the network read them,
        called only when someone listens (over a small pass, the rows written, held on
        the driver: engine/frames/driver_rows.py). Delivered from that plan rather than from
        :meth:`ResultStore.read` of the link: the rows are the same (the same files, the
        same rebuild), and the network's read knows their schema, where reading the link
        again plans the rebuild twice and infers the files' schema with a Spark job, on
        the path from a landing to its subscriber."""
        self.store.link(batch_id, files, column, layout)  # stored first: nothing owed
        if self.wanted():
            self.deliver(rows(), batch_id)


class ResultFollower:
    """Hands on the batches another process stores, each once, oldest first.

    A level's own Spark application (engine/levels/level_application.py) writes its queries'
    batches to result stores under its directory; the server, where delivery runs,
    follows them with this. A batch is installed by one rename, so a batch seen here is
    whole; a replayed batch (the same rows again) is not handed on twice, and a batch
    pruned before it was seen is skipped. While ``wanted()`` is false (nobody listens) a
    batch is passed over unread, as :class:`StoringSink` stores without delivering.
    """

    def __init__(
        self,
        store: ResultStore,
        spark: SparkSession,
        deliver: Callable[[DataFrame, int], None],
        after: int = -1,
        wanted: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store, self.spark, self.deliver, self.last = store, spark, deliver, after
        self.wanted = wanted

    def poll(self) -> list[int]:
        """Deliver every batch stored since the last poll; their ids."""
        handed: list[int] = []
        for batch_id in self.store.batches():
            if batch_id <= self.last:
                continue
            if not self.wanted():
                self.last = batch_id
                continue
            frame = self.store.stored(batch_id, self.spark)
            if frame is not None:
                self.deliver(frame, batch_id)
                handed.append(batch_id)
            self.last = batch_id
        return handed
