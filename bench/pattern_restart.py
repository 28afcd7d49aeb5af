"""How long an event pattern takes to give its first match after a server restart, and
where the time goes, through a real ``streamshield serve`` process.

    python -m bench.pattern_restart --reps 2 --out bench/results/pattern-restart.json

Per repetition: a fresh root, the server started, the event types and rules (docs/cep.md's
fire alarm: ``SEQ(Temp a, Smoke b)`` on the room), the pattern registered and one match
made (the first match of a fresh pattern); the server stopped (SIGTERM) and started
again on the same root; then, at once after ``/readyz``, one more Temp and Smoke pair is
appended. Reported: the start to ``/readyz`` (the server's own steps from its "ready
after" line: ``patterns`` is the pattern's plan built and its query started), from the
append to both events labelled (secure ingest's first micro-batch of the run), and to
the match counted by ``GET /patterns/fire`` (the pattern's trigger, planning and first
micro-batch); the pattern's own log lines (sources, protected plan, query start, when
its first micro-batch began and how long it took); the load average beside them (the
machine is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import httpx

from bench.restart_profile import steps
from bench.server_process import ServerProcess, prepare_root

RESULTS = Path(__file__).resolve().parent / "results" / "pattern-restart.json"
ROLES = ["ADMIN", "CUSTOMER1", "INFO_PROVIDER"]
USERS = {"joe": ["ADMIN"], "ward": ["INFO_PROVIDER"], "al": ["CUSTOMER1"]}
SCHEMAS = {
    "temp": [["id", "bigint"], ["room", "string"], ["celsius", "double"], ["ts", "timestamp"]],
    "smoke": [["id", "bigint"], ["room", "string"], ["level", "bigint"], ["ts", "timestamp"]],
}
TYPES = {
    "Temp": {"ts": "timestamp", "id": "long", "room": "string", "celsius": "double"},
    "Smoke": {"ts": "timestamp", "id": "long", "room": "string", "level": "long"},
}
RULES = {
    "event_types": TYPES,
    "roles": {
        "CUSTOMER1": {
            "Temp": [{"operator": "xi", "attributes": "*"}],
            "Smoke": [{"operator": "xi", "attributes": "*"}],
        }
    },
}
FIRE = (
    "PATTERN SEQ(Temp a, Smoke b) WHERE a.room = b.room AND a.celsius > 50 "
    "WITHIN 1 MINUTE RETURN a.room, a.celsius, b.level"
)
DEADLINE = 600.0
OPTIONS = ["--log-level", "info"]
"""Info: the pattern logs when its query started and its first micro-batch ran."""


def _ok(answer: httpx.Response, status: int = 200) -> dict:
    if answer.status_code != status:
        raise RuntimeError(f"{answer.request.method} {answer.request.url}: {answer.text}")
    return answer.json()


def _line(kind: str, stream: str, seq: int, **fields) -> str:
    if kind == "sp":
        return json.dumps(
            {
                "type": "sp",
                "stream": stream,
                "provider": "ward",
                "seq": seq,
                "ts": 100,
                "sn": 1,
                "ddp": {"streams": stream, "tuples": "*", "attributes": "*"},
                "srp": {"roles": "{CUSTOMER1}", "grant_option": False},
                "sign": "+",
                "immutable": False,
            }
        )
    return json.dumps(
        {
            "type": "tuple",
            "stream": stream,
            "provider": "ward",
            "seq": seq,
            "tid": fields["id"],
            "policy": {"ts": 100, "csn": 1},
            "values": fields,
        }
    )


def _set_up(server: ServerProcess) -> None:
    with server.login("joe", ["ADMIN"]) as joe:
        for name, attributes in SCHEMAS.items():
            body = {"name": name, "attributes": attributes, "tid": "id", "event_time": "ts"}
            _ok(joe.post("/schemas", json=body), 201)
        for stream, schema in (("Temp", "temp"), ("Smoke", "smoke")):
            _ok(joe.post("/streams", json={"name": stream, "schema": schema}), 201)
            for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
                _grant(joe, permission, "stream", stream, "INFO_PROVIDER")
            for permission in ("VIEW OBJECT", "READ TUPLE"):
                _grant(joe, permission, "stream", stream, "CUSTOMER1")
        for permission in ("ADD", "VIEW CATALOG"):
            _grant(joe, permission, "system", "system", "CUSTOMER1")
        _ok(joe.put("/cep/rules", json=RULES))
    with server.login("al", ["CUSTOMER1"]) as al:
        _ok(al.post("/patterns", json={"name": "fire", "pattern": FIRE, "key": "room"}), 201)


def _grant(client: httpx.Client, permission: str, kind: str, obj: str, role: str) -> None:
    body = {"permission": permission, "kind": kind, "object": obj, "role": role}
    _ok(client.post("/grants", json=body))


def _append(server: ServerProcess, pair: int, with_sps: bool) -> float:
    """One Temp and one Smoke event of room R<pair> (seqs after the sps); when sent."""
    seq = pair + 1
    second = f"2026-11-23T10:{pair:02d}:"
    temp = _line("tuple", "Temp", seq, id=pair, room=f"R{pair}", celsius=80.0, ts=second + "01Z")
    smoke = _line("tuple", "Smoke", seq, id=pair, room=f"R{pair}", level=3, ts=second + "05Z")
    with server.login("ward", ["INFO_PROVIDER"]) as ward:
        sent = time.monotonic()
        for stream, line in (("Temp", temp), ("Smoke", smoke)):
            body = (_line("sp", stream, 1) + "\n" if with_sps else "") + line
            _ok(ward.post(f"/streams/{stream}/elements", content=body))
    return sent


def _matched(server: ServerProcess, more_than: int, since: float) -> float:
    """Seconds from ``since`` until the pattern has stored more than ``more_than`` rows
    (a busy server's slow answer is waited for, not counted as a failure)."""
    with server.login("al", ["CUSTOMER1"]) as al:
        while time.monotonic() - since < DEADLINE:
            with contextlib.suppress(httpx.TimeoutException):
                answer = al.get("/patterns/fire")
                if answer.status_code == 200 and answer.json().get("delivered", 0) > more_than:
                    return time.monotonic() - since
            time.sleep(0.2)
    raise RuntimeError(f"no new match within {DEADLINE:.0f} s")


def _labelled(root: Path, before: dict[str, int], since: float) -> float:
    """Seconds from ``since`` until secure ingest has stored more files of each stream
    than ``before`` (both events labelled: the pattern can read them)."""
    while time.monotonic() - since < DEADLINE:
        if all(_files(root, stream) > before.get(stream, 0) for stream in TYPES):
            return time.monotonic() - since
        time.sleep(0.1)
    raise RuntimeError("the events were not labelled")


def _files(root: Path, stream: str) -> int:
    return len(list((root / "store" / "labelled" / stream).glob("batch=*/*.parquet")))


def once() -> dict:
    work = Path(tempfile.mkdtemp(prefix="streamshield-pattern-restart-"))
    root = work / "root"
    prepare_root(root, None, ROLES, USERS)
    server = ServerProcess(root, options=OPTIONS)
    try:
        server.wait_ready(timeout=DEADLINE)
        _set_up(server)
        sent = _append(server, 1, with_sps=True)
        fresh_labelled = _labelled(root, {}, sent)
        fresh = _matched(server, 0, sent)
        server.stop()
        load = os.getloadavg()[0]
        server = ServerProcess(root, log=server.log, options=OPTIONS)
        ready = server.wait_ready(timeout=DEADLINE).ready_seconds
        at_ready = time.monotonic()
        files = {stream: _files(root, stream) for stream in TYPES}
        sent = _append(server, 2, with_sps=False)
        labelled = _labelled(root, files, sent)
        first = _matched(server, 0, sent)  # explain counts the rows since the start
        text = server.log.read_text()
        said = steps(text)
        pattern_says = [line for line in text.splitlines() if "pattern fire:" in line]
        return {
            "fresh_append_to_labelled_s": round(fresh_labelled, 2),
            "fresh_first_match_s": round(fresh, 2),
            "restart_ready_s": round(ready, 2),
            "append_to_labelled_s": round(labelled, 2),
            "append_to_match_s": round(first, 2),
            "ready_to_match_s": round(sent - at_ready + first, 2),
            "server_says": said[-1] if said else None,
            "pattern_says": pattern_says,
            "load_before_restart": round(load, 2),
        }
    finally:
        server.kill()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    runs = []
    for _ in range(args.reps):
        runs.append(once())
        print(json.dumps(runs[-1]), flush=True)
    out = {"label": args.label, "runs": runs}
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
