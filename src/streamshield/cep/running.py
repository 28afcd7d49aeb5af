"""A registered pattern running on Spark under the rules in force (docs/cep.md).

The pattern's query delivers each micro-batch through ``foreachBatch``; before it hands
any row on, the driver compares the :class:`~streamshield.cep.rule_book.RuleBook`'s
version with the one the running plan was built under (Python once per micro-batch,
never per event). When the rules changed:

- if the pattern is no longer legal for its roles (it reads an attribute now denied,
  an Omega attribute with a function no longer allowed, ...), the batch is not delivered
  and the pattern stops with status ``stopped`` and the refusal as its reason: a revoked
  attribute never appears in a later match;
- if it is legal but its protection changed (a Phi condition, an attribute now Omega,
  a type's trees), the batch is not delivered and not committed: the query restarts
  from its checkpoint with the protection rebuilt, and Spark runs that same batch again
  under the new rules;
- otherwise the batch is delivered and the new version noted.

The same holds for a change of the roles the rules are read under (the book's
``rights`` stamp: a role created, a hierarchy edge added or removed, the owner's roles
or grants changed, a clearance): the pattern's roles are asked anew (``acting``: the
roles of its registration its owner may still act with, or PatternRefused with why
not), and its effective roles under the hierarchy in force are part of its protection,
so a role that no longer reaches a junior's tuples or rules makes the pattern restart
with sources read through the narrower view, or stop when the rules no longer allow it.

So a change applies from the first micro-batch that starts delivering after it. The
restart keeps the join and aggregation state (only the projections and filters under
the watermark change, which Structured Streaming allows on restart): events that reached
the role's space under the previous rules keep what they were released with while they wait
for a match (at most WITHIN plus the watermark delay); every later event is protected
under the new rules.

A pattern runs in the query processor of its Chinese-Wall level, as a query does
(:mod:`streamshield.engine.levels.level_processor`): its sources are read with the processor's
session and pass its trusted shepherd (only events the level dominates) before the
protection engine and the pattern see them, its checkpoint (join and aggregation state)
lives under the level's directory, and its jobs run in the level's scheduler pool.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from shutil import rmtree
from typing import Any

from pyspark.sql import DataFrame

from streamshield.cep.match_labels import LabelLayout
from streamshield.cep.pattern import Pattern
from streamshield.cep.protection import K_DEFAULT, Detector, detectors
from streamshield.cep.rule_book import Edition, RuleBook
from streamshield.cep.spark_protection import compile_protected
from streamshield.cep.validation import PatternRefused, validate
from streamshield.engine.levels.level_processor import LevelProcessor, LevelProcessors
from streamshield.engine.queries.streaming_queries import safe_error
from streamshield.engine.store.checkpoint_leftovers import at_checkpoint
from streamshield.policy.query_level import QueryLevel

log = logging.getLogger(__name__)


class Status(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"  # by its owner, or by a rule change that made it illegal
    FAILED = "failed"


class _RulesChanged(Exception):
    """Raised inside a micro-batch so that Spark does not commit it."""


Protection = tuple[bool, tuple[tuple[str, Detector], ...], frozenset[str]]
"""Whether the k rule applies, each event type's detector trees, and the effective
roles (the roles and all their juniors) its sources are read with."""
Sources = Callable[[LevelProcessor, frozenset[str]], Mapping[str, DataFrame]]
"""One streaming DataFrame per event type, read with the processor's session through
the view of the given roles."""
Layout = LabelLayout | Callable[[frozenset[str]], LabelLayout]
"""The sources' label layout, fixed or built for the roles the pattern starts with."""
STORAGE = "patterns"  # a pattern's checkpoint: <level directory>/patterns/<name>


class RunningPattern:
    """One pattern, its roles and its query; ``deliver`` receives each batch's rows."""

    def __init__(
        self,
        pattern: Pattern,
        roles: Iterable[str],
        book: RuleBook,
        sources: Sources,
        deliver: Callable[[list[dict[str, Any]]], None],
        *,
        name: str,
        processors: LevelProcessors,
        level: QueryLevel | None = None,
        delay: timedelta,
        key: str | None = None,
        k: int = K_DEFAULT,
        trigger: Mapping[str, Any] | None = None,
        labels: Layout | None = None,
        sink: Callable[[DataFrame, int], None] | None = None,
        earlier: Path | None = None,
        acting: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        """``deliver`` gets each batch's rows as dicts; ``sink``, when given, gets the
        batch's DataFrame and id instead (a labelled output: the caller stores it and
        checks each recipient natively). ``labels``: the sources' label layout.
        ``processors``: the level processors it runs in (the one of ``level``), where it
        holds its processor under ``holder`` while it runs; ``name`` names its storage.
        ``earlier``: where an older layout kept its checkpoint (moved in at a start).
        ``acting``: the roles it may act with now, asked at every start and after every
        change of the book's rights (PatternRefused: none; None: always ``roles``)."""
        self.pattern, self.book = pattern, book
        self.registered = frozenset(roles)
        """The roles it was registered with."""
        self.roles = self.registered
        """The roles it runs with: those of :attr:`registered` its owner acts with."""
        self._acting = acting
        self._sources, self._deliver = sources, deliver
        self.name, self._processors, self.level = name, processors, level
        self.checkpoint: Path | None = None
        """Where its state lives (under its level's directory), once started."""
        self._delay, self._key, self._k, self._trigger = delay, key, k, dict(trigger or {})
        self._labels, self._sink, self._earlier = labels, sink, earlier
        self._lock = threading.RLock()
        self._query: Any = None
        self._stamp: tuple[int, Any] | None = None
        self._protection: Protection | None = None
        self._restart: threading.Thread | None = None
        self._started = time.monotonic()
        self._first = True
        """Whether the next micro-batch is the first since the query started."""
        self.status = Status.STOPPED
        self.reason: str | None = None
        self.restarts = 0

    # -- the plan under one edition of the rules -------------------------------------

    def protection(self, edition: Edition, roles: frozenset[str] | None = None) -> Protection:
        """What the running plan depends on, for ``roles`` (its own by default):
        PatternRefused when the pattern is illegal."""
        roles = self.roles if roles is None else roles
        if not roles:
            raise PatternRefused("its owner acts with none of the roles it was registered with")
        clearance = validate(self.pattern, edition.access, edition.hierarchy, roles, key=self._key)
        trees = detectors(edition.access, edition.hierarchy, roles)
        used = sorted({i.type for i in self.pattern.items})
        effective = frozenset(edition.hierarchy.effective(roles))
        return clearance.statistics, tuple((t, trees[t]) for t in used), effective

    def roles_now(self) -> frozenset[str]:
        """The roles of its registration its owner may act with now (PatternRefused:
        she may not run it at all)."""
        if self._acting is None:
            return self.registered
        return self.registered & frozenset(self._acting())

    @property
    def holder(self) -> str:
        """The name it holds its level's processor under (no SQL query name has a space)."""
        return f"pattern {self.name}"

    def start(self) -> None:
        """Start (or resume from the checkpoint) under the rules in force, in the
        processor of its level."""
        with self._lock:
            edition = self.book.current()
            roles = self.roles_now()
            self._protection = self.protection(edition, roles)  # PatternRefused: not started
            self.roles, self._stamp = roles, edition.stamp
            processor = self._processors.acquire(self.level, self.holder)
            try:
                self._start(edition, processor)
            except BaseException:
                self._processors.release(self.holder)
                raise
            self.status, self.reason = Status.RUNNING, None

    def _start(self, edition: Edition, processor: LevelProcessor) -> None:
        # The shepherd is trusted code outside the pattern: whatever the sources are,
        # the pattern's space gets only events its level dominates.
        began = time.monotonic()
        sources = self._sources(processor, self.roles)
        sources = {t: processor.shepherd(f) for t, f in sources.items()}
        read = time.monotonic()
        labels = self._labels(self.roles) if callable(self._labels) else self._labels
        frame = compile_protected(
            self.pattern,
            edition.access,
            edition.hierarchy,
            self.roles,
            sources,
            delay=self._delay,
            key=self._key,
            k=self._k,
            labels=labels,
        )
        self.checkpoint = processor.path(STORAGE, self.name)
        if self._earlier is not None:
            adopt(self._earlier, self.checkpoint)
        writer = at_checkpoint(frame.writeStream.foreachBatch(self._batch), self.checkpoint)
        if self._trigger:
            writer = writer.trigger(**self._trigger)
        self._started = time.monotonic()
        self._first = True
        with processor.pool():
            self._query = writer.start()
        log.info(
            "pattern %s: sources %.1f s, protected plan %.1f s, query started in %.1f s",
            self.name,
            read - began,
            self._started - read,
            time.monotonic() - self._started,
        )

    def observed(self) -> Status:
        """The status, noticing a query Spark ended with an error (not a rule change):
        ``failed``, with Spark's error class as the reason (never its message: it can
        hold data values)."""
        with self._lock:
            query = self._query
            ended = query is not None and self._restart is None and not query.isActive
            if self.status is Status.RUNNING and ended:
                failure = query.exception()
                self.status = Status.FAILED
                self.reason = safe_error(failure) if failure else "STOPPED_UNEXPECTEDLY"
                self._processors.release(self.holder)
            return self.status

    def stop(self) -> None:
        with self._lock:
            query, self._query = self._query, None
            if self.status is Status.RUNNING:
                self.status = Status.STOPPED
            self._processors.release(self.holder)
        if query is not None:
            query.stop()

    def forget(self) -> None:
        """Stop and delete its state (and any left where an older layout kept it), so
        that a pattern registered later under the same name does not resume it (its
        level's directory stays)."""
        self.stop()
        if self._earlier is not None:
            rmtree(self._earlier, ignore_errors=True)
        processor = self._processors.acquire(self.level, self.holder)
        try:
            rmtree(processor.path(STORAGE, self.name), ignore_errors=True)
        finally:
            self._processors.release(self.holder)

    def process(self) -> None:
        """Run everything available to completion, restarts included (tests, benches)."""
        while True:
            query = self._query
            if query is None:
                return
            with suppress(Exception):  # the query ended: a rule change or a failure
                query.processAllAvailable()
            restart = self._restart
            if restart is not None:
                restart.join()
            if self._query is query or self._query is None:
                return  # not restarted: done, stopped, refused or failed

    # -- per micro-batch (driver) ----------------------------------------------------

    def _batch(self, frame: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        self._deliver_batch(frame, batch_id)
        if self._first:  # where a start's time goes (docs/cep.md, the first match)
            self._first = False
            log.info(
                "pattern %s: first micro-batch %d began %.1f s after the start, "
                "delivered in %.1f s",
                self.name,
                batch_id,
                began - self._started,
                time.monotonic() - began,
            )

    def _deliver_batch(self, frame: DataFrame, batch_id: int) -> None:
        edition = self.book.current()
        if edition.stamp != self._stamp:
            try:
                roles = self.roles_now()
                protection = self.protection(edition, roles)
            except PatternRefused as refused:
                self._refused(refused)
                self._after_this_batch(restart=False)
                raise _RulesChanged(self.reason) from None
            if protection != self._protection or roles != self.roles:
                self._after_this_batch(restart=True)
                raise _RulesChanged("protection changed")
            self._stamp = edition.stamp
        if self._sink is not None:
            self._sink(frame, batch_id)
        else:
            self._deliver([row.asDict() for row in frame.collect()])

    def _refused(self, refused: PatternRefused) -> None:
        self.status, self.reason = Status.STOPPED, f"stopped by a rule or role change: {refused}"

    def _after_this_batch(self, *, restart: bool) -> None:
        """Once the query has ended (the batch raised), restart it or leave it stopped."""
        query = self._query

        def run() -> None:
            with suppress(Exception):  # the _RulesChanged this batch raises
                query.awaitTermination()
            try:
                self._after_end(query, restart=restart)
            finally:
                with self._lock:
                    if self._restart is threading.current_thread():
                        self._restart = None

        self._restart = threading.Thread(target=run, name="cep-restart", daemon=True)
        self._restart.start()

    def _after_end(self, query: Any, *, restart: bool) -> None:
        """Restart the ended query under the rules in force, or leave it stopped."""
        with self._lock:
            if self._query is not query:
                return  # stopped meanwhile by its owner
            self._query = None
            if not restart:
                self._processors.release(self.holder)
                return
            try:
                self.restarts += 1
                self.start()
            except PatternRefused as refused:  # the rules changed again meanwhile
                self._refused(refused)
                self._processors.release(self.holder)
            except Exception as failure:
                log.warning("pattern restart failed: %s", safe_error(failure))
                self.status, self.reason = Status.FAILED, safe_error(failure)
                self._processors.release(self.holder)


def adopt(earlier: Path, checkpoint: Path) -> bool:
    """Move a checkpoint from where an older layout kept it (``<root>/cep/checkpoints/
    <name>``, before patterns ran in their level's directory) to ``checkpoint``, unless
    there is one there already: a pattern restarted after the upgrade resumes instead of
    reading every event again and storing its old matches again under new batch ids.
    Whether it moved."""
    if not earlier.is_dir() or checkpoint.exists():
        return False
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    earlier.rename(checkpoint)
    return True
