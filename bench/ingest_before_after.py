"""Secure ingest before and after a change, interleaved with plain ingest in one session.

    python -m bench.ingest_before_after --reps 3 \
        --configs 100000x100x1,100000x100x500,10000x1x64 --out /tmp/before-after.json

Arms: ``plain`` ingest; ``before``: ``engine/ingest/ingest.py`` as of ``--before`` (default
054181a, ingest without its one-pass labelling) with every sp pattern
read by the grammar (``--before-patterns fast``: with the fast pattern reader, for a
base that has it); ``after``: this tree. The arms' order rotates every repetition;
a configuration is tuples x tuples-per-sp x roles. Prints every run with its passes and
the load average; the JSON has the times, plain/secure ratios and median passes.

``--small B`` (B > 0) adds the small-batch case of the landing latency: B micro-batches
of ``--small-tuples`` tuples (one provider, one sp per batch, 64 roles), each arm one
``availableNow`` query reading one file a batch; it reports each arm's median batch
time (Spark's ``triggerExecution`` and ``addBatch``, the first batch left out as
warm-up). Only ``engine/ingest/ingest.py`` is swapped: both secure arms run this tree's
``ingest_job``, labelled store and policy modules.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from bench.run import plain_ingest
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest.ingest import ELEMENT_SCHEMA, Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.lang import cql, wire

FAST = cql._simple_pattern


def old_module(revision: str):
    """``engine/ingest/ingest.py`` of ``revision``, imported beside the current one."""
    text = subprocess.run(
        ["git", "show", f"{revision}:src/streamshield/engine/ingest/ingest.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="ingest-before-")) / "old_ingest.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_ingest", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["old_ingest"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def secure(
    spark, cls, land: Path, out: Path, roles: int, fast: bool, batches: list | None = None
) -> tuple[float, dict]:
    """One secure ingest of ``land``; ``batches``: read one file a batch and append each
    batch's durations (ms) from Spark's progress reports."""
    cql._simple_pattern = FAST if fast else (lambda text: None)
    wire._parsed_pattern.cache_clear()
    return timed_job(cls(spark, hierarchy(roles), {STREAM.name: STREAM}), land, out, batches)


def timed_job(ingest, land: Path, out: Path, batches: list | None = None) -> tuple[float, dict]:
    """One available-now ingest job of ``land``: its wall time and each pass's seconds
    summed over its batches (``batches``: one file a batch, durations appended)."""
    job = IngestJob(ingest, land, out)
    passes: dict[str, float] = {}

    def keep(stream: str, accepted: int, denied: int) -> None:
        for name, seconds in ingest.passes.items():
            passes[name] = passes.get(name, 0.0) + seconds

    job.on_counts = keep
    began = time.perf_counter()
    query = job.start(available_now=True, max_files=1 if batches is not None else None)
    query.awaitTermination()
    if batches is not None:
        batches += [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
    return time.perf_counter() - began, passes


def plain_small(spark, land: Path, out: Path, batches: list) -> float:
    """Plain ingest of ``land`` one file a batch (durations appended to ``batches``)."""
    source = (
        spark.readStream.schema(ELEMENT_SCHEMA)
        .option("pathGlobFilter", "*.jsonl")
        .option("maxFilesPerTrigger", 1)
        .json(str(land / "*"))
        .filter(F.col("type") == "tuple")
    )
    values = F.from_json(F.col("values"), STREAM.ddl)
    rows = source.select(
        "stream", "provider", "seq", "tid", *(values[n].alias(n) for n in STREAM.names)
    )
    began = time.perf_counter()
    query = (
        rows.writeStream.format("parquet")
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(availableNow=True)
        .start(str(out / "data"))
    )
    query.awaitTermination()
    batches += [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]
    return time.perf_counter() - began


def small_batches(spark, old, work: Path, args) -> dict:
    """The small-batch case: each arm's median batch time over ``args.small`` batches."""
    n = args.small * args.small_tuples
    land = write_landing(work / "small", n, args.small_tuples, 64, providers=1, files=args.small)
    spent: dict[str, dict[str, list[float]]] = {}
    names = ["plain", "before", "after"]
    for i in range(args.reps):
        for name in names[i % 3 :] + names[: i % 3]:
            batches: list[dict] = []
            out = work / f"small-{name}{i}"
            if name == "plain":
                plain_small(spark, land, out, batches)
            else:
                module = Ingest if name == "after" else old.Ingest
                fast = name == "after" or args.before_patterns == "fast"
                secure(spark, module, land, out, 64, fast, batches)
            arm = spent.setdefault(name, {"triggerExecution": [], "addBatch": []})
            for key, values in arm.items():
                values += [b[key] / 1000 for b in batches[1:]]  # the first: warm-up
            load = round(os.getloadavg()[0], 1)
            median = statistics.median(b["triggerExecution"] for b in batches[1:]) / 1000
            shown = f"{len(batches)} batches, median {median:.3f} s"
            print("small", i, name, shown, "load", load, flush=True)
    result = {
        "batches": args.small,
        "tuples_per_batch": args.small_tuples,
        **{
            f"{name}_{key}_s": summary(values)
            for name, arm in spent.items()
            for key, values in arm.items()
        },
        "load": os.getloadavg(),
    }
    print("RESULT", json.dumps(result), flush=True)
    return result


def summary(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--configs", default="100000x100x1,100000x100x500,10000x1x64")
    parser.add_argument("--before", default="054181a")
    parser.add_argument("--before-patterns", choices=("grammar", "fast"), default="grammar")
    parser.add_argument("--small", type=int, default=0, help="small batches (0: none)")
    parser.add_argument("--small-tuples", type=int, default=1000)
    parser.add_argument("--out", default="/tmp/ingest-before-after.json")
    args = parser.parse_args()
    old = old_module(args.before)
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="ingest-ab-"))
    warm = write_landing(work / "warm", 20000, 100, 1)
    secure(spark, old.Ingest, warm, work / "w0", 1, args.before_patterns == "fast")
    secure(spark, Ingest, warm, work / "w1", 1, True)
    plain_ingest(spark, warm, work / "w2")
    results = []
    for config in filter(None, args.configs.split(",")):
        n, per_sp, roles = (int(x) for x in config.split("x"))
        land = write_landing(work / config, n, per_sp, roles)
        times: dict[str, list[float]] = {"plain": [], "before": [], "after": []}
        passes: dict[str, list[dict]] = {"before": [], "after": []}
        for i in range(args.reps):

            def run(name: str, i: int = i, land: Path = land, prefix: str = config, r=roles):
                out = work / f"{prefix}-{name}{i}"
                if name == "plain":
                    return plain_ingest(spark, land, out), {}
                fast = name == "after" or args.before_patterns == "fast"
                module = Ingest if name == "after" else old.Ingest
                return secure(spark, module, land, out, r, fast)

            arms = {name: run for name in ("plain", "before", "after")}
            names = list(arms)
            for name in names[i % 3 :] + names[: i % 3]:
                seconds, spent = arms[name](name)
                times[name].append(seconds)
                if name != "plain":
                    passes[name].append(spent)
                shown = {k: round(v, 2) for k, v in spent.items()}
                load = round(os.getloadavg()[0], 1)
                print(config, i, name, round(seconds, 2), shown, "load", load, flush=True)
        result = {
            "tuples": n,
            "per_sp": per_sp,
            "roles": roles,
            **{f"{k}_s": v for k, v in times.items()},
            "ratio_before": [p / b for p, b in zip(times["plain"], times["before"], strict=True)],
            "ratio_after": [p / a for p, a in zip(times["plain"], times["after"], strict=True)],
            "after_over_before": [
                a / b for a, b in zip(times["after"], times["before"], strict=True)
            ],
            **{
                f"passes_{arm}": {k: statistics.median(x[k] for x in runs) for k in runs[0]}
                for arm, runs in passes.items()
            },
            "load": os.getloadavg(),
        }
        print("RESULT", json.dumps(result), flush=True)
        results.append(result)
    if args.small:
        results.append({"small": small_batches(spark, old, work, args)})
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
