"""Retention on a real server (engine/store/retention.py): consumed landing files and labelled
batches are pruned, never what a query's checkpoint still needs, even a stopped one's;
every query still gets every row exactly once, across a restart; a query registered
later reads what is kept. The rules on hand-made roots: tests/unit/test_retention.py."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from streamshield.engine.store.labelled_store import READ_OPTIONS
from streamshield.engine.store.retention import read_record
from tests.server.conftest import (
    grant,
    ok,
    poll,
    serve_root,
    sp_line,
    start_server,
    stop_server,
    tuple_line,
)

pytestmark = pytest.mark.spark

USERS = {"joe": ["ADMIN"], "ed": ["INFO_PROVIDER"], "al": ["CUSTOMER1"]}
COUNT = "SELECT id, count(*) AS c FROM ticks GROUP BY id"  # stores every batch


def _send(ed, ids: range) -> None:
    """Two appends (two landed files) of tuples whose seq and id are ``ids``."""
    half = ids.start + len(ids) // 2
    for part in (range(ids.start, half), range(half, ids.stop)):
        lines = [tuple_line("ticks", "ed", i, i, {"id": i, "v": i}) for i in part]
        assert ok(ed.post("/streams/ticks/elements", content="\n".join(lines)))["accepted"]


def _output(server, spark, name: str) -> Counter:
    """How many times each id is in the query's stored output (with c == 1 each)."""
    frame = server.service.queries.get(name).store.everything(spark)
    rows = frame.select("id", "c").collect() if frame is not None else []
    assert all(row["c"] == 1 for row in rows)
    return Counter(row["id"] for row in rows)


def _has(server, spark, name: str, ids: set[int]) -> bool:
    query = server.service.queries.get(name)
    assert query.error_class is None, f"{name} failed: {query.error_class}"
    return ids <= set(_output(server, spark, name))


def _retained(spark, root) -> set[int]:
    """The ids of the tuples the labelled store keeps."""
    path = root / "store" / "labelled" / "ticks"
    if not any(path.glob("batch=*/*.parquet")):
        return set()
    # Files pruned meanwhile are skipped; the schema is given, as no file may be left to
    # infer it from by the time Spark reads a footer.
    frame = spark.read.schema("id BIGINT").options(**READ_OPTIONS).parquet(str(path))
    return {row["id"] for row in frame.select("id").collect()}


def _pruned(server) -> dict:
    server.service.retention.prune()
    return read_record(server.service.root / "store" / "labelled")


def test_pruning_keeps_what_queries_need_and_every_row_arrives_once(spark, tmp_path) -> None:
    first = start_server(tmp_path, spark, USERS)
    server = first
    try:
        joe = first.login("joe", ["ADMIN"])
        schema = {"name": "tick", "attributes": [["id", "bigint"], ["v", "bigint"]], "tid": "id"}
        ok(joe.post("/schemas", json=schema), 201)
        ok(joe.post("/streams", json={"name": "ticks", "schema": "tick"}), 201)
        for permission in ("VIEW OBJECT", "WRITE", "INJECT SP"):
            grant(joe, permission, "stream", "ticks", "INFO_PROVIDER")
        for permission in ("VIEW OBJECT", "READ TUPLE"):
            grant(joe, permission, "stream", "ticks", "CUSTOMER1")
        grant(joe, "ADD", "system", "system", "CUSTOMER1")
        grant(joe, "VIEW CATALOG", "system", "system", "CUSTOMER1")
        al = first.login("al", ["CUSTOMER1"])
        for name in ("agg", "held"):
            ok(al.post("/queries", json={"name": name, "text": COUNT}), 201)
        ed = first.login("ed", ["INFO_PROVIDER"])
        ok(ed.post("/streams/ticks/elements", content=sp_line("ticks", "ed", 1, "{CUSTOMER1}")))

        a, b, c = set(range(2, 8)), set(range(8, 14)), set(range(14, 18))
        _send(ed, range(2, 8))
        poll(lambda: _has(first, spark, "agg", a) and _has(first, spark, "held", a), 300)
        first.service.queries.get("held").handle.handle.processAllAvailable()  # committed
        ok(al.post("/queries/held/stop"))  # stopped, restorable: its checkpoint counts
        _send(ed, range(8, 14))
        poll(lambda: _has(first, spark, "agg", b), 300)

        # The pruner's clock two seconds ahead: what is on disk is past a 1 s retention
        # now, without waiting for it to age. A new retention prunes at once.
        first.service.retention.pruner.clock = lambda: time.time() + 2.0
        first.service.retention.max_age = 1.0  # then every second from now on
        poll(lambda: _retained(spark, tmp_path) == b, 300)  # what "held" read went, not more
        assert _pruned(first)["streams"]["ticks"] >= 0
        landing = tmp_path / "landing" / "ticks"
        # ingest labelled every landed file: only the channel's newest stays
        poll(lambda: _pruned(first) and len(list(landing.glob("*.jsonl"))) == 1, 300)
        first.service.retention.max_age = None  # what is kept now stays for what follows

        ok(al.post("/queries/held/start"))  # resumes after what it read: b, never a again
        poll(lambda: _has(first, spark, "held", b), 300)
        ok(al.post("/queries", json={"name": "late", "text": COUNT}), 201)
        poll(lambda: _has(first, spark, "late", b), 300)  # a query registered later
        assert set(_output(first, spark, "late")) == b  # ... reads what is kept, no more

        scraped = joe.get("/metrics").text
        assert 'streamshield_storage_pruned_files_total{store="labelled"}' in scraped
        assert 'streamshield_storage_kept_bytes{store="landing"}' in scraped

        stop_server(first)
        server = serve_root(tmp_path, spark)  # ingest's start-up check accepts the pruned store
        server.service.retention.max_age = 1.0
        ed = server.login("ed", ["INFO_PROVIDER"])
        _send(ed, range(14, 18))
        for name in ("agg", "held", "late"):
            poll(lambda name=name: _has(server, spark, name, c), 300)
        _pruned(server)
        everything = a | b | c
        assert _output(server, spark, "agg") == Counter(everything)  # each id exactly once
        assert _output(server, spark, "held") == Counter(everything)
        assert _output(server, spark, "late") == Counter(b | c)
        assert all(q.error_class is None for q in server.service.queries.all())
    finally:
        stop_server(server)
