"""A stand-in for engine/levels/level_driver.py that speaks its protocol without Spark.

    python -m tests.unit.fake_level_driver SPEC

Replies as the real driver does (first a ready line, then one line per request, each
with every query's state as ``status`` gives it); the request ``die`` exits without a
reply, as a crashed driver would, and ``fail`` ends a query with an error class, as a
query failing inside it would. The level named by ``FAKE_LEVEL_DRIVER_GATED`` starts
only once the file ``FAKE_LEVEL_DRIVER_GATE`` exists (a slow start); the one named by
``FAKE_LEVEL_DRIVER_DEAD`` exits before its ready line (a start that fails).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text())
    queries: dict[str, dict] = {}
    if spec["level"] == os.environ.get("FAKE_LEVEL_DRIVER_DEAD"):
        return 4  # a driver that never starts (its JVM would not come up)
    if spec["level"] == os.environ.get("FAKE_LEVEL_DRIVER_GATED"):
        gate = Path(os.environ["FAKE_LEVEL_DRIVER_GATE"])
        while not gate.exists():  # a slow JVM start, as long as the test wants
            time.sleep(0.02)

    def reply(body: dict) -> None:
        sys.stdout.write(json.dumps(body) + "\n")
        sys.stdout.flush()

    reply(
        {
            "ok": True,
            "application": f"fake-{os.getpid()}",
            "pid": os.getpid(),
            "level": spec["level"],
        }
    )
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "die":
            return 3
        if op == "hang":  # never answers, as a driver stuck in the JVM would
            continue
        if op == "start":
            if request["name"].startswith(".."):
                reply(
                    {"ok": False, "type": "storage", "error": "level_storage", "message": "outside"}
                )
                continue
            if request["text"].startswith("INSERT"):
                reply(
                    {
                        "ok": False,
                        "type": "rejected",
                        "error": "level_application",
                        "message": "not here",
                    }
                )
                continue
            queries[request["name"]] = {"active": True, "error": None, "progress": None}
        if op == "fail":
            queries[request["name"]].update(active=False, error="CAST_INVALID_INPUT")
        if op == "stop":
            queries.pop(request["name"], None)
        reply({"ok": True, "queries": queries, "columns": ["id", "_ss_lvl_0"]})
        if op == "shutdown":
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
