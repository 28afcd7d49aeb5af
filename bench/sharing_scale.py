"""What N users watching one stream cost today, when every query is its own Spark query.

One command: ``.venv/bin/python -m bench.sharing_scale [--queries 1 4 16] [--rows 20000]``
(the "without sharing" half). The default, 1, 4 and 16 queries, took
about 6 minutes on the project's shared 2 cores; ``--queries 1 4 16 64`` adds the large
case and took about 12 (registering 64 queries alone takes ~30 s per case).

Setup, engine level (no HTTP): one Spark session, and per measured case a fresh
:class:`~streamshield.engine.pipeline.Pipeline` over the hospital example's catalog, so
every case starts from an empty store and processes exactly the same input. A provider
channel of HeartRate (``ward-B``) carries a policy that gives each hospital role a
different view (cardiologists everything, general physicians some patients, nurses two
attributes, employees and so doctors a few patients). N users, cycling through the
roles C, GP, ND, E and D, register overlapping selections
``SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= k`` (k cycles
through 4 thresholds, so some texts are identical); each is its own streaming query with
the default trigger and a sink that materialises its whole output (Spark's ``noop``
writer: every column computed, nothing collected).

Per case: one warm-up batch, then ``--batches`` timed batches of ``--rows`` tuples, each
landed and ingested at once (not timed); then every query's ``processAllAvailable``. A
batch's time is the span from the first of the N queries' micro-batches that read it
starting to the last one ending (Spark's progress reports); the summed durations of
those micro-batches (work) and the driver's wall time from the first of them starting
until every query's ``processAllAvailable`` returned are kept too (ingest commits
before its call returns, so queries may start reading before it ends). Cases are
interleaved (rep 1: every N, rep 2: every N, ..., order rotated per rep); the figure
per N is the median over reps and batches, with min and max, and its ratio to N=1.
Results go to ``bench/results/sharing-scale.json`` and to their own section of
``docs/performance.md``.

``--shared``: the N queries are submitted to ``CqlService`` as the server submits them
(one network over HeartRate; ``--fused`` sets its ``fuse`` setting, on in the server).
``--store``: each query's sink is the server's instead (``StoringSink``: every batch
stored in the query's result store, nobody listening, so nothing delivered); in a shared
network with ``--fused`` the branches' batches are then links into one write of the
fused pass, each row stored once (engine/sharing/fused_branches.py, engine/store/result_store.py).
Results go to ``...-store.json``.

``bench.sharing_users`` measures the same users through the server's own path instead
(``QueryRegistry``, the server's ``StoringSink`` and SecFilter ``Delivery``, switches
driven by subscriptions), with nobody and everyone listening.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from pyspark.sql.streaming import StreamingQuery

from bench.experiment_common import changed_flags
from bench.revocation_latency import write_section
from streamshield.engine.pipeline import Pipeline
from streamshield.engine.queries.streaming_queries import CallbackSink, RegisteredQuery
from streamshield.engine.session import spark_session
from streamshield.engine.store.result_store import ResultStore, StoringSink
from streamshield.examples.hospital_catalog import hospital_catalog
from streamshield.lang.cql import parse_policy
from streamshield.policy.elements import Channel, Element, SpElement, TupleElement

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Query sharing: N users on one stream, each query its own"
SHARED_HEADING = "## Query sharing: N users on one stream (one shared network)"
CHANNEL = Channel("HeartRate", "ward-B")
ROLES = (("C",), ("GP",), ("ND",), ("E",), ("D",))
THRESHOLDS = (100, 104, 108, 112)  # every role reads some of every range
PATIENTS = range(100, 150)
POLICY = """
INSERT SP INTO STREAM HeartRate LET DDP = STREAMS: HeartRate, SRP = rbac:C;
INSERT SP INTO STREAM HeartRate LET DDP = TUPLES: [120, 139], SRP = rbac:GP;
INSERT SP INTO STREAM HeartRate
  LET DDP = ATTRIBUTES: {patient_id, beats_per_min}, SRP = rbac:ND;
INSERT SP INTO STREAM HeartRate
  LET DDP = TUPLES: [100, 114] AND ATTRIBUTES: {patient_id, beats_per_min}, SRP = rbac:E
"""
POLICY_TS = 100


def user_query(i: int) -> tuple[str, tuple[str, ...]]:
    """User ``i``'s selection and roles: overlapping ranges, roles cycling."""
    k = THRESHOLDS[i % len(THRESHOLDS)]
    text = f"SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= {k}"
    return text, ROLES[i % len(ROLES)]


def batches(count: int, rows: int, seed: int) -> list[list[Element]]:
    """The policy, then ``count`` batches of ``rows`` tuples; the same for every case."""
    rng = random.Random(seed)
    policy = parse_policy(POLICY, ts=POLICY_TS)
    first: list[Element] = [SpElement(CHANNEL, sp.sn, sp) for sp in policy.sps]
    seq, out = len(first), []
    for b in range(count):
        items: list[Element] = first if b == 0 else []
        for _ in range(rows):
            seq += 1
            patient = rng.choice(PATIENTS)
            values = {
                "patient_id": patient,
                "beats_per_min": round(rng.uniform(50, 150), 1),
                "ts": 1000 + seq,
            }
            items.append(TupleElement(CHANNEL, seq, patient, POLICY_TS, policy.csn, values))
        out.append(items)
    return out


@dataclass
class Case:
    """One measured case: N queries on a fresh pipeline."""

    n: int
    rep: int
    fused: bool = False
    register_s: float = 0.0
    output_rows: list[int] = field(default_factory=list)  # per query, warm-up batch
    batches: list[dict] = field(default_factory=list)


class Sink:
    """Counts the output in the warm-up batch, then only materialises it (noop writer)."""

    def __init__(self) -> None:
        self.counting = True
        self.rows = 0

    def __call__(self, frame, batch_id: int) -> None:
        if self.counting:
            self.rows += frame.count()
        else:
            frame.write.format("noop").mode("overwrite").save()


def progress_time(event: dict) -> float:
    """Seconds since the epoch at which a progress report's micro-batch started."""
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def batch_figures(queries: list[RegisteredQuery | Network], since: float, rows: int) -> dict:
    """Span, work and per-query durations of the micro-batches that read the new input."""
    starts, ends, work, per_query = [], [], 0.0, []
    for query in queries:
        events = [
            e
            for e in query.handle.recentProgress
            if e["numInputRows"] > 0 and progress_time(e) >= since - 0.002
        ]
        got = sum(e["numInputRows"] for e in events)
        if got != rows:
            raise RuntimeError(f"{query.name} read {got} rows of the batch, not {rows}")
        durations = [e["durationMs"]["triggerExecution"] / 1000 for e in events]
        starts += [progress_time(e) for e in events]
        ends += [progress_time(e) + d for e, d in zip(events, durations, strict=True)]
        work += sum(durations)
        per_query.append(sum(durations))
    return {
        "span_s": max(ends) - min(starts),
        "work_s": work,
        "per_query_median_s": statistics.median(per_query),
        "micro_batches": len(starts),
        "first_start": min(starts),
    }


@dataclass
class Network:
    """The shared network's one streaming query, read like a registered query's."""

    name: str
    handle: StreamingQuery

    def process_all_available(self) -> None:
        self.handle.processAllAvailable()

    def stop(self) -> None:
        self.handle.stop()


def storing(root: Path, name: str) -> StoringSink:
    """The server's sink for a query nobody listens to: every batch stored, none delivered."""
    return StoringSink(ResultStore(root / "results" / name), lambda _f, _b: None, lambda: False)


def stored_rows(sink: StoringSink, spark) -> int:
    frames = (sink.store.stored(b, spark) for b in sink.store.batches())
    return sum(f.count() for f in frames if f is not None)


def shared_network(
    pipeline: Pipeline,
    n: int,
    sinks: list,
    root: Path,
    fuse: bool = False,
    store: bool = False,
) -> Network:
    """N users' queries as branches of one network over HeartRate (``--shared``),
    registered as the server registers them (``CqlService.submit``: admission, routing,
    the stream's network, its ``fuse`` setting), everyone's switch on."""
    pipeline.cql.tuning = replace(pipeline.cql.tuning, fuse=fuse)
    for i in range(n):
        text, roles = user_query(i)
        sink = storing(root, f"user{i:02d}") if store else Sink()
        sinks.append(sink)
        pipeline.cql.submit(
            pipeline.cql.admit(text, roles), CallbackSink(sink), name=f"user{i:02d}"
        )
    (network,) = pipeline.cql.networks.values()
    assert network.handle is not None and len(network.branches) == n
    return Network(network.name, network.handle)


def run_case(
    spark,
    tmp: Path,
    n: int,
    rep: int,
    data: list[list[Element]],
    shared: bool = False,
    fuse: bool = False,
    store: bool = False,
) -> Case:
    root = tmp / f"n{n}-rep{rep}-{fuse}"
    pipeline = Pipeline(spark, hospital_catalog(root / "catalog.db"), root)
    case, sinks, queries = Case(n, rep, fuse), [], []
    started = time.perf_counter()
    try:
        if shared:
            queries.append(shared_network(pipeline, n, sinks, root, fuse, store))
        for i in range(0 if shared else n):
            text, roles = user_query(i)
            sink = storing(root, f"user{i:02d}") if store else Sink()
            # A streaming query of its own (CqlService would put it in a shared network).
            query = pipeline.queries.register(
                pipeline.queries.admit(text, roles), CallbackSink(sink), f"user{i:02d}"
            )
            sinks.append(sink)
            queries.append(query)
        case.register_s = time.perf_counter() - started
        for b, items in enumerate(data):
            result = pipeline.landing.append(items)
            if result.rejected:
                raise RuntimeError(f"landing rejected {len(result.rejected)} elements")
            since = time.time()
            pipeline.ingest_available()
            for query in queries:
                query.process_all_available()
            done = time.time()
            rows = sum(isinstance(e, TupleElement) for e in items)
            figures = batch_figures(queries, since, rows)
            wall = done - figures.pop("first_start")
            if b == 0:
                case.output_rows = [
                    stored_rows(s, spark) if isinstance(s, StoringSink) else s.rows for s in sinks
                ]
                for s in sinks:
                    s.counting = False
                continue  # warm-up: JIT, first-file listing, code generation
            case.batches.append({"wall_s": wall, **figures})
    finally:
        for query in queries:
            query.stop()
        shutil.rmtree(root, ignore_errors=True)
    return case


def summarise(cases: list[Case], sizes: list[int]) -> dict:
    def stats(values: list[float]) -> dict:
        return {
            "median": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
        }

    per_n = {}
    for n in sizes:
        mine = [c for c in cases if c.n == n]
        batch = [b for c in mine for b in c.batches]
        per_n[n] = {
            "span_s": stats([b["span_s"] for b in batch]),
            "wall_s": stats([b["wall_s"] for b in batch]),
            "work_s": stats([b["work_s"] for b in batch]),
            "per_query_batch_s": stats([b["per_query_median_s"] for b in batch]),
            "register_s": stats([c.register_s for c in mine]),
            "output_rows_per_query": mine[0].output_rows,
            "samples": len(batch),
        }
    base = per_n[sizes[0]]
    for n in sizes:
        for key in ("span_s", "wall_s", "work_s"):
            per_n[n][f"{key}_ratio"] = round(per_n[n][key]["median"] / base[key]["median"], 2)
    return per_n


def _table(per_n: dict, sizes: list[int], base: int) -> list[str]:
    lines = [
        f"| queries | batch span s | ratio to {base} | wall s | one query's batch s "
        "| register all s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        f = per_n[str(n)] if str(n) in per_n else per_n[n]

        def cell(key: str, f: dict = f) -> str:
            s = f[key]
            return f"{s['median']} [{s['min']}-{s['max']}]"

        lines.append(
            f"| {n} | {cell('span_s')} | **{f['span_s_ratio']}x** | {cell('wall_s')} "
            f"| {cell('per_query_batch_s')} | {f['register_s']['median']} |"
        )
    return lines


def markdown(result: dict, command: str) -> str:
    per_n, base = result["per_n"], result["sizes"][0]
    lines = [
        HEADING,
        "",
        f"Generated by `{command}`",
        "on this project's machine (2 cores, shared with other agents' Spark jobs while",
        f"measured, 1-minute load average {result['load_before']} before and "
        f"{result['load_after']} after:",
        "absolute seconds are noisy). With sharing off every query is its own Spark",
        "streaming query. N users (roles cycling C, GP, ND, E, D) watch the hospital's",
        "HeartRate stream with overlapping selections",
        "`SELECT patient_id, beats_per_min FROM HeartRate WHERE patient_id >= k`",
        f"(k in {list(THRESHOLDS)}); each batch lands {result['rows']} tuples at once,",
        "ingested before timing. A batch's time (span) runs from the first micro-batch",
        "reading it starting to the last one ending, over all N queries (Spark's progress",
        "reports); wall is the driver's time from that start until every query's",
        "`processAllAvailable` returned; one query's batch is the median duration of one",
        "query's micro-batch in that batch (the queries run side by side, so it grows with",
        f"contention). Median [min-max] over {result['reps']} interleaved reps x",
        f"{result['batches']} batches, each case after its own warm-up batch (and one",
        "untimed case before all, for the JVM).",
        "",
    ]
    if result.get("only_fused"):
        lines += [
            "Only the **fused arm** was run (`--only-fused`): what the server runs, one pass",
            "over the batch written once, each row once with a taken bit per branch and a",
            "mask bit per attribute test, each branch's batch a link its rows are rebuilt",
            "from.",
            "",
        ]
    lines += _table(per_n, result["sizes"], base)
    fused = result.get("per_n_fused")
    if fused:
        lines += [
            "",
            "The **fused arm** (what the server runs: one pass over the batch, written once,",
            "each row once with a taken bit per branch and a mask bit per attribute test,",
            "each branch's batch a link its rows are rebuilt from), measured in the same",
            "run, interleaved with the arm above:",
            "",
            *_table(fused, result["sizes"], base),
        ]
    lines += [
        "",
        "* Target of sharing: 16 queries at most 2x the batch time",
        "  of one, 64 at most 4x. Without sharing every query reads,",
        "  label-checks and filters the whole batch on its own, so the work grows with N",
        "  and the span with it once the 2 cores are busy. The summed durations of the",
        "  N queries' micro-batches are in the JSON (`work_s`); they overlap in time, so",
        "  they are not CPU time.",
        "* Output rows of the first 16 users' queries in the warm-up batch, showing they",
        f"  see different results: {result['output_rows_example'][:16]}.",
        "",
    ]
    return "\n".join(lines)


def load() -> float:
    return round(os.getloadavg()[0], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=2, help="timed batches per case")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--shared", action="store_true", help="the N queries as one shared network (after)"
    )
    parser.add_argument(
        "--fused",
        action="store_true",
        help="with --shared: also run every case with the branches computed in one pass "
        "(interleaved), to measure what that saves",
    )
    parser.add_argument(
        "--store", action="store_true", help="the server's storing sinks (nobody listening)"
    )
    parser.add_argument(
        "--only-fused",
        action="store_true",
        help="with --shared --fused: skip the arm whose branches each run their own plan "
        "(the 64-branch case of that arm costs most of the run on a loaded machine)",
    )
    args = parser.parse_args()
    sizes = sorted(set(args.queries))
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    data = batches(args.batches + 1, args.rows, args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="ss-sharing-"))
    load_before, cases = load(), []
    arms = (False, True) if args.shared and args.fused else (False,)
    if args.only_fused and len(arms) > 1:
        arms = (True,)
    began = time.perf_counter()
    try:
        run_case(spark, tmp, 1, -1, data, args.shared, store=args.store)  # JVM warm-up
        for rep in range(args.reps):
            order = sizes[rep % len(sizes) :] + sizes[: rep % len(sizes)]
            for n in order:
                for fuse in arms if rep % 2 else arms[::-1]:
                    case = run_case(spark, tmp, n, rep, data, args.shared, fuse, args.store)
                    cases.append(case)
                    spans = [round(b["span_s"], 2) for b in case.batches]
                    print(f"rep {rep} n {n} fused {fuse}: spans {spans}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fused = summarise([c for c in cases if c.fused], sizes) if True in arms else None
    per_n = summarise([c for c in cases if not c.fused], sizes) if False in arms else fused
    largest = max(sizes)
    result = {
        "date": datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "sizes": sizes,
        "rows": args.rows,
        "batches": args.batches,
        "reps": args.reps,
        "seed": args.seed,
        "load_before": load_before,
        "load_after": load(),
        "run_s": round(time.perf_counter() - began, 1),
        "output_rows_example": per_n[largest]["output_rows_per_query"],
        "per_n": per_n,
        "per_n_fused": None if arms == (True,) else fused,
        "only_fused": arms == (True,),
        "cases": [c.__dict__ for c in cases],
    }
    command = ".venv/bin/python -m bench.sharing_scale --queries " + " ".join(map(str, sizes))
    command += " --shared" if args.shared else ""
    command += " --fused" if True in arms else ""
    command += " --only-fused" if arms == (True,) else ""
    command += " --store" if args.store else ""
    command += changed_flags(
        (
            ("--rows", args.rows, 20_000),
            ("--batches", args.batches, 2),
            ("--reps", args.reps, 3),
            ("--seed", args.seed, 12),
        )
    )
    summary = {
        n: {k: v for k, v in f.items() if k != "output_rows_per_query"} for n, f in per_n.items()
    }
    print(json.dumps(summary, indent=2))
    if fused is not None:
        print("fused", json.dumps({n: f["span_s_ratio"] for n, f in fused.items()}))
    if args.no_write:
        return
    suffix, heading = ("-shared", SHARED_HEADING) if args.shared else ("", HEADING)
    if args.store:
        suffix, heading = suffix + "-store", heading + " (the server's storing sinks)"
    out = ROOT / "bench" / "results" / f"sharing-scale{suffix}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result, command)
    if args.shared:
        text = shared_markdown(text)
    if args.store:
        text = text.replace(SHARED_HEADING if args.shared else HEADING, heading, 1)
    write_section(ROOT / "docs" / "performance.md", text, heading)


def shared_markdown(text: str) -> str:
    """The same table, told as the shared figure."""
    text = text.replace(HEADING, SHARED_HEADING, 1)
    text = text.replace(
        "absolute seconds are noisy). With sharing off every query is its own Spark\n"
        "streaming query.",
        "absolute seconds are noisy). The N queries run as branches of one shared\n"
        "network (`engine/sharing/shared_network.py`): one streaming query scans the\n"
        "stream once per micro-batch, computes the selections they share once, and runs\n"
        "each branch's own secured view and SQL on what reaches it.",
    )
    return text.replace(
        "Without sharing every query reads,\n"
        "  label-checks and filters the whole batch on its own, so the work grows with N\n"
        "  and the span with it once the 2 cores are busy.",
        "Shared, the queries are registered through `CqlService` as\n"
        "  the server registers them; compare the section without sharing.",
    )


if __name__ == "__main__":
    main()
