"""Revocation on a busy server: how long a revoked or logged-out subscriber still receives.

One command: ``.venv/bin/python -m bench.revocation_server`` (about 3 minutes; the
revocation target: "measure the time from the revoke call to the last row and to the ``closed``
event, on a busy server").

A real server runs in this process over TLS on loopback (as tests/server/conftest.py
starts it: the same public calls, one Spark session, a temporary root). It is kept
busy: a provider appends tuples over HTTPS continuously (an sp first, then
``--tuples`` plain rows per POST, ``--posts`` POSTs per second, the server assigning
seq), and four other users run their own queries over the stream, each with a live
subscriber, so that ingest and query micro-batches never stop. Al owns a query over
the stream and shares its output (VIEW OBJECT + SUBSCRIBE) with ``--recipients`` users
(Bob, Bea, Ben, Bo: CUSTOMER2, who may also read the stream's tuples themselves), who
run rounds at the same time, each alternating:

* revoke: Bob subscribes; once rows reach him, at a random moment of the next delivery
  cycle, ``t0`` is taken just before Al's ``DELETE /grants`` of Bob's SUBSCRIBE; we
  record when Bob's last ``rows`` event and his ``closed`` event arrived (monotonic
  receive times in Bob's reader thread). Al grants SUBSCRIBE again for the next round.
* logout: the same, but Bob's own session ends (``POST /logout``) instead.

Revoke -> last row is negative (or zero) when no row reached the recipient after the
call: then it says how long before the call her last rows came. How busy the server was
is measured from Spark's progress reports of every streaming query of the session
(ingest and the five user queries): batches that had input rows, per second, and the
share of the time each query spent in a batch, during the rounds. Figures go to
``bench/results/revocation-server.json`` and to their own section of ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import socket
import ssl
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx

from bench.experiment_common import changed_flags
from bench.revocation_latency import write_section
from streamshield.catalog.security import SecurityCatalog
from streamshield.engine.session import spark_session
from streamshield.engine.tuning import SERVER, EngineTuning
from streamshield.server.app import create_app
from streamshield.server.runner import Running, serve_in_thread
from streamshield.server.service import ServerService
from streamshield.server.tls import ensure_self_signed

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Delivery: revocation on a busy server"
RESULTS = ROOT / "bench" / "results" / "revocation-server.json"
PASSWORD = "correct horse battery staple"
ROLES = ["ADMIN", "INFO_PROVIDER", "CUSTOMER1", "CUSTOMER2"]
STREAM = "feed"
SHARED = "al_q_out"  # Al's query output, shared with the recipients
SYMBOLS = [f"S{i}" for i in range(8)]
OTHERS = {  # four other users' queries: selections and one aggregate (stateful)
    "carol": "SELECT id, price FROM feed WHERE price > 50",
    "dave": "SELECT id, symbol FROM feed WHERE price < 20",
    "erin": "SELECT symbol, count(*) AS n, sum(price) AS total FROM feed GROUP BY symbol",
    "frank": "SELECT id, symbol, price FROM feed WHERE symbol = 'S3'",
}
RECIPIENTS = ("bob", "bea", "ben", "bo")  # Al shares his output with each of them
USERS = {
    "joe": ["ADMIN"],
    "ed": ["INFO_PROVIDER"],
    "al": ["CUSTOMER1"],
    **{name: ["CUSTOMER2"] for name in RECIPIENTS},
    **{name: ["CUSTOMER1"] for name in OTHERS},
}
SP = {
    "type": "sp",
    "ddp": {"streams": STREAM, "tuples": "*", "attributes": "*"},
    "srp": {"roles": "{CUSTOMER1, CUSTOMER2}", "grant_option": False},
    "sign": "+",
    "immutable": False,
}


def wait_for(condition: Callable[[], object], timeout: float, every: float = 0.02) -> object:
    """Bounded polling: the condition's first truthy value, or TimeoutError."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise TimeoutError("condition not met in time")


# -- the server (the public calls tests/server/conftest.py makes) ---------------------------


@dataclass
class Server:
    url: str
    cert: Path
    service: ServerService
    running: Running

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        context = ssl.create_default_context(cafile=str(self.cert))
        return httpx.Client(base_url=self.url, verify=context, headers=headers, timeout=60)

    def login(self, user: str) -> httpx.Client:
        with self.client() as anonymous:
            answer = anonymous.post(
                "/login", json={"user": user, "password": PASSWORD, "roles": USERS[user]}
            )
        ok(answer)
        return self.client(answer.json()["token"])


@contextlib.contextmanager
def busy_root_server(spark, root: Path, tuning: EngineTuning = SERVER) -> Iterator[Server]:
    """A server on a fresh ``root`` with the bench's users, running with ``tuning``;
    stopped on exit."""
    security = SecurityCatalog(root / "catalog.db")
    security.catalog.set_roles(ROLES, [])
    (first, roles), *others = USERS.items()
    security.create_user(first, PASSWORD, roles)
    admin = security.login(first, PASSWORD, roles)
    for name, roles in others:
        security.create_user(name, PASSWORD, roles, by=admin)
    service = ServerService(spark, root, security, tuning=tuning)
    service.start()
    try:
        tls = ensure_self_signed(root / "tls")
        running = serve_in_thread(create_app(service), "127.0.0.1", 0, tls)
    except BaseException:
        service.stop()
        raise
    try:
        yield Server(running.url, tls.cert, service, running)
    finally:  # the service first (its subscribers get a closed event), then HTTP
        service.stop()
        running.stop()


def ok(answer: httpx.Response, status: int = 200) -> dict:
    if answer.status_code != status:
        raise RuntimeError(f"{answer.request.method} {answer.request.url.path}: {answer.text}")
    return answer.json()


def grant_body(permission: str, kind: str, obj: str, role: str | None = None, user=None) -> dict:
    body = {"permission": permission, "kind": kind, "object": obj}
    return body | ({"user": user} if user else {"role": role})


def set_up(server: Server) -> None:
    """Joe's schema, stream and grants; every user's query (Al's is shared with the recipients)."""
    set_up_stream(server)
    queries = {"al": f"SELECT id, symbol, price FROM {STREAM}", **OTHERS}
    for user, text in queries.items():
        with server.login(user) as client:
            ok(client.post("/queries", json={"name": f"{user}_q", "text": text}), 201)
    with server.login("al") as al:
        for user in RECIPIENTS:
            for permission in ("VIEW OBJECT", "SUBSCRIBE"):
                ok(al.post("/grants", json=grant_body(permission, "stream", SHARED, user=user)))


def set_up_stream(server: Server) -> None:
    """Joe's schema and stream; Ed may write it and inject sps, the customers read it and
    CUSTOMER1 may register queries."""
    with server.login("joe") as joe:
        schema = {
            "name": "ticks",
            "attributes": [["id", "bigint"], ["symbol", "string"], ["price", "double"]],
            "tid": "id",
        }
        ok(joe.post("/schemas", json=schema), 201)
        ok(joe.post("/streams", json={"name": STREAM, "schema": "ticks"}), 201)
        for role in ("INFO_PROVIDER", "CUSTOMER1", "CUSTOMER2"):
            ok(joe.post("/grants", json=grant_body("VIEW CATALOG", "system", "system", role)))
            for kind, obj in (("schema", "ticks"), ("stream", STREAM)):
                ok(joe.post("/grants", json=grant_body("VIEW OBJECT", kind, obj, role)))
        for permission in ("WRITE", "INJECT SP"):
            ok(joe.post("/grants", json=grant_body(permission, "stream", STREAM, "INFO_PROVIDER")))
        # Recipients may read the tuples themselves: a per-recipient check passes them the rows.
        for role in ("CUSTOMER1", "CUSTOMER2"):
            ok(joe.post("/grants", json=grant_body("READ TUPLE", "stream", STREAM, role)))
        ok(joe.post("/grants", json=grant_body("ADD", "system", "system", "CUSTOMER1")))


# -- load and observation -------------------------------------------------------------------


class Provider:
    """Ed appends continuously over HTTPS: one sp, then plain rows (the server assigns seq)."""

    def __init__(self, client: httpx.Client, tuples: int, posts: float, seed: int) -> None:
        self.client, self.tuples, self.interval = client, tuples, 1.0 / posts
        self.rng = random.Random(seed)
        self.posts: list[tuple[float, int, int]] = []  # monotonic end, accepted, rejected
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="bench-provider", daemon=True)
        self.next_id = 1

    def _lines(self, first: bool) -> str:
        lines = [json.dumps(SP)] if first else []
        for _ in range(self.tuples):
            values = {
                "id": self.next_id,
                "symbol": self.rng.choice(SYMBOLS),
                "price": round(self.rng.uniform(0, 100), 2),
            }
            lines.append(json.dumps({"values": values}))
            self.next_id += 1
        return "\n".join(lines)

    def post(self, first: bool) -> bool:
        """One POST of ``tuples`` rows (an sp first when ``first``); whether it was accepted."""
        try:
            answer = self.client.post(
                f"/streams/{STREAM}/elements",
                params={"assign": "seq"},
                content=self._lines(first),
                headers={"Content-Type": "application/x-ndjson"},
            )
        except httpx.HTTPError as err:
            self.errors.append(type(err).__name__)
            return False
        if answer.status_code != 200:
            self.errors.append(f"{answer.status_code}: {answer.text[:200]}")
            return False
        report = answer.json()
        self.posts.append((time.monotonic(), report["accepted"], report["rejected"]))
        return True

    def _run(self) -> None:
        first = True
        while not self.stop.is_set():
            began = time.monotonic()
            if self.post(first):
                first = False
            self.stop.wait(max(0.0, self.interval - (time.monotonic() - began)))

    def start(self) -> None:
        self.thread.start()

    def join(self) -> None:
        self.stop.set()
        self.thread.join(60)
        if self.thread.is_alive():
            raise RuntimeError("the provider thread did not end")

    def accepted_between(self, start: float, end: float) -> int:
        return sum(a for t, a, _ in self.posts if start <= t <= end)


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, int]]:
    """Server-sent events as (event, bytes of data), pings skipped. The data is not decoded:
    the bench shares the server's process (and its GIL), and decoding tens of thousands of
    rows per event in the readers would slow the server it measures."""
    event, size = "message", 0
    for line in lines:
        if not line:
            if size:
                yield event, size
            event, size = "message", 0
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            size += len(line) - 5


class Subscriber:
    """A live SSE subscription read in a thread; every event with its monotonic receive time.

    As tests/server/conftest.py's ``Subscriber``, plus the receive times; the rows are
    neither decoded nor kept.
    """

    def __init__(self, client: httpx.Client, name: str) -> None:
        self.events: list[tuple[float, str, int]] = []  # received at, event, data bytes
        self.status: int | None = None
        self.body = ""
        self.client = client
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, args=(name,), daemon=True)
        self._thread.start()
        wait_for(lambda: self.status is not None, timeout=60)
        if self.status != 200:
            raise RuntimeError(f"subscribe {name}: {self.status} {self.body}")

    def _run(self, name: str) -> None:
        try:
            with self.client.stream(
                "GET", f"/queries/{name}/subscribe", timeout=httpx.Timeout(30, read=None)
            ) as response:
                self._response = response
                if response.status_code != 200:
                    self.body = response.read().decode(errors="replace")[:200]
                    self.status = response.status_code
                    return
                self.status = 200
                for event, size in sse_events(response.iter_lines()):
                    self.events.append((time.monotonic(), event, size))
        except (httpx.HTTPError, RuntimeError):
            self.status = self.status or -1

    def rows_events(self) -> list[float]:
        return [t for t, event, _ in self.events if event == "rows"]

    def end(self) -> tuple[float, str] | None:
        """The first event that ends the stream (``closed``, ``dropped``, ...: neither
        ``rows`` nor ``lagging``) and when it came."""
        return next(((t, e) for t, e, _ in self.events if e not in ("rows", "lagging")), None)

    def close(self) -> None:
        """Ends the stream without touching the reader's TLS state (see the conftest)."""
        if self._response is not None:
            stream = self._response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
        self._thread.join(30)
        if self._thread.is_alive():
            raise RuntimeError("a subscriber's reader did not end")


def batches_with_rows(spark, service: ServerService, start: float, end: float) -> dict:
    """Per streaming query (ingest and every user query), its batches with input rows that
    started in [start, end] (epoch seconds), from Spark's progress reports. User queries
    run in their own Spark sessions: their handles come from the service's registry."""
    found = {q.id: (q.name or str(q.id), q) for q in spark.streams.active}
    ingest = service.ingest_query  # driven ingest is no Spark streaming query
    if ingest is not None:
        found[ingest.id] = (ingest.name, ingest)
    for live in service.queries.all():
        streaming = getattr(getattr(live, "handle", None), "handle", None)
        if streaming is not None:
            found[streaming.id] = (live.name, streaming)
    out: dict[str, list[dict]] = {}
    for name, query in found.values():
        seen: dict[int, dict] = {}
        for p in query.recentProgress:
            began = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
            if start <= began <= end and (p.get("numInputRows") or 0) > 0:
                seen[p["batchId"]] = p
        out[name] = list(seen.values())
    return out


# -- rounds ---------------------------------------------------------------------------------


def one_round(
    server: Server, user: str, kind: str, rng: random.Random, cycle: float, end_timeout: float
) -> dict:
    """``user`` subscribes, receives rows, then loses the right (``revoke``) or his session
    at a random moment of the next ``cycle`` seconds (about one delivery cycle)."""
    recipient = server.login(user)
    try:
        subscriber = Subscriber(recipient, SHARED)
        try:
            wait_for(subscriber.rows_events, timeout=120)
            time.sleep(rng.uniform(0.0, cycle))
            with server.login("al") as al:
                t0 = time.monotonic()
                if kind == "revoke":
                    revoke = grant_body("SUBSCRIBE", "stream", SHARED, user=user)
                    ok(al.request("DELETE", "/grants", json=revoke))
                else:
                    ok(recipient.post("/logout"))
                returned = time.monotonic()
                with contextlib.suppress(TimeoutError):  # a missing end is reported
                    wait_for(subscriber.end, timeout=end_timeout)
                end = subscriber.end()
                if kind == "revoke":
                    regrant = grant_body("SUBSCRIBE", "stream", SHARED, user=user)
                    ok(al.post("/grants", json=regrant))
        finally:
            subscriber.close()
    finally:
        recipient.close()
    rows = subscriber.rows_events()
    after = [t for t in rows if t >= t0 and (end is None or t <= end[0])]
    return {
        "kind": kind,
        "user": user,
        "call_s": round(returned - t0, 4),
        "end_event": end[1] if end else None,
        "to_end_s": round(end[0] - t0, 4) if end else None,
        "to_last_row_s": round(max(t for t in rows if end is None or t <= end[0]) - t0, 4),
        "rows_events_after_call": len(after),
        "rows_events_before_call": len([t for t in rows if t < t0]),
    }


def all_rounds(
    server: Server, args: argparse.Namespace, busy: Subscriber, started: float
) -> list[dict]:
    """``--recipients`` users run rounds at once, each alternating revoke and logout, until
    ``2 * --rounds`` rounds have started or ``--max-seconds`` have passed."""
    rounds: list[dict] = []
    lock = threading.Lock()
    begun = 0
    failures: list[BaseException] = []

    def recipient(index: int, user: str) -> None:
        nonlocal begun
        rng = random.Random(args.seed * 100 + index)
        for n in itertools.count():
            with lock:
                if begun >= 2 * args.rounds or time.monotonic() - started > args.max_seconds:
                    return
                begun += 1
            kind = "revoke" if (index + n) % 2 == 0 else "logout"
            try:
                outcome = one_round(server, user, kind, rng, delivery_cycle(busy), args.end_timeout)
            except BaseException as err:  # reported after the others finished their rounds
                failures.append(err)
                return
            with lock:
                rounds.append(outcome)
            print(json.dumps(outcome), flush=True)

    threads = [
        threading.Thread(target=recipient, args=(i, user), name=f"bench-{user}", daemon=True)
        for i, user in enumerate(RECIPIENTS[: args.recipients])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(args.max_seconds + 300)
        if thread.is_alive():
            raise RuntimeError(f"{thread.name} did not end")
    if failures:
        raise failures[0]
    return rounds


def delivery_cycle(subscriber: Subscriber) -> float:
    """The median gap between a busy subscriber's rows events (0.5 to 10 s)."""
    times = subscriber.rows_events()[-20:]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return min(10.0, max(0.5, statistics.median(gaps))) if gaps else 1.0


def stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def run(args: argparse.Namespace) -> dict:
    phases: dict[str, float] = {}
    clock = time.monotonic()

    def phase(name: str) -> None:
        nonlocal clock
        phases[name] = round(time.monotonic() - clock, 1)
        clock = time.monotonic()
        print(f"{name}: {phases[name]} s", flush=True)

    spark = spark_session(conf={"spark.sql.streaming.numRecentProgressUpdates": "2000"})
    spark.sparkContext.setLogLevel("ERROR")
    phase("spark session")
    tmp = Path(tempfile.mkdtemp(prefix="ss-revbench-"))
    try:
        with busy_root_server(spark, tmp) as server:
            phase("server start")
            set_up(server)
            phase("set-up (schema, stream, grants, 5 queries)")
            provider = Provider(server.login("ed"), args.tuples, args.posts, args.seed)
            provider.start()
            others: list[Subscriber] = []
            try:
                for user in OTHERS:
                    others.append(Subscriber(server.login(user), f"{user}_q"))
                for sub in others:  # warm-up: every query delivers before we measure
                    wait_for(sub.rows_events, timeout=180, every=0.2)
                phase("warm-up (every other subscriber has rows)")
                loadavg = [os.getloadavg()[0]]
                started, wall_started = time.monotonic(), time.time()
                rounds = all_rounds(server, args, others[0], started)
                ended, wall_ended = time.monotonic(), time.time()
                loadavg.append(os.getloadavg()[0])
                batches = batches_with_rows(spark, server.service, wall_started, wall_ended)
                phase("rounds")
            finally:
                for sub in others:
                    sub.close()
                    sub.client.close()
                provider.join()
                provider.client.close()
            others_rows = [
                [(n, t) for t, e, n in sub.events if e == "rows" and started <= t <= ended]
                for sub in others
            ]
        phase("stop")
        result = summarise(
            args, rounds, ended - started, provider, (started, ended), batches, others_rows
        )
        machine = {"cpus": os.cpu_count(), "loadavg_1min_before_after": loadavg}
        return {**result, "machine": machine, "phases_s": phases}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def summarise(
    args: argparse.Namespace,
    rounds: list[dict],
    seconds: float,
    provider: Provider,
    window: tuple[float, float],
    batches: dict[str, list[dict]],
    others_rows: list[list[tuple[int, float]]],
) -> dict:
    revokes = [r for r in rounds if r["kind"] == "revoke"]
    logouts = [r for r in rounds if r["kind"] == "logout"]
    per_query = {
        name: {
            "batches": len(items),
            "per_s": round(len(items) / seconds, 2),
            "busy_fraction": round(sum(_seconds(p) for p in items) / seconds, 2),
            "median_batch_s": round(statistics.median(_seconds(p) for p in items), 3)
            if items
            else None,
        }
        for name, items in sorted(batches.items())
    }
    total = sum(len(items) for items in batches.values())
    return {
        "command": command(args),
        "rounds": {
            "revoke": len(revokes),
            "logout": len(logouts),
            "recipients": args.recipients,
        },
        "measured_s": round(seconds, 1),
        "load": {
            "tuples_per_post": args.tuples,
            "posts_per_s_target": args.posts,
            "tuples_accepted_per_s": round(provider.accepted_between(*window) / seconds, 1),
            "provider_errors": len(provider.errors),
            "streaming_queries": len(batches),
            "batches_with_rows_per_s": round(total / seconds, 2),
            "per_query": per_query,
            "other_subscribers_rows_events": [len(events) for events in others_rows],
            "other_subscribers_mb": [
                round(sum(n for n, _ in events) / 1e6, 1) for events in others_rows
            ],
        },
        "revoke_to_closed_s": stats([r["to_end_s"] for r in revokes if r["to_end_s"] is not None]),
        "revoke_to_last_row_s": stats([r["to_last_row_s"] for r in revokes]),
        "revoke_call_s": stats([r["call_s"] for r in revokes]),
        "logout_to_closed_s": stats([r["to_end_s"] for r in logouts if r["to_end_s"] is not None]),
        "logout_to_last_row_s": stats([r["to_last_row_s"] for r in logouts]),
        "ends_other_than_closed": [r for r in rounds if r["end_event"] != "closed"],
        "closed_within_1s": sum(
            1 for r in rounds if r["end_event"] == "closed" and r["to_end_s"] <= 1.0
        ),
        "closed_before_call_returned": sum(
            1 for r in rounds if r["to_end_s"] is not None and r["to_end_s"] <= r["call_s"]
        ),
        "rows_after_call_max": max((r["rows_events_after_call"] for r in rounds), default=0),
        "per_round": rounds,
    }


def _seconds(progress: dict) -> float:
    return progress["durationMs"]["triggerExecution"] / 1000


def command(args: argparse.Namespace) -> str:
    return ".venv/bin/python -m bench.revocation_server" + changed_flags(
        (f"--{name}", getattr(args, name.replace("-", "_")), default)
        for name, default in DEFAULTS.items()
    )


def _row(label: str, figure: dict) -> str:
    if not figure.get("n"):
        return f"| {label} | - | - | - | 0 |"
    return f"| {label} | {figure['median']} | {figure['min']} | {figure['max']} | {figure['n']} |"


def markdown(result: dict) -> str:
    load = result["load"]
    missing = result["ends_other_than_closed"]
    return "\n".join(
        [
            HEADING,
            "",
            f"Generated by `{result['command']}`",
            f"on this project's machine ({result['machine']['cpus']} cores, shared with other "
            "agents' Spark jobs while",
            "measured, 1-minute load average "
            + " then ".join(f"{x:.1f}" for x in result["machine"]["loadavg_1min_before_after"])
            + ":",
            "absolute seconds are noisy). A real server over TLS on loopback, in the bench's",
            "process (its HTTP clients share the server's GIL), one Spark session. Busy: a",
            f"provider appends {load['tuples_per_post']} tuples per POST at up",
            f"to {load['posts_per_s_target']} POSTs/s "
            f"(**{load['tuples_accepted_per_s']} tuples/s accepted**); four other users'",
            "queries (three selections, one aggregate) with their own subscribers, Al's shared",
            f"query and ingest ran **{load['batches_with_rows_per_s']} micro-batches with rows "
            "per second**",
            f"in all during the {result['measured_s']} s of rounds:",
            "",
            "| streaming query | batches with rows | per s | median batch s | share of time "
            "in a batch |",
            "|---|---:|---:|---:|---:|",
            *(
                f"| {name} | {q['batches']} | {q['per_s']} | {q['median_batch_s']} "
                f"| {q['busy_fraction']} |"
                for name, q in load["per_query"].items()
            ),
            "",
            "Al shares his query's output (SUBSCRIBE) with "
            f"{result['rounds']['recipients']} recipients running rounds at",
            "once. Once rows reach a recipient, at a random moment of the next delivery cycle,",
            "`t0` is taken just before Al's `DELETE /grants` of her SUBSCRIBE (revoke rounds)",
            "or her own `POST /logout` (logout rounds); times are when her SSE reader received",
            "the event. Last `rows` is negative when no row came after the call (then: how long",
            "before it the last one came). Rounds: "
            f"{result['rounds']['revoke']} revoke, {result['rounds']['logout']} logout.",
            "",
            "| figure (s) | median | min | max | n |",
            "|---|---:|---:|---:|---:|",
            _row("revoke -> `closed`", result["revoke_to_closed_s"]),
            _row("revoke -> last `rows`", result["revoke_to_last_row_s"]),
            _row("revoke call (DELETE /grants) itself", result["revoke_call_s"]),
            _row("logout -> `closed`", result["logout_to_closed_s"]),
            _row("logout -> last `rows`", result["logout_to_last_row_s"]),
            "",
            f"* Rounds whose `closed` came within one second of the call: "
            f"**{result['closed_within_1s']} of {len(result['per_round'])}**.",
            f"* `rows` events that reached a recipient after the call, at most: "
            f"**{result['rows_after_call_max']}**.",
            f"* Rounds that did not end with `closed` in time: **{len(missing)}**"
            + (f" ({', '.join(str(r['end_event']) for r in missing)})." if missing else "."),
            f"* `closed` arrived before the revoking or logout call had returned in "
            f"**{result['closed_before_call_returned']} of {len(result['per_round'])}** rounds:",
            "  the server re-checks live subscriptions inside the call.",
            "* Meanwhile the four other subscribers received "
            f"{', '.join(map(str, load['other_subscribers_rows_events']))} `rows` events",
            f"  ({', '.join(map(str, load['other_subscribers_mb']))} MB of JSON).",
            "",
        ]
    )


DEFAULTS = {
    "rounds": 8,
    "recipients": 3,
    "tuples": 1000,
    "posts": 2.0,
    "seed": 11,
    "max-seconds": 90.0,
    "end-timeout": 10.0,
}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=DEFAULTS["rounds"], help="of each kind, in all"
    )
    parser.add_argument(
        "--recipients",
        type=int,
        default=DEFAULTS["recipients"],
        choices=range(1, len(RECIPIENTS) + 1),
        metavar=f"1..{len(RECIPIENTS)}",
        help="users Al shares with, running rounds at once",
    )
    parser.add_argument("--tuples", type=int, default=DEFAULTS["tuples"], help="per POST")
    parser.add_argument("--posts", type=float, default=DEFAULTS["posts"], help="POSTs per s")
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=DEFAULTS["max-seconds"],
        help="no new round starts after this many seconds of rounds",
    )
    parser.add_argument(
        "--end-timeout",
        type=float,
        default=DEFAULTS["end-timeout"],
        help="how long a round waits for the closed event",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    result = run(args)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    write_section(ROOT / "docs" / "performance.md", markdown(result), HEADING)
    print(json.dumps({k: v for k, v in result.items() if k != "per_round"}, indent=2))


if __name__ == "__main__":
    main()
