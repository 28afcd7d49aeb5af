"""1, 4, 16 and 64 users on one stream, registered and served the way the server does it.

One command: ``.venv/bin/python -m bench.sharing_users [--queries 1 4 16 64] [--reps 2]``
(the scale targets). ``bench.sharing_scale`` drives ``CqlService`` with sinks of its own;
here every query goes through the server's own registration path, in process (no HTTP):

* a :class:`~streamshield.server.queries.LiveQuery` per user, built as
  ``QueryRequests.live_query`` builds it: a :class:`~streamshield.engine.delivery.delivery.Delivery`
  (SecFilter: the subscriber's rights, roles and level of now, her own query's mask),
  a result store, a switch on the server's
  :class:`~streamshield.network.switchboard.Switchboard` that the delivery opens with its
  first subscriber (``+``) and closes with its last (``-``);
* started by the server's :class:`~streamshield.server.queries.QueryRegistry`, whose
  ``start`` wraps the delivery in the server's ``StoringSink`` and submits the query to
  ``CqlService`` with the server's settings (``fuse`` on).

Three arms, interleaved: **fused** (every user's selection a branch of the stream's
network, computed in one pass written once, each branch's batch a link, every listening
branch delivered by one Spark job: ``SharedNetwork.deliver_together`` on, the server's
default), **fused-each** (the same, each listening branch delivered by a
job of its own)
and **separate** (``EngineTuning(share=False)``: each query its own
streaming query, a full pass each: what N users cost before sharing). Per case, after
registration:

1. **nobody listening**: every switch opened by hand (an sp by a user who does not
   subscribe, as ``POST /networks/sps`` would), so every branch computes and stores its
   output and nothing is delivered; a warm-up batch, then ``--batches`` timed ones.
   (With nobody listening and the switches left closed, as in the server, a fused branch
   runs no job at all; a separate query still computes and stores every batch.)
2. **everyone listening**: each user subscribes to her own query (``Delivery.subscribe``,
   as ``GET /queries/<q>/results`` does, her session's roles being the query's), the
   hand-opened switches are closed again, and rows go through SecFilter to a bounded
   inbox per user (the last 64 batches kept, as the SSE queue bounds a subscriber); a
   warm-up batch, then ``--batches`` timed ones.

The data, users' queries and timing are ``bench.sharing_scale``'s: ``--rows`` tuples per
batch landed and ingested at once (not timed), N users cycling through the roles C, GP,
ND, E and D with ``SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >=
k`` (k in 4 thresholds); a batch's span runs from the first micro-batch reading it
starting to the last one ending (Spark's progress reports). Each listening batch also
records the seconds spent in delivery (summed over the users' deliveries, which run up
to four side by side) and the rows handed over. Results go to
``bench/results/sharing-users.json`` and their own section of ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame

from bench.experiment_common import changed_flags
from bench.revocation_latency import write_section
from bench.sharing_scale import (
    THRESHOLDS,
    Network,
    batch_figures,
    batches,
    load,
    user_query,
)
from streamshield.engine.delivery import delivery as delivery_module
from streamshield.engine.delivery.delivery import Delivery, Subscription
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.session import spark_session
from streamshield.engine.sharing.shared_network import SharedNetwork
from streamshield.engine.store.result_store import ResultStore
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.network.switchboard import QuerySp, Switchboard
from streamshield.policy.elements import Element, TupleElement
from streamshield.policy.operator_limits import OperatorLimits
from streamshield.policy.punctuation import Sign
from streamshield.server.queries import LiveQuery, QueryRegistry

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Query sharing: N users through the server's path"
ARMS = ("fused", "fused-each", "separate")
MODES = ("nobody", "listening")
SHOWN = (
    "fused/nobody",
    "fused/listening",
    "fused-each/listening",
    "separate/nobody",
    "separate/listening",
)
"""The first table's columns (fused-each computes and stores as fused does)."""
OPENER = "bench-open"
"""The user whose hand-injected ``+`` holds every switch open while nobody listens."""
INBOX_BATCHES = 64
"""Batches a user's inbox keeps (the server's SSE queue: ``subscriptions.DEFAULT_QUEUE``)."""


class TimedDelivery(Delivery):
    """The server's SecFilter delivery, timed: seconds and rows handed per micro-batch."""

    def __init__(self, *args, clock: DeliveryClock, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock

    def deliver_to(
        self, frame: DataFrame, batch_id: int, subscriptions: tuple[Subscription, ...]
    ) -> None:
        started = self.clock.began.at = time.perf_counter()
        try:
            super().deliver_to(frame, batch_id, subscriptions)
        finally:
            self.clock.add(time.perf_counter() - started)


@dataclass
class DeliveryClock:
    """Delivery seconds and calls summed over every user's query (thread-safe): the
    planning before delivery's one Spark job (rights, classes, conditions, on the
    driver), that job (``collect_rows``: the job and the rows as Arrow columns), and the
    rest is per-row Python (each row a dict, handed over)."""

    seconds: float = 0.0
    calls: int = 0
    collect: float = 0.0
    plan: float = 0.0
    began: threading.local = field(default_factory=threading.local, repr=False)
    """When this thread's delivery started (``began.at``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds
            self.calls += 1

    def add_collect(self, plan: float, seconds: float) -> None:
        with self._lock:
            self.plan += plan
            self.collect += seconds

    def take(self) -> tuple[float, int, float, float]:
        """Delivery seconds, calls, their planning and their collects, then zero."""
        with self._lock:
            out = (self.seconds, self.calls, self.plan, self.collect)
            self.seconds, self.calls, self.plan, self.collect = 0.0, 0, 0.0, 0.0
        return out

    @contextmanager
    def timing_collects(self) -> Iterator[None]:
        """Times every delivery's ``collect_rows``, and a network's delivery of all
        its listening branches in one job as one delivery (profiling only: the names are
        rebound while measuring, the functions themselves are unchanged)."""
        original = delivery_module.collect_rows
        together = SharedNetwork._deliver_together

        def timed_together(network, *args, **kwargs):
            started = self.began.at = time.perf_counter()
            done = together(network, *args, **kwargs)
            if done:
                self.add(time.perf_counter() - started)
            return done

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                planned = started - getattr(self.began, "at", started)
                self.add_collect(planned, time.perf_counter() - started)

        delivery_module.collect_rows = timed
        SharedNetwork._deliver_together = timed_together  # type: ignore[method-assign]
        try:
            yield
        finally:
            delivery_module.collect_rows = original
            SharedNetwork._deliver_together = together  # type: ignore[method-assign]


@dataclass
class Inbox:
    """A subscriber's bounded sink: the newest batches kept, every row counted."""

    batches: deque = field(default_factory=lambda: deque(maxlen=INBOX_BATCHES))
    rows: int = 0

    def __call__(self, rows: list[dict], batch_id: int) -> None:
        self.batches.append((batch_id, rows))
        self.rows += len(rows)


@dataclass
class Server:
    """The server's query side over one pipeline: registry, switchboard, deliveries."""

    pipeline: Pipeline
    registry: QueryRegistry
    switches: Switchboard
    clock: DeliveryClock
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each user's session roles (her own query's)."""
    inboxes: dict[str, Inbox] = field(default_factory=dict)
    """Each subscribed user's inbox."""
    drops: dict[str, int] = field(default_factory=dict)
    """Rows each subscriber did not get (the server audits them)."""

    def subscribe_everyone(self) -> None:
        """Each user subscribes to her own query (her first subscription: a ``+``)."""
        for query in self.registry.all():
            inbox = self.inboxes[query.owner] = Inbox()
            query.delivery.subscribe(query.owner, inbox, batched=True)

    def delivered(self) -> int:
        return sum(inbox.rows for inbox in self.inboxes.values())

    @classmethod
    def over(cls, pipeline: Pipeline, fused: bool) -> Server:
        """As ``ServerService.__init__`` wires them: the switchboard drives the networks'
        switches; ``fused`` False runs every selection as a streaming query of its own."""
        cql = pipeline.cql
        cql.tuning = replace(cql.tuning, share=fused, fuse=fused)
        switches = Switchboard()
        cql.switch = switches.is_on
        return cls(pipeline, QueryRegistry(cql), switches, DeliveryClock())

    def dropped(self, user: str, batch: int, count: int, policies: tuple[str, ...]) -> None:
        """Where the server records a subscriber's dropped rows (its security catalog)."""
        self.drops[user] = self.drops.get(user, 0) + count

    def register(self, user: str, text: str, roles: tuple[str, ...]) -> LiveQuery:
        """As ``QueryRequests.register_query`` then ``live_query``: the query recorded with its
        delivery, store and switch, then started by the registry."""
        queries = self.pipeline.queries
        codec, internal = queries.codec, f"api_{uuid.uuid4().hex[:12]}"
        self.roles[user] = roles
        delivery = TimedDelivery(
            lambda _user: ({"HeartRate"}, set()),  # READ TUPLE on the stream
            queries.provenance,
            roles=lambda s: codec.query(self.roles[s.user]),
            aggregate=False,
            on_drop=self.dropped,
            clock=self.clock,
        )
        query = LiveQuery(
            f"q_{user}",
            user,
            text,
            roles,
            ("HeartRate",),
            internal,
            delivery,
            ResultStore(self.pipeline.root / "results" / internal),
            output=f"q_{user}_out",
        )
        delivery.query_mask = lambda: codec.query(roles)
        self.switches.add(internal)
        delivery.on_access = lambda who, sign: self.switches.inject(
            QuerySp(internal, who, sign, time.time())
        )
        self.registry.add(query)
        return self.registry.start(query.name, OperatorLimits())

    def hold_open(self, sign: Sign) -> None:
        """Every switch opened (``+``) or closed (``-``) by hand for :data:`OPENER`."""
        for query in self.registry.all():
            self.switches.inject(QuerySp(query.internal, OPENER, sign, time.time()))

    def measured(self) -> list:
        """What ``batch_figures`` reads: the network's one streaming query, or each query's."""
        networks = list(self.pipeline.cql.networks.values())
        if networks:
            (network,) = networks
            assert network.handle is not None
            return [Network(network.name, network.handle)]
        return [q.handle for q in self.registry.all()]


@dataclass
class Case:
    n: int
    rep: int
    arm: str
    register_s: float = 0.0
    batches: dict[str, list[dict]] = field(default_factory=lambda: {m: [] for m in MODES})
    delivered_rows: list[int] = field(default_factory=list)  # per user, listening


def one_batch(server: Server, items: list[Element], measured: list) -> dict:
    """Lands and ingests ``items`` (untimed), then waits for every query to process them."""
    result = server.pipeline.landing.append(items)
    if result.rejected:
        raise RuntimeError(f"landing rejected {len(result.rejected)} elements")
    server.clock.take()
    since, handed = time.time(), server.delivered()
    server.pipeline.ingest_available()  # queries may start reading before it returns
    for query in measured:
        query.process_all_available()
    done = time.time()
    figures = batch_figures(measured, since, sum(isinstance(e, TupleElement) for e in items))
    delivery_s, calls, plan_s, collect_s = server.clock.take()
    return {
        "wall_s": done - figures.pop("first_start"),
        **figures,
        "delivery_s": delivery_s,
        "deliveries": calls,
        "plan_s": plan_s,
        "collect_s": collect_s,
        "rows_delivered": server.delivered() - handed,
    }


def run_case(spark, tmp: Path, n: int, rep: int, arm: str, data: list[list[Element]]) -> Case:
    """N users on a fresh pipeline: nobody listening, then everyone (``data``: the policy
    and warm-up batch, the timed batches, the listening warm-up, its timed batches)."""
    root = tmp / f"n{n}-rep{rep}-{arm}"
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
    server = Server.over(pipeline, fused=arm != "separate")
    case, timed = Case(n, rep, arm), (len(data) - 2) // 2
    started = time.perf_counter()
    try:
        for i in range(n):
            text, roles = user_query(i)
            server.register(f"user{i:02d}", text, roles)
        case.register_s = time.perf_counter() - started
        for network in pipeline.cql.networks.values():
            network.deliver_together = arm == "fused"
        measured = server.measured()
        server.hold_open(Sign.GRANT)
        plan = [("nobody", b) for b in range(timed + 1)] + [
            ("listening", b) for b in range(timed + 1)
        ]
        with server.clock.timing_collects():
            for (mode, b), items in zip(plan, data, strict=True):
                if mode == "listening" and b == 0:  # everyone subscribes, the hand lets go
                    server.subscribe_everyone()
                    server.hold_open(Sign.DENY)
                figures = one_batch(server, items, measured)
                if b > 0:  # b == 0: warm-up (JIT, file listing, code generation, delivery)
                    case.batches[mode].append(figures)
        case.delivered_rows = [server.inboxes[u].rows for u in sorted(server.inboxes)]
        if not all(case.delivered_rows):
            raise RuntimeError(f"a subscriber got nothing: {case.delivered_rows}")
    finally:
        server.registry.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    return case


def stats(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def summarise(cases: list[Case], sizes: list[int]) -> dict:
    """Per arm and mode, per N: span, wall and delivery figures and the span's ratio to
    the smallest N of the same arm and mode."""
    out: dict = {}
    for arm in ARMS:
        for mode in MODES:
            per_n = {}
            for n in sizes:
                mine = [c for c in cases if c.n == n and c.arm == arm]
                rows = [b for c in mine for b in c.batches[mode]]
                if not rows:
                    continue
                per_n[n] = {
                    "span_s": stats([b["span_s"] for b in rows]),
                    "wall_s": stats([b["wall_s"] for b in rows]),
                    "delivery_s": stats([b["delivery_s"] for b in rows]),
                    "plan_s": stats([b["plan_s"] for b in rows]),
                    "collect_s": stats([b["collect_s"] for b in rows]),
                    "rows_delivered": stats([b["rows_delivered"] for b in rows]),
                    "register_s": stats([c.register_s for c in mine]),
                    "samples": len(rows),
                }
            if per_n:
                base = per_n[min(per_n)]["span_s"]["median"]
                for figures in per_n.values():
                    figures["span_ratio"] = round(figures["span_s"]["median"] / base, 2)
                out[f"{arm}/{mode}"] = per_n
    return out


def markdown(result: dict, command: str, heading: str = HEADING) -> str:
    sizes, summary = result["sizes"], result["summary"]
    lines = [
        heading,
        "",
        f"Generated by `{command}` (2 cores; 1-minute load",
        f"{result['load_before']} before and {result['load_after']} after,"
        f" {result['run_s']} s in all). Every query is",
        "registered, switched and served by the server's own classes in process",
        "(`QueryRegistry.start`: the server's `StoringSink` around its SecFilter `Delivery`,",
        "`CqlService` with `fuse` on; the `Switchboard` driven by the deliveries' `+`/`-`).",
        "N users (roles cycling C, GP, ND, E, D) each register",
        "`SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= k`",
        f"(k in {list(THRESHOLDS)}); {result['rows']} tuples per batch. **fused**: one",
        "network, one pass written once, a link per branch, every listening branch",
        "delivered by one job (`deliver_together` on: the server's default); **each**: the",
        "same but a delivery job per listening branch; **separate**: each query its own",
        "streaming query",
        "(`share` off: a full pass each). **nobody**: every switch held",
        "open by hand, nothing delivered; **listening**: every user subscribed to her own",
        "query, rows through SecFilter into a bounded inbox. Batch span (first micro-batch",
        "reading the batch",
        "starting to the last ending), median [min-max] over",
        f"{result['reps']} interleaved reps x {result['batches']} batches; ratio to 1",
        "user of the same arm and mode; delivery s: summed over the users' deliveries",
        "(up to four run side by side).",
        "",
        "| users | fused, nobody | fused, listening | each, listening | separate, nobody "
        "| separate, listening |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        cells = []
        for key in SHOWN:
            f = _figures(summary, key, n)
            if not f:
                cells.append("-")
                continue
            s = f["span_s"]
            cells.append(f"{s['median']} [{s['min']}-{s['max']}] **{f['span_ratio']}x**")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Where a listening batch's delivery goes (median seconds per batch, summed over the",
        "users' deliveries): planning on the driver (rights, classes, conditions), its",
        "Spark job (`collect_rows`, the rows' transfer included), and per-row Python",
        "(the rest: a dict per row, handed over); register: all N queries.",
        "",
        "| users | fused: delivery (plan / job / rows) | each: delivery | separate: delivery"
        " | rows delivered per batch | register all s (fused / separate) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        fr = _figures(summary, "fused/nobody", n).get("register_s", {})
        sr = _figures(summary, "separate/nobody", n).get("register_s", {})
        listening = next(
            (f for k in SHOWN if k.endswith("listening") and (f := _figures(summary, k, n))), {}
        )
        rows = round(listening["rows_delivered"]["median"]) if listening else "-"
        lines.append(
            f"| {n} | {_split(_figures(summary, 'fused/listening', n))} "
            f"| {_split(_figures(summary, 'fused-each/listening', n))} "
            f"| {_split(_figures(summary, 'separate/listening', n))} | {rows} "
            f"| {fr.get('median', '-')} / {sr.get('median', '-')} |"
        )
    return "\n".join(lines) + "\n"


def _figures(summary: dict, key: str, n: int) -> dict:
    """One arm and mode's figures for N users (JSON keys are strings once read back)."""
    per_n = summary.get(key, {})
    return per_n.get(n) or per_n.get(str(n)) or {}


def _split(figures: dict) -> str:
    """``total (plan / job / per-row Python)`` of a listening batch's delivery."""
    if not figures:
        return "-"
    total, plan, job = (figures[k]["median"] for k in ("delivery_s", "plan_s", "collect_s"))
    return f"{total} ({plan} / {job} / {round(total - plan - job, 3)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=2, help="timed batches per mode")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--out", default="bench/results/sharing-users.json")
    parser.add_argument(
        "--part",
        default="",
        help="names this run's section of docs/performance.md (several runs: one each)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    sizes = sorted(set(args.queries))
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    data = batches(2 * (args.batches + 1), args.rows, args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="ss-sharing-users-"))
    load_before, cases, began = load(), [], time.perf_counter()
    try:
        run_case(spark, tmp, 1, -1, args.arms[0], data)  # JVM warm-up, not kept
        for rep in range(args.reps):
            order = sizes[rep % len(sizes) :] + sizes[: rep % len(sizes)]
            for n in order:
                for arm in args.arms if rep % 2 == 0 else args.arms[::-1]:
                    case = run_case(spark, tmp, n, rep, arm, data)
                    cases.append(case)
                    spans = {m: [round(b["span_s"], 2) for b in case.batches[m]] for m in MODES}
                    print(f"rep {rep} n {n} {arm}: {spans} load {load()}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = summarise(cases, sizes)
    result = {
        "date": datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "sizes": sizes,
        "rows": args.rows,
        "batches": args.batches,
        "reps": args.reps,
        "seed": args.seed,
        "arms": args.arms,
        "load_before": load_before,
        "load_after": load(),
        "run_s": round(time.perf_counter() - began, 1),
        "summary": summary,
        "cases": [c.__dict__ for c in cases],
    }
    command = "python -m bench.sharing_users --queries " + " ".join(map(str, sizes))
    command += changed_flags(
        (
            ("--rows", args.rows, 20_000),
            ("--batches", args.batches, 2),
            ("--reps", args.reps, 2),
            ("--seed", args.seed, 12),
        )
    )
    if args.arms != list(ARMS):
        command += " --arms " + " ".join(args.arms)
    print(json.dumps(summary, indent=2))
    if args.no_write:
        return
    (ROOT / args.out).write_text(json.dumps(result, indent=2) + "\n")
    heading = f"{HEADING} ({args.part})" if args.part else HEADING
    if args.out != parser.get_default("out"):
        command += f" --out {args.out}"
    if args.part:
        command += f" --part {args.part!r}"
    write_section(ROOT / "docs" / "performance.md", markdown(result, command, heading), heading)


if __name__ == "__main__":
    main()
