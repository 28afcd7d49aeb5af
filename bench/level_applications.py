"""What a Spark application per level costs against a processor inside the server's one.

``python -m bench.level_applications [--master URL] [--reps 3]``. The cloud-auditing
MessageLog goes through secure ingest (local mode, this process); then, interleaved per
repetition, the paper's Q1 (a selection) runs at a level

* in process: the level's processor is created on demand in this application
  (engine/levels/level_processor.py), the query registered, everything available processed;
* as its own application (engine/levels/level_application.py): the driver started (its JVM),
  the query submitted, everything available processed, the application stopped.

Printed per mode: median and spread of the seconds to the first stored batch (start
included), the driver's start alone, the stop, and the resident memory of the
application's processes (driver Python and JVM; on a cluster its executor runs in the
worker's tree and is not counted). The load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.join_planning import ROLE, _pipeline
from streamshield.engine.levels.level_application import LevelApplications
from streamshield.engine.queries.streaming_queries import CallbackSink
from streamshield.engine.session import spark_session
from streamshield.engine.store.result_store import ResultStore, StoringSink
from streamshield.examples import cloud_audit as ca
from streamshield.policy.query_level import QueryLevel

LEVEL = "[1, _]"
CONF = {"spark.driver.memory": "512m", "spark.cores.max": "1", "spark.executor.memory": "512m"}


def resident_mib(pid: int) -> float:
    """VmRSS of ``pid`` and all its descendants, in MiB (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 2),
        "min": round(min(values), 2),
        "max": round(max(values), 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[1]", help="the applications' master")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    spark = spark_session(app_name="streamshield-level-applications")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="level-applications-"))
    pipeline = _pipeline(spark, root)
    lattice = ca.lattice()
    level = QueryLevel(lattice, lattice.parse(LEVEL))
    text = next(q.text for q in ca.QUERIES if q.name == "q1")
    queries = pipeline.queries
    apps = LevelApplications(
        queries.hierarchy,
        queries.streams,
        queries.root,
        queries.labelled.root,
        args.master,
        CONF,
    )
    runs: dict[str, dict[str, list[float]]] = {"in_process": {}, "application": {}}
    loads = [os.getloadavg()[0]]
    for rep in range(args.reps):
        modes = ["in_process", "application"]
        for mode in modes if rep % 2 == 0 else modes[::-1]:
            name = f"q1_{mode}_{rep}"
            start = time.monotonic()
            if mode == "in_process":
                store = ResultStore(root / "in-process" / name)
                sink = CallbackSink(StoringSink(store, lambda _f, _b: None))
                pipeline.cql.submit(pipeline.cql.admit(text, [ROLE], level), sink, name=name)
                queries.queries[name].process_all_available()
                first = time.monotonic() - start
                pipeline.cql.stop(name)
                figures = {"first_batch": first, "stop": time.monotonic() - start - first}
            else:
                app = apps.acquire(level, name)
                ready = app.wait_ready()
                started = time.monotonic() - start
                app.submit(name, text, [ROLE])
                app.process_all_available(name)
                first = time.monotonic() - start
                memory = resident_mib(ready["pid"])
                apps.release(name)
                stop = time.monotonic() - start - first
                figures = {"start": started, "first_batch": first, "stop": stop, "mib": memory}
            for key, value in figures.items():
                runs[mode].setdefault(key, []).append(value)
            loads.append(os.getloadavg()[0])
            print(f"rep {rep} {mode}: " + ", ".join(f"{k} {v:.1f}" for k, v in figures.items()))
    result = {
        "master": args.master,
        "reps": args.reps,
        "load_1min": summary(loads),
        **{mode: {k: summary(v) for k, v in figures.items()} for mode, figures in runs.items()},
    }
    print(json.dumps(result, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
