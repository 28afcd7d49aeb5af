"""One streaming query per stream for every network over it: a
stream's selections and windows share its scan.

Why: the selection network (engine/sharing/shared_network.py) and the window network
(engine/sharing/window_network.py) of one stream each ran a streaming query of their own over
the same labelled store: two listings of the stream's directory every trigger, two offset
logs, two plannings and two reads of every new file, for rows that are the same. Both
networks' streaming plans are the bare scan (all they compute happens per micro-batch,
in ``foreachBatch``), so one scan can feed both: each micro-batch is handed to every
attached network, each reading it with its own schema (the selection network reads the
scan summaries too), under its own batch lock, positions and branch ledger, exactly as
its own streaming query handed it over. The networks take it side by side, each in a
thread of its own that inherits the micro-batch thread's Spark properties (its job
group, which stopping the query cancels, and its level's scheduler pool): with two
streaming queries they ran side by side too, and a window subscriber does not wait for
the selections' delivery.

Positions stay per network and per branch (engine/sharing/branch_ledger.py), so whatever the
scan's checkpoint has read, a network's branch takes exactly the ingest batches it has
not covered: a network attaching to a running scan catches its branches up to the scan's
position as it did to its own, and a batch it has had already (its old checkpoint was
ahead of the scan's) is skipped.

Micro-batch ids must only grow for a network: its branches' result stores and its window
states are kept by batch id, and a stored id is a batch already had. So the scan resumes
from whichever of the networks' own checkpoints (from before they shared a scan) has
committed the newest micro-batch (:func:`scan_checkpoint`), the selection network's when
none has; the other network's ids jump ahead, and its window nodes, whose stored versions
then do not precede the new ids, are rebuilt from the stream's history, as when a branch
comes back on.

Joining a running scan. A network's (or a branch's) catch-up reads the stream's history
up to the scan's position, and the scan's micro-batches hand it everything after. So the
position a fresh network starts from must be exactly what the scan has handed out: the
ingest batches of every micro-batch dispatched so far (dispatched is not yet committed:
Spark writes the commit after ``foreachBatch`` returns), and no micro-batch may be
dispatched between that reading and the network's attaching. A network joins under
:meth:`StreamScan.joining`, which holds off dispatching; a micro-batch already planned
then waits and is handed to the new network too (its branches, at the position before
it, take its rows). Without it, a row ingested just before a query joined a stream whose
scan was already running for a window was lost to the new selection.

A network's failure in a micro-batch still fails the micro-batch (and so the streaming
query, for the restart to replay it), but only after every other network has had the
batch: each network's branches fail alone, as before.

The server's default scan is not this streaming query but one driven by ingest's commits
(engine/sharing/driven_scan.py, ``DrivenScan``, a subclass): the same dispatch, joining and
positions, its micro-batches started by each committed ingest batch and read from the
files its marker lists, its log written in this query's checkpoint format.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.util import inheritable_thread_target

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.frames.held_columns import HeldColumns
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.engine.sharing.branch_ledger import NOTHING
from streamshield.engine.store.labelled_store import LabelledStore


class Attached(Protocol):
    """What the scan needs of a network: its name, the columns it reads, its batches."""

    name: str
    levels: int

    def reads(self) -> list[str]: ...

    def _process(self, batch: DataFrame, batch_id: int) -> None: ...

    def _known_position(self) -> int: ...


def scan_checkpoint(candidates: list[Path]) -> Path:
    """Of the networks' checkpoints, the one that committed the newest micro-batch (the
    first when none has committed any)."""

    return max(candidates, key=lambda checkpoint: SourceLog(checkpoint).last_batch())


class StreamScan:
    """The one streaming query of a stream (per level processor) and the networks it
    feeds."""

    def __init__(
        self,
        spark: SparkSession,
        labelled: LabelledStore,
        stream: StreamDefinition,
        width: int,
        checkpoint: Path,
        name: str,
        levels: int = 0,
        feed: Callable[[DataFrame], DataFrame] | None = None,
        trigger_seconds: float = 1.0,
    ) -> None:
        self.spark, self.labelled, self.stream, self.width = spark, labelled, stream, width
        self.checkpoint, self.name, self.levels, self.feed = checkpoint, name, levels, feed
        self.trigger_seconds = trigger_seconds
        self.log = SourceLog(checkpoint)
        """The scan's source log: every attached network reads its batches' ingest ids and
        its position here."""
        self.handle: StreamingQuery | None = None
        self._networks: list[Attached] = []
        self._lock = threading.Lock()
        self._dispatch = threading.RLock()
        """Held while a micro-batch is handed to the networks, and while one joins."""
        self._dispatched: int | None = None
        """The newest ingest batch of every micro-batch handed out by this process."""
        self._read_columns: dict[tuple[str, ...], HeldColumns] = {}
        """The columns each set of networks' reads is selected by, built once."""

    @property
    def networks(self) -> tuple[Attached, ...]:
        with self._lock:
            return tuple(self._networks)

    @contextlib.contextmanager
    def joining(self) -> Iterator[None]:
        """No micro-batch is handed out while held: a network reads :meth:`position`,
        catches up and attaches inside."""
        with self._dispatch:
            yield

    def position(self) -> int | None:
        """The newest ingest batch the scan has handed out (its checkpoint's, before this
        process dispatched any; None: the checkpoint is unreadable). Takes no lock: a
        network reads it under its own batch lock, which a micro-batch takes after the
        scan's (hold :meth:`joining` for a position no micro-batch moves meanwhile)."""
        committed, dispatched = self.log.position(), self._dispatched
        if dispatched is None or committed is None:
            return committed
        return max(committed, dispatched)

    def attach(self, network: Attached, available_now: bool = False) -> StreamingQuery:
        """``network`` gets every micro-batch from now on; the scan starts with its first
        network (or again, when it had stopped)."""
        if network.levels != self.levels:
            raise ValueError(f"{network.name} reads level words of another width")
        with self._lock:
            if network not in self._networks:
                self._networks.append(network)
            if self.handle is None or not self.handle.isActive:
                self.handle = self.labelled.per_batch(
                    self.spark,
                    self.stream,
                    self.width,
                    self._process,
                    self.checkpoint,
                    self.name,
                    available_now,
                    self.levels,
                    self.feed,
                    self.trigger_seconds,
                    summaries=True,  # whichever network needs them: the others drop them
                )
            return self.handle

    def detach(self, network: Attached) -> None:
        """``network`` gets no more micro-batches; the scan stops with its last one."""
        with self._lock:
            if network in self._networks:
                self._networks.remove(network)
            handle = None if self._networks else self.handle
        if handle is not None:
            handle.stop()

    def _reading(self, names: list[str]) -> HeldColumns:
        """The columns selecting ``names`` (a network's reads), built on first use: four
        Py4J calls a column each time were a visible share of a landing's micro-batch."""
        key = tuple(names)
        held = self._read_columns.get(key)
        if held is None:
            if len(self._read_columns) >= 64:  # networks come and go: never unbounded
                self._read_columns.clear()
            held = HeldColumns(F.col(f"`{name}`") for name in key)
            self._read_columns[key] = held
        return held

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        with self._dispatch:
            networks = self.networks
            if not networks:  # the last one left while the scan stops
                return

            def hand(network: Attached) -> None:
                network._process(self._reading(network.reads()).select(batch), batch_id)

            if len(networks) == 1:
                hand(networks[0])
            else:  # side by side; each fails alone, then the batch fails
                with ThreadPoolExecutor(len(networks), thread_name_prefix=self.name) as pool:
                    # a wrapper each: each thread gets its own copy of the properties,
                    # which its job groups then change
                    inherit = inheritable_thread_target
                    futures = [pool.submit(inherit(self.spark)(hand), n) for n in networks]
                    failures = [f.exception() for f in futures]
                failure = next((f for f in failures if f is not None), None)
                if failure is not None:
                    raise failure
            for network in networks:  # each read the batch's ingest ids (log or Spark)
                self._dispatched = max(self._dispatched or NOTHING, network._known_position())
