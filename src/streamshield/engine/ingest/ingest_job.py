"""Secure ingest as a Spark streaming query: landing zone in, labelled streams out.

The query reads the landing zone's JSON-lines files; each micro-batch is labelled by
:class:`~streamshield.engine.ingest.ingest.Ingest` (driver work per batch and per policy,
native expressions per tuple) and written through :class:`LabelledStore`. The shield
state of batch N is saved only after batch N's output is committed, so a restart from
the checkpoint replays batch N from the state of N-1 and reaches the same decisions.
Batch N starts from exactly that snapshot or not at all (ShieldStateError), and the query
does not start while the checkpoint, the labelled store and the shield state disagree
(:mod:`~streamshield.engine.ingest.ingest_consistency`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamshield.engine.ingest import ingest_consistency
from streamshield.engine.ingest.driven_ingest import DrivenIngest
from streamshield.engine.ingest.ingest import ELEMENT_SCHEMA, PASS, Ingest
from streamshield.engine.ingest.policy_registry import PolicyRegistry
from streamshield.engine.ingest.source_log import SourceLog
from streamshield.engine.ingest.tracker_state import ChannelState, ShieldStateError, StateStore
from streamshield.engine.spark_errors.batch_errors import bounded
from streamshield.engine.store.checkpoint_leftovers import at_checkpoint
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.engine.store.small_writes import SMALL_BYTES, total_bytes
from streamshield.engine.tuning import STREAMING, EngineTuning
from streamshield.policy.elements import Channel

log = logging.getLogger("streamshield.engine")
GUESS_BYTES = 8 << 20
"""Landed bytes up to which a batch is labelled in one pass (a guess, engine/ingest/ingest.py):
a wrong guess costs its write, and each stream's write reads the files again (no cache)."""


class IngestJob:
    """Runs secure ingest from ``landing`` into ``<root>/labelled`` with state under ``root``."""

    def __init__(
        self,
        ingest: Ingest,
        landing: str | Path,
        root: str | Path,
        tuning: EngineTuning = STREAMING,
    ) -> None:
        """``tuning``: whether a landing starts its micro-batch (``driven_ingest``:
        :meth:`wake`, engine/ingest/driven_ingest.py) or Spark's file source does on its
        trigger (the library's default, which the tests of the batch function drive),
        and whether small batches are labelled on a checked guess (``ingest_guess``)."""
        self.ingest = ingest
        self.guess = tuning.ingest_guess
        self.driven = tuning.driven_ingest
        self.landing = Path(landing)
        self.root = Path(root)
        self.store = LabelledStore(self.root / ingest_consistency.LABELLED)
        self.state = StateStore(self.root / ingest_consistency.SHIELD_STATE)
        self.checkpoint = self.root / ingest_consistency.CHECKPOINT
        if ingest.registry is None:
            ingest.registry = PolicyRegistry(self.root / "policies")
        self.policies = ingest.registry
        self.on_counts: Callable[[str, int, int], None] | None = None
        """Told ``(stream, accepted, denied)`` per written batch: tuples labelled under a
        complete policy, and tuples no policy covers (readable by nobody). Counted while
        the batch is written (``DataFrame.observe``), or from the rows a small batch's
        write brought to the driver, not by another pass."""
        self._driven: DrivenIngest | None = None

    def check(self) -> int | None:
        """The batch ingest runs next, after checking that the checkpoint, the labelled
        store and the shield state are in step (IngestOutOfStep / ShieldStateError
        otherwise, logged; see :mod:`~streamshield.engine.ingest.ingest_consistency`)."""
        try:
            return ingest_consistency.check(self.checkpoint, self.store, self.state)
        except ShieldStateError as err:
            log.error("secure ingest refused to start: %s", err)
            raise

    def quarantine(self) -> Path:
        """Moves this job's checkpoint, labelled store and shield state aside, so the next
        start relabels from the beginning (:func:`ingest_consistency.quarantine`)."""
        aside = ingest_consistency.quarantine(self.root)
        store, self.store = self.store, LabelledStore(self.root / ingest_consistency.LABELLED)
        self.store.adopt_listeners(store)
        self.state = StateStore(self.root / ingest_consistency.SHIELD_STATE)
        return aside

    def _process(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch. Readers in this process are told of its commit when it
        returns (``LabelledStore.hold``), not at its marker: started at the marker they
        ran beside its state save on the same cores, and both were slower."""
        store = self.store  # the instance holding the batch (a quarantine replaces it)
        store.hold(batch_id)
        try:
            self._labelled(batch, batch_id)
        finally:
            store.release(batch_id)

    def _labelled(self, batch: DataFrame, batch_id: int) -> None:
        try:
            states = self.state.load(batch_id)  # exactly the state batch N-1 saved
        except ShieldStateError as err:
            log.error("secure ingest stopped before batch %d: %s", batch_id, err)
            raise
        try:
            began = time.perf_counter()
            landed = self._landed(batch_id)
            written = self._guessed(batch, batch_id, states, landed)
            if written is None:  # no guess, or a wrong one: the passes label the batch
                guessing = time.perf_counter() - began
                frames = self.ingest.label_batch(batch, states, driver_write=True)
                small = landed <= SMALL_BYTES or self.ingest.write_on_driver
                written = self._write(batch_id, frames, small=small)
                assert written is not None  # no check: nothing refuses the write
                self.ingest.passes["no guess or a wrong one"] = guessing
            began = time.perf_counter()
            self.state.save(batch_id, states)
            self.ingest.lap("shield state", began)
            self._report(written)
        finally:
            self.ingest.release()

    def _guessed(
        self,
        batch: DataFrame,
        batch_id: int,
        states: dict[Channel, ChannelState],
        landed: int,
    ) -> dict[str, Observation | tuple[int, int] | None] | None:
        """The batch labelled and written in one pass (Ingest.guess_batch), or None when
        there is no guess, a replay (part of the batch is in place) or a wrong guess
        (nothing was installed, ``states`` untouched). A wrong guess costs a write thrown
        away: only batches of ``landed`` <= GUESS_BYTES are guessed."""
        streams = tuple(self.ingest.streams)
        if not (self.guess and landed <= GUESS_BYTES and self.store.untouched(batch_id, streams)):
            return None
        small = landed <= SMALL_BYTES
        guess = self.ingest.guess_batch(batch, states, sort=not small)  # small: sorted there
        if guess is None:
            return None
        written = self._write(batch_id, guess.frames, guess.holds, small)
        if written is None:
            log.info("batch %d was not as guessed: labelled by the passes", batch_id)
            return None
        guess.advance(states)
        return written

    def _landed(self, batch_id: int) -> int:
        """The bytes batch ``batch_id`` reads from the landing zone, counted up to just
        past GUESS_BYTES (past it when its checkpoint cannot say)."""
        files = SourceLog(self.checkpoint).files(batch_id)
        return GUESS_BYTES + 1 if files is None else total_bytes(files, GUESS_BYTES)

    def _write(
        self,
        batch_id: int,
        frames: dict[str, DataFrame],
        check: Callable[[], bool] | None = None,
        small: bool = False,
    ) -> dict[str, Observation | tuple[int, int] | None] | None:
        """Writes the batch (None: ``check`` refused it; ``small``: from the driver);
        each written stream with the observation of its counts, or the counts themselves
        (None: nobody counts).

        ``small``: counted from the rows the driver wrote (they are on the driver anyway)
        rather than observed: an observation is another frame for the JVM to analyse and
        a few aggregates to build, on a small landing's way to its subscriber. A stream
        Spark wrote after all (a type Arrow cannot carry) is counted by a job."""
        observed: dict[str, Observation] = {}
        counting = self.on_counts is not None
        if counting and not small:
            for stream, frame in frames.items():
                observed[stream] = Observation()  # a fresh name each: names are per session
                frames[stream] = frame.observe(observed[stream], *_counted())
        tables: dict[str, pa.Table] = {}
        began = time.perf_counter()
        written = self.store.write_batch(batch_id, frames, check, small, tables)
        self.ingest.lap("label+write", began)
        if written is None:
            return None
        if not counting or not small:
            return {s: observed.get(s) for s in written}
        return {s: _counts(tables.get(s), frames[s]) for s in written}

    def _report(self, observed: dict[str, Observation | tuple[int, int] | None]) -> None:
        """Only for streams whose rows were written: an observation of a frame no action
        ran on would wait forever. (tuples, accepted): counted on the driver."""
        if self.on_counts is None:
            return
        for stream, observation in observed.items():
            if observation is None:
                continue
            try:
                if isinstance(observation, tuple):
                    tuples, accepted = observation
                else:
                    counts = observation.get
                    tuples, accepted = int(counts["tuples"]), int(counts["accepted"])
                self.on_counts(stream, accepted, tuples - accepted)
            except Exception as err:  # counting must never stop ingest
                log.warning("ingest counts of %s unavailable (%s)", stream, type(err).__name__)

    def start(
        self,
        available_now: bool = True,
        max_files: int | None = None,
        trigger_seconds: float = 1.0,
    ) -> StreamingQuery:
        """Start the query; ``available_now`` processes what is there and stops (tests, demo),
        otherwise a batch starts every ``trigger_seconds`` when files have landed.

        Refuses (IngestOutOfStep, ShieldStateError) when its state is out of step.
        :attr:`driven`: a :class:`~streamshield.engine.queries.driven_handle.DrivenHandle`, which
        answers as a StreamingQuery does."""
        self.check()
        self.landing.mkdir(parents=True, exist_ok=True)
        if self.driven:
            self._driven = DrivenIngest(
                self.ingest.spark,
                self.landing,
                self.checkpoint,
                ELEMENT_SCHEMA,
                self._process,
                poll_seconds=trigger_seconds,
                max_files=max_files,
            )
            return self._driven.start(available_now)  # type: ignore[return-value]
        reader = self.ingest.spark.readStream.schema(ELEMENT_SCHEMA)
        if max_files:
            reader = reader.option("maxFilesPerTrigger", max_files)
        source = reader.option("pathGlobFilter", "*.jsonl").json(str(self.landing / "*"))
        writer = at_checkpoint(
            source.writeStream.foreachBatch(bounded(self._process)), self.checkpoint
        ).queryName("streamshield-ingest")
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime=f"{int(trigger_seconds * 1000)} milliseconds")
        )
        return writer.start()

    def wake(self, landed: list[Path] | None = None) -> None:
        """Files landed (``landed``, when known): a driven ingest reads them at once (a
        streaming query finds them at its next trigger)."""
        driven = self._driven
        if driven is not None:
            driven.tell(landed or [])


def _counted() -> list[Column]:
    """A labelled frame's (tuples, accepted): every row, the rows that passed."""
    return [
        F.count(F.lit(1)).alias("tuples"),
        F.count_if(F.col("reason") == PASS).alias("accepted"),
    ]


def _counts(table: pa.Table | None, frame: DataFrame) -> tuple[int, int] | None:
    """(tuples, accepted) of a written stream: from the rows the driver wrote, natively
    (no Python per row), or by a job over ``frame`` when Spark wrote it (None: the job
    failed; counting never stops ingest)."""
    try:
        if table is not None:
            accepted = pc.sum(pc.equal(table.column("reason"), PASS)).as_py() or 0
            return table.num_rows, int(accepted)
        row = frame.agg(*_counted()).collect()[0]
        return int(row["tuples"]), int(row["accepted"])
    except Exception as err:
        log.warning("ingest counts unavailable (%s)", type(err).__name__)
        return None
