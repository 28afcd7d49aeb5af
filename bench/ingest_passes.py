"""Secure vs plain ingest, paired and interleaved in one Spark session, with the cost of
each secure-ingest pass.

    python -m bench.ingest_passes --tuples 200000 --pairs 3

Every configuration of the ingest targets (1 sp per 100 tuples with 1 and 500 roles, 1 sp
per 10 and per tuple with 64 roles) lands once; then plain and secure ingest of the same
files alternate (the order flips every pair), each a fresh ``availableNow`` query. The
ratio is plain time / secure time per pair (1.0 = security costs nothing); median and
min-max over the pairs. The secure runs of a configuration share one ``Ingest``, as a
running server's batches do, warmed by an untimed first run: its label projections (a
few hundred columns built through py4j at 500 roles: 0.3-1.5 s) and compiled policies
are built once per stream, not per batch; that first run's time is reported as
``cold_secure_s``. ``passes`` is the secure run's driver wall time per pass (median
over the pairs), ``other`` the rest of the query (trigger, offsets, commit log).
Results go to ``bench/results/ingest-passes.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.run import plain_ingest
from bench.workload import STREAM, hierarchy, write_landing
from streamshield.engine.ingest.ingest import Ingest
from streamshield.engine.ingest.ingest_job import IngestJob
from streamshield.engine.session import spark_session

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ((100, 1), (100, 500), (10, 64), (1, 64))  # (tuples per sp, roles)


def new_ingest(spark, n_roles: int) -> Ingest:
    return Ingest(spark, hierarchy(n_roles), {STREAM.name: STREAM})


def secure_ingest(
    spark, landing: Path, out: Path, n_roles: int, ingest: Ingest | None = None
) -> tuple[float, dict]:
    """Secure ingest of ``landing`` into ``out`` by a fresh job (its own shield state),
    labelled by ``ingest`` (a fresh one when None)."""
    ingest = ingest or new_ingest(spark, n_roles)
    job = IngestJob(ingest, landing, out)
    passes: dict[str, float] = {}

    def keep(stream: str, accepted: int, denied: int) -> None:
        for name, seconds in getattr(ingest, "passes", {}).items():
            passes[name] = passes.get(name, 0.0) + seconds

    job.on_counts = keep  # told once per written batch, after the labelling passes
    began = time.perf_counter()
    job.start(available_now=True).awaitTermination()
    total = time.perf_counter() - began
    passes["other (trigger, offsets, commit)"] = total - sum(passes.values())
    return total, passes


def summary(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def one_pair(
    spark, landing: Path, case: Path, i: int, n_roles: int, ingest: Ingest | None = None
) -> tuple[float, float, dict]:
    """Pair ``i``: plain and secure ingest of the same files, the order flipping every
    pair; (plain seconds, secure seconds, the secure run's seconds per pass)."""
    out: dict[str, tuple] = {}
    runs = [
        ("plain", lambda: (plain_ingest(spark, landing, case / f"plain{i}"), {})),
        ("secure", lambda: secure_ingest(spark, landing, case / f"secure{i}", n_roles, ingest)),
    ]
    for name, run in runs if i % 2 == 0 else reversed(runs):
        out[name] = run()
    return out["plain"][0], out["secure"][0], out["secure"][1]


def config_result(
    n: int, per_sp: int, n_roles: int, plain: list[float], secure: list[float], passes: list
) -> dict:
    """A configuration's pairs summed up: times, ratio plain / secure, median per pass."""
    names = passes[0].keys()
    return {
        "tuples": n,
        "tuples_per_sp": per_sp,
        "roles": n_roles,
        "plain_s": summary(plain),
        "secure_s": summary(secure),
        "ratio": summary([p / s for p, s in zip(plain, secure, strict=True)]),
        "passes_s": {k: round(statistics.median(p[k] for p in passes), 3) for k in names},
    }


def warmed(spark, landing: Path, case: Path, n_roles: int) -> tuple[Ingest, float]:
    """An ``Ingest`` after one untimed run over ``landing`` (a running server's), and
    that first run's seconds (what a fresh one's first batch costs)."""
    ingest = new_ingest(spark, n_roles)
    cold, _ = secure_ingest(spark, landing, case / "cold", n_roles, ingest)
    shutil.rmtree(case / "cold", ignore_errors=True)
    return ingest, cold


def run_config(spark, work: Path, n: int, per_sp: int, n_roles: int, pairs: int) -> dict:
    case = work / f"k{per_sp}-r{n_roles}"
    landing = write_landing(case / "landing", n, per_sp, n_roles)
    ingest, cold = warmed(spark, landing, case, n_roles)
    plain, secure, passes = [], [], []
    for i in range(pairs):
        p, s, spent = one_pair(spark, landing, case, i, n_roles, ingest)
        plain.append(p)
        secure.append(s)
        passes.append(spent)
    return config_result(n, per_sp, n_roles, plain, secure, passes) | {"cold_secure_s": cold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tuples", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--only", help="one configuration, e.g. 100x500 (tuples per sp x roles)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ingest-passes.json"))
    args = parser.parse_args()
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="streamshield-bench-ingest-"))
    configs = [c for c in CONFIGS if args.only in (None, f"{c[0]}x{c[1]}")]
    results = {"load_before": os.getloadavg(), "configs": []}
    try:
        run_config(spark, work / "warm-up", 20_000, 100, 1, 1)  # JIT and caches, not reported
        for per_sp, n_roles in configs:
            result = run_config(spark, work, args.tuples, per_sp, n_roles, args.pairs)
            result["load"] = os.getloadavg()
            print(json.dumps(result), flush=True)
            results["configs"].append(result)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
