"""Start-up and stop of ``streamshield serve`` on a fresh root, as a new user meets them.

    python -m bench.startup --repeats 5

Each repetition starts the real server process on a new, empty root, with the hospital
example and without it (interleaved, so both see the same machine), and measures from
the process start to ``/readyz`` 200 (the harness's clock), the server's own start-up
steps (its "ready after N s (step s, ...)" line), and SIGTERM to exit. The install's
JVM class archive must be in place (``streamshield warm-up``, as ``make run`` does
first); the bench refuses to run without it, since it would then measure the one start
that writes it. Median and spread per arm, with the load average beside each run (the
machine is shared); results in ``bench/results/startup.json`` and docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path

from bench.restart_profile import steps
from bench.revocation_latency import write_section
from bench.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "startup.json"
HEADING = "## Start-up: process start to ready"
ARMS = {"example": True, "no example": False}
READY_TARGET = {"example": 15.0, "no example": 5.0}
STOP_TARGET = 10.0


def measure(example: bool, work: Path) -> dict:
    """One start on a fresh root to ``/readyz`` 200, then a clean stop."""
    root = work / f"root-{time.monotonic_ns()}"
    load = os.getloadavg()[0]
    server = ServerProcess(root, example=example)
    try:
        ready = server.wait_ready().ready_seconds
        server._out.flush()
        line = steps(server.log.read_text())
    except BaseException:
        server.kill()
        raise
    began = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    stopped = server.wait_exit(120)
    stop = time.monotonic() - began
    if not stopped:
        server.kill()
    else:
        server.reap()
    shutil.rmtree(root, ignore_errors=True)
    return {
        "ready_s": round(ready, 2),
        "stop_s": round(stop, 2),
        "exit_code": server.process.returncode,
        "load": round(load, 2),
        "steps": line[-1]["steps"] if line else {},
    }


def summary(runs: list[dict], key: str) -> dict:
    values = sorted(run[key] for run in runs)
    return {"median": round(statistics.median(values), 2), "min": values[0], "max": values[-1]}


def run(repeats: int) -> dict:
    from streamshield.server.warm_up import archive_needed

    if archive_needed():
        raise SystemExit("no JVM class archive for this install: run `streamshield warm-up`")
    work = Path(tempfile.mkdtemp(prefix="streamshield-startup-"))
    runs: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    try:
        for _ in range(repeats):
            for arm, example in ARMS.items():
                runs[arm].append(measure(example, work))
                print(arm, json.dumps(runs[arm][-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    arms = {}
    for arm, done in runs.items():
        step_names = {name for one in done for name in one["steps"]}
        arms[arm] = {
            "ready_s": summary(done, "ready_s"),
            "stop_s": summary(done, "stop_s"),
            "steps_median_s": {
                name: round(statistics.median(one["steps"].get(name, 0.0) for one in done), 2)
                for name in sorted(step_names)
            },
            "runs": done,
        }
    return {"repeats": repeats, "cores": os.cpu_count(), "arms": arms}


def markdown(result: dict, command: str) -> str:
    rows = []
    for arm, figures in result["arms"].items():
        ready, stop = figures["ready_s"], figures["stop_s"]
        steps_text = ", ".join(
            f"{name} {seconds:.1f} s"
            for name, seconds in sorted(figures["steps_median_s"].items(), key=lambda s: -s[1])
            if seconds >= 0.1
        )
        loads = [run["load"] for run in figures["runs"]]
        rows.append(
            f"| fresh root, {arm} | {ready['median']:.1f} s ({ready['min']:.1f}-"
            f"{ready['max']:.1f}) | {READY_TARGET[arm]:.0f} s | {stop['median']:.1f} s "
            f"({stop['min']:.1f}-{stop['max']:.1f}) | {min(loads):.1f}-{max(loads):.1f} "
            f"| {steps_text} |"
        )
    return "\n".join(
        [
            HEADING,
            "",
            "`streamshield serve` prints `ready after N s (step s, ...)` with the time of each",
            "start-up step. `make run` first runs `streamshield warm-up`, which writes the",
            "JVM's class archive once per install (the example served on a throw-away root",
            "until its queries have run a batch, 30-90 s): without it, the JVM",
            "loads and verifies Spark's classes one by one, and the first start of an install",
            "took 46-65 s, its first stop 40-50 s. With the archive, on the 2-core machine,",
            f"median (min-max) of {result['repeats']} interleaved starts per arm, each on a",
            "new, empty root (`" + command + "`):",
            "",
            "| start | process start to `/readyz` 200 | target | SIGTERM to exit | load "
            "| the server's steps (median) |",
            "|---|---:|---:|---:|---|---|",
            *rows,
            "",
            "The JVM starts first, in a thread, while Python imports, the TLS certificate, the",
            "catalog and the example's password hashes are done beside it. The API listens as",
            "soon as Spark is up (`/healthz` 200, `/readyz` 503 `starting`); what is left is the",
            "example's stream, grants and queries, and ingest's start. A restart on a root",
            "that has queries to restore is measured by `python -m bench.restart_profile`.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    result = run(args.repeats)
    arms = result["arms"].items()
    medians = {arm: {k: v for k, v in f.items() if k != "runs"} for arm, f in arms}
    print(json.dumps(medians, indent=2))
    if args.no_write:
        return
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    command = "python -m bench.startup"
    if args.repeats != 5:
        command += f" --repeats {args.repeats}"
    write_section(ROOT / "docs" / "performance.md", markdown(result, command), HEADING)


if __name__ == "__main__":
    main()
