"""The driver of one level's own Spark application (see engine/levels/level_application.py).

    python -m streamshield.engine.levels.level_driver <level directory>/application.json

Its own process, so its own SparkContext and JVM; its executors are its own on the
standalone master the spec names. It runs the engine's query paths unchanged
(:class:`~streamshield.engine.queries.cql_service.CqlService`: shared networks, windows, joins,
its level's processor with its shepherd) with three differences that keep it inside
its level:

- every query runs at the spec's level and nothing else: the processor's directory must
  be the spec's level directory, which is where everything it writes goes (checkpoints,
  window and join state, result batches, Spark's local directory for the driver);
- what would write outside it is refused: ``INSERT SP`` and ``ON RESULT`` (the landing
  zone, the catalog), and a provenance id the server has not assigned;
- results go to a :class:`~streamshield.engine.store.result_store.ResultStore` per query under
  ``results/``, never to a person: delivery stays with the server.

Protocol: one JSON object per line on stdin, one reply per line on the process's
original stdout (the JVM and logging write to stderr). The first reply says it is
ready. End of stdin stops it like ``shutdown``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO

from streamshield.engine.levels.level_application import ApplicationError, ApplicationSpec
from streamshield.engine.levels.level_processor import LevelProcessor, LevelStorageError
from streamshield.engine.queries.batch_boundary import at_batch_boundary
from streamshield.engine.queries.cql_service import CqlService
from streamshield.engine.queries.source_ids import SourceIds
from streamshield.engine.queries.streaming_queries import (
    CallbackSink,
    QueryFailed,
    QueryService,
    RegisteredQuery,
    failure_class,
)
from streamshield.engine.session import (
    cache_directory,
    class_cache,
    spark_session,
    with_java_option,
)
from streamshield.engine.store.labelled_store import LabelledStore
from streamshield.engine.store.result_store import ResultStore, StoringSink
from streamshield.lang.admission import AdmittedQuery, admit
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.roles import RoleHierarchy

audit = logging.getLogger("streamshield.audit")
SPARK_LOCAL = "spark-local"
STOP_AT_BOUNDARY_SECONDS = 10.0
PROGRESS = ("batchId", "timestamp", "inputRowsPerSecond", "processedRowsPerSecond", "durationMs")
"""What of a query's last progress the server is told (its metrics and status read these)."""


class _Refused:
    """Stands in for what a level's application must not write to (landing, catalog,
    ingest, shield state): any use is a refusal, never a silent write."""

    def __init__(self, what: str) -> None:
        self._what = what

    def __getattr__(self, name: str) -> NoReturn:
        raise QueryRejected(
            "level_application",
            f"{self._what}: a level's own application writes nothing outside its directory",
        )


class LevelDriver:
    """The engine of one level inside its own Spark application."""

    def __init__(self, spec_path: Path) -> None:
        self.spec = ApplicationSpec.from_json(Path(spec_path).read_text())
        self.level = self.spec.query_level()
        self.root = self.spec.root.resolve()
        if self.root != Path(spec_path).resolve().parent:
            raise ApplicationError("the spec lies outside its level's directory")
        streams = {s.name: s for s in self.spec.streams}
        known = SourceIds(self.spec.queries_root / "provenance.json").codec.streams
        if not set(streams) <= set(known):  # assigning one would write the server's file
            raise ApplicationError("a stream has no provenance id from the server yet")
        conf = {"spark.local.dir": str(self.root / SPARK_LOCAL), **self.spec.conf}
        option, pending = class_cache(cache_directory())
        if pending is None:  # map the server's class archive; never write one from here
            conf = with_java_option(conf, option)
        self.spark = spark_session(self.spec.master, f"streamshield-{self.root.name}", conf=conf)
        self.spark.sparkContext.setLogLevel("ERROR")
        queries = QueryService(
            self.spark,
            streams,
            self.spec.hierarchy(),
            LabelledStore(self.spec.labelled),
            self.spec.queries_root,
        )
        self.cql = CqlService(
            queries,
            _Refused("landing"),  # type: ignore[arg-type]
            _Refused("catalog"),
            _Refused("ingest"),  # type: ignore[arg-type]
            _Refused("shield state"),  # type: ignore[arg-type]
        )
        self.own = LevelProcessor(self.level, self.root, self.spark)
        """Its directory's path checks (the processor CqlService makes has the same)."""
        self.reported: set[str] = set()
        """Failed queries whose failure the log has."""

    # -- requests --------------------------------------------------------------------------

    def ready(self) -> dict[str, Any]:
        context = self.spark.sparkContext
        return {
            "ok": True,
            "application": context.applicationId,
            "master": context.master,
            "pid": os.getpid(),
            "level": self.level.text,
            "root": str(self.root),
        }

    def start(
        self, name: str, text: str, roles: list[str], hierarchy: list | None = None
    ) -> dict[str, Any]:
        """``hierarchy``: the server's roles in order and its edges now, which ``roles``
        are resolved with (the one this application started with may be out of date)."""
        store = ResultStore(self.own.path("results", name))  # refuses a name leaving it
        if hierarchy is not None:
            order, edges = hierarchy
            current = RoleHierarchy.build(
                order,
                [tuple(edge) for edge in edges],
                order=order,
                capacity=self.spec.role_capacity,
            )
            self.cql.queries.use_hierarchy(current)
        admitted = admit(
            text, roles, self.cql.queries.hierarchy, list(self.cql.streams), self.level
        )
        if not isinstance(admitted, AdmittedQuery) or admitted.delegating:
            raise QueryRejected(
                "level_application", "a level's application runs queries, not sps or ON RESULT"
            )
        sink = StoringSink(store, _nowhere, wanted=lambda: False)  # stored, delivered elsewhere
        query = self.cql.submit(admitted, CallbackSink(sink), name=name)
        assert isinstance(query, RegisteredQuery)  # an admitted query, not an sp script
        processor = self.cql.processors.of(name)
        if processor is None or processor.root.resolve() != self.root:
            self.cql.stop(name)
            raise QueryRejected("level_application", "the query left its level's directory")
        return {
            "ok": True,
            "name": name,
            "columns": list(query.columns),
            "results": str(store.root),
        }

    def process(self, name: str) -> dict[str, Any]:
        self._query(name).process_all_available()
        return {"ok": True, "batches": ResultStore(self.own.path("results", name)).batches()}

    def stop(self, name: str) -> dict[str, Any]:
        """Stops ``name`` between two micro-batches (bounded wait), as the server does
        in-process; an unknown name is already stopped."""
        query = self.cql.queries.queries.get(name)
        if query is not None:
            at_batch_boundary(query.handle, STOP_AT_BOUNDARY_SECONDS)
            self.cql.stop(name)
        return {"ok": True}

    def status(self) -> dict[str, Any]:
        context = self.spark.sparkContext
        ids = context._jvm.scala.jdk.javaapi.CollectionConverters.asJava(  # type: ignore[union-attr]
            context._jsc.sc().getExecutorIds()
        )
        queries = {name: _state(query) for name, query in self.cql.queries.queries.items()}
        for name, state in queries.items():
            if state["error"] and name not in self.reported:  # its log says why, once
                self.reported.add(name)
                audit.error("query %s failed: %s", name, self._query(name).handle.exception())
        return {
            **self.ready(),
            "executors": sorted(str(i) for i in ids),
            "local_dir": context.getConf().get("spark.local.dir"),
            "queries": queries,
        }

    def shutdown(self) -> dict[str, Any]:
        for name in list(self.cql.queries.queries):
            self.cql.stop(name)
        self.spark.stop()
        return {"ok": True}

    def _query(self, name: str) -> RegisteredQuery:
        query = self.cql.queries.queries.get(name)
        if query is None:
            raise QueryRejected("unknown_query", "no such query in this level's application")
        return query

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request's reply; a failure becomes an error reply naming its kind only
        (a message could quote data values, so only refusals, which never do, carry one)."""
        op = request.get("op")
        try:
            if op == "start":
                return self.start(
                    str(request["name"]),
                    str(request["text"]),
                    request["roles"],
                    request.get("hierarchy"),
                )
            if op == "process":
                return self.process(str(request["name"]))
            if op == "stop":
                return self.stop(str(request["name"]))
            if op == "status":
                return self.status()
            if op == "shutdown":
                return self.shutdown()
            return {"ok": False, "type": "protocol", "error": "unknown_op"}
        except QueryRejected as err:
            return {"ok": False, "type": "rejected", "error": err.rule, "message": err.message}
        except LevelStorageError as err:
            return {"ok": False, "type": "storage", "error": "level_storage", "message": str(err)}
        except QueryFailed as err:
            return {"ok": False, "type": "failed", "error": "query_failed", "message": str(err)}
        except Exception as err:  # the driver outlives one bad request
            return {"ok": False, "type": "error", "error": type(err).__name__}


def _state(query: RegisteredQuery) -> dict[str, Any]:
    """A query's state as the server needs it: whether it runs, why it failed (an error
    class: the message may quote values and stays in this application's log), and its
    last progress's figures."""
    active = query.active
    error = None if active else failure_class(query.handle.exception())
    last = query.handle.lastProgress
    progress = {k: last[k] for k in PROGRESS if k in last} if last else None
    return {"active": active, "error": error, "progress": progress}


def _nowhere(_frame: Any, _batch: int) -> None:
    """Batches are stored, never handed to anyone here."""


def _reply(out: TextIO, body: dict[str, Any]) -> None:
    out.write(json.dumps(body) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m streamshield.engine.levels.level_driver SPEC", file=sys.stderr)
        return 2
    # Replies get the original stdout; everything else written to fd 1 (the JVM's
    # console, a stray print) goes to stderr and cannot break the protocol.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    try:
        driver = LevelDriver(Path(args[0]))
    except Exception as err:  # our own errors' messages name no data; others only a type
        message = str(err) if isinstance(err, ApplicationError) else ""
        _reply(
            replies, {"ok": False, "type": "error", "error": type(err).__name__, "message": message}
        )
        return 1
    _reply(replies, driver.ready())
    stopped = False
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except json.JSONDecodeError:
            _reply(replies, {"ok": False, "type": "protocol", "error": "not_json"})
            continue
        request = request if isinstance(request, dict) else {}
        reply = driver.handle(request)
        _reply(replies, reply)
        if request.get("op") == "shutdown" and reply.get("ok"):
            stopped = True
            break
    if not stopped:  # the server went away: stop rather than run unobserved
        driver.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
