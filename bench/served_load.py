"""Served load: throughput and latency as users meet them, through the real HTTPS/SSE server.

One command: ``.venv/bin/python -m bench.served_load`` (part of ``make bench``; about 30
minutes). ``--quick`` is a smoke run of a few seconds per step (tests/server/test_served_load.py
runs it and asserts that rows arrive, nothing about speed).

The shape is a ward with colleagues watching: one ``streamshield serve`` process with the
hospital example on a fresh root; ``--providers`` providers (user ``ward``, each on a channel
of its own, ``ward.load-<i>``, whose sp lets the five clinicians read everything) each POST
``/streams/HeartRate/elements?assign=seq`` four times a second; each watcher is an SSE
subscription to a selection of its own,
``SELECT patient_id, beats_per_min, ts FROM HeartRate WHERE beats_per_min >= c``, registered
and watched by one of the five clinicians (a session per watcher). ``ts`` (event time, whole
seconds) is the post's send time; the send time in milliseconds travels in the patient id
(``send_ms * 1000 + patient``), so a row's latency is the moment its subscriber reads it
minus that send time.

Per configuration (``--watchers``: 1, 16, 64 queries/watchers, each on a server of its own)
a warm-up runs first, then every rate of ``--rates`` for ``--seconds``; after each step the load
stops and delivery gets ``--catch-up`` seconds to deliver everything sent. Reported per
step: offered and acknowledged tuples/s (answers 200; 503s counted apart), delivered rows/s
over all watchers, latency p50/p95/p99 of every delivered row sent during the step, the
share of expected rows delivered (the bench knows every value it sent, hence what each
selection must receive), whether delivery caught up, the server's CPU (cores, Python
driver and JVM together) and RSS, and where a batch's time goes (the server's own
``/metrics``: ingest and query batch durations, delivery lag; ``--profile``: a py-spy
profile of the server per step, its top frames in the output).

The subscribers run in a process of their own (one asyncio loop reading every SSE stream;
rows are counted and their ``ts`` read with a regular expression, never decoded), the
providers in threads of this one, so the clients' work stays out of the server's process.
Results: ``bench/results/served-load.json`` and the table of docs/performance.md between
``<!-- bench:served-load -->`` markers.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import multiprocessing
import os
import pickle
import random
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench.server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "served-load.json"
MARK_BEGIN, MARK_END = "<!-- bench:served-load -->", "<!-- /bench:served-load -->"
STREAM = "HeartRate"
CLINICIANS = {"carol": "C", "nina": "ND", "gus": "GP", "erin": "ER", "ivan": "INS"}
POSTS_PER_SECOND = 4
RETRY_CAP = 5.0  # seconds a provider pauses at most when told to retry later
BPM = (40, 180)  # beats per minute sent, uniformly (integers)
SP = {
    "type": "sp",
    "ddp": {"streams": STREAM, "tuples": "*", "attributes": "*"},
    "srp": {"roles": "{" + ", ".join(CLINICIANS.values()) + "}", "grant_option": False},
    "sign": "+",
    "immutable": False,
}
SENT = re.compile(rb'"patient_id": (\d{16,})')
"""A row's send time (ms) is its patient id // 1000; the example's own ward readings have
short patient ids and are not this bench's rows."""


def threshold(watcher: int) -> int:
    """Watcher ``watcher``'s selection ``beats_per_min >= c``: 14-86% of the rows."""
    return 60 + (watcher * 37) % 100


# -- providers ----------------------------------------------------------------------------


@dataclass
class Post:
    sent: float  # epoch seconds (the rows' ts)
    answered: float
    lines: int
    status: int
    accepted: int
    values: collections.Counter  # beats_per_min -> rows, of an accepted post


class Provider:
    """One channel of the ward's, posting ``rate`` tuples/s in four posts a second."""

    def __init__(self, server: ServerProcess, token: str, index: int, seed: int) -> None:
        self.client = server.client(token, timeout=120)
        self.channel = f"ward.load-{index}"
        self.rng = random.Random(seed)
        self.patient = 100 + 100 * index
        self.posts: list[Post] = []
        self.errors: list[str] = []
        self.rate = 0.0
        self.retry_after = 0.0
        self._started = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, rate: float) -> None:
        self.rate, self._stop = rate, threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.channel, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(180)

    def _body(self, count: int, sent: float) -> tuple[str, collections.Counter]:
        lines = [] if self._started else [json.dumps({**SP, "provider": self.channel})]
        values: collections.Counter = collections.Counter()
        sent_ms, sent_s = int(sent * 1000), int(sent)
        head = '{"provider": "' + self.channel + '", "values": {"patient_id": '
        for _ in range(count):
            bpm = self.rng.randrange(*BPM)
            values[bpm] += 1
            patient = sent_ms * 1000 + self.patient + self.rng.randrange(100)
            lines.append(f'{head}{patient}, "beats_per_min": {bpm}, "ts": {sent_s}}}}}')
        return "\n".join(lines), values

    def _run(self) -> None:
        interval = 1.0 / POSTS_PER_SECOND
        due = time.monotonic()
        owed = 0.0
        while not self._stop.is_set():
            owed += self.rate * interval
            count, owed = int(owed), owed - int(owed)
            if count:
                self._post(count)
            if self.retry_after:  # the server asked for a pause (503 ingest_backlog)
                self._stop.wait(self.retry_after)
                due, self.retry_after = time.monotonic(), 0.0
            due += interval
            self._stop.wait(max(0.0, due - time.monotonic()))
            due = max(due, time.monotonic() - interval)  # behind: offered load drops

    def _post(self, count: int) -> None:
        sent = time.time()
        body, values = self._body(count, sent)
        try:
            answer = self.client.post(
                f"/streams/{STREAM}/elements",
                params={"assign": "seq"},
                content=body,
                headers={"Content-Type": "application/x-ndjson"},
            )
        except httpx.HTTPError as err:
            self.errors.append(type(err).__name__)
            return
        accepted = 0
        if answer.status_code == 200:
            report = answer.json()
            accepted = report["accepted"] - (0 if self._started else 1)
            self._started = True
            if report["rejected"]:
                self.errors.append(f"rejected: {report['rejections'][:2]}")
        elif answer.status_code == 503:  # refused, nothing landed: honour Retry-After
            self.retry_after = min(float(answer.headers.get("Retry-After", "1")), RETRY_CAP)
        elif len(self.errors) < 20:
            self.errors.append(f"{answer.status_code}: {answer.text[:120]}")
        kept = values if answer.status_code == 200 else collections.Counter()
        self.posts.append(Post(sent, time.time(), count, answer.status_code, accepted, kept))


# -- watchers (their own process) ---------------------------------------------------------


@dataclass(frozen=True)
class Watch:
    query: str
    token: str


def _watch_process(url: str, cert: str, watches: list[Watch], pipe) -> None:
    """Reads every SSE stream until told to stop; sends back, per watcher, the events'
    (receive time, {ts: rows}) and the non-row events."""
    asyncio.run(_watch_all(url, cert, watches, pipe))


async def _watch_all(url: str, cert: str, watches: list[Watch], pipe) -> None:
    context = ssl.create_default_context(cafile=cert)
    limits = httpx.Limits(max_connections=len(watches) + 4, max_keepalive_connections=0)
    got: list[list[tuple[float, dict[int, int]]]] = [[] for _ in watches]
    other: list[list[tuple[float, str]]] = [[] for _ in watches]
    opened = [asyncio.Event() for _ in watches]
    status: list[int] = [0] * len(watches)
    async with httpx.AsyncClient(base_url=url, verify=context, limits=limits) as client:

        async def read(i: int, watch: Watch) -> None:
            headers = {"Authorization": f"Bearer {watch.token}"}
            timeout = httpx.Timeout(60, read=None)
            try:
                async with client.stream(
                    "GET", f"/queries/{watch.query}/subscribe", headers=headers, timeout=timeout
                ) as response:
                    status[i] = response.status_code
                    opened[i].set()
                    event = b"message"
                    async for line in response.aiter_lines():
                        raw = line.encode()
                        if raw.startswith(b"event:"):
                            event = raw[6:].strip()
                        elif raw.startswith(b"data:"):
                            now = time.time()
                            if event == b"rows":
                                counts = collections.Counter(
                                    int(m) // 1000 for m in SENT.findall(raw)
                                )
                                got[i].append((now, dict(counts)))
                            else:
                                other[i].append((now, event.decode()))
                        elif not raw:
                            event = b"message"
            except (httpx.HTTPError, asyncio.CancelledError):
                pass
            finally:
                opened[i].set()

        tasks = [asyncio.create_task(read(i, w)) for i, w in enumerate(watches)]
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in opened)), 120)
        pipe.send(("opened", status))
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, pipe.recv) == "newest":
            newest = [max((max(c) for _, c in events if c), default=0) for events in got]
            pipe.send(newest)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    pipe.send(("events", got, other))


class Watchers:
    """The watchers' process: opened with every watch, read until :meth:`finish`."""

    def __init__(self, server: ServerProcess, watches: list[Watch]) -> None:
        self.watches = watches
        context = multiprocessing.get_context("spawn")
        self._pipe, theirs = context.Pipe()
        cert = str(server.root / "tls" / "server-cert.pem")
        self._process = context.Process(
            target=_watch_process, args=(server.url, cert, watches, theirs), daemon=True
        )
        self._process.start()
        if not self._pipe.poll(180):
            raise RuntimeError("the watchers did not open their subscriptions")
        _, status = self._pipe.recv()
        if any(s != 200 for s in status):
            raise RuntimeError(f"subscriptions refused: {status}")

    def newest(self) -> list[int]:
        """Per watcher, the newest ``ts`` (epoch ms) it has received."""
        self._pipe.send("newest")
        return self._pipe.recv()

    def caught_up(self, due: list[int], bound: float) -> float | None:
        """Seconds until every watcher had its newest row due (``due``: per watcher, the
        ts in ms of the newest accepted post with a row for it), polled; None when
        ``bound`` seconds pass first."""
        began = time.monotonic()
        while time.monotonic() - began <= bound:
            if all(got >= want for got, want in zip(self.newest(), due, strict=True)):
                return round(time.monotonic() - began, 1)
            time.sleep(0.25)
        return None

    def finish(self) -> tuple[list, list]:
        self._pipe.send("stop")
        if not self._pipe.poll(300):
            raise RuntimeError("the watchers did not report")
        _, got, other = self._pipe.recv()
        self._process.join(30)
        return got, other


# -- the server's side: resources and metrics ---------------------------------------------


def _tree(pid: int) -> list[int]:
    """The server's process and its descendants (the JVM)."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True)
    children: dict[int, list[int]] = collections.defaultdict(list)
    for line in out.stdout.splitlines():
        child, parent = (int(v) for v in line.split())
        children[parent].append(child)
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for member in _tree(pid):
        with contextlib.suppress(OSError, IndexError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def rss_mb(pid: int) -> float:
    total = 0
    for member in _tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


METRIC = re.compile(r"^(streamshield_[a-z_]+)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN)$")
WATCHED_METRICS = (
    "streamshield_ingest_batch_duration_seconds",
    "streamshield_query_batch_duration_seconds",
    "streamshield_query_recent_delivery_lag_seconds",
)


class MetricsSampler:
    """``/metrics`` every two seconds during a step: the batch durations it reports."""

    def __init__(self, server: ServerProcess, token: str) -> None:
        self.client = server.client(token, timeout=30)
        self.samples: dict[str, list[float]] = collections.defaultdict(list)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(2.0):
            with contextlib.suppress(httpx.HTTPError):
                text = self.client.get("/metrics").text
                for line in text.splitlines():
                    match = METRIC.match(line)
                    if match and match.group(1) in WATCHED_METRICS and match.group(3) != "NaN":
                        self.samples[match.group(1)].append(float(match.group(3)))

    def stop(self) -> dict[str, float | None]:
        self._stop.set()
        self._thread.join(30)
        return {
            name.removeprefix("streamshield_"): (
                round(statistics.median(self.samples[name]), 3) if self.samples[name] else None
            )
            for name in WATCHED_METRICS
        }


class Profile:
    """py-spy on the server's Python process for one step (``--profile``)."""

    def __init__(self, pid: int, seconds: float, out: Path) -> None:
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [
                shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"),
                "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "50",
                "--format", "raw", "--nonblocking", "--output", str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def top(self, count: int = 12) -> list[tuple[str, float]]:
        """Frames by inclusive share of the samples (a frame counted once per stack)."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(60)
        if not self.out.exists():
            return []
        inclusive: collections.Counter = collections.Counter()
        total = 0
        for line in self.out.read_text().splitlines():
            stack, _, samples = line.rpartition(" ")
            if not samples.isdigit():
                continue
            total += int(samples)
            for frame in {f.split(" (")[0] for f in stack.split(";")}:
                inclusive[frame] += int(samples)
        plumbing = ("threading.py", "concurrent/futures", "asyncio/", "selectors.py")
        plumbing += ("uvicorn/", "pyspark/util.py", "contextlib.py", "<module>")
        ranked = [(f, n) for f, n in inclusive.most_common() if not any(p in f for p in plumbing)]
        return [(frame, round(100 * n / total, 1)) for frame, n in ranked[:count]] if total else []


# -- one run ------------------------------------------------------------------------------


@dataclass
class Step:
    watchers: int
    rate: float
    start: float = 0.0
    end: float = 0.0
    cpu: float = 0.0
    rss_before: float = 0.0
    rss_after: float = 0.0
    metrics: dict = field(default_factory=dict)
    profile: list = field(default_factory=list)
    caught_up: float | None = None
    """Seconds after the load stopped until every watcher had the last second's rows."""


def percentile(values: list[tuple[float, int]], q: float) -> float | None:
    """The q-quantile of weighted values ((value, weight) pairs)."""
    if not values:
        return None
    ordered = sorted(values)
    total = sum(w for _, w in ordered)
    reach, seen = q * total, 0
    for value, weight in ordered:
        seen += weight
        if seen >= reach:
            return value
    return ordered[-1][0]


def summarise(step: Step, providers: list[Provider], got: list, other: list) -> dict:
    seconds = step.end - step.start
    posts = [p for prov in providers for p in prov.posts if step.start <= p.sent < step.end]
    offered = sum(p.lines for p in posts)
    acked = sum(p.accepted for p in posts if p.status == 200)
    refused = sum(p.lines for p in posts if p.status == 503)
    sent: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for post in posts:  # posts of two providers in one millisecond share their ts
        sent[int(post.sent * 1000)].update(post.values)
    latencies: list[tuple[float, int]] = []
    delivered = expected = duplicated = missing = 0
    for watcher, events in enumerate(got):
        c = threshold(watcher)
        received: collections.Counter = collections.Counter()
        for at, counts in events:
            for ts, n in counts.items():
                if ts in sent:  # a row of a post of this step
                    latencies.append((at - ts / 1000, n))
                    received[ts] += n
        for ts in sent:
            want = sum(n for bpm, n in sent[ts].items() if bpm >= c)
            expected += want
            delivered += received[ts]
            duplicated += max(0, received[ts] - want)
            missing += max(0, want - received[ts])
    ends = collections.Counter(e for events in other for _, e in events)
    return {
        "watchers": step.watchers,
        "rate": step.rate,
        "seconds": round(seconds, 1),
        "offered_per_s": round(offered / seconds),
        "acknowledged_per_s": round(acked / seconds),
        "refused_503_per_s": round(refused / seconds),
        "delivered_rows_per_s": round(delivered / seconds),
        "delivered_share": round(delivered / expected, 4) if expected else None,
        "rows_missing": missing,
        "rows_beyond_expected": duplicated,
        "latency_s": {
            name: None if (v := percentile(latencies, q)) is None else round(v, 3)
            for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
        },
        "caught_up_s": step.caught_up,
        "server_cores": round(step.cpu / seconds, 2),
        "server_rss_mb": [round(step.rss_before), round(step.rss_after)],
        "batches": step.metrics,
        "events": dict(ends),
        "provider_errors": sorted({e for prov in providers for e in prov.errors})[:5],
        "profile": step.profile,
    }


class Bench:
    def __init__(self, args: argparse.Namespace, root: Path) -> None:
        self.args = args
        # The suite's smoke run shares its machine with the rest of the suite: a cold,
        # starved JVM's first batches would have every append refused by the latency
        # budget (test_operability.py tests admission; this run tests delivery).
        options = ["--ingest-latency-budget", "0"] if args.quick else []
        self.server = ServerProcess(
            root / "root", example=True, log=root / "server.log", options=options
        )
        self.server.wait_ready(600)
        passwords = json.loads((root / "root" / "example-credentials.json").read_text())
        self.passwords = passwords
        self.admin = self._login("admin", ["ADMIN"])
        # Every clinician runs her share of the watchers' queries (13 of 64): more than
        # the default limit of five running queries a user.
        most = max(args.watchers) + 5  # the example's own query each, too
        limits = {
            "operator_limits": {"default": {"max_queries": most}},
            "quota.max_running_queries": most,
        }
        with self.server.client(self.admin) as http:
            answer = http.put("/system/settings", json={"values": limits})
        if answer.status_code != 200:
            raise RuntimeError(f"operator limits: {answer.status_code} {answer.text[:300]}")
        ward = self._login("ward", ["PROVIDER"])
        self.providers = [Provider(self.server, ward, i, seed=i) for i in range(args.providers)]
        self.watches: list[Watch] = []
        self.results: list[dict] = []
        self.raw: list[tuple] = []
        """Per configuration, the steps, posts and events summarised (``--dump``)."""

    def _login(self, user: str, roles: list[str]) -> str:
        with self.server.client() as anonymous:
            for _ in range(30):
                answer = anonymous.post(
                    "/login",
                    json={"user": user, "password": self.passwords[user], "roles": roles},
                )
                if answer.status_code != 503:
                    break
                time.sleep(float(answer.headers.get("Retry-After", "1")))
        answer.raise_for_status()
        return answer.json()["token"]

    def add_watchers(self, count: int) -> None:
        names = list(CLINICIANS)
        while len(self.watches) < count:
            i = len(self.watches)
            user = names[i % len(names)]
            token = self._login(user, [CLINICIANS[user]])
            name = f"load_{i}"
            text = (
                f"SELECT patient_id, beats_per_min, ts FROM {STREAM} "
                f"WHERE beats_per_min >= {threshold(i)}"
            )
            with self.server.client(token, timeout=300) as http:
                answer = http.post("/queries", json={"name": name, "text": text})
            if answer.status_code != 201:
                raise RuntimeError(f"register {name}: {answer.status_code} {answer.text[:300]}")
            self.watches.append(Watch(name, token))

    def _due(self) -> list[int]:
        """Per watcher, the ts (ms) of the newest accepted post with a row for it."""
        due = []
        for watcher in range(len(self.watches)):
            c = threshold(watcher)
            sent = [
                int(p.sent * 1000)
                for v in self.providers
                for p in v.posts
                if any(bpm >= c for bpm in p.values)
            ]
            due.append(max(sent, default=0))
        return due

    def run_load(self, rate: float, seconds: float) -> tuple[float, float]:
        start = time.time()  # before the first post: every post of the step is after it
        for provider in self.providers:
            provider.start(rate / len(self.providers))
        time.sleep(seconds)
        for provider in self.providers:
            provider.stop()
        return start, time.time()

    def configuration(self, watchers: int) -> None:
        """Watchers added up to ``watchers``, a warm-up, then every rate; each measured
        step's summary is added to :attr:`results`, also when a later one fails."""
        args = self.args
        self.add_watchers(watchers)
        reader = Watchers(self.server, self.watches)
        steps: list[Step] = []
        try:
            self.run_load(args.warmup_rate, args.warmup)
            # Measuring starts once every watcher receives: a query's first batches
            # (its start, the history it reads) are not the load's. Posts refused (503)
            # meanwhile are sent again for a while, until each watcher has rows due.
            warming = time.monotonic() + args.catch_up
            while min(self._due()) == 0 and time.monotonic() < warming:
                self.run_load(args.warmup_rate, 2.0)
            due = self._due()
            if min(due) == 0 or reader.caught_up(due, args.catch_up) is None:
                raise RuntimeError("the watchers received nothing of the warm-up")
            for rate in args.rates:
                step = Step(watchers, rate, rss_before=rss_mb(self.server.pid))
                sampler = MetricsSampler(self.server, self.admin)
                profile = None
                if args.profile:
                    out = Path(args.profile) / f"served-{watchers}w-{int(rate)}.txt"
                    profile = Profile(self.server.pid, args.seconds, out)
                cpu = cpu_seconds(self.server.pid)
                step.start, step.end = self.run_load(rate, args.seconds)
                step.cpu = cpu_seconds(self.server.pid) - cpu
                step.rss_after = rss_mb(self.server.pid)
                step.metrics = sampler.stop()
                step.profile = profile.top() if profile else []
                steps.append(step)
                step.caught_up = reader.caught_up(self._due(), args.catch_up)
        finally:
            got, other = reader.finish()
            self.results += [summarise(step, self.providers, got, other) for step in steps]
            self.raw.append((steps, [v.posts[:] for v in self.providers], got, other))
            for provider in self.providers:
                provider.posts.clear()

    def close(self) -> None:
        self.server.stop()


def run(args: argparse.Namespace) -> dict:
    """Each configuration on a server of its own, on a fresh root: a query registered
    later reads every labelled batch still kept (docs/administration.md), so watchers
    added to a server that has taken minutes of load would first read all of it."""
    began = datetime.now(UTC)
    load = os.getloadavg()
    results: list[dict] = []
    failure = None
    for watchers in args.watchers:
        work = Path(tempfile.mkdtemp(prefix="served-load-"))
        bench = None
        try:
            bench = Bench(args, work)
            bench.configuration(watchers)
        except Exception as err:  # the steps measured so far are kept and reported
            failure = f"{watchers} watchers: {type(err).__name__}: {err}"
        finally:
            if bench is not None:
                results += bench.results
                if args.dump:
                    with open(f"{args.dump}-{watchers}.pickle", "wb") as out:
                        pickle.dump(bench.raw, out)
                bench.close()
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
        if failure:
            break
    return {
        "command": "python -m bench.served_load " + " ".join(args.argv),
        "began": began.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "ended": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "load_average": [list(load), list(os.getloadavg())],
        "cores": os.cpu_count(),
        "steps": results,
        "failure": failure,
    }


# -- reporting ----------------------------------------------------------------------------


def _latency(step: dict) -> str:
    lat = step["latency_s"]
    if lat["p50"] is None:
        return "-"
    return f"{lat['p50']:.2f} / {lat['p95']:.2f} / {lat['p99']:.2f} s"


def table(result: dict) -> str:
    lines = [
        MARK_BEGIN,
        f"Generated by `{result['command'].strip()}` ({result['cores']} cores, load average "
        f"{_load(result['load_average'][0])} before, {_load(result['load_average'][1])} "
        "after; the run's times are in its results file):",
        "",
        "| watchers | offered tuples/s | acknowledged/s | delivered rows/s (share) "
        "| latency p50 / p95 / p99 | caught up | server cores, RSS MB | ingest / query "
        "batch s |",
        "|---:|---:|---:|---:|---|---|---|---|",
    ]
    for s in result["steps"]:
        batches = s["batches"]
        ingest = batches.get("ingest_batch_duration_seconds")
        query = batches.get("query_batch_duration_seconds")
        share = "-" if s["delivered_share"] is None else f"{100 * s['delivered_share']:.1f}%"
        lines.append(
            f"| {s['watchers']} | {s['offered_per_s']:,} | {s['acknowledged_per_s']:,} "
            f"| {s['delivered_rows_per_s']:,} ({share}) | {_latency(s)} "
            f"| {_caught(s['caught_up_s'])} "
            f"| {s['server_cores']}, {s['server_rss_mb'][0]}-{s['server_rss_mb'][1]} "
            f"| {ingest if ingest is not None else '-'} / {query if query is not None else '-'} |"
        )
    if result.get("failure"):
        lines += ["", f"The run stopped early: {result['failure']}"]
    return "\n".join([*lines, MARK_END])


def _caught(seconds: float | None) -> str:
    return "**no**" if seconds is None else f"yes, {seconds:.1f} s"


def _load(values: list[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def write_block(path: Path, text: str) -> None:
    """Replaces the block that ``text`` opens and closes with its first and last lines
    (a bench's markers); a doc without that block is an error, not a guess."""
    lines = text.splitlines()
    begin, end_mark = lines[0], lines[-1]
    if not (begin.startswith("<!-- bench:") and end_mark.startswith("<!-- /bench:")):
        raise ValueError("no bench markers open and close the block")
    doc = path.read_text()
    start, end = doc.find(begin), doc.find(end_mark)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no {begin} ... {end_mark} block")
    path.write_text(doc[:start] + text + doc[end + len(end_mark) :])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--rates", type=float, nargs="+", default=[500, 2000, 8000, 20000])
    parser.add_argument("--seconds", type=float, default=60.0, help="per step")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds, per configuration")
    parser.add_argument("--warmup-rate", type=float, default=200.0)
    parser.add_argument(
        "--catch-up", type=float, default=60.0, help="at most, seconds after a step"
    )
    parser.add_argument("--providers", type=int, default=4)
    parser.add_argument("--profile", default=None, help="a directory: py-spy per step")
    parser.add_argument("--quick", action="store_true", help="a smoke run, seconds long")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--doc", default=str(ROOT / "docs" / "performance.md"))
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--keep", action="store_true", help="keep the server's root")
    parser.add_argument("--dump", default=None, help="a path prefix: raw data per run")
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    if args.quick:
        # one configuration (a server start each): two watchers on it check fan-out
        args.watchers, args.rates, args.providers = [2], [200], 2
        args.seconds, args.warmup, args.catch_up = 4.0, 4.0, 90.0
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    result = run(args)
    print(json.dumps(result, indent=2))
    if not args.no_write:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        write_block(Path(args.doc), table(result))
    return result


if __name__ == "__main__":
    main()
