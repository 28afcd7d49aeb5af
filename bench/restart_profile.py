"""Where a restart's time goes: the soak's server (16 queries, 3 providers' channels),
killed with SIGKILL after some load, started again on the same root.

    python -m bench.restart_profile --restarts 1 --out bench/results/restart-profile.json

Each restart reports kill-to-ready (the harness's clock: process start to ``/readyz``
200) and the server's own start-up steps, from the line ``streamshield serve`` prints
when ready ("ready after N s (step s, ...)"): Python's start and imports, the catalog
and TLS, the Spark session (the JVM starts in a thread from the first moment, so this is
what is left of it after the catalog), the API, secure ingest's start (its consistency
check and the query's start), restoring the queries, the patterns. The load average is
recorded beside each figure: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from bench.server_process import ServerProcess
from bench.soak import Shape, Soak

RESULTS = Path(__file__).resolve().parent / "results" / "restart-profile.json"
_READY = re.compile(r"ready after ([0-9.]+)s \((.*)\)")
_STEP = re.compile(r"(.+?) ([0-9.]+)s(?:, |$)")  # a step's name may hold ", "


def steps(log_text: str) -> list[dict]:
    """Every "ready after" line of a server log, its steps in seconds."""
    found = []
    for total, parts in _READY.findall(log_text):
        named = {name: float(seconds) for name, seconds in _STEP.findall(parts)}
        found.append({"ready_after": float(total), "steps": named})
    return found


def profile(restarts: int, queries: int, load_seconds: float) -> dict:
    work = Path(tempfile.mkdtemp(prefix="streamshield-restart-"))
    shape = Shape(queries=queries, subscribers=0, seconds=load_seconds, providers=3)
    soak = Soak(shape, work / "root")
    out: dict = {"queries": queries, "restarts": []}
    try:
        soak.set_up()
        assert soak.server is not None
        out["first_start"] = steps(soak.server.log.read_text())[-1:]
        soak.started = time.monotonic()
        soak.deadline = soak.started + load_seconds
        for index in range(shape.providers):
            soak.provider(index)  # one after another: each runs until the deadline
        for _ in range(restarts):
            load_before = os.getloadavg()[0]
            soak.server.kill()
            server = ServerProcess(soak.root, log=soak.server.log)
            began = time.monotonic()
            started = server.wait_ready(timeout=600)
            lines = steps(server.log.read_text())
            out["restarts"].append(
                {
                    "kill_to_ready": round(time.monotonic() - began, 2),
                    "process_to_ready": round(started.ready_seconds, 2),
                    "server_says": lines[-1] if lines else None,
                    "load1_before": round(load_before, 2),
                    "load1_after": round(os.getloadavg()[0], 2),
                }
            )
            soak.server = server
        soak.server.stop()
    finally:
        if soak.server is not None and soak.server.alive():
            soak.server.kill()
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--restarts", type=int, default=1)
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = profile(args.restarts, args.queries, args.load_seconds)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
