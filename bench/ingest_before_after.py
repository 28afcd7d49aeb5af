"""Secure ingest before and after a change, interleaved with plain ingest in one session.

    python -m bench.ingest_before_after --reps 3 \
        --configs 100000x100x1,100000x100x500,10000x1x64 --out /tmp/before-after.json

Arms: ``plain`` ingest; ``before``: ``engine/ingest.py`` as of ``--before`` (default
054181a, the code before the issue-13 ingest work of 2026-11-24) with every sp pattern
read by the grammar; ``after``: this tree. The arms' order rotates every repetition;
a configuration is tuples x tuples-per-sp x roles. Prints every run with its passes and
the load average; the JSON has the times, plain/secure ratios and median passes.
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

from bench.run import plain_ingest
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest import Ingest
from streamshield.engine.ingest_job import IngestJob
from streamshield.engine.session import spark_session
from streamshield.lang import cql, wire

FAST = cql._simple_pattern


def old_module(revision: str):
    """``engine/ingest.py`` of ``revision``, imported beside the current one."""
    text = subprocess.run(
        ["git", "show", f"{revision}:src/streamshield/engine/ingest.py"],
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


def secure(spark, cls, land: Path, out: Path, roles: int, fast: bool) -> tuple[float, dict]:
    cql._simple_pattern = FAST if fast else (lambda text: None)
    wire._parsed_pattern.cache_clear()
    ingest = cls(spark, hierarchy(roles), {STREAM.name: STREAM})
    job = IngestJob(ingest, land, out)
    passes: dict[str, float] = {}

    def keep(stream: str, accepted: int, denied: int) -> None:
        for name, seconds in ingest.passes.items():
            passes[name] = passes.get(name, 0.0) + seconds

    job.on_counts = keep
    began = time.perf_counter()
    job.start(available_now=True).awaitTermination()
    return time.perf_counter() - began, passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--configs", default="100000x100x1,100000x100x500,10000x1x64")
    parser.add_argument("--before", default="054181a")
    parser.add_argument("--out", default="/tmp/ingest-before-after.json")
    args = parser.parse_args()
    old = old_module(args.before)
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="ingest-ab-"))
    warm = write_landing(work / "warm", 20000, 100, 1)
    secure(spark, old.Ingest, warm, work / "w0", 1, False)
    secure(spark, Ingest, warm, work / "w1", 1, True)
    plain_ingest(spark, warm, work / "w2")
    results = []
    for config in args.configs.split(","):
        n, per_sp, roles = (int(x) for x in config.split("x"))
        land = write_landing(work / config, n, per_sp, roles)
        times: dict[str, list[float]] = {"plain": [], "before": [], "after": []}
        passes: dict[str, list[dict]] = {"before": [], "after": []}
        for i in range(args.reps):

            def run(name: str, i: int = i, land: Path = land, prefix: str = config, r=roles):
                out = work / f"{prefix}-{name}{i}"
                if name == "plain":
                    return plain_ingest(spark, land, out), {}
                return secure(
                    spark, Ingest if name == "after" else old.Ingest, land, out, r, name == "after"
                )

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
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
