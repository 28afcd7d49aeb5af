"""Landing -> subscriber latency through the real HTTPS/SSE server (issue 13, table row 6).

A server runs in this process over TLS on loopback (``bench.revocation_server``'s
``busy_root_server``, one Spark session, a temporary root), with one stream and one
query: Al's selection ``SELECT id, symbol, price FROM feed WHERE price >= 0`` at the
server's default trigger, and Al's own live SSE subscription to it. Nothing else runs.
Each round, at a random moment, Ed POSTs ``tuples`` rows (an sp before the first
round's rows); the latency is from just before the POST to Al's reader receiving the
next ``rows`` event: landing, secure ingest, the query's micro-batch and delivery.
The first round warms the JVM and the query up and is not reported.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
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

QUERY = f"SELECT id, symbol, price FROM {STREAM} WHERE price >= 0"


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: with few rounds p95 is the largest, not an interpolation."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def measure(spark: SparkSession, rounds: int, tuples: int, seed: int = 3) -> dict:
    """``rounds`` reported latencies (seconds) of a ``tuples``-row POST to Al's SSE reader."""
    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="ss-latency-"))
    latencies: list[float] = []
    try:
        with busy_root_server(spark, root) as server:
            set_up_stream(server)
            with server.login("al") as al:
                ok(al.post("/queries", json={"name": "al_q", "text": QUERY}), 201)
                subscriber = Subscriber(server.login("al"), "al_q")
                provider = Provider(server.login("ed"), tuples, posts=1.0, seed=seed)
                try:
                    for index in range(rounds + 1):
                        seen = len(subscriber.rows_events())
                        began = time.monotonic()
                        if not provider.post(first=index == 0):
                            raise RuntimeError(f"the POST was refused: {provider.errors[-1:]}")
                        arrived = wait_for(
                            lambda seen=seen: subscriber.rows_events()[seen:], timeout=120
                        )
                        if index:
                            latencies.append(round(arrived[0] - began, 4))
                        time.sleep(rng.uniform(0.1, 1.0))  # a random phase against the trigger
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
    }
