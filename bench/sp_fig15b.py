"""Security-punctuations paper, Fig. 15b: memory with the SS pushed down vs pushed up.

``python -m bench.sp_fig15b [--quick]``. The paper measures "the memory consumption for
executions with both the SS pushed down and up" for the select-project query of its
Fig. 14 at the small SS state (10 roles), and finds that pushed down "filters more data
early, hence requiring fewer memory to store the tuples being processed" (section 6.2,
no numbers). We run the same query and plans as :mod:`bench.paper_fig14` (pushed down,
pushed up, and no SS for reference) and read memory three ways, Spark's own and the OS's:

* **peak execution memory**: the largest ``peakExecutionMemory`` of the stages of the
  run's jobs, from Spark's status store (``AppStatusStore``: what a SparkListener sees
  from the task metrics; it is kept with the web UI off);
* **JVM peak RSS** (``VmHWM`` of the JVM in ``/proc``): the high-water mark of the
  resident memory of the process running the query;
* **JVM heap used** right after the run (``Runtime.totalMemory - freeMemory``).

A JVM's RSS only grows, so in the full mode every sample runs in a **fresh process**
(``--child``: its own Python driver and JVM, reading the data the parent prepared):
one plan at one selectivity per JVM, the plans interleaved round by round. ``--quick``
runs the samples in the caller's session instead (the test suite's), where the RSS and
heap are those of a shared JVM: it proves the path, not the numbers. A select-project
query keeps no streaming state, so there is no state-store memory to read
(``stateOperators`` of its progress is empty; checked and recorded).

Writes ``bench/results/fig15b.json`` and ``docs/img/fig15b.png``; ``--render`` redraws.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench import experiment_common as ec
from bench import plots
from bench.paper_fig14 import build
from bench.plots import Caption, Claim, Panel, Series, publish

DOCS = Path(__file__).resolve().parent.parent / "docs"
REPO = DOCS.parent
PLANS = ("pushed down", "pushed up", "no SS")
MB = 1024 * 1024
METRICS = ("peak_exec_mb", "jvm_hwm_mb", "heap_used_mb")


def _jobs(spark: SparkSession) -> set[int]:
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return {jobs.apply(i).jobId() for i in range(jobs.size())}


def peak_execution_memory(spark: SparkSession, before: set[int]) -> int:
    """The largest peak execution memory of a stage of the jobs not in ``before``."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    peak = 0
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobId() in before:
            continue
        stages = job.stageIds()
        for k in range(stages.size()):
            try:
                peak = max(peak, store.lastStageAttempt(stages.apply(k)).peakExecutionMemory())
            except Exception:  # a skipped stage has no attempt: nothing of it ran
                continue
    return peak


def jvm_memory(spark: SparkSession) -> dict[str, float]:
    """The JVM's peak RSS (``VmHWM``) and current RSS from /proc, and its heap in use."""
    jvm = spark.sparkContext._jvm
    pid = jvm.java.lang.ProcessHandle.current().pid()
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    kb = {line.split(":")[0]: int(line.split()[1]) for line in status if line.startswith("Vm")}
    runtime = jvm.java.lang.Runtime.getRuntime()
    return {
        "jvm_hwm_mb": round(kb["VmHWM"] / 1024, 1),
        "jvm_rss_mb": round(kb["VmRSS"] / 1024, 1),
        "heap_used_mb": round((runtime.totalMemory() - runtime.freeMemory()) / MB, 1),
    }


def one_run(spark: SparkSession, data: Path, w: ec.Workload, plan: str, pct: int, ck: Path) -> dict:
    """One plan at one selectivity drained into the no-op sink, and its memory."""
    struct = ec.labelled_struct(spark, w)
    before = _jobs(spark)
    frame = build(plan, ec.read_stream(spark, data, struct), w, F.col("value") < float(pct))
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    states = [op for p in query.recentProgress for op in (p.get("stateOperators") or [])]
    return {
        "peak_exec_mb": round(peak_execution_memory(spark, before) / MB, 3),
        "state_mb": round(sum(op.get("memoryUsedBytes", 0) for op in states) / MB, 3),
        **jvm_memory(spark),
    }


def prepare(spark: SparkSession, work: Path, args: argparse.Namespace) -> tuple[Path, int]:
    """Labelled data as in Fig. 14: secure ingest once, hard-linked ``copies`` times."""
    w = workload(args)
    landing = ec.write_landing(work / "landing", w)
    ec.secure_ingest(spark, landing, work / "ss", w)
    data = ec.link_copies(ec.labelled_path(work / "ss"), work / "q", args.copies)
    rows = spark.read.schema(ec.labelled_struct(spark, w)).parquet(str(data)).count()
    return data, rows


def workload(args: argparse.Namespace) -> ec.Workload:
    return ec.Workload(args.tuples, args.per_sp, args.roles)


def child(args: argparse.Namespace) -> None:
    """``--child``: one sample in this fresh process; its JSON on the last stdout line."""
    spark = ec.session()
    ck = Path(tempfile.mkdtemp(prefix="streamshield-fig15b-ck-"))
    try:
        result = one_run(spark, Path(args.data), workload(args), args.plan, args.pct, ck)
    finally:
        shutil.rmtree(ck, ignore_errors=True)
    print(json.dumps(result), flush=True)


def in_child(args: argparse.Namespace, data: Path, plan: str, pct: int) -> dict:
    command = [sys.executable, "-m", "bench.sp_fig15b", "--child", "--data", str(data)]
    command += ["--plan", plan, "--pct", str(pct), "--tuples", str(args.tuples)]
    command += ["--per-sp", str(args.per_sp), "--roles", str(args.roles)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{plan} at {pct}%: the child failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> tuple[list[dict], int]:
    spark = ec.session()
    work = Path(tempfile.mkdtemp(prefix="streamshield-fig15b-"))
    try:
        if args.prepared:  # an earlier run's labelled data (same --tuples, --per-sp, --roles)
            data = Path(args.prepared)
            rows = spark.read.schema(ec.labelled_struct(spark, workload(args))).parquet(str(data))
            rows = rows.count()
        else:
            data, rows = prepare(spark, work, args)
        out = []
        for pct in args.selectivities:
            samples: dict[str, list[dict]] = {plan: [] for plan in PLANS}
            for i in range(args.repeats):
                for plan in PLANS if i % 2 == 0 else reversed(PLANS):
                    if args.quick:
                        sample = one_run(
                            spark, data, workload(args), plan, pct, work / f"ck{i}{plan}{pct}"
                        )
                    else:
                        sample = in_child(args, data, plan, pct)
                    samples[plan].append(sample)
            row: dict = {"selectivity_pct": pct, "rows": rows}
            for plan in PLANS:
                for key in (*METRICS, "state_mb"):
                    row[f"{plan} {key}"] = [s[key] for s in samples[plan]]
            print(json.dumps(row), flush=True)
            out.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out, rows


def _ratio(row: dict, key: str) -> list[float]:
    pairs = zip(row[f"pushed down {key}"], row[f"pushed up {key}"], strict=True)
    return [d / u if u else 1.0 for d, u in pairs]


def panels(result: dict) -> list[Panel]:
    rows = result["rows"]
    xs = [r["selectivity_pct"] for r in rows]
    claim = Claim(min(xs), max(xs), False, "pushed down needs less memory")
    sel = "selectivity of value < x (%)"

    def per_plan(key: str) -> list[Series]:
        return [Series(p, [r[f"{p} {key}"] for r in rows]) for p in PLANS]

    return [
        Panel(
            "JVM peak RSS per plan [paper 15b]",
            sel,
            "MB (VmHWM of the JVM)",
            xs,
            per_plan("jvm_hwm_mb"),
        ),
        Panel(
            "pushed down / pushed up, JVM peak RSS [paper 15b]",
            sel,
            "ratio down / up (<1: down needs less)",
            xs,
            [Series("pushed down / pushed up", [_ratio(r, "jvm_hwm_mb") for r in rows])],
            claims=[claim],
            reference=1.0,
        ),
        Panel(
            "Spark peak execution memory per plan",
            sel,
            "MB (max over the run's stages)",
            xs,
            per_plan("peak_exec_mb"),
        ),
        Panel("JVM heap in use after the run", sel, "MB", xs, per_plan("heap_used_mb")),
    ]


def render(result: dict, out: Path) -> Path:
    title = "SP Fig. 15b on Spark: memory, SS pushed down vs up (10 roles)"
    return publish(panels(result), out, "fig15b", title, Caption.of(result))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = plots.experiment_parser(__doc__, "fig15b", DOCS, "tiny, in the caller's JVM")
    parser.add_argument("--tuples", type=int, default=20_000)
    parser.add_argument("--per-sp", type=int, default=10)
    parser.add_argument("--copies", type=int, default=25, help="query rows = tuples x copies")
    parser.add_argument("--roles", type=int, default=10, help="SS state (the paper: 10)")
    parser.add_argument("--selectivities", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--prepared", help="labelled data of an earlier run to reuse (kept, not deleted)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--plan", choices=PLANS, help=argparse.SUPPRESS)
    parser.add_argument("--pct", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.tuples, args.copies, args.repeats, args.selectivities = 800, 2, 1, [50]
    return args


def fields(args: argparse.Namespace) -> dict:
    """What this bench adds to its results JSON (measured now)."""
    rows, count = run(args)
    where = "the caller's shared JVM" if args.quick else "a fresh JVM per sample"
    return {
        "data": f"{args.tuples} tuples ingested (1 sp per {args.per_sp}, SS state of "
        f"{args.roles} roles), queried as {args.copies} hard-linked copies ({count} rows); "
        f"{args.repeats} interleaved rounds per point, {where}",
        "config": {k: getattr(args, k) for k in ("tuples", "per_sp", "copies", "roles")},
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> dict | None:
    arguments = sys.argv[1:] if argv is None else argv
    if "--child" in arguments:  # one sample, in the fresh JVM the parent started
        child(parse(arguments))
        return None
    return plots.run_experiment(arguments, parse, "sp_fig15b", "fig15b", DOCS, fields, render)


if __name__ == "__main__":
    main()
