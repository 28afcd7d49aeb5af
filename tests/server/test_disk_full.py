"""A full or read-only landing zone: appends get a clear per-line error naming the cause
(``write_failed``, the OS's reason, never data), nothing partial becomes visible, no seq
is used up, and once space (or write access) returns the same lines land. A full result
store: the query is ``failed`` with STORAGE_UNAVAILABLE and runs again by itself once
space returns, its rows stored exactly once.

Simulated with a 1 MiB tmpfs mounted on the root's ``landing`` (or ``results``) directory
(filled with a file until the kernel says ENOSPC, and remounted read-only); the tests are
skipped where mounting is not allowed (they need root or CAP_SYS_ADMIN)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import grant, ok, poll, sp_line, start_server, stop_server, tuple_line

pytestmark = pytest.mark.spark
USERS = {"joe": ["ADMIN"], "ed": ["INFO_PROVIDER"]}


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True, check=False).returncode == 0


@contextlib.contextmanager
def _small(directory: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted on ``directory`` (skips the test where mounting is refused)."""
    directory.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(directory)):
        pytest.skip("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


@pytest.fixture
def small_landing(tmp_path) -> Iterator[Path]:
    with _small(tmp_path / "landing") as landing:
        yield landing


@pytest.fixture
def small_results(tmp_path) -> Iterator[Path]:
    with _small(tmp_path / "results") as results:
        yield results


def _fill(landing: Path) -> Path:
    filler = landing / "_filler"
    with open(filler, "wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    return filler


def _labelled(root: Path) -> int:
    return len(list((root / "store" / "labelled" / "_commits").glob("[0-9]*")))


def test_a_full_or_read_only_landing_zone_refuses_clearly_and_recovers(
    spark, tmp_path, small_landing
) -> None:
    server = start_server(tmp_path, spark, USERS)
    try:
        joe = server.login("joe", ["ADMIN"])
        schema = {"name": "t", "attributes": [["id", "bigint"], ["v", "string"]], "tid": "id"}
        ok(joe.post("/schemas", json=schema), 201)
        ok(joe.post("/streams", json={"name": "s", "schema": "t"}), 201)
        for permission in ("WRITE", "INJECT SP", "VIEW OBJECT"):
            grant(joe, permission, "stream", "s", "INFO_PROVIDER")
        ed = server.login("ed", ["INFO_PROVIDER"])
        lines = "\n".join(
            [
                sp_line("s", "ed", 1, "{CUSTOMER1}"),
                tuple_line("s", "ed", 2, 1, {"id": 1, "v": "secret"}),
            ]
        )

        filler = _fill(small_landing)
        full = ok(ed.post("/streams/s/elements", content=lines))
        assert full["accepted"] == 0 and full["rejected"] == 2
        assert {r["reason"] for r in full["rejections"]} == {"write_failed"}
        assert all("No space left on device" in r["message"] for r in full["rejections"])
        assert "secret" not in str(full)
        assert list((small_landing / "s").glob("*.jsonl")) == []  # nothing partial in place

        filler.unlink()  # space returns: the very same lines land (no seq was used up)
        assert ok(ed.post("/streams/s/elements", content=lines))["accepted"] == 2
        poll(lambda: _labelled(tmp_path) >= 1, timeout=120)

        assert _mount("-o", "remount,ro", str(small_landing))
        more = tuple_line("s", "ed", 3, 2, {"id": 2, "v": "x"})
        refused = ed.post("/streams/s/elements", content=more)
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
        assert refused.json()["error"] == "storage_unavailable"
        assert "Read-only file system" in refused.json()["message"]
        assert _mount("-o", "remount,rw", str(small_landing))
        assert ok(ed.post("/streams/s/elements", content=more))["accepted"] == 1
        assert server.client().get("/readyz").status_code == 200
    finally:
        stop_server(server)


def test_a_query_whose_result_store_is_full_fails_clearly_and_runs_again_when_space_returns(
    spark, tmp_path, small_results
) -> None:
    server = start_server(tmp_path, spark, {**USERS, "al": ["CUSTOMER1"]})
    try:
        joe = server.login("joe", ["ADMIN"])
        schema = {"name": "t", "attributes": [["id", "bigint"], ["v", "string"]], "tid": "id"}
        ok(joe.post("/schemas", json=schema), 201)
        ok(joe.post("/streams", json={"name": "s", "schema": "t"}), 201)
        for permission in ("WRITE", "INJECT SP", "VIEW OBJECT"):
            grant(joe, permission, "stream", "s", "INFO_PROVIDER")
        for permission, kind, obj in [
            ("VIEW CATALOG", "system", "system"),
            ("ADD", "system", "system"),
            ("VIEW OBJECT", "stream", "s"),
            ("READ TUPLE", "stream", "s"),
        ]:
            grant(joe, permission, kind, obj, "CUSTOMER1")
        al = server.login("al", ["CUSTOMER1"])
        text = "SELECT v, count(*) AS c FROM s GROUP BY v"  # stored every batch
        ok(al.post("/queries", json={"name": "g", "text": text}), 201)

        def status() -> dict:
            listed = ok(al.get("/queries"))["queries"]
            return next(q for q in listed if q["name"] == "g")

        filler = _fill(small_results)
        ed = server.login("ed", ["INFO_PROVIDER"])
        lines = [sp_line("s", "ed", 1, "{CUSTOMER1}")]
        lines += [tuple_line("s", "ed", n + 1, n, {"id": n, "v": "a"}) for n in (1, 2, 3)]
        assert ok(ed.post("/streams/s/elements", content="\n".join(lines)))["accepted"] == 4
        # Bounds for a loaded machine (at load 60 the batch took over 2 minutes to fail).
        failed = poll(lambda: (q := status())["status"] == "failed" and q, timeout=300)
        assert failed["error_class"] == "STORAGE_UNAVAILABLE", failed

        filler.unlink()  # space returns: the watch starts it again, the batch is replayed
        poll(lambda: status()["status"] == "running", timeout=300)
        internal = server.service.queries.get("g").internal
        store = small_results / internal
        stored = poll(lambda: sorted(store.glob("batch=*/*.parquet")), timeout=300)
        rows = spark.read.parquet(*map(str, stored)).select("v", "c").collect()
        assert [(r.v, r.c) for r in rows] == [("a", 3)]  # once, complete
    finally:
        stop_server(server)
