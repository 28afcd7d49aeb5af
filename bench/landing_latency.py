"""Landing -> subscriber latency through the real HTTPS/SSE server (target p50 <= 0.4 s).

A server runs in this process over TLS on loopback (``bench.revocation_server``'s
``busy_root_server``, one Spark session, a temporary root), with one stream and one
query: Al's selection ``SELECT id, symbol, price FROM feed WHERE price >= 0`` at the
server's default trigger, and Al's own live SSE subscription to it. Nothing else runs.
Each round, at a random moment, Ed POSTs ``tuples`` rows (an sp before the first
round's rows); the latency is from just before the POST to Al's reader receiving the
next ``rows`` event: landing, secure ingest, the query's micro-batch and delivery.
The first round warms the JVM and the query up and is not reported.

``profile`` says where a round's time went, from Spark's progress reports of the ingest
query and Al's query (batch start times and durations, epoch milliseconds): the POST,
the wait for ingest's next trigger, the ingest batch (and its secure passes), the wait
until Al's query starts a batch on the new labelled file, that batch (its ``addBatch``
includes delivery to the SSE queue and then the result store's write) and the rest until
the reader has the event (negative: the reader had the rows before the batch ended;
``query batch start to the SSE reader`` is the query side's share of the latency). A
stage is the median over the rounds that have it.

``idle_cpu`` is what the server costs when nothing lands: after the rounds, the CPU
seconds the driver JVM and this process spend over ``--idle`` quiet seconds, per wall
second (1.0 is one core busy): the price of short triggers, which poll the landing zone
and the labelled store while nothing happens.
``python -m bench.landing_latency [--rounds N] [--tuples N] [--idle S] [--no-guess]
[--driven | --no-driven] [--driven-ingest | --no-driven-ingest]`` prints it;
``--no-guess`` switches off ingest's one-pass guess (every batch by the passes, as a large
one goes), ``--driven`` / ``--no-driven`` the scan driven by ingest's commits
(engine/sharing/driven_scan.py; the server's ``driven_scan`` setting) and ``--driven-ingest`` /
``--no-driven-ingest`` ingest driven by the landings (the server's ``driven_ingest``
setting), to measure each apart.
With the driven scan, the query batch stages are its micro-batch's (``latestOffset``:
reading the markers and writing its log; ``queryPlanning``: the read's plan).
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
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from pyspark.sql import SparkSession

from bench.revocation_server import (
    STREAM,
    Provider,
    Subscriber,
    busy_root_server,
    ok,
    set_up_stream,
    wait_for,
)
from streamshield.engine.session import spark_session
from streamshield.engine.tuning import SERVER, EngineTuning
from streamshield.server.service import ServerService

QUERY = f"SELECT id, symbol, price FROM {STREAM} WHERE price >= 0"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: with few rounds p95 is the largest, not an interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def cpu_seconds(spark: SparkSession) -> float:
    """CPU seconds used so far by this process and the driver JVM (Linux ``/proc``)."""
    own = os.times()
    used = own.user + own.system
    gateway = getattr(spark.sparkContext, "_gateway", None)
    process = getattr(gateway, "proc", None)
    if process is not None:
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        used += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return used


def idle_cpu(spark: SparkSession, seconds: float) -> float | None:
    """Cores busy on average while nothing lands for ``seconds`` (None: not measured)."""
    if seconds <= 0:
        return None
    before, began = cpu_seconds(spark), time.monotonic()
    time.sleep(seconds)
    return round((cpu_seconds(spark) - before) / (time.monotonic() - began), 3)


def measure(
    spark: SparkSession,
    rounds: int,
    tuples: int,
    seed: int = 3,
    idle: float = 0.0,
    tuning: EngineTuning = SERVER,
) -> dict:
    """``rounds`` reported latencies (seconds) of a ``tuples``-row POST to Al's SSE reader
    through a server running with ``tuning``, with where each round's time went
    (``profile``)."""
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="ss-latency-"))
    latencies: list[float] = []
    spans: list[dict] = []
    try:
        with busy_root_server(spark, root, tuning) as server:
            set_up_stream(server)
            with server.login("al") as al:
                ok(al.post("/queries", json={"name": "al_q", "text": QUERY}), 201)
                subscriber = Subscriber(server.login("al"), "al_q")
                provider = Provider(server.login("ed"), tuples, posts=1.0, seed=seed)
                try:
                    for index in range(rounds + 1):
                        seen = len(subscriber.rows_events())
                        wall, began = time.time(), time.monotonic()
                        if not provider.post(first=index == 0):
                            raise RuntimeError(f"the POST was refused: {provider.errors[-1:]}")
                        posted = time.monotonic() - began
                        arrived = wait_for(
                            lambda seen=seen: subscriber.rows_events()[seen:], timeout=120
                        )
                        passes = dict(server.service.pipeline.ingest.ingest.passes)
                        if index == 0:
                            time.sleep(1.0)  # the warm-up round's tail is not counted
                            counted = job_ids(spark)
                        if index:
                            latency = arrived[0] - began
                            latencies.append(round(latency, 4))
                            spans.append(
                                {"posted": wall, "post_s": posted, "latency_s": latency}
                                | {"passes": passes}
                            )
                        time.sleep(rng.uniform(0.1, 1.0))  # a random phase against the trigger
                    progress = reports(spark, server.service)
                    time.sleep(2.0)  # the last batch's tail (commits) is not idle time
                    jobs = jobs_per_round(spark, counted, rounds)
                    idle_share = idle_cpu(spark, idle)
                finally:
                    subscriber.close()
                    subscriber.client.close()
                    provider.client.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "query": QUERY,
        "tuples_per_post": tuples,
        "rounds": rounds,
        "latency_s": latencies,
        "p50_s": round(statistics.median(latencies), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "min_s": min(latencies),
        "max_s": max(latencies),
        "idle_cpu": idle_share,
        "guess": tuning.ingest_guess,
        "driven_scan": tuning.driven_scan,
        "driven_ingest": tuning.driven_ingest,
        "jobs_per_round": jobs,
        "profile": profile(spans, progress),
    }


def job_ids(spark: SparkSession) -> set[int]:
    """The ids of the Spark jobs the application's status store holds (UI on or off)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return {int(jobs.apply(i).jobId()) for i in range(jobs.size())}


def jobs_per_round(spark: SparkSession, before: set[int], rounds: int) -> dict[str, float]:
    """Spark jobs run since ``before`` per round, in all and by job group (a network's
    groups are ``<network>:<part>``; ingest's jobs have none)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    groups: dict[str, int] = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if int(job.jobId()) in before:
            continue
        group = job.jobGroup()
        name = str(group.get()) if group.isDefined() else "(no group)"
        name = name.split(":", 1)[-1] if ":" in name else name
        groups[name] = groups.get(name, 0) + 1
    out = {"all": round(sum(groups.values()) / rounds, 2)}
    return out | {g: round(n / rounds, 2) for g, n in sorted(groups.items())}


def reports(spark: SparkSession, service: ServerService) -> dict[str, list[dict]]:
    """Progress reports with input rows of ingest and Al's query, as (start epoch s, ms)."""
    found = {q.name: q for q in spark.streams.active if q.name}
    if service.ingest_query is not None:  # driven ingest is no Spark streaming query
        found["streamshield-ingest"] = service.ingest_query
    for live in service.queries.all():
        streaming = getattr(getattr(live, "handle", None), "handle", None)
        if streaming is not None:
            found[live.name] = streaming
    out = {}
    for name in ("streamshield-ingest", "al_q"):
        batches = {}
        for p in found[name].recentProgress if name in found else ():
            if (p.get("numInputRows") or 0) > 0:
                start = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00"))
                batches[p["batchId"]] = {"start": start.timestamp(), **p["durationMs"]}
        out[name] = sorted(batches.values(), key=lambda b: b["start"])
    return out


def profile(spans: list[dict], progress: dict[str, list[dict]]) -> dict:
    """Median seconds per stage over the rounds whose ingest and query batch were found."""
    stages: list[dict[str, float]] = []
    for span in spans:
        end = span["posted"] + span["latency_s"]
        ingest = [b for b in progress["streamshield-ingest"] if span["posted"] <= b["start"] <= end]
        query = [b for b in progress["al_q"] if span["posted"] <= b["start"] <= end]
        if not ingest or not query:
            continue
        i, q = ingest[0], query[-1]
        ingest_end = i["start"] + i["triggerExecution"] / 1000
        query_end = q["start"] + q["triggerExecution"] / 1000
        stage = {
            "POST (landing)": span["post_s"],
            "wait for ingest trigger": i["start"] - span["posted"] - span["post_s"],
            "ingest batch": i["triggerExecution"] / 1000,
            "ingest batch start to the SSE reader": end - i["start"],
            "wait for query batch": q["start"] - ingest_end,
            "query batch (incl. delivery)": q["triggerExecution"] / 1000,
            "to the SSE reader": end - query_end,
            "query batch start to the SSE reader": end - q["start"],
        }
        timed = (k for k in q if k not in ("start", "triggerExecution"))
        stage |= {f"query {k}": q[k] / 1000 for k in timed}
        stage |= {f"ingest pass: {k}": v for k, v in span["passes"].items()}
        stage |= {f"ingest {k}": i[k] / 1000 for k in i if k not in ("start", "triggerExecution")}
        stages.append(stage)
    if not stages:
        return {"rounds": 0}
    keys = dict.fromkeys(k for s in stages for k in s)
    medians = {k: round(statistics.median(s[k] for s in stages if k in s), 3) for k in keys}
    slowest = max(
        stages, key=lambda s: s["POST (landing)"] + s["ingest batch start to the SSE reader"]
    )
    return (
        {"rounds": len(stages)}
        | medians
        | {
            "slowest round": {k: round(v, 3) for k, v in slowest.items()}  # where a tail goes
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--tuples", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=20.0, help="idle seconds measured")
    parser.add_argument(
        "--no-guess", action="store_true", help="the ingest guess off (EngineTuning.ingest_guess)"
    )
    ingest = parser.add_mutually_exclusive_group()
    ingest.add_argument(
        "--driven-ingest", action="store_true", default=None, help="driven ingest on"
    )
    ingest.add_argument(
        "--no-driven-ingest", dest="driven_ingest", action="store_false", help="... off"
    )
    driven = parser.add_mutually_exclusive_group()
    driven.add_argument("--driven", action="store_true", default=None, help="driven scan on")
    driven.add_argument("--no-driven", dest="driven", action="store_false", help="... off")
    args = parser.parse_args()
    tuning = replace(SERVER, ingest_guess=not args.no_guess)
    if args.driven is not None:
        tuning = replace(tuning, driven_scan=args.driven)
    if args.driven_ingest is not None:
        tuning = replace(tuning, driven_ingest=args.driven_ingest)
    spark = spark_session(app_name="streamshield-bench-latency")
    spark.sparkContext.setLogLevel("ERROR")
    measured = measure(spark, args.rounds, args.tuples, idle=args.idle, tuning=tuning)
    print(json.dumps(measured, indent=2))


if __name__ == "__main__":
    main()
