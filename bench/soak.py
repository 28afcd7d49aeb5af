"""Bounded soak: a real server under steady load for a fixed time, resources sampled.

``python -m bench.soak --seconds 600`` (the documented mode: 3 providers, 16 continuous
queries, 50 subscribers); ``tests/server/test_soak.py`` runs a short mode. Figures go to
``bench/results/soak.json``, plots to ``docs/img/soak-*.png`` (``--plot``).

A ``streamshield serve`` process on loopback (its own process group, so its RSS, open
files and threads are the Python driver's and the JVM's together, read from /proc).
Providers append over HTTPS on their own channels, an sp first, then tuples carrying the
time they were sent; users own the continuous queries (selections and aggregates); the
subscribers are spread over the queries' outputs. Every ``--revoke-every`` seconds the
revocation probe takes SUBSCRIBE away from a watched subscriber's role and measures the
time from the call to her ``closed`` event, then grants it back and subscribes again.

Measured: tuples/s acknowledged; end-to-end latency (the tuple's send time to the moment
a subscriber reads its row, selection rows only: an aggregate's row has no single send
time), p50 and p99; revocation latency; RSS, open files, threads and what the landing
zone and labelled store hold every ``--sample-every`` seconds, and their growth after
warm-up (:func:`after_warm_up`): the least-squares slope over the samples after the
warm-up, which ends at ``--warm-up`` seconds when told, else at the later of the first
row delivered and a third of the run (JIT, Spark's pools and caches fill first). Under
a minute of samples after it, the report says so instead of a slope.

Every loop stops by itself: each thread runs until the common deadline (or the stop
event), every request and read has a timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tests.server.conftest import sp_line, tuple_line

from bench.server_process import ServerProcess, prepare_root
from streamshield.client import parse_sse

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "soak.json"
STREAM = "s"
ROLES = ["ADMIN", "PROV", "R1", "R2"]
RESOURCES = (
    "rss_mb",
    "rss_driver_mb",
    "rss_jvm_mb",
    "open_files",
    "threads",
    "threads_driver",
    "threads_jvm",
    "heap_retained_mb",
    "heap_committed_mb",
    "backlog",
    "landing_mb",
    "labelled_mb",
    "stored_files",
)
FLAT_SHARE = 0.05
"""A resource is flat after warm-up when its fitted change over that window is under
this share of its median there (noise on a loaded machine is a few per cent)."""


@dataclass
class Shape:
    providers: int = 3
    queries: int = 16
    subscribers: int = 50
    seconds: float = 600.0
    tuples_per_post: int = 20
    post_every: float = 0.5
    revoke_every: float = 15.0
    sample_every: float = 2.0
    owners: int = 4
    max_ingest_backlog: int = -1
    """The server's ``--max-ingest-backlog`` (-1: its default)."""
    retention: str = ""
    """The server's ``--retention`` (empty: its default, 7d: nothing is pruned)."""
    warm_up: float = -1.0
    """Seconds of warm-up (-1: detected, see :func:`warm_up_end`)."""

    def users(self) -> dict[str, list[str]]:
        users = {"joe": ["ADMIN"]}
        users |= {f"p{i}": ["PROV"] for i in range(self.providers)}
        users |= {f"o{i}": ["R1"] for i in range(self.owners)}
        users |= {f"s{i}": ["R1"] for i in range(self.subscribers)}
        users["watched"] = ["R2"]
        return users

    def query_texts(self) -> dict[str, str]:
        """Selections of different shares of the stream, every fourth an aggregate."""
        texts = {}
        for i in range(self.queries):
            if i % 4 == 3:
                texts[f"q{i}"] = (
                    f"SELECT chan, count(*) AS c FROM s WHERE n % {i + 2} = 0 GROUP BY chan"
                )
            else:
                texts[f"q{i}"] = f"SELECT id, chan, n, t FROM s WHERE n % {i % 3 + 1} = 0"
        return texts


@dataclass
class Figures:
    acked: list[tuple[float, int]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    revocations: list[float] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rows: int = 0
    refused: int = 0
    """Appends answered 503 ingest_backlog (re-sent after their Retry-After)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def error(self, what: str) -> None:
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(what)


class Soak:
    def __init__(self, shape: Shape, root: Path, serve: list[str] | None = None) -> None:
        """``serve``: more ``streamshield serve`` options (say ``--conf k=v``)."""
        self.shape, self.root, self.serve = shape, root, list(serve or [])
        self.figures = Figures()
        self.stop = threading.Event()
        self.server: ServerProcess | None = None
        self.tokens: dict[str, str] = {}
        self.started = 0.0
        self.deadline = 0.0

    # -- set-up ------------------------------------------------------------------------------

    def client(self, user: str) -> httpx.Client:
        assert self.server is not None
        if user not in self.tokens:
            with self.server.login(user, self.shape.users()[user]) as http:
                self.tokens[user] = http.headers["Authorization"].split()[1]
        return self.server.client(self.tokens[user], timeout=60)

    def ok(self, user: str, method: str, path: str, status: int = 200, **kwargs) -> dict:
        with self.client(user) as http:
            answer = http.request(method, path, **kwargs)
        if answer.status_code != status:
            raise RuntimeError(f"{method} {path}: {answer.status_code} {answer.text[:300]}")
        return answer.json()

    def grant(self, user: str, permission: str, kind: str, obj: str, role: str, revoke=False):
        body = {"permission": permission, "kind": kind, "object": obj, "role": role}
        self.ok(user, "DELETE" if revoke else "POST", "/grants", json=body)

    def set_up(self) -> None:
        prepare_root(self.root, None, ROLES, self.shape.users())
        bound = self.shape.max_ingest_backlog
        options = ["--max-ingest-backlog", str(bound)] if bound >= 0 else []
        if self.shape.retention:
            options += ["--retention", self.shape.retention]
        options += self.serve
        self.server = ServerProcess(self.root, options=options)
        self.server.wait_ready()
        attributes = [["id", "bigint"], ["chan", "string"], ["n", "bigint"], ["t", "bigint"]]
        schema = {"name": "tick", "attributes": attributes, "tid": "id"}
        self.ok("joe", "POST", "/schemas", json=schema, status=201)
        self.ok("joe", "POST", "/streams", json={"name": STREAM, "schema": "tick"}, status=201)
        for permission in ("WRITE", "INJECT SP", "VIEW OBJECT"):
            self.grant("joe", permission, "stream", STREAM, "PROV")
        for role in ("R1", "R2"):
            self.grant("joe", "VIEW CATALOG", "system", "system", role)
            self.grant("joe", "VIEW OBJECT", "stream", STREAM, role)
            self.grant("joe", "READ TUPLE", "stream", STREAM, role)
        self.grant("joe", "ADD", "system", "system", "R1")
        self.ok(
            "joe", "PUT", "/system/settings", json={"values": {"quota.max_running_queries": 1000}}
        )
        # One at a time: at once, those beyond the login gate's queue would get 503 login_busy.
        for user in self.shape.users():
            self.client(user).close()
        for i, (name, text) in enumerate(self.shape.query_texts().items()):
            owner = f"o{i % self.shape.owners}"
            self.ok(owner, "POST", "/queries", json={"name": name, "text": text}, status=201)
            for role in ("R1", "R2"):
                self.grant(owner, "VIEW OBJECT", "stream", f"{name}_out", role)
                self.grant(owner, "SUBSCRIBE", "stream", f"{name}_out", role)

    # -- the load ----------------------------------------------------------------------------

    def provider(self, index: int) -> None:
        user, channel = f"p{index}", f"p{index}"
        sp = sp_line(STREAM, channel, 1, "{R1, R2}")
        seq = 1
        try:
            http = self.client(user)
            answer = http.post(f"/streams/{STREAM}/elements", content=sp)
        except httpx.HTTPError as err:
            self.figures.error(f"{user} sp: {type(err).__name__}")
            return
        with contextlib.closing(http):
            if answer.status_code != 200:
                self.figures.error(f"{user} sp: {answer.status_code}")
                return
            while not self.stop.is_set() and time.monotonic() < self.deadline:
                began = time.monotonic()
                lines = []
                now = int(time.time() * 1000)
                for _ in range(self.shape.tuples_per_post):
                    seq += 1
                    tid = (index + 1) * 1_000_000_000 + seq
                    values = {"id": tid, "chan": channel, "n": seq, "t": now}
                    lines.append(tuple_line(STREAM, channel, seq, tid, values))
                try:
                    answer = self.append(http, "\n".join(lines))
                    accepted = answer.json().get("accepted", 0) if answer.status_code == 200 else 0
                    if answer.status_code == 503 and time.monotonic() >= self.deadline:
                        break  # still refused (backlog) when the time was up: not an error
                    if answer.status_code != 200 or accepted != len(lines):
                        self.figures.error(f"{user}: {answer.status_code} {answer.text[:200]}")
                    with self.figures.lock:
                        self.figures.acked.append((time.monotonic(), accepted))
                except httpx.HTTPError as err:
                    self.figures.error(f"{user}: {type(err).__name__}")
                self.stop.wait(max(0.0, self.shape.post_every - (time.monotonic() - began)))

    def append(self, http: httpx.Client, content: str) -> httpx.Response:
        """POSTs ``content``; while the server answers 503 ingest_backlog, waits its
        Retry-After (within the deadline) and sends the very same lines again."""
        while True:
            answer = http.post(f"/streams/{STREAM}/elements", content=content)
            if answer.status_code != 503 or answer.json().get("error") != "ingest_backlog":
                return answer
            with self.figures.lock:
                self.figures.refused += 1
            wait = float(answer.headers.get("Retry-After", "1"))
            if self.stop.wait(min(wait, max(0.0, self.deadline - time.monotonic()))):
                return answer
            if time.monotonic() >= self.deadline:
                return answer

    def subscriber(self, user: str, query: str, watched: threading.Event | None = None) -> str:
        """Reads ``query``'s output until the deadline; returns how the stream ended."""
        path = f"/queries/{query}_out/subscribe"
        timeout = httpx.Timeout(30, read=60)
        ended = "deadline"
        try:
            http = self.client(user)
        except httpx.HTTPError as err:
            self.figures.error(f"{user} could not log in: {type(err).__name__}")
            return "refused"
        with (
            http,
            contextlib.suppress(httpx.HTTPError),
            http.stream("GET", path, timeout=timeout) as answer,
        ):
            if answer.status_code != 200:
                self.figures.error(f"{user} on {query}: {answer.status_code}")
                return "refused"
            if watched is not None:
                watched.set()
            # Rows come every micro-batch and pings every 15 s: a read never waits
            # long, and the server's stop ends the stream with a closed event.
            for event, data in parse_sse(answer.iter_lines()):
                if event == "lagging":  # told it lags, not dropped: it reads on
                    continue
                if event != "rows":
                    return event
                now = time.time() * 1000
                latencies = [now - row["t"] for row in data["rows"] if row.get("t")]
                with self.figures.lock:
                    self.figures.rows += len(data["rows"])
                    self.figures.latencies.extend(ms / 1000 for ms in latencies)
                if self.stop.is_set() or time.monotonic() > self.deadline:
                    break
        return ended

    def revocations(self) -> None:
        """Revoke the watched user's SUBSCRIBE, time the ``closed`` event, grant it back."""
        owner, query, role = "o0", "q0", "R2"
        while not self.stop.is_set() and time.monotonic() < self.deadline - 10:
            subscribed = threading.Event()
            result: dict[str, float | str] = {}

            def watch(result=result, subscribed=subscribed) -> None:
                result["event"] = self.subscriber("watched", query, subscribed)
                result["at"] = time.monotonic()

            thread = threading.Thread(target=watch, daemon=True)
            thread.start()
            if not subscribed.wait(30):
                self.figures.error("watched subscriber did not connect")
                return
            self.stop.wait(self.shape.revoke_every)
            if self.stop.is_set() or time.monotonic() > self.deadline - 5:
                break
            called = time.monotonic()
            try:
                self.grant(owner, "SUBSCRIBE", "stream", f"{query}_out", role, revoke=True)
            except (httpx.HTTPError, RuntimeError) as err:
                self.figures.error(f"revoke: {type(err).__name__}")
                return
            thread.join(30)
            if result.get("event") == "closed":
                with self.figures.lock:
                    self.figures.revocations.append(float(result["at"]) - called)
            else:
                self.figures.error(f"revocation ended the stream with {result.get('event')}")
            try:
                self.grant(owner, "SUBSCRIBE", "stream", f"{query}_out", role)
            except (httpx.HTTPError, RuntimeError) as err:
                self.figures.error(f"grant: {type(err).__name__}")
                return

    def sampler(self) -> None:
        assert self.server is not None
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            sample = group_resources(self.server.pid) | self.scraped()
            sample["t"] = round(time.monotonic() - self.started, 1)
            sample["load1"] = round(os.getloadavg()[0], 2)  # the machine is shared
            with self.figures.lock:
                sample["acked"] = sum(n for _, n in self.figures.acked)
                sample["rows"] = self.figures.rows
                self.figures.samples.append(sample)
            self.stop.wait(self.shape.sample_every)

    def scraped(self) -> dict:
        """The JVM's heap and the ingest backlog, from the server's /metrics (as joe)."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            with self.client("joe") as http:
                text = http.get("/metrics", timeout=20).text
        except httpx.HTTPError:
            return {}
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "streamshield_jvm_heap_bytes":
                    kind = sample.labels.get("kind")
                    if kind in ("retained", "committed"):
                        out[f"heap_{kind}_mb"] = round(sample.value / 2**20, 1)
                elif sample.name == "streamshield_ingest_backlog_elements":
                    out["backlog"] = int(sample.value)
                elif sample.name == "streamshield_storage_kept_bytes":
                    store = sample.labels.get("store")
                    if store in ("landing", "labelled"):
                        out[f"{store}_mb"] = round(sample.value / 2**20, 2)
                elif sample.name == "streamshield_storage_kept_files":
                    out["stored_files"] = out.get("stored_files", 0) + int(sample.value)
        return out

    def run(self) -> dict:
        self.set_up()
        queries = list(self.shape.query_texts())
        self.started = time.monotonic()
        self.deadline = self.started + self.shape.seconds
        threads = [threading.Thread(target=self.sampler, daemon=True)]
        threads += [
            threading.Thread(
                target=self.subscriber, args=(f"s{i}", queries[i % len(queries)]), daemon=True
            )
            for i in range(self.shape.subscribers)
        ]
        threads += [
            threading.Thread(target=self.provider, args=(i,), daemon=True)
            for i in range(self.shape.providers)
        ]
        threads.append(threading.Thread(target=self.revocations, daemon=True))
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(max(1.0, self.deadline - time.monotonic() + 60))
        finally:
            self.stop.set()
            if self.server is not None:
                self.server.stop()  # ends every subscription with a closed event
            ends = time.monotonic() + 30  # one bound for all threads together
            for thread in threads:
                thread.join(max(0.1, ends - time.monotonic()))
        return self.report()

    def report(self) -> dict:
        f = self.figures
        acked = sum(n for _, n in f.acked)
        warm = [s for s in f.samples if s["t"] >= self.shape.seconds / 3]
        end = warm_up_end(f.samples, self.shape.seconds, self.shape.warm_up)
        return {
            "shape": self.shape.__dict__,
            "tuples_acknowledged": acked,
            "tuples_per_second": round(acked / self.shape.seconds, 1),
            "rows_delivered": f.rows,
            "appends_refused": f.refused,
            "latency_seconds": _percentiles(f.latencies),
            "revocation_seconds": _percentiles(f.revocations) | {"count": len(f.revocations)},
            "resources": {
                key: {
                    "first": next((s[key] for s in f.samples if key in s), None),
                    "max": max((s[key] for s in f.samples if key in s), default=None),
                    "growth_after_warm_up": _growth([s[key] for s in warm if key in s]),
                    "after_warm_up": after_warm_up(f.samples, key, end),
                }
                for key in RESOURCES
            },
            "warm_up_seconds": end,
            "load_average": _percentiles([s["load1"] for s in f.samples if "load1" in s]),
            "samples": f.samples,
            "errors": f.errors,
        }


def group_resources(leader: int) -> dict:
    """RSS (MB), open files and threads of the server: the Python driver (``leader``) and
    its JVM (a ``java`` child of it), each also apart (``rss_driver_mb``, ``rss_jvm_mb``).

    Every other process of the group is a short-lived helper the JVM spawns (Hadoop's
    local file system runs ``chmod`` through ``jspawnhelper``; Spark's Python workers),
    counted apart (``helpers``, ``helper_rss_mb``): a helper between its fork and its
    exec shows the whole JVM's RSS and descriptors as its own, which, summed in, made
    spikes of +4 GB and +700 files in the first soak's plot that were no memory at all.
    """
    parts = {"driver": [0, 0, 0], "jvm": [0, 0, 0], "helper": [0, 0, 0]}
    helpers = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            ppid, pgid = (int(v) for v in stat.rsplit(")", 1)[1].split()[1:3])
            if pgid != leader:
                continue
            status = Path(entry.path, "status").read_text()
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            files = len(os.listdir(Path(entry.path, "fd")))
            rss, threads = int(fields.get("VmRSS", "0 kB").split()[0]), int(fields["Threads"])
        except (OSError, ValueError, IndexError, KeyError):
            continue
        if int(entry.name) == leader:
            kind = "driver"
        elif ppid == leader and comm == "java":
            kind = "jvm"
        else:
            kind, helpers = "helper", helpers + 1
        for i, value in enumerate((rss, files, threads)):
            parts[kind][i] += value
    driver, jvm, helper = parts["driver"], parts["jvm"], parts["helper"]
    return {
        "rss_mb": round((driver[0] + jvm[0]) / 1024, 1),
        "rss_driver_mb": round(driver[0] / 1024, 1),
        "rss_jvm_mb": round(jvm[0] / 1024, 1),
        "open_files": driver[1] + jvm[1],
        "threads": driver[2] + jvm[2],
        "threads_driver": driver[2],
        "threads_jvm": jvm[2],
        "helpers": helpers,
        "helper_rss_mb": round(helper[0] / 1024, 1),
    }


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "max": round(ordered[-1], 3),
        "n": len(ordered),
    }


def warm_up_end(samples: list[dict], seconds: float, told: float = -1.0) -> float:
    """When warm-up ends: ``told`` seconds if given (>= 0), else the later of the first
    sample with a row delivered and a third of the run."""
    if told >= 0:
        return told
    first_rows = next((s["t"] for s in samples if s.get("rows")), seconds)
    return round(max(first_rows, seconds / 3), 1)


def after_warm_up(samples: list[dict], key: str, end: float) -> dict:
    """The trend of ``key`` after warm-up: least-squares slope per minute, the fitted
    change over the window, the median there, and ``flat`` when that change is under
    :data:`FLAT_SHARE` of the median (None under a minute or five samples: too short)."""
    points = [(s["t"], s[key]) for s in samples if s["t"] >= end and key in s]
    if len(points) < 5 or points[-1][0] - points[0][0] < 60:
        return {"samples": len(points), "flat": None}
    ts, values = [p[0] for p in points], [float(p[1]) for p in points]
    mean_t, mean_v = statistics.fmean(ts), statistics.fmean(values)
    spread = sum((t - mean_t) ** 2 for t in ts)
    slope = sum((t - mean_t) * (v - mean_v) for t, v in points) / spread if spread else 0.0
    change = slope * (ts[-1] - ts[0])
    median = statistics.median(values)
    return {
        "samples": len(points),
        "minutes": round((ts[-1] - ts[0]) / 60, 2),
        "slope_per_minute": round(slope * 60, 3),
        "fitted_change": round(change, 2),
        "median": round(median, 2),
        "min": min(values),
        "max": max(values),
        "flat": abs(change) <= FLAT_SHARE * abs(median) if median else abs(change) < 1,
    }


def _growth(values: list[float]) -> float | None:
    """Median of the last half minus median of the first half (after warm-up)."""
    if len(values) < 4:
        return None
    half = len(values) // 2
    return round(statistics.median(values[half:]) - statistics.median(values[:half]), 2)


def plot(report: dict, out_dir: Path, stem: str = "soak-resources") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = report["samples"]
    t = [s["t"] / 60 for s in samples]
    panels = (
        (("rss_mb", "rss_jvm_mb", "rss_driver_mb"), "RSS (MB)"),
        (("heap_committed_mb", "heap_retained_mb"), "JVM heap (MB)"),
        (("open_files",), "open files"),
        (("threads", "threads_jvm", "threads_driver"), "threads"),
        (("landing_mb", "labelled_mb"), "stored (MB)"),
        (("acked",), "tuples acknowledged"),
    )
    panels = tuple(p for p in panels if any(k in s for k in p[0] for s in samples))
    figure, axes = plt.subplots(len(panels), 1, figsize=(7, 2 * len(panels)), sharex=True)
    warm = report.get("warm_up_seconds")
    names = {
        "rss_mb": "driver + JVM",
        "threads": "driver + JVM",
        "heap_committed_mb": "committed",
        "heap_retained_mb": "retained (old + survivors)",
        "landing_mb": "landing zone",
        "labelled_mb": "labelled store",
    }
    for axis, (keys, label) in zip(axes, panels, strict=True):
        for key in keys:
            if any(key in s for s in samples):  # older reports lack the split
                name = names.get(key, key.rsplit("_", 2)[1] if "_" in key else key)
                points = [(x, s[key]) for x, s in zip(t, samples, strict=True) if key in s]
                axis.plot(*zip(*points, strict=True), label=name)
        if warm is not None:
            axis.axvline(warm / 60, color="grey", linestyle=":", linewidth=1)
        if len(keys) > 1:
            axis.legend(fontsize="small", loc="upper left")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[-1].set_xlabel("minutes (dotted: end of warm-up)" if warm is not None else "minutes")
    shape = report["shape"]
    figure.suptitle(
        f"soak: {shape['providers']} providers, {shape['queries']} queries, "
        f"{shape['subscribers']} subscribers, {report['tuples_per_second']} tuples/s"
    )
    figure.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    resources = out_dir / f"{stem}.png"
    figure.savefig(resources, dpi=110)
    plt.close(figure)
    return [resources]


def run(shape: Shape, serve: list[str] | None = None) -> dict:
    work = Path(tempfile.mkdtemp(prefix="streamshield-soak-"))
    try:
        return Soak(shape, work / "root", serve).run()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Shape()
    for name, value in defaults.__dict__.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=None, help="directory for the plots")
    parser.add_argument("--plot-name", default="soak-resources", help="the plot's file name")
    parser.add_argument(
        "--conf", action="append", default=[], help="Spark k=v for the server (repeat)"
    )
    args = parser.parse_args()
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)
    shape = Shape(**{name: getattr(args, name) for name in defaults.__dict__})
    report = run(shape, [o for pair in args.conf for o in ("--conf", pair)])
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.plot is not None:
        plot(report, args.plot, args.plot_name)
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=2))


if __name__ == "__main__":
    main()
