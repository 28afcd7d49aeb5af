"""Where the time of a small landing file goes, in process.

    python -m bench.ingest_latency --files 8 --tuples 1000 --trigger 1

A running secure ingest (``processingTime`` trigger of ``--trigger`` seconds, as the
server runs it) gets one landing file of ``--tuples`` tuples (one sp first) at a time,
at a random moment; the latency is from the file's rename into the landing zone to its
batch being committed (marker and shield state written). Per file it reports that
latency, the batch's passes (driver wall time) and the rest: the wait for the next
trigger plus the query's own bookkeeping (offsets, commit log). Results go to
``bench/results/ingest-latency.json``.
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
from pathlib import Path

from bench.workload import STREAM, hierarchy
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.lang.wire import to_line
from streamshield.policy.elements import Channel, SpElement, TupleElement
from streamshield.policy.punctuation import (
    DataDescription,
    SecurityPunctuation,
    SecurityRestriction,
)
from streamshield.policy.sp_patterns import ANY, Literal

ROOT = Path(__file__).resolve().parent.parent


def land(landing: Path, index: int, n: int) -> None:
    """File ``index``: a fresh sp (ts = index + 1) and ``n`` tuples, renamed into place."""
    channel = Channel(STREAM.name, "p0")
    seq = index * (n + 1)
    sp = SecurityPunctuation(
        DataDescription(ANY, ANY, ANY), SecurityRestriction(Literal("r000")), ts=index + 1, sn=1
    )
    lines = [to_line(SpElement(channel, seq + 1, sp))]
    for i in range(n):
        values = {"id": i, "value": float(i), "ts": i}
        lines.append(to_line(TupleElement(channel, seq + 2 + i, i, index + 1, 1, values)))
    folder = landing / STREAM.name
    folder.mkdir(parents=True, exist_ok=True)
    tmp = landing / "_tmp" / f".f{index}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, folder / f"p0-{seq + 1:012d}-{index:08x}.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--tuples", type=int, default=1000)
    parser.add_argument("--trigger", type=float, default=1.0, help="seconds between triggers")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ingest-latency.json"))
    args = parser.parse_args()
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="streamshield-bench-latency-"))
    ingest = Ingest(spark, hierarchy(1), {STREAM.name: STREAM})
    job = IngestJob(ingest, work / "landing", work / "root")
    batches: list[dict[str, float]] = []
    job.on_counts = lambda stream, accepted, denied: batches.append(dict(ingest.passes))
    rng = random.Random(1)
    runs = []
    query = job.start(available_now=False, trigger_seconds=args.trigger)
    try:
        for index in range(args.files + 1):  # the first file warms the JVM up, not reported
            time.sleep(rng.uniform(0.2, 1.2))  # a random phase against the trigger
            seen = len(batches)
            began = time.perf_counter()
            land(work / "landing", index, args.tuples)
            while len(batches) == seen:  # told after the commit marker and the shield state
                if not query.isActive:
                    raise RuntimeError("ingest stopped")
                time.sleep(0.005)
            latency = time.perf_counter() - began
            passes = batches[seen]
            if index:
                run = {"latency_s": round(latency, 3)}
                run |= {k: round(v, 3) for k, v in passes.items()}
                run["trigger wait + bookkeeping"] = round(latency - sum(passes.values()), 3)
                runs.append(run)
                print(json.dumps(run), flush=True)
    finally:
        query.stop()
        shutil.rmtree(work, ignore_errors=True)
    latencies = sorted(r["latency_s"] for r in runs)
    result = {
        "tuples_per_file": args.tuples,
        "trigger_s": args.trigger,
        "load": os.getloadavg(),
        "p50_s": statistics.median(latencies),
        "max_s": latencies[-1],
        "median_by_part_s": {
            k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0] if k != "latency_s"
        },
        "runs": runs,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
