"""A query that runs in its level's own Spark application, as the server sees it.

With ``level_applications = "separate"`` (server/settings.py) the registry hands a query
that has a level to :class:`~streamshield.engine.levels.level_application.LevelApplications`
once every check of the server's own has passed (OxRBAC, admission, operator limits):
the level's application runs it and stores each micro-batch under the level's
directory; delivery stays in the server, where each recipient's roles and level are
checked per row as for any query.

:class:`ApplicationQuery` stands in for
:class:`~streamshield.engine.queries.streaming_queries.RegisteredQuery` (``active``, ``columns``,
``stop``, and ``handle``: the StreamingQuery face the registry, its watch and the metrics
read). One thread per query follows its result store into its
:class:`~streamshield.engine.delivery.delivery.Delivery`
(:class:`~streamshield.engine.store.result_store.ResultFollower`, every 0.1 s, as networks
poll) and asks the application every second how the query is. A driver that exits or
stops answering fails its queries with :data:`LEVEL_APPLICATION_LOST`; the server starts
them again as it does queries failed for their storage (a new driver for the level, each
query resuming from its checkpoint).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from streamshield.engine.delivery.delivery import Delivery
from streamshield.engine.levels.level_application import (
    ApplicationError,
    LevelApplication,
    LevelApplications,
)
from streamshield.engine.queries.streaming_queries import failure_class
from streamshield.engine.store.result_store import ResultFollower, ResultStore
from streamshield.policy.query_level import QueryLevel

audit = logging.getLogger("streamshield.audit")
LEVEL_APPLICATION_LOST = "LEVEL_APPLICATION_LOST"
"""The error class of a query whose level's application exited or stopped answering."""
FOLLOW_SECONDS = 0.1
STATUS_SECONDS = 1.0
JOIN_SECONDS = 30.0


@dataclass(frozen=True)
class SeparateLevels:
    """``level_applications = "separate"``: each level's queries run in a Spark
    application of its own, on ``master`` (local mode in each driver by default)."""

    master: str = "local[1]"
    conf: Mapping[str, str] = field(default_factory=dict)


class ApplicationFailure(RuntimeError):
    """Why a query in a level's application stopped: an error class only (the message
    may quote values; it stays in the application's log), which failure_class reads."""

    def __init__(self, error_class: str, log: object) -> None:
        super().__init__(f"{error_class} in the level's own application (its log: {log})")
        self.error_class = error_class


class ApplicationQuery:
    """A query in its level's application: the registry's handle, and its follower."""

    def __init__(
        self,
        name: str,
        applications: LevelApplications,
        application: LevelApplication,
        store: ResultStore,
        delivery: Delivery,
        spark: SparkSession,
    ) -> None:
        self.name, self.application, self._applications = name, application, applications
        self.columns: tuple[str, ...] = ()
        self.failure: ApplicationFailure | None = None
        self.progress: dict[str, Any] | None = None
        # Batches stored before this start were delivered then (or stored unwatched).
        after = max(store.batches(), default=-1)
        self._follower = ResultFollower(
            store, spark, delivery, after, wanted=lambda: bool(delivery.subscriptions)
        )
        self._polling = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def start(
        cls,
        applications: LevelApplications,
        level: QueryLevel,
        name: str,
        text: str,
        roles: tuple[str, ...],
        store: ResultStore,
        delivery: Delivery,
        spark: SparkSession,
    ) -> ApplicationQuery:
        """Hands the query to its level's application (started if it has none) and
        follows it; a refusal raises as in-process (QueryRejected, LevelStorageError),
        a driver that does not start ApplicationError."""
        query = cls(name, applications, applications.acquire(level, name), store, delivery, spark)
        try:
            reply = query.application.submit(name, text, roles, applications.hierarchy)
        except BaseException:
            with suppress(ApplicationError):
                applications.release(name)  # the application goes if it was for this one
            raise
        query.columns = tuple(reply.get("columns", ()))
        query._thread = threading.Thread(target=query._follow, name=f"follow-{name}", daemon=True)
        query._thread.start()
        return query

    @property
    def active(self) -> bool:
        return self.failure is None and not self._stopped.is_set()

    @property
    def handle(self) -> _Streaming:
        return _Streaming(self)

    def stop(self) -> None:
        """Stops the query in its application (between two batches; the application
        with its level's last query), then delivers what it stored before."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(JOIN_SECONDS)
        try:
            self._applications.release(self.name)
        except ApplicationError as err:  # gone already: nothing is left to stop
            audit.warning("query %s: its application did not answer the stop: %s", self.name, err)
        try:
            self._poll()
        except Exception as err:  # its subscribers are told it stopped just after
            audit.error("query %s: last delivery failed: %s", self.name, type(err).__name__)

    def _poll(self) -> None:
        with self._polling:
            self._follower.poll()

    def _follow(self) -> None:
        checked = time.monotonic()
        while not self._stopped.wait(FOLLOW_SECONDS):
            try:
                self._poll()
                if time.monotonic() - checked >= STATUS_SECONDS:
                    checked = time.monotonic()
                    self._check()
            except ApplicationError as err:
                audit.error("query %s: %s", self.name, err)
                self._fail(LEVEL_APPLICATION_LOST)
            except Exception as err:  # a batch that cannot be delivered fails the query,
                self._fail(failure_class(err))  # as it does in-process
                audit.error("query %s: delivery failed: %s", self.name, err)
            if self.failure is not None:
                return

    def _check(self) -> None:
        """The application's word on the query (raises ApplicationError when it is gone)."""
        if self.application.process.poll() is not None:
            raise ApplicationError(f"{self.application.name}: the application exited")
        state = self.application.status()["queries"].get(self.name)
        if state is None:
            self._fail("STOPPED_UNEXPECTEDLY")
            return
        self.progress = state.get("progress")
        if not state.get("active"):
            self._poll()  # what it stored before it failed
            self._fail(str(state.get("error") or "STOPPED_UNEXPECTEDLY"))

    def _fail(self, error_class: str) -> None:
        if self.failure is None and not self._stopped.is_set():
            self.failure = ApplicationFailure(error_class, self.application.log)


class _Streaming:
    """The StreamingQuery face of an :class:`ApplicationQuery`: what the registry, its
    watch and the metrics read of a running query. The driver stops its query between two
    batches itself, so no trigger is ever reported active here."""

    def __init__(self, query: ApplicationQuery) -> None:
        self._query = query

    @property
    def isActive(self) -> bool:
        return self._query.active

    @property
    def status(self) -> dict[str, Any]:
        return {
            "isTriggerActive": False,
            "isDataAvailable": False,
            "message": "in its level's application",
        }

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        return self._query.progress

    def exception(self) -> ApplicationFailure | None:
        return self._query.failure

    def stop(self) -> None:
        self._query.stop()
