"""A level's query processor as a Spark application of its own (paper 2, section 6).

Inside the server's one Spark application every level already has its own session,
scheduler pool, directory and shepherd (:mod:`~streamshield.engine.levels.level_processor`),
but the JVM, the block manager, the cache and the executors are shared. This module is
the stronger option: each level's processor runs in its own driver process
(:mod:`streamshield.engine.levels.level_driver`, its own JVM) whose executors the standalone
master gives to that application alone (or in local mode, inside that driver).

The hand-over is files and JSON lines, nothing else:

- **in**: an :class:`ApplicationSpec` (``application.json`` in the level's directory):
  the lattice and the level, the role hierarchy, the stream definitions, where the
  trusted ingest's labelled store is (read only) and the master. Queries arrive as
  JSON lines on the driver's stdin (``start``, ``process``, ``stop``, ``status``,
  ``shutdown``), each answered by one JSON line;
- **out**: every micro-batch of a query is written to a
  :class:`~streamshield.engine.store.result_store.ResultStore` at
  ``<level directory>/results/<query>/``, the layout the server already delivers from:
  the recipient still decides per row where delivery runs, outside the application.

The driver writes only under its level's directory (the same one the in-process
processor uses, so switching between the two keeps checkpoints), reads the labelled
store only through its processor's shepherd and the secured views, and refuses what
would write elsewhere (``INSERT SP``, ``ON RESULT``). Applications are started on demand
with a level's first query and stopped with its last (:class:`LevelApplications`).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamshield.catalog.streams import StreamDefinition
from streamshield.engine.levels.level_processor import (
    LEVELS_DIRECTORY,
    LevelStorageError,
    processor_name,
)
from streamshield.lang.query_check import QueryRejected
from streamshield.policy.lattice import Lattice
from streamshield.policy.query_level import QueryLevel
from streamshield.policy.roles import RoleHierarchy

SPEC_FILE = "application.json"
DRIVER = "streamshield.engine.levels.level_driver"
RESULTS_DIRECTORY = "results"
START_SECONDS = 180.0
"""A driver's JVM start and first executor on a loaded machine (2 cores, 6 users)."""
REQUEST_SECONDS = 300.0
STOP_SECONDS = 30.0


class ApplicationError(RuntimeError):
    """The level's application failed to start, died, or broke the protocol."""


@dataclass(frozen=True)
class ApplicationSpec:
    """Everything a level's driver needs, as JSON: no catalog access, no secrets."""

    level: str
    words: tuple[int, ...]
    classes: tuple[tuple[str, tuple[str, ...]], ...]
    companies: tuple[str, ...]
    level_width: int
    roles: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    role_capacity: int
    streams: tuple[StreamDefinition, ...]
    queries_root: Path
    """The server's query root (``<root>/store``): levels' directories live under it."""
    labelled: Path
    """The trusted ingest's labelled store: read, never written."""
    master: str = "local[1]"
    conf: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        level: QueryLevel,
        hierarchy: RoleHierarchy,
        streams: Mapping[str, StreamDefinition],
        queries_root: Path,
        labelled: Path,
        master: str = "local[1]",
        conf: Mapping[str, str] | None = None,
    ) -> ApplicationSpec:
        lattice = level.lattice
        return cls(
            level.text,
            tuple(level.words),
            tuple((c.name, tuple(c.companies)) for c in lattice.classes.classes),
            lattice.classes.companies,
            lattice.width,
            hierarchy.roles,
            tuple(hierarchy.edges),
            hierarchy.capacity,
            tuple(streams[name] for name in sorted(streams)),
            Path(queries_root).resolve(),
            Path(labelled).resolve(),
            master,
            dict(conf or {}),
        )

    def query_level(self) -> QueryLevel:
        """The level rebuilt from its lattice; its encoding must be the one it was sent
        with (a lattice rebuilt differently would read other tuples)."""
        lattice = Lattice.of(
            [(name, list(companies)) for name, companies in self.classes],
            order=self.companies,
            capacity=self.level_width,
        )
        level = QueryLevel(lattice, lattice.parse(self.level))
        if tuple(level.words) != self.words:
            raise ApplicationError("the level's encoding differs from the server's")
        return level

    def hierarchy(self) -> RoleHierarchy:
        return RoleHierarchy.build(
            self.roles, self.edges, order=self.roles, capacity=self.role_capacity
        )

    @property
    def name(self) -> str:
        """The level's processor name (``level-<hash>``), as in-process."""
        return processor_name(self.query_level())

    @property
    def root(self) -> Path:
        """The level's own directory: the only place its application writes."""
        return self.queries_root / LEVELS_DIRECTORY / self.name

    def to_json(self) -> str:
        body = {
            "level": self.level,
            "words": list(self.words),
            "classes": [[name, list(companies)] for name, companies in self.classes],
            "companies": list(self.companies),
            "level_width": self.level_width,
            "roles": list(self.roles),
            "edges": [list(edge) for edge in self.edges],
            "role_capacity": self.role_capacity,
            "streams": [
                {
                    "name": s.name,
                    "attributes": [list(a) for a in s.attributes],
                    "tid": s.tid,
                    "event_time": s.event_time,
                }
                for s in self.streams
            ],
            "queries_root": str(self.queries_root),
            "labelled": str(self.labelled),
            "master": self.master,
            "conf": dict(self.conf),
        }
        return json.dumps(body, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ApplicationSpec:
        body = json.loads(text)
        return cls(
            body["level"],
            tuple(int(w) for w in body["words"]),
            tuple((name, tuple(companies)) for name, companies in body["classes"]),
            tuple(body["companies"]),
            int(body["level_width"]),
            tuple(body["roles"]),
            tuple((senior, junior) for senior, junior in body["edges"]),
            int(body["role_capacity"]),
            tuple(
                StreamDefinition(
                    s["name"],
                    tuple((n, t) for n, t in s["attributes"]),
                    s["tid"],
                    s.get("event_time"),
                )
                for s in body["streams"]
            ),
            Path(body["queries_root"]),
            Path(body["labelled"]),
            body["master"],
            {str(k): str(v) for k, v in body["conf"].items()},
        )


def refusal(reply: Mapping[str, Any]) -> Exception:
    """The parent-side exception for an error reply: a user's refusal stays a
    :class:`QueryRejected` (as in-process), a storage escape a :class:`LevelStorageError`."""
    kind, message = str(reply.get("error", "error")), str(reply.get("message", ""))
    if reply.get("type") == "rejected":
        return QueryRejected(kind, message)
    if reply.get("type") == "storage":
        return LevelStorageError(message)
    return ApplicationError(f"{kind}: {message}" if message else kind)


class LevelApplication:
    """One level's driver process and the protocol to it (one request at a time)."""

    def __init__(self, spec: ApplicationSpec, driver: str = DRIVER) -> None:
        """``driver``: the module run as ``python -m`` (tests give a stand-in)."""
        self.spec, self.root = spec, spec.root
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / SPEC_FILE).write_text(spec.to_json())
        self.log = self.root / "application.log"
        self._lock = threading.Lock()
        self._replies: queue.Queue[str | None] = queue.Queue()
        self.ready: dict[str, Any] | None = None
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
        env.pop("STREAMSHIELD_SPARK_MASTER", None)  # the spec names the master
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", driver, str(self.root / SPEC_FILE)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self.root,
                start_new_session=True,  # its own group: close() reaches its JVM too
            )
        threading.Thread(target=self._read, name=f"{spec.name}-replies", daemon=True).start()

    @property
    def name(self) -> str:
        return self.root.name

    def results(self, query: str) -> Path:
        """Where the application stores ``query``'s micro-batches (a ResultStore root)."""
        return self.root / RESULTS_DIRECTORY / query

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._replies.put(line.decode(errors="replace"))
        self._replies.put(None)

    def _next(self, timeout: float) -> dict[str, Any]:
        """The next reply, an error reply raised as its refusal (:func:`refusal`)."""
        try:
            line = self._replies.get(timeout=timeout)
        except queue.Empty:  # a late answer would pair with the next request: end it
            _end_group(self.process)
            raise ApplicationError(f"{self.name}: no answer in {timeout:.0f} s; stopped") from None
        if line is None:
            self._replies.put(None)  # every later request sees the end too
            self.process.wait()
            raise ApplicationError(
                f"{self.name}: the application exited ({self.process.returncode}); see {self.log}"
            )
        reply = json.loads(line)
        if not reply.get("ok"):
            raise refusal(reply)
        return reply

    def wait_ready(self, timeout: float = START_SECONDS) -> dict[str, Any]:
        """The driver's first line: its application id, master, pid (once started)."""
        with self._lock:
            if self.ready is None:
                self.ready = self._next(timeout)
            return self.ready

    def request(self, op: str, timeout: float = REQUEST_SECONDS, **fields: Any) -> dict[str, Any]:
        self.wait_ready()
        with self._lock:
            if self.process.stdin is None or self.process.poll() is not None:
                raise ApplicationError(f"{self.name}: the application is not running")
            try:
                self.process.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
                self.process.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise ApplicationError(f"{self.name}: the application is gone") from None
            return self._next(timeout)

    def submit(
        self,
        name: str,
        text: str,
        roles: tuple[str, ...] | list[str],
        hierarchy: RoleHierarchy | None = None,
    ) -> dict[str, Any]:
        """Start ``text`` as query ``name`` with ``roles`` at the application's level;
        its batches go to :meth:`results`. Refusals raise as they would in-process.
        ``hierarchy``: the server's role hierarchy of now, which the application
        resolves ``roles`` with (its own is the one of its start: roles created and
        edges changed since would otherwise not count)."""
        extra: dict[str, Any] = {}
        if hierarchy is not None:
            extra = {"hierarchy": [list(hierarchy.roles), [list(e) for e in hierarchy.edges]]}
        return self.request("start", name=name, text=text, roles=list(roles), **extra)

    def process_all_available(self, name: str, timeout: float = REQUEST_SECONDS) -> dict[str, Any]:
        """Block until the query has processed everything available (tests, batch runs)."""
        return self.request("process", timeout, name=name)

    def stop(self, name: str) -> None:
        self.request("stop", name=name)

    def status(self) -> dict[str, Any]:
        return self.request("status")

    def close(self, timeout: float = STOP_SECONDS) -> int:
        """Stop every query and the driver (its JVM with it); the exit code."""
        if self.process.poll() is None:
            with contextlib.suppress(ApplicationError):
                self.request("shutdown", timeout=timeout)
            with contextlib.suppress(OSError, ValueError):
                if self.process.stdin is not None:
                    self.process.stdin.close()  # the driver also ends at the end of its stdin
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _end_group(self.process)
        return self.process.returncode


def _end_group(process: subprocess.Popen) -> None:
    """SIGTERM to the driver's process group (driver and its JVM), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class LevelApplications:
    """The applications of one server, keyed by level: created with a level's first
    query, closed with its last (its directory stays, so a query restarts from its
    checkpoint)."""

    def __init__(
        self,
        hierarchy: RoleHierarchy | Callable[[], RoleHierarchy],
        streams: Mapping[str, StreamDefinition],
        queries_root: Path,
        labelled: Path,
        master: str = "local[1]",
        conf: Mapping[str, str] | None = None,
        driver: str = DRIVER,
    ) -> None:
        """``hierarchy``: the role hierarchy, or how to ask for the one in force (each
        query's start hands it to its application)."""
        self._hierarchy, self.streams, self.driver = hierarchy, streams, driver
        self.queries_root, self.labelled = Path(queries_root), Path(labelled)
        self.master, self.conf = master, dict(conf or {})
        self._applications: dict[str, LevelApplication] = {}
        self._queries: dict[str, set[str]] = {}
        self._owner: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def hierarchy(self) -> RoleHierarchy:
        """The role hierarchy in force."""
        return self._hierarchy() if callable(self._hierarchy) else self._hierarchy

    def results(self, level: QueryLevel, query: str) -> Path:
        """Where ``level``'s application stores ``query``'s batches (running or not)."""
        return (
            self.queries_root / LEVELS_DIRECTORY / processor_name(level) / RESULTS_DIRECTORY / query
        )

    def acquire(self, level: QueryLevel, query: str) -> LevelApplication:
        """The application of ``level`` (started now if it has no query, or if its
        driver exited: the queries it ran fail and are started again into the new one),
        with ``query``. Starting does not wait for the driver: its first request does."""
        name = processor_name(level)
        with self._lock:
            application = self._applications.get(name)
            if application is None or application.process.poll() is not None:
                spec = ApplicationSpec.of(
                    level,
                    self.hierarchy,
                    self.streams,
                    self.queries_root,
                    self.labelled,
                    self.master,
                    self.conf,
                )
                application = LevelApplication(spec, self.driver)
                self._applications[name] = application
                self._queries.setdefault(name, set())
            self._queries[name].add(query)
            self._owner[query] = name
            return application

    def of(self, query: str) -> LevelApplication | None:
        with self._lock:
            name = self._owner.get(query)
            return None if name is None else self._applications.get(name)

    def release(self, query: str) -> int | None:
        """Stop ``query``; the application goes with its last query (its exit code)."""
        with self._lock:
            name = self._owner.pop(query, None)
            if name is None:
                return None
            self._queries[name].discard(query)
            application = self._applications[name]
            if not self._queries[name]:
                del self._queries[name], self._applications[name]
                last = True
            else:
                last = False
        if last:
            return application.close()  # stops every query it still runs
        application.stop(query)
        return None

    def active(self) -> dict[str, LevelApplication]:
        with self._lock:
            return dict(self._applications)

    def close(self) -> None:
        for query in list(self._owner):
            self.release(query)
