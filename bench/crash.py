"""Crash at any point: SIGKILL the whole server, restart it, prove exactly-once and labels.

``python -m bench.crash --kills 60 --db sqlite`` (and ``--db postgresql``: a private
PostgreSQL as tests/db/conftest.py starts it; or ``STREAMSHIELD_PG_URL``). The suite runs
a short mode (``tests/server/test_crash.py``). Figures go to
``bench/results/crash-<db>.json`` and docs/reliability.md.

What runs: ``streamshield serve`` in a process group of its own on a temporary root; a
provider appends on three channels of stream ``s``, each with its own sequence numbers
(the per-channel check Flink's end-to-end tests use): ``feed.a`` whose sp grants R1,
``feed.b`` whose sp grants R2, ``feed.c`` that never sends an sp (its tuples declare a
policy that never comes: nobody may ever read them). Al (R1) runs ``SELECT id, chan, n
FROM s`` and subscribes to its output; Bob (R2, who holds READ TUPLE on ``s`` and
SUBSCRIBE on the output, so only the tuples' labels keep rows from him) subscribes too.
Every few rounds the catalog changes (a schema added, a query registered and removed).

Each kill is at a named crash point (:mod:`streamshield.faults`: the server SIGKILLs
itself at the n-th pass) or at a random moment (the harness SIGKILLs the process group).
After each restart the provider re-sends what it sent without an answer (same seqs: the
landing zone refuses what it had landed, which tells the provider it was landed), the
subscribers resume from the last batch id they got, and once everything has caught up
these are checked against the whole history:

* every element the API acknowledged is in the landing zone, and nothing else is;
* every landed tuple is labelled exactly once (committed labelled batches), ``feed.a``
  and ``feed.b`` tuples pass under their policy, ``feed.c`` tuples pass for no one;
* the query's output (its result store) holds every ``feed.a`` tuple exactly once and
  nothing of ``feed.b`` or ``feed.c``; a stored batch read again is unchanged;
* Al's subscription, across every reconnection, got each ``feed.a`` row exactly once
  and each batch id once; Bob got no row at all;
* the catalog: every query it records has its definition and runs, every schema its
  definition, each channel's last seq is the landing zone's.

Every loop is bounded in count and time; a violation is reported with the kill it
followed, and the run goes on (``--stop-on-violation`` stops it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pyarrow.parquet as pq
from tests.server.conftest import sp_line, tuple_line

from bench.server_process import ServerProcess, prepare_root
from streamshield.client import parse_sse
from streamshield.faults import POINTS

ROOT = Path(__file__).resolve().parent.parent
STREAM = "s"
ROLES = ["ADMIN", "PROV", "R1", "R2"]
USERS = {"joe": ["ADMIN"], "feed": ["PROV"], "al": ["R1"], "bob": ["R2"]}
CHANNELS = {"feed.a": "{R1}", "feed.b": "{R2}", "feed.c": None}  # None: never an sp
READABLE = "feed.a"  # the only channel Al's query may output
QUERIES = {
    "g": "SELECT chan, n, count(*) AS c FROM s GROUP BY chan, n",
    "q": "SELECT id, chan, n FROM s",
}
"""``g``, an aggregate, is computed and stored every batch whoever listens (a query of its
own; as a folding branch of the stream's network, ``share_aggregates``, it has no privacy
switch either): its output must hold every readable tuple's group exactly once. ``q``, a
selection, runs in the shared network, whose privacy switch computes nothing while
nobody receives it (the moments around each restart): its rows must be once each and
only readable ones, and what its subscriber got must be what it stored, but rows that
came while nobody listened are rightly never computed (docs/query-sharing.md)."""
COMPLETE = "g"
SUBSCRIPTIONS = [("al", "g"), ("al", "q"), ("bob", "g"), ("bob", "q")]
RANDOM = "random"
SCHEDULE = [*(p for p in POINTS if not p.startswith(("kafka.", "mqtt."))), RANDOM]
"""The Kafka and MQTT sources' points need a broker and a binding:
tests/server/test_kafka_crash.py and tests/server/test_mqtt_crash.py kill there."""
TUPLES_PER_POST = 5
UNREACHED_IN_SET_UP = ("landing", "ingest", "result")
"""Kinds of crash points set-up never passes (it appends no element)."""
CATALOG_EVERY = 3  # rounds between catalog changes
DRIVE_SECONDS = 45.0  # a named point not reached by then: the harness kills at random
CATCH_UP_SECONDS = 180.0
FINAL_CATCH_UP_SECONDS = 900.0


# -- the provider ---------------------------------------------------------------------------


@dataclass
class Channel:
    name: str
    index: int
    roles: str | None
    seq: int = 0
    acked: set[int] = field(default_factory=set)
    """Seqs of tuples the server acknowledged (directly, or by refusing a re-send)."""
    doubt: list[str] = field(default_factory=list)
    """Lines sent without an answer: re-sent after the restart."""
    sp_sent: bool = False

    def tid(self, seq: int) -> int:
        return self.index * 1_000_000_000 + seq

    def lines(self, count: int) -> list[str]:
        out = []
        if not self.sp_sent and self.roles is not None:
            self.seq += 1
            out.append(sp_line(STREAM, self.name, self.seq, self.roles))
        self.sp_sent = True
        for _ in range(count):
            self.seq += 1
            values = {"id": self.tid(self.seq), "chan": self.name, "n": self.seq}
            out.append(tuple_line(STREAM, self.name, self.seq, self.tid(self.seq), values))
        return out


class Unanswered(Exception):
    """The server did not answer (it died or is restarting)."""


class NotCaughtUp(RuntimeError):
    """Not everything acknowledged was labelled, output and delivered within the bound.

    Slowness, not a violation: on a loaded machine a restart's catch-up can outlast
    any fixed bound. The check of that kill is deferred to the next restart (checks are
    of the whole history, so nothing escapes); the final, unarmed cycle waits
    :data:`FINAL_CATCH_UP_SECONDS` and a timeout there is a violation."""


# -- the subscribers -------------------------------------------------------------------------


class Subscriber(threading.Thread):
    """One user's subscription to the output, resumed after every disconnection from the
    last batch id received (``?after=``); every batch and row is recorded."""

    def __init__(self, user: str, query: str, stop: threading.Event) -> None:
        super().__init__(name=f"sub-{user}-{query}", daemon=True)
        self.user, self.query, self.stop = user, query, stop
        self.server: ServerProcess | None = None
        self.token: str | None = None
        self.last = -1
        self.rows: list[tuple[int, dict]] = []
        self.problems: list[str] = []
        self.connects = 0
        self.lock = threading.Lock()

    def run(self) -> None:
        while not self.stop.is_set():
            server = self.server
            if server is None or not server.alive():
                self.stop.wait(0.2)
                continue
            with contextlib.suppress(httpx.HTTPError, OSError, ValueError):
                self._follow(server)
            self.stop.wait(0.2)

    def _follow(self, server: ServerProcess) -> None:
        if self.token is None:
            with server.login(self.user, USERS[self.user]) as http:
                self.token = http.headers["Authorization"].split()[1]
        with server.client(self.token, timeout=30) as http:
            path = f"/queries/{self.query}_out/subscribe"
            timeout = httpx.Timeout(30, read=None)
            params = {"after": self.last}
            with http.stream("GET", path, params=params, timeout=timeout) as response:
                if response.status_code == 401:
                    self.token = None
                    return
                if response.status_code != 200:
                    response.read()
                    return
                self.connects += 1
                for event, data in parse_sse(response.iter_lines()):
                    if self.stop.is_set():
                        return
                    self._event(event, data)

    def _event(self, event: str, data: dict) -> None:
        with self.lock:
            if event == "rows":
                batch = int(data["batch"])
                if batch <= self.last:
                    self.problems.append(
                        f"{self.user} on {self.query}: batch {batch} again (after {self.last})"
                    )
                self.last = max(self.last, batch)
                self.rows.extend((batch, row) for row in data["rows"])
            elif event == "gap":
                self.problems.append(f"{self.user} on {self.query}: batches {data} were pruned")

    def snapshot(self) -> list[tuple[int, dict]]:
        with self.lock:
            return list(self.rows)


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Kill:
    number: int
    point: str
    spec: str | None
    reached: bool = False
    """The server died at its crash point (False: the harness killed it at random)."""
    during: str = ""
    slow: bool = False
    """Its catch-up outlasted the bound: checked with a later one (not a violation)."""
    ready_seconds: float | None = None
    """From the kill to ``/readyz`` 200 on the restarted server."""
    caught_up_seconds: float | None = None
    """From the kill to every acknowledged tuple labelled, output and delivered."""
    violations: list[str] = field(default_factory=list)


class Harness:
    def __init__(self, root: Path, catalog: str | None, seed: int, log=print) -> None:
        self.root, self.catalog, self.log = root, catalog, log
        self.random = random.Random(seed)
        self.channels = {
            name: Channel(name, i + 1, roles) for i, (name, roles) in enumerate(CHANNELS.items())
        }
        self.stop = threading.Event()
        self.subscribers = {key: Subscriber(*key, self.stop) for key in SUBSCRIPTIONS}
        self.server: ServerProcess | None = None
        self.tokens: dict[str, str] = {}
        self.rounds = 0
        self.catalog_changes = 0
        self.labelled_batches: dict[str, list[tuple[tuple[str, int], str]]] = {}
        """Committed labelled batches read so far (a committed batch never changes)."""
        self.stored_batches: dict[str, dict[int, list[tuple]]] = {}
        """Result-store batches read so far (pruned ones stay verified here)."""
        self.kills: list[Kill] = []
        self.armed: str | None = None
        """The crash point the running server was started with."""
        self.killed_at: float | None = None
        self.deferred: list[Kill] = []
        """Kills whose check a crash during the catch-up after them put off."""
        self.pending_catalog: list[str] = []
        """Catalog changes whose answer never came (checked after the restart)."""

    # -- server life ---------------------------------------------------------------------

    def start(self, crash_at: str | None) -> float:
        if self.server is not None and self.server.alive():
            self.server.kill()  # one server per root, always
        # No latency budget: a cold JVM's first batches take tens of seconds at load, and
        # the harness, which checks what survives a kill, counts a 503 as a dead server.
        options = ["--ingest-latency-budget", "0"]
        self.server = ServerProcess(self.root, self.catalog, crash_at, options=options)
        started = self.server.wait_ready()
        for subscriber in self.subscribers.values():
            subscriber.server = self.server
        return started.ready_seconds

    def http(self, user: str) -> httpx.Client:
        assert self.server is not None
        if user not in self.tokens:
            with self.server.login(user, USERS[user]) as http:
                self.tokens[user] = http.headers["Authorization"].split()[1]
        return self.server.client(self.tokens[user], timeout=60)

    def call(self, user: str, method: str, path: str, **kwargs) -> httpx.Response:
        """One API call; Unanswered when the server died under it. A session that has
        expired (a run is longer than a session's life) is renewed once."""
        for _attempt in range(2):
            try:
                with self.http(user) as http:
                    answer = http.request(method, path, **kwargs)
            except (httpx.TransportError, OSError) as err:
                raise Unanswered(str(err)) from None
            if answer.status_code != 401:
                break
            self.tokens.pop(user, None)  # expired, or a session the catalog no longer has
        else:
            raise Unanswered("401")
        if answer.status_code >= 500 or answer.status_code == 503:
            raise Unanswered(f"{answer.status_code}")
        return answer

    # -- set-up ----------------------------------------------------------------------------

    def set_up(self, first: str | None = None) -> bool:
        """A fresh root: the catalog, the stream, the grants, the queries, the
        subscribers. ``first``, the first kill's point: when set-up cannot pass it (it
        appends nothing, so no landing, ingest or result point), the set-up's server is
        started armed for it and kept running for that kill (True), which saves a stop
        and a start (a JVM each) per run; else it is stopped (False)."""
        prepare_root(self.root, self.catalog, ROLES, USERS)
        keep = first == RANDOM or (first or "").split(".")[0] in UNREACHED_IN_SET_UP
        self.start(self._spec(first) if keep else None)
        schema = {
            "name": "t",
            "attributes": [["id", "bigint"], ["chan", "string"], ["n", "bigint"]],
        }
        self._ok("joe", "POST", "/schemas", json={**schema, "tid": "id"}, status=201)
        self._ok("joe", "POST", "/streams", json={"name": STREAM, "schema": "t"}, status=201)
        grants = [
            ("WRITE", "stream", STREAM, "PROV"),
            ("INJECT SP", "stream", STREAM, "PROV"),
            ("VIEW OBJECT", "stream", STREAM, "PROV"),
            ("VIEW CATALOG", "system", "system", "R1"),
            ("VIEW OBJECT", "stream", STREAM, "R1"),
            ("READ TUPLE", "stream", STREAM, "R1"),
            ("ADD", "system", "system", "R1"),
            ("VIEW OBJECT", "stream", STREAM, "R2"),
            ("READ TUPLE", "stream", STREAM, "R2"),
        ]
        for permission, kind, obj, role in grants:
            body = {"permission": permission, "kind": kind, "object": obj, "role": role}
            self._ok("joe", "POST", "/grants", json=body)
        for name, text in QUERIES.items():
            self._ok("al", "POST", "/queries", json={"name": name, "text": text}, status=201)
            for permission in ("VIEW OBJECT", "SUBSCRIBE"):
                body = {"permission": permission, "kind": "stream", "object": f"{name}_out"}
                self._ok("al", "POST", "/grants", json={**body, "role": "R2"})
        for subscriber in self.subscribers.values():
            subscriber.start()
        self.catch_up(time.monotonic(), FINAL_CATCH_UP_SECONDS)
        assert self.server is not None
        if self.server.process.poll() is not None:
            raise RuntimeError(f"the server died during set-up:\n{self.server.tail()}")
        if not keep:
            self.server.stop()
        return keep

    def _ok(self, user: str, method: str, path: str, status: int = 200, **kwargs) -> dict:
        answer = self.call(user, method, path, **kwargs)
        if answer.status_code != status:
            raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:300]}")
        return answer.json()

    # -- load ------------------------------------------------------------------------------

    def round(self) -> None:
        """One POST per channel, and every few rounds a catalog change."""
        self.rounds += 1
        for channel in self.channels.values():
            lines = channel.lines(TUPLES_PER_POST)
            channel.doubt.extend(lines)
            self.send(channel)
        if self.rounds % CATALOG_EVERY == 0:
            self.change_catalog()

    def send(self, channel: Channel) -> None:
        """Sends the channel's unanswered lines; the answer settles each of them."""
        if not channel.doubt:
            return
        lines = list(channel.doubt)
        answer = self.call("feed", "POST", f"/streams/{STREAM}/elements", content="\n".join(lines))
        if answer.status_code != 200:
            raise RuntimeError(
                f"append on {channel.name}: {answer.status_code} {answer.text[:300]}"
            )
        body = answer.json()
        odd = [r for r in body["rejections"] if r["reason"] != "seq_not_increasing"]
        if odd:
            raise RuntimeError(f"append on {channel.name} refused: {odd[:3]}")
        for line in lines:  # accepted now, or refused as landed before: landed either way
            element = json.loads(line)
            if element["type"] == "tuple":
                channel.acked.add(element["seq"])
        channel.doubt.clear()

    def change_catalog(self) -> None:
        """A schema added; a query registered, then removed (crash points catalog.*)."""
        self.catalog_changes += 1
        k = self.catalog_changes
        schema = {"name": f"x{k}", "attributes": [["id", "bigint"]], "tid": "id"}
        self.pending_catalog.append(f"schema x{k}")
        self._ok("joe", "POST", "/schemas", json=schema, status=201)
        self.pending_catalog[-1:] = [f"query c{k}"]
        body = {"name": f"c{k}", "text": "SELECT id FROM s WHERE n < 0"}
        self._ok("al", "POST", "/queries", json=body, status=201)
        self._ok("al", "DELETE", f"/queries/c{k}")
        self.pending_catalog.clear()

    def settle(self) -> None:
        """After a restart: re-send every unanswered line, finish the catalog change."""
        for channel in self.channels.values():
            self.send(channel)
        for change in self.pending_catalog:
            kind, name = change.split()
            if kind == "query":
                answer = self.call("al", "DELETE", f"/queries/{name}")
                if answer.status_code not in (200, 404):
                    raise RuntimeError(f"removing {name}: {answer.status_code} {answer.text}")
        self.pending_catalog.clear()

    # -- the kills -------------------------------------------------------------------------

    def cycle(self, number: int, point: str | None, running: bool = False) -> Kill | None:
        """Start the server armed for ``point`` (None: unarmed, the last check), recover
        from the previous kill and check everything, then load it until it dies at its
        point (or, for a random kill, until the harness kills it). ``running``: the
        set-up's server, already armed for ``point``, is used (the first kill)."""
        spec = self.armed if running else self._spec(point)
        kill = None if point is None else Kill(number, point, spec)
        previous = self.kills[-1] if self.kills else None
        try:
            if not running:
                self.start(spec)
        except RuntimeError:  # the server died before it was ready
            assert self.server is not None
            if kill is None or spec is None or self.server.process.poll() != -signal.SIGKILL:
                raise
            # Its armed point came in the recovery itself (a replayed batch passes the
            # same points): that is this kill, and the previous one is checked later.
            if previous is not None:
                self.deferred.append(previous)
            kill.reached, kill.during = True, "start-up"
            self.kills.append(kill)
            self.killed_at = time.monotonic()
            return kill
        if previous is not None and self.killed_at is not None:
            previous.ready_seconds = time.monotonic() - self.killed_at
        phase = "catch-up"
        try:
            self.settle()
            bound = CATCH_UP_SECONDS if point is not None else FINAL_CATCH_UP_SECONDS
            try:
                self.catch_up(time.monotonic(), bound)  # from ready: start-up varies with load
                self.checked(previous)
            except NotCaughtUp as err:
                if point is None or previous is None:
                    raise
                previous.slow = True
                self.deferred.append(previous)
                self.log(f"kill {previous.number}: {err}; checked with the next")
            if kill is None:
                return None
            phase = "load"
            bound = self.random.uniform(1.0, 8.0) if point == RANDOM else DRIVE_SECONDS
            if running and point != RANDOM:  # the set-up's server has run no batch yet:
                bound = CATCH_UP_SECONDS  # its first ones are a cold JVM's (slow at load)
            deadline = time.monotonic() + bound
            while time.monotonic() < deadline and self.server and self.server.alive():
                self.round()
        except (Unanswered, RuntimeError, AssertionError) as err:
            # A connection cut by the crash is seen a moment before the process is gone.
            assert self.server is not None
            if self.server.wait_exit(10):
                if phase == "catch-up" and previous is not None:
                    self.deferred.append(previous)  # checked after the next restart
            else:
                blamed = previous if phase == "catch-up" else kill
                (blamed or Kill(0, "set-up", None)).violations.append(f"{phase}: {err}")
        assert self.server is not None
        if kill is not None:
            kill.reached = spec is not None and self.server.process.poll() == -signal.SIGKILL
            kill.during = phase
            self.kills.append(kill)
        self.server.kill()
        self.killed_at = time.monotonic()
        return kill

    def checked(self, previous: Kill | None) -> None:
        """Everything caught up after ``previous``: the history is checked as a whole, for
        it and for every kill whose check a crash during catch-up deferred."""
        assert self.killed_at is not None or previous is None
        problems = self.verify()
        for kill in [*self.deferred, *([previous] if previous else [])]:
            kill.violations += problems
            if kill is previous and self.killed_at is not None:
                kill.caught_up_seconds = time.monotonic() - self.killed_at
        self.deferred.clear()

    def _spec(self, point: str | None) -> str | None:
        """``STREAMSHIELD_CRASH_AT`` for ``point`` (None: unarmed; a random kill is the
        harness's own)."""
        self.armed = None if point in (None, RANDOM) else f"{point}:{self._count(point)}"
        return self.armed

    def _count(self, point: str) -> int:
        """Which pass of the point kills: catalog points are passed once per change."""
        return 1 if point.startswith("catalog.") else self.random.randint(1, 3)

    # -- catching up and checking ----------------------------------------------------------

    def catch_up(self, since: float, bound: float = CATCH_UP_SECONDS) -> None:
        """Waits (``bound`` seconds) until every acknowledged tuple is labelled, every
        readable one in the output and at Al's subscriber, and Al's selection rows are
        exactly what the selection stored (NotCaughtUp otherwise)."""
        deadline = since + bound
        acked = readable = output = delivered = set()
        labelled: list = []
        while time.monotonic() < deadline:
            if self.server is None or not self.server.alive():
                raise Unanswered("the server died while catching up")
            labelled = self.labelled()
            acked = {(c.name, s) for c in self.channels.values() for s in c.acked}
            readable = {(READABLE, s) for s in self.channels[READABLE].acked}
            output = {(r["chan"], r["n"]) for r in self.output_rows(COMPLETE)}
            delivered = _keys(self.subscribers["al", COMPLETE].snapshot())
            selected = {(r["chan"], r["n"]) for r in self.output_rows("q")}
            if (
                acked <= {key for key, _ in labelled}
                and readable <= output <= delivered
                # and both ways for the selection: a batch delivered just before a kill
                # is stored by the replay after the restart, which may come after g's
                and selected == _keys(self.subscribers["al", "q"].snapshot())
            ):
                return
            time.sleep(0.3)
        raise NotCaughtUp(
            f"not caught up within {bound:.0f} s: {len(acked)} acknowledged, "
            f"{len(acked & {key for key, _ in labelled})} of them labelled; {len(readable)} "
            f"readable, {len(readable & output)} output, {len(readable & delivered)} delivered"
        )

    def labelled(self) -> list[tuple[tuple[str, int], str]]:
        """((provider, seq), reason) of every row of every committed labelled batch."""
        store = self.root / "store" / "labelled"
        out = []
        for marker in (store / "_commits").glob("[0-9]*"):
            if marker.name not in self.labelled_batches:
                listing = json.loads(marker.read_text())["streams"].get(STREAM, [])
                rows = []
                for name in listing:
                    path = store / STREAM / f"batch={marker.name}" / name
                    rows += _rows(path, ("provider", "seq", "reason"))
                self.labelled_batches[marker.name] = [((p, s), r) for p, s, r in rows]
            out += self.labelled_batches[marker.name]
        return out

    def output_rows(self, query: str, again: bool = False) -> list[dict]:
        """Every output row ``query`` stored so far, pruned batches included; ``again``:
        read every stored batch again, and say if one changed."""
        definition = json.loads((self.root / "queries" / f"{query}.json").read_text())
        results = self.root / "results" / definition["internal"]
        seen = self.stored_batches.setdefault(query, {})
        for batch in results.glob("batch=*"):
            batch_id = int(batch.name.split("=")[1])
            if batch_id in seen and not again:
                continue
            rows = sorted(_batch_rows(batch, ("chan", "n")))
            if batch_id in seen and seen[batch_id] != rows:
                raise AssertionError(f"{query}: output batch {batch_id} changed when read again")
            seen[batch_id] = rows
        return [{"chan": c, "n": n} for rows in seen.values() for c, n in rows]

    def verify(self) -> list[str]:
        problems: list[str] = []
        landed = self.landed()
        for channel in self.channels.values():
            acked = {(channel.name, s) for s in channel.acked}
            mine = {key for key in landed if key[0] == channel.name}
            if acked - mine:
                problems.append(
                    f"{channel.name}: acknowledged, not landed: {sorted(acked - mine)[:5]}"
                )
            if mine - acked:
                problems.append(
                    f"{channel.name}: landed, never acknowledged: {sorted(mine - acked)[:5]}"
                )
        labelled = self.labelled()
        counts = Counter(key for key, _ in labelled)
        twice = [key for key, n in counts.items() if n > 1]
        if twice:
            problems.append(f"labelled more than once: {twice[:5]}")
        if set(counts) != set(landed):
            problems.append(
                f"labelled != landed: missing {sorted(set(landed) - set(counts))[:5]}, "
                f"extra {sorted(set(counts) - set(landed))[:5]}"
            )
        wrong = [(k, r) for k, r in labelled if (r == "pass") != (k[0] != "feed.c")]
        if wrong:
            problems.append(f"labelled under the wrong policy: {wrong[:5]}")
        readable = {(READABLE, s) for s in self.channels[READABLE].acked}
        for query in QUERIES:
            output = Counter(_keys(self.output_rows(query, again=True), Counter))
            twice = [key for key, n in output.items() if n > 1]
            if twice:
                problems.append(f"{query}: output rows produced twice: {twice[:5]}")
            if set(output) - readable:
                problems.append(f"{query}: output rows not readable: {set(output) - readable}")
            if query == COMPLETE and readable - set(output):
                problems.append(f"{query}: readable tuples missing: {readable - set(output)}")
            got = Counter(_keys(self.subscribers["al", query].snapshot(), Counter))
            twice = [key for key, n in got.items() if n > 1]
            if twice:
                problems.append(f"al got {query}'s rows twice: {twice[:5]}")
            if set(got) != set(output):
                problems.append(
                    f"al's {query} rows != its output: missing {sorted(set(output) - set(got))[:5]}"
                    f", extra {sorted(set(got) - set(output))[:5]}"
                )
            bob = self.subscribers["bob", query].snapshot()
            if bob:
                problems.append(f"bob got {len(bob)} rows of {query} he may not read: {bob[:2]}")
        for subscriber in self.subscribers.values():
            problems += subscriber.problems
            subscriber.problems.clear()
        return problems + self.verify_catalog(landed)

    def landed(self) -> set[tuple[str, int]]:
        out = set()
        for path in (self.root / "landing" / STREAM).glob("*.jsonl"):
            for line in path.read_text().splitlines():
                element = json.loads(line)
                if element["type"] == "tuple":
                    out.add((element["provider"], element["seq"]))
        return out

    def verify_catalog(self, landed: set[tuple[str, int]]) -> list[str]:
        from streamshield.catalog.store import SqlCatalog
        from streamshield.policy.elements import Channel as Chan

        problems = []
        queries = self._ok("joe", "GET", "/queries")["queries"]
        for query in queries:
            if not (self.root / "queries" / f"{query['name']}.json").is_file():
                problems.append(f"query {query['name']} has no definition")
            if query["status"] != "running":
                problems.append(f"query {query['name']} is {query['status']}")
        if set(QUERIES) - {q["name"] for q in queries}:
            problems.append(f"queries gone: {set(QUERIES) - {q['name'] for q in queries}}")
        catalog = self._ok("joe", "GET", "/catalog")
        for schema in catalog["schemas"]:
            path = self.root / "schemas" / f"{schema['name']}.json"
            hidden = path.with_name(f".{path.name}.pending")
            if not (path.is_file() or hidden.is_file()):
                problems.append(f"schema {schema['name']} has no definition")
        sql = SqlCatalog(self.catalog or self.root / "catalog.db")
        try:
            for channel in self.channels.values():
                newest = max((s for c, s in landed if c == channel.name), default=0)
                recorded = max(sql.last_seq(Chan(STREAM, channel.name)), 0)  # -1: none yet
                if recorded != channel.seq or newest > recorded:
                    problems.append(
                        f"{channel.name}: catalog last_seq {recorded}, landed up to {newest}, "
                        f"sent up to {channel.seq}"
                    )
        finally:
            sql.engine.dispose()
        return problems

    def close(self) -> None:
        self.stop.set()
        if self.server is not None:
            self.server.kill()
        for subscriber in self.subscribers.values():
            if subscriber.is_alive():
                subscriber.join(40)


def _keys(rows, kind=set):
    """(chan, n) of rows, or of (batch, row) pairs, as a set (or another collection)."""
    rows = [row[1] if isinstance(row, tuple) else row for row in rows]
    return kind((row["chan"], row["n"]) for row in rows)


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple]:
    table = pq.read_table(path, columns=list(columns))
    return list(zip(*(table[c].to_pylist() for c in columns), strict=True))


def _batch_rows(batch: Path, columns: tuple[str, ...]) -> list[tuple]:
    """A stored batch's rows, read with pyarrow (not through the server's code): its own
    files, or, for a branch of a shared network, its rows of the files its link names
    (engine/store/result_store.py); a link to pruned files reads as nothing."""
    link = batch / "link.json"
    if not link.is_file():
        return [r for p in sorted(batch.glob("*.parquet")) for r in _rows(p, columns)]
    target = json.loads(link.read_text())
    out = []
    for file in target["files"]:
        if not Path(file).is_file():
            return []
        for row in pq.read_table(file).to_pylist():
            mine = _linked_row(row, target)
            if mine is not None:
                out.append(tuple(mine[c] for c in columns))
    return out


def _is_set(word: int | None, bit: int) -> bool:
    return word is not None and (word >> bit) & 1 == 1


def _linked_row(row: dict, target: dict) -> dict | None:
    """One row of a network's write as a branch's link rebuilds it, or None when the
    branch does not take it: a fused pass (``rebuild``: the taken bit, the view's columns
    shared, masked (a value only where its mask bit says it is readable) or flags, then
    the SELECT items that name a column; computed ones, such as ``_masked``, are left out)
    or an older link (a struct per branch)."""
    spec = target.get("rebuild")
    if spec is None:
        mine = row[target["column"]]
        if mine is None:
            return None
        got = dict(mine)  # a struct's fields under their own names
        for name, kind, source in target.get("layout", []):
            got[name] = mine[source] if kind == "field" else row[source]
        return got
    if not _is_set(row[spec["taken"][0]], spec["taken"][1]):
        return None
    view = {}
    for name, kind, source, mask_word, mask_bit in spec["view"]:
        readable = _is_set(row.get(mask_word), mask_bit) if mask_word else True
        if kind == "common":
            view[name] = row[source]
        elif kind == "masked":
            view[name] = row[source] if readable else None
        else:
            view[name] = not readable
    plain = ((name, sql.strip().strip("`")) for name, sql in spec["items"])
    return {name: view[column] for name, column in plain if column in view}  # computed: left out


# -- the command -----------------------------------------------------------------------------


@contextlib.contextmanager
def database(kind: str, given: str | None = None) -> Iterator[str | None]:
    """None for SQLite (the root's file); for PostgreSQL a fresh database on the server
    tests/db/conftest.py starts (or on ``STREAMSHIELD_PG_URL``), dropped afterwards."""
    if kind == "sqlite":
        yield None
        return
    import os

    from sqlalchemy import create_engine, text
    from tests.db.conftest import PG_URL_VARIABLE, _private_server

    given = given or os.environ.get(PG_URL_VARIABLE)
    with contextlib.nullcontext(given) if given else _private_server() as url:
        name = f"crash_{uuid.uuid4().hex[:10]}"
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        with admin.connect() as db:
            db.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield url.rsplit("/", 1)[0] + f"/{name}"
        finally:
            with admin.connect() as db:
                db.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


def run(
    kills: int,
    db: str,
    seed: int = 7,
    keep: Path | None = None,
    log=print,
    points: list[str] | None = None,
    pg_url: str | None = None,
    minutes: float | None = None,
    out: Path | None = None,
) -> dict:
    """``kills`` kills cycling through ``points`` (default: every crash point and random
    moments, shuffled by ``seed``); the report. ``pg_url``: the PostgreSQL server to make
    a database on (default: ``$STREAMSHIELD_PG_URL``, else a private one). ``minutes``:
    no new kill starts after that long; ``out``: the report is written there after every
    kill (a long run stopped early still leaves its figures)."""
    work = Path(tempfile.mkdtemp(prefix="streamshield-crash-"))
    began = time.monotonic()
    try:
        with database(db, pg_url) as catalog:
            harness = Harness(work / "root", catalog, seed, log)
            try:
                order = list(points or SCHEDULE)
                if points is None:
                    random.Random(seed).shuffle(order)
                running = harness.set_up(order[0] if kills else None)
                for number in range(kills):
                    if minutes is not None and time.monotonic() - began > minutes * 60:
                        log(f"time bound of {minutes:g} min reached after {number} kills")
                        break
                    point = order[number % len(order)]
                    harness.cycle(number + 1, point, running=running and number == 0)
                    _report(log, harness.kills[-2:-1])
                    if out is not None:
                        report = summary(harness, db, seed, time.monotonic() - began)
                        out.write_text(json.dumps(report, indent=2) + "\n")
                harness.cycle(len(harness.kills) + 1, None)  # unarmed: the last check
                _report(log, harness.kills[-1:])
            finally:
                harness.close()
            report = summary(harness, db, seed, time.monotonic() - began)
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.copytree(work, keep, dirs_exist_ok=True)
            shutil.rmtree(work, ignore_errors=True)
    return report


def _report(log, kills: list[Kill]) -> None:
    for kill in kills:
        log(
            f"kill {kill.number:3d} at {kill.point:22s} reached={kill.reached!s:5s} "
            f"during {kill.during:8s} ready {kill.ready_seconds or 0:5.1f}s caught up "
            f"{kill.caught_up_seconds or 0:5.1f}s "
            f"{kill.violations or ('OK' if kill.caught_up_seconds else 'checked with the next')}"
        )


def summary(harness: Harness, db: str, seed: int, seconds: float) -> dict:
    kills = harness.kills
    ready = [k.ready_seconds for k in kills if k.ready_seconds is not None]
    caught = [k.caught_up_seconds for k in kills if k.caught_up_seconds is not None]
    points = {}
    for point in SCHEDULE:
        mine = [k for k in kills if k.point == point]
        points[point] = {
            "tried": len(mine),
            "reached": sum(k.reached for k in mine) if point != RANDOM else len(mine),
            "survived": sum(not k.violations for k in mine),
        }
    return {
        "db": db,
        "seed": seed,
        "kills": len(kills),
        "survived": sum(not k.violations for k in kills),
        "points": points,
        "ready_seconds": _spread(ready),
        "caught_up_seconds": _spread(caught),
        "tuples_acknowledged": sum(len(c.acked) for c in harness.channels.values()),
        "output_rows": {q: len(harness.output_rows(q)) for q in QUERIES} if kills else {},
        "rows_delivered": {
            f"{user}:{query}": len(sub.snapshot())
            for (user, query), sub in harness.subscribers.items()
        },
        "subscriber_reconnects": {
            f"{user}:{query}": sub.connects for (user, query), sub in harness.subscribers.items()
        },
        "catalog_changes": harness.catalog_changes,
        "slow_catch_ups": sum(k.slow for k in kills),
        "violations": [f"kill {k.number} ({k.point}): {v}" for k in kills for v in k.violations],
        "seconds": round(seconds, 1),
    }


def _spread(values: list[float]) -> dict:
    if not values:
        return {}
    return {
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
        "min": round(min(values), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON report (default bench/results/crash-<db>.json)"
    )
    parser.add_argument("--minutes", type=float, default=None, help="no new kill after this")
    parser.add_argument("--keep", type=Path, default=None, help="copy the root here at the end")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the server this run started is killed on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    out = args.out or ROOT / "bench" / "results" / f"crash-{args.db}.json"
    report = run(args.kills, args.db, args.seed, args.keep, minutes=args.minutes, out=out)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "violations"}, indent=2))
    print(f"violations: {len(report['violations'])}")
    for violation in report["violations"]:
        print(" ", violation)
    raise SystemExit(1 if report["violations"] else 0)


if __name__ == "__main__":
    main()
