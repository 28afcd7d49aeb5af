"""A running server whose shield state vanishes halts ingest: clearly, once, and for good.

Restarting ingest cannot repair a missing snapshot, so the server must not retry in a
loop nor fall back: ingest stays stopped, ``/readyz`` says so, appends are refused (what
lands would never be labelled), the halt is audited once; a restart on the same root
refuses again at start-up; the documented recovery labels every accepted tuple.
"""

from __future__ import annotations

import pytest

from streamshield.server import service as service_module
from tests.server.conftest import poll, serve_root, sp_line, start_server, stop_server, tuple_line

pytestmark = pytest.mark.spark
USERS = {"joe": ["ADMIN"]}
SCHEMA = {"name": "t", "attributes": [["id", "bigint"], ["symbol", "string"]], "tid": "id"}


def _lines(seq: int, tids: range) -> str:
    lines = [sp_line("ticks", "joe", seq, "{CUSTOMER1}")]
    lines += [
        tuple_line("ticks", "joe", seq + 1 + i, tid, {"id": tid, "symbol": "S"})
        for i, tid in enumerate(tids)
    ]
    return "\n".join(lines)


def _halts(client) -> list[dict]:
    entries = client.get("/audit", params={"action": "query_failed", "limit": 50}).json()
    return [
        e for e in entries["entries"] if e["detail"].get("error_class") == "SHIELD_STATE_INVALID"
    ]


def _labelled(server) -> int:
    path = server.service.pipeline.ingest.store.path("ticks")
    if not path.exists():
        return 0
    spark = server.service.spark
    return spark.read.option("recursiveFileLookup", "true").parquet(str(path)).count()


def test_a_vanished_snapshot_halts_ingest_once_and_refuses_input(
    spark, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(service_module, "INGEST_RETRY_SECONDS", 0.5)  # a loop would show
    first = start_server(tmp_path, spark, USERS)
    state = first.service.pipeline.ingest.state.directory
    try:
        joe = first.login("joe", ["ADMIN"])
        assert joe.post("/schemas", json=SCHEMA).status_code == 201
        assert joe.post("/streams", json={"name": "ticks", "schema": "t"}).status_code == 201
        assert (
            joe.post("/streams/ticks/elements", content=_lines(1, range(1, 4))).status_code == 200
        )
        poll(lambda: _labelled(first) == 3)
        assert first.client().get("/readyz").status_code == 200
        for snapshot in state.glob("*.json"):
            snapshot.unlink()  # an older one would be the rollback: none is left to use
        accepted = joe.post("/streams/ticks/elements", content=_lines(10, range(4, 6)))
        assert accepted.status_code == 200 and accepted.json()["accepted"] == 3

        def halted() -> bool:
            ready = first.client().get("/readyz")
            return ready.status_code == 503 and ready.json()["checks"]["ingest_state"] is False

        poll(halted)
        refused = joe.post("/streams/ticks/elements", content=_lines(20, range(6, 7)))
        assert refused.status_code == 409 and refused.json()["error"] == "ingest_halted"
        # several watch periods later: still halted, not restarted, audited exactly once
        assert len(_halts(joe)) == 1
        poll(lambda: True, timeout=3)
        assert first.service.ingest_query is None and len(_halts(joe)) == 1
        assert "shield state snapshot" in first.service.halt.reason
        assert _labelled(first) == 3  # batch 2 was not labelled from an older state
    finally:
        stop_server(first)

    second = serve_root(tmp_path, spark)  # a restart refuses at start-up, clearly
    try:
        joe = second.login("joe", ["ADMIN"])
        assert second.client().get("/readyz").status_code == 503
        assert "is missing" in second.service.halt.reason
        refused = joe.post("/streams/ticks/elements", content=_lines(20, range(6, 7)))
        assert refused.status_code == 409
        assert len(_halts(joe)) == 2  # one per halt, not one per retry
    finally:
        stop_server(second)

    second.service.pipeline.ingest.quarantine()  # the documented recovery, offline
    third = serve_root(tmp_path, spark)
    try:
        assert third.service.halt.reason is None
        poll(lambda: _labelled(third) == 5)  # every accepted tuple, exactly once
        assert third.client().get("/readyz").status_code == 200
    finally:
        stop_server(third)
